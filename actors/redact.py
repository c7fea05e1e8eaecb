"""Secret redaction: the one function every log line, error message and event passes through.

Redaction is by shape and by registration:

* by shape: ``sk-…`` keys (OpenAI, Anthropic ``sk-ant-…``), ``Bearer …`` tokens, and
  ``api_key=…`` / ``Authorization: …`` pairs inside free text;
* by key: a mapping entry whose key is a credential header or field (``authorization``,
  ``x-api-key``, ``api_key``, …) has its whole value replaced;
* by registration: any value passed to :func:`register_secret` (adapters register the
  keys they load) is replaced wherever it appears, whatever its shape.

The registry is process-wide on purpose: a secret must be hidden from every logger in the
process, not only from one runtime's. Registering is idempotent; values shorter than four
characters are refused (they would redact ordinary words).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

SENSITIVE_KEYS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "api_key",
        "apikey",
        "openai_api_key",
        "anthropic_api_key",
        "cookie",
        "set-cookie",
        "password",
        "secret",
        "token",
        "access_token",
        "refresh_token",
    }
)

_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{6,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=\-]+"
    r"|(?i:(?:x-)?api[_-]?key|authorization)(\s*[:=]\s*)\S+"
)

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()
_secret_pattern: re.Pattern[str] | None = None
# Strings shorter than this cannot hold a secret: the shortest shape ("Bearer x") is 8
# characters; registering a shorter secret lowers it.
_min_len = 8
# Up to this many registered secrets, plain substring checks decide whether to run the
# combined pattern; past it, the pattern runs on every string.
_SUBSTRING_CHECK_LIMIT = 16


def register_secret(value: str) -> None:
    """Hide ``value`` from every redacted string from now on."""
    global _secrets, _secret_pattern, _min_len
    if len(value) < 4:
        raise ValueError("a secret shorter than 4 characters cannot be redacted safely")
    with _lock:
        if value in _secrets:
            return
        _secrets = _secrets | {value}
        ordered = sorted(_secrets, key=len, reverse=True)
        _secret_pattern = re.compile("|".join(re.escape(s) for s in ordered))
        _min_len = min(_min_len, len(value))


def _shape_sub(match: re.Match[str]) -> str:
    separator = match.group(1)
    if separator is not None:
        key = match.group(0)[: match.start(1) - match.start(0)]
        return f"{key}{separator}{REDACTED}"
    return REDACTED


def redact_text(text: str) -> str:
    """Return ``text`` with every secret replaced by ``[REDACTED]``."""
    if len(text) < _min_len:
        return text
    pattern = _secret_pattern
    if pattern is not None and (
        len(_secrets) > _SUBSTRING_CHECK_LIMIT or any(secret in text for secret in _secrets)
    ):
        text = pattern.sub(REDACTED, text)
    lowered = text.lower()
    # Every shape contains one of these; most strings contain none, and this check is
    # ten times cheaper than the regular expression.
    if "sk-" in lowered or "bearer" in lowered or "key" in lowered or "authorization" in lowered:
        return _SHAPES.sub(_shape_sub, text)
    return text


def _key_is_sensitive(key: object) -> bool:
    return type(key) is str and key.lower() in SENSITIVE_KEYS


def redact_value(value: Any) -> Any:
    """Redact strings inside ``value`` recursively, returning plain JSON-able data.

    Mappings become dicts (entries under a sensitive key replaced whole), lists, tuples
    and sets become lists, numbers / booleans / ``None`` pass through, and any other object
    is rendered with ``repr`` first — so a secret inside an object's repr is caught too.
    Dispatches on the exact type first: this runs on every logged event.
    """
    kind = type(value)
    if kind is str:
        return redact_text(value)
    if kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        return {k: REDACTED if _key_is_sensitive(k) else redact_value(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [redact_value(v) for v in value]
    if isinstance(value, str):  # str subclasses: enums, markup
        return redact_text(str(value))
    if isinstance(value, int | float):
        return value
    if isinstance(value, Mapping):
        return {
            str(k): REDACTED if _key_is_sensitive(k) else redact_value(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [redact_value(v) for v in value]
    return redact_text(repr(value))
