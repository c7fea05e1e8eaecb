"""The API key a provider sends (:func:`api_key_of`), read when its adapter starts."""

from __future__ import annotations

import os
from collections.abc import Callable

from actors.errors import ActorError, Code
from actors.redact import register_secret


def api_key_of(
    provider: str, api_key: str | Callable[[], str] | None, api_key_env: str | None
) -> str | None:
    """``api_key`` itself, or what it returns when it is a callable, else the value of
    the environment variable ``api_key_env``; ``None`` when the config names no key at all
    (neither field: an endpoint that needs none, such as a local server). The key is
    registered with the redaction processor.

    ``config_invalid`` (never showing a key) when a key is named but there is none:
    ``api_key`` is empty or not a string, ``api_key_env`` names a variable that is not
    set or is empty, or the ``api_key`` callable returns something other than a non-empty
    string; and for a key shorter than 4 characters (too short to be redacted without
    hiding words)."""
    key: object
    if callable(api_key):
        key = api_key()
        if not isinstance(key, str) or not key:
            raise _no_key(provider, "the api_key callable", "returned no key", key)
    elif api_key is not None:
        key = api_key
        if not isinstance(key, str) or not key:
            raise _no_key(provider, "the api_key", "is empty", key)
    elif api_key_env is not None:
        key = os.environ.get(api_key_env)
        if not key:
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                f"the environment variable {api_key_env} (api_key_env of provider"
                f" {provider}) is not set or is empty",
                provider=provider,
            )
    else:
        return None
    assert isinstance(key, str) and key
    try:
        register_secret(key)
    except ValueError as exc:  # too short to be redacted without hiding words
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"the API key of provider {provider} is shorter than 4 characters",
            provider=provider,
        ) from exc
    return key


def _no_key(provider: str, what: str, problem: str, key: object) -> ActorError:
    return ActorError.from_code(
        Code.CONFIG_INVALID,
        f"{what} of provider {provider} {problem} ({type(key).__name__}, not a non-empty string)",
        provider=provider,
    )
