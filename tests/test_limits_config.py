"""Rate limits and breaker configs built in code are checked as they are built (issue
28): a negative rate, a NaN cooldown, a code set holding strings — each is
``config_invalid`` naming the class and the field, through the checks of
:mod:`actors.checks`; the defaults are pinned."""

from __future__ import annotations

import math
from typing import Any

import pytest

from actors import ActorError, Code
from supervisors import BreakerConfig, RateLimit
from supervisors.resilience.breaker import DEFAULT_COOLDOWNS


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"requests_per_minute": -5},
            "RateLimit.requests_per_minute must be a finite number > 0 per minute, got -5",
        ),
        (
            {"requests_per_minute": 0},
            "RateLimit.requests_per_minute must be a finite number > 0 per minute, got 0",
        ),
        (
            {"tokens_per_minute": math.nan},
            "RateLimit.tokens_per_minute must be a finite number > 0 per minute, got nan",
        ),
        (
            {"tokens_per_minute": math.inf},
            "RateLimit.tokens_per_minute must be a finite number > 0 per minute, got inf",
        ),
        (
            {"tokens_per_minute": "100"},
            "RateLimit.tokens_per_minute must be a finite number > 0 per minute, got '100'",
        ),
        ({"request_burst": 0}, "RateLimit.request_burst must be a finite number > 0, got 0"),
        ({"token_burst": -1.0}, "RateLimit.token_burst must be a finite number > 0, got -1.0"),
        ({"token_burst": True}, "RateLimit.token_burst must be a finite number > 0, got True"),
    ],
    ids=[
        "rpm-negative",
        "rpm-zero",
        "tpm-nan",
        "tpm-inf",
        "tpm-str",
        "burst-zero",
        "burst-negative",
        "burst-bool",
    ],
)
def test_a_bad_rate_limit_is_config_invalid_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ActorError) as caught:
        RateLimit(**fields)
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == message


def test_a_good_rate_limit_and_its_defaults() -> None:
    assert RateLimit() == RateLimit(
        requests_per_minute=None, tokens_per_minute=None, request_burst=None, token_burst=None
    )
    limit = RateLimit(requests_per_minute=60, tokens_per_minute=1e6, request_burst=5)
    assert limit.specs("k")["k:requests"].capacity == 5


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"failure_threshold": 0},
            "BreakerConfig.failure_threshold must be an integer >= 1, got 0",
        ),
        (
            {"success_threshold": 1.5},
            "BreakerConfig.success_threshold must be an integer >= 1, got 1.5",
        ),
        (
            {"default_cooldown": 0},
            "BreakerConfig.default_cooldown must be a finite number of seconds > 0, got 0",
        ),
        (
            {"default_cooldown": math.nan},
            "BreakerConfig.default_cooldown must be a finite number of seconds > 0, got nan",
        ),
        (
            {"early_probe": -1},
            "BreakerConfig.early_probe must be a finite number of seconds >= 0, got -1",
        ),
        (
            {"probe_lease": math.inf},
            "BreakerConfig.probe_lease must be a finite number of seconds > 0, got inf",
        ),
        (
            {"cooldowns": {Code.UNAVAILABLE: -3}},
            "BreakerConfig.cooldowns[unavailable] must be a finite number of seconds > 0, got -3",
        ),
        (
            {"cooldowns": {"unavailable": 3}},
            "BreakerConfig.cooldowns has the key 'unavailable', which is not an actors.Code",
        ),
        (
            {"cooldowns": [1]},
            "BreakerConfig.cooldowns must be a mapping of codes to seconds, got list",
        ),
        (
            {"permanent": frozenset({"auth"})},
            "BreakerConfig.permanent has 'auth', which is not an actors.Code",
        ),
        ({"ignored": [Code.BAD_REQUEST]}, "BreakerConfig.ignored must be a set of codes, got list"),
        ({"per_model": None}, "BreakerConfig.per_model must be a set of codes, got NoneType"),
    ],
    ids=[
        "failures-zero",
        "successes-float",
        "cooldown-zero",
        "cooldown-nan",
        "early-negative",
        "lease-inf",
        "per-code-negative",
        "per-code-str-key",
        "cooldowns-list",
        "permanent-str",
        "ignored-list",
        "per-model-none",
    ],
)
def test_a_bad_breaker_config_is_config_invalid_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ActorError) as caught:
        BreakerConfig(**fields)
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == message


def test_the_breaker_config_defaults_are_pinned_and_pass_their_checks() -> None:
    config = BreakerConfig()
    assert (config.failure_threshold, config.success_threshold) == (1, 1)
    assert (config.default_cooldown, config.early_probe, config.probe_lease) == (60.0, 30.0, 30.0)
    assert config.cooldowns is DEFAULT_COOLDOWNS
    assert config.permanent == frozenset({Code.AUTH, Code.PAYMENT})
    assert config.per_model == frozenset({Code.MODEL_NOT_FOUND})
    assert config.ignored == frozenset(
        {Code.BAD_REQUEST, Code.CONTENT_FILTER, Code.CONTEXT_WINDOW_EXCEEDED}
    )
    assert BreakerConfig(early_probe=0, permanent=set()).early_probe == 0
