"""Retry schedules built in code are checked as they are built (issue 28): every bad
value of ``RetryPolicy`` and ``RetryRules`` is ``config_invalid`` naming the class and the
field, never a raw ``TypeError`` or ``ValueError`` from attrs."""

from __future__ import annotations

import math
from typing import Any

import pytest

from actors import ActorError, Code
from supervisors import Backoff, RetryPolicy, RetryRules

GOOD_POLICY: dict[str, Any] = {"max_attempts": 3, "backoff": Backoff()}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_attempts": "3"}, "RetryPolicy.max_attempts must be an integer >= 0, got '3'"),
        ({"max_attempts": -1}, "RetryPolicy.max_attempts must be an integer >= 0, got -1"),
        ({"max_attempts": 3.0}, "RetryPolicy.max_attempts must be an integer >= 0, got 3.0"),
        ({"max_attempts": True}, "RetryPolicy.max_attempts must be an integer >= 0, got True"),
        ({"max_attempts": math.nan}, "RetryPolicy.max_attempts must be an integer >= 0, got nan"),
        ({"backoff": None}, "RetryPolicy.backoff must be a Backoff, got NoneType"),
        ({"backoff": {"initial": 1}}, "RetryPolicy.backoff must be a Backoff, got dict"),
        ({"honour_retry_after": 1}, "RetryPolicy.honour_retry_after must be true or false, got 1"),
        ({"deadline": 0}, "RetryPolicy.deadline must be a finite number of seconds > 0, got 0"),
        (
            {"deadline": -1.0},
            "RetryPolicy.deadline must be a finite number of seconds > 0, got -1.0",
        ),
        (
            {"deadline": math.inf},
            "RetryPolicy.deadline must be a finite number of seconds > 0, got inf",
        ),
        (
            {"deadline": math.nan},
            "RetryPolicy.deadline must be a finite number of seconds > 0, got nan",
        ),
        ({"deadline": "5"}, "RetryPolicy.deadline must be a finite number of seconds > 0, got '5'"),
        (
            {"deadline": 10**400},
            "RetryPolicy.deadline must be a finite number of seconds > 0, got an integer of 1329 bits",
        ),
    ],
    ids=[
        "attempts-str",
        "attempts-negative",
        "attempts-float",
        "attempts-bool",
        "attempts-nan",
        "backoff-none",
        "backoff-dict",
        "honour-int",
        "deadline-zero",
        "deadline-negative",
        "deadline-inf",
        "deadline-nan",
        "deadline-str",
        "deadline-huge",
    ],
)
def test_a_bad_retry_policy_is_config_invalid_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ActorError) as caught:
        RetryPolicy(**{**GOOD_POLICY, **fields})
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == message


def test_a_good_retry_policy_keeps_its_values_and_defaults() -> None:
    policy = RetryPolicy(max_attempts=0, backoff=Backoff(), deadline=0.5)
    assert (policy.max_attempts, policy.honour_retry_after, policy.deadline) == (0, True, 0.5)
    assert RetryPolicy(**GOOD_POLICY).deadline is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"by_code": None},
            "RetryRules.by_code must be a mapping of codes to RetryPolicy, got NoneType",
        ),
        (
            {"by_code": [1, 2]},
            "RetryRules.by_code must be a mapping of codes to RetryPolicy, got list",
        ),
        (
            {"by_code": {"timeout": RetryPolicy(**GOOD_POLICY)}},
            "RetryRules.by_code has the key 'timeout', which is not an actors.Code",
        ),
        (
            {"by_code": {Code.TIMEOUT: 3}},
            "RetryRules.by_code[timeout] must be a RetryPolicy, got int",
        ),
        (
            {"by_code": {}, "deadline": -5},
            "RetryRules.deadline must be a finite number of seconds > 0, got -5",
        ),
        (
            {"by_code": {}, "deadline": True},
            "RetryRules.deadline must be a finite number of seconds > 0, got True",
        ),
    ],
    ids=["none", "list", "str-key", "int-policy", "deadline-negative", "deadline-bool"],
)
def test_bad_retry_rules_are_config_invalid_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ActorError) as caught:
        RetryRules(**fields)
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == message


def test_good_retry_rules_are_a_read_only_copy() -> None:
    policy = RetryPolicy(**GOOD_POLICY)
    rules = RetryRules(by_code={Code.TIMEOUT: policy}, deadline=30)
    assert dict(rules.by_code) == {Code.TIMEOUT: policy} and rules.deadline == 30
