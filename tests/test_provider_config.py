"""A provider endpoint built in code is checked as it is built (issue 28): before, a
negative ``read_timeout`` or a ``base_url`` without a scheme was taken, and every request
then failed as ``internal``. Each bad value is ``config_invalid`` naming the field, with
the checks a deployment file's ``[providers]`` go through too; a value that may be a
secret is never shown."""

from __future__ import annotations

import math
from typing import Any

import pytest

from actors import ActorError, Code
from actors.providers import ProviderConfig

GOOD: dict[str, Any] = {"name": "alpha", "base_url": "http://127.0.0.1:8080/v1"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ""}, "ProviderConfig.name must be a non-empty string, got ''"),
        ({"name": 3}, "ProviderConfig.name must be a non-empty string, got 3"),
        (
            {"base_url": "localhost:8080"},
            "ProviderConfig.base_url must be an http:// or https:// URL with a host,"
            " got 'localhost:8080'",
        ),
        (
            {"base_url": "ftp://example.com"},
            "ProviderConfig.base_url must be an http:// or https:// URL with a host,"
            " got 'ftp://example.com'",
        ),
        (
            {"base_url": "http://"},
            "ProviderConfig.base_url must be an http:// or https:// URL with a host, got 'http://'",
        ),
        (
            {"base_url": "https://user:sk-secret@/v1"},
            "ProviderConfig.base_url must be an http:// or https:// URL with a host,"
            " got a value with '@' (not shown)",
        ),
        (
            {"base_url": None},
            "ProviderConfig.base_url must be an http:// or https:// URL with a host, got None",
        ),
        (
            {"api_key_env": "sk-live-abcdef123456"},
            "ProviderConfig.api_key_env must be the name of an environment variable"
            " (letters, digits, _), not its value (not shown)",
        ),
        (
            {"read_timeout": -1},
            "ProviderConfig.read_timeout must be a finite number of seconds > 0, got -1",
        ),
        (
            {"read_timeout": 0},
            "ProviderConfig.read_timeout must be a finite number of seconds > 0, got 0",
        ),
        (
            {"read_timeout": math.nan},
            "ProviderConfig.read_timeout must be a finite number of seconds > 0, got nan",
        ),
        (
            {"connect_timeout": math.inf},
            "ProviderConfig.connect_timeout must be a finite number of seconds > 0, got inf",
        ),
        (
            {"connect_timeout": "5"},
            "ProviderConfig.connect_timeout must be a finite number of seconds > 0, got '5'",
        ),
        (
            {"max_response_bytes": 0},
            "ProviderConfig.max_response_bytes must be an integer >= 1, got 0",
        ),
        (
            {"max_connections": 1.5},
            "ProviderConfig.max_connections must be an integer >= 1, got 1.5",
        ),
        ({"max_in_flight": True}, "ProviderConfig.max_in_flight must be an integer >= 1, got True"),
    ],
    ids=[
        "name-empty",
        "name-int",
        "url-no-scheme",
        "url-ftp",
        "url-no-host",
        "url-credentials",
        "url-none",
        "key-in-env-field",
        "read-negative",
        "read-zero",
        "read-nan",
        "connect-inf",
        "connect-str",
        "bytes-zero",
        "connections-float",
        "in-flight-bool",
    ],
)
def test_a_bad_provider_config_is_config_invalid_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ActorError) as caught:
        ProviderConfig(**{**GOOD, **fields})
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == message
    assert "sk-" not in str(caught.value)


def test_a_good_provider_config_keeps_its_values_and_defaults() -> None:
    config = ProviderConfig(
        name="alpha", base_url="https://api.example.com/v1", api_key_env="ALPHA_KEY"
    )
    assert (config.connect_timeout, config.read_timeout) == (5.0, 60.0)
    assert (config.max_response_bytes, config.max_connections, config.max_in_flight) == (
        8 << 20,
        100,
        256,
    )
    assert ProviderConfig(**GOOD, read_timeout=0.001, max_in_flight=1).read_timeout == 0.001
