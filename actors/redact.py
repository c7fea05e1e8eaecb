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


def register_secret(value: str) -> None:
    """Hide ``value`` from every redacted string from now on."""
    global _secrets, _secret_pattern
    if len(value) < 4:
        raise ValueError("a secret shorter than 4 characters cannot be redacted safely")
    with _lock:
        if value in _secrets:
            return
        _secrets = _secrets | {value}
        ordered = sorted(_secrets, key=len, reverse=True)
        _secret_pattern = re.compile("|".join(re.escape(s) for s in ordered))


def _shape_sub(match: re.Match[str]) -> str:
    separator = match.group(1)
    if separator is not None:
        key = match.group(0)[: match.start(1) - match.start(0)]
        return f"{key}{separator}{REDACTED}"
    return REDACTED


def redact_text(text: str) -> str:
    """Return ``text`` with every secret replaced by ``[REDACTED]``."""
    pattern = _secret_pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    return _SHAPES.sub(_shape_sub, text)


def redact_value(value: Any) -> Any:
    """Redact strings inside ``value`` recursively (dicts, lists, tuples, sets).

    Mapping entries under a sensitive key are replaced whole. Other objects are returned
    unchanged: renderers call ``str``/``repr`` later, so callers that log arbitrary objects
    must render them first (the logging pipeline does, see :mod:`actors.observe`).
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and k.lower() in SENSITIVE_KEYS else redact_value(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, tuple | set | frozenset):
        return tuple(redact_value(v) for v in value)
    return value
