"""What a provider's HTTP answer means: status, headers and body → a code and its fields.

The HTTP knowledge of the providers, as tables and small pure functions (each table
entry is a rule a test pins). It knows nothing of exceptions, logging or actors: it
imports only :mod:`actors.codes`, :mod:`actors.usage` and httpx, so that
:func:`actors.classify.classify` (which turns an :class:`HttpAnswer` into an
``ActorError``) and the provider adapters can both build on it without an import cycle.

Rules for an error status, in order (``docs/errors.md`` has the table):

1. a body error type/code in :data:`BODY_CODES` decides, whatever the status
   (``overloaded_error`` → ``unavailable``; ``insufficient_quota`` → ``payment``, even on
   a 429);
2. on a status in :data:`MARKER_STATUSES` (400, 413, 422): a :data:`CONTEXT_MARKERS`
   phrase in the lowered type/code/message → ``context_window_exceeded``; a type/code in
   :data:`CONTENT_MARKERS` or a :data:`CONTENT_WORDS` phrase → ``content_filter``;
3. :data:`BY_STATUS` (exact statuses), then :data:`BY_STATUS_CLASS` (4xx, 5xx);
4. anything else (1xx, 3xx, ≥ 600) has no code: the caller makes it ``internal``.

A 2xx is a failure only when its body is malformed for the dialect: not JSON, not an
object, or missing the fields of :data:`SUCCESS_SHAPES`; a well-formed 2xx has no code.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Final

import attrs
import httpx

from actors.codes import Code
from actors.usage import Usage

# --- the tables -------------------------------------------------------------------------

#: A body error type or code that decides the code on any status; first match wins.
BODY_CODES: Final[Mapping[str, Code]] = {
    "overloaded_error": Code.UNAVAILABLE,
    "insufficient_quota": Code.PAYMENT,
}
#: Statuses whose error text is searched for the marker phrases below.
MARKER_STATUSES: Final = frozenset({400, 413, 422})
#: Phrases (lower case) meaning the prompt does not fit the model's context window.
CONTEXT_MARKERS: Final = (
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "context window",
)
#: Error types/codes (exact) meaning the provider's content policy refused the request.
CONTENT_MARKERS: Final = frozenset({"content_filter", "content_policy_violation"})
#: Providers that have no code for it say it in words (Anthropic, Azure OpenAI).
CONTENT_WORDS: Final = ("content filtering policy", "content management policy")
#: Exact statuses.
BY_STATUS: Final[Mapping[int, Code]] = {
    400: Code.BAD_REQUEST,
    413: Code.BAD_REQUEST,
    422: Code.BAD_REQUEST,
    401: Code.AUTH,
    403: Code.AUTH,
    402: Code.PAYMENT,
    404: Code.MODEL_NOT_FOUND,
    408: Code.TIMEOUT,
    409: Code.UNAVAILABLE,
    429: Code.RATE_LIMITED,
    529: Code.UNAVAILABLE,
}
#: The rest of a status class (``status // 100``).
BY_STATUS_CLASS: Final[Mapping[int, Code]] = {4: Code.BAD_REQUEST, 5: Code.UNAVAILABLE}
#: ``x-should-retry`` values (stripped, lower case); anything else is ignored.
SHOULD_RETRY: Final[Mapping[str, bool]] = {"true": True, "false": False}
#: The fields of an error body's ``error`` object: (type, code, message).
ERROR_FIELDS: Final = ("type", "code", "message")
#: Usage keys, OpenAI's first: the first key present wins.
INPUT_TOKENS: Final = ("prompt_tokens", "input_tokens")
OUTPUT_TOKENS: Final = ("completion_tokens", "output_tokens")
#: Characters of the provider's error message kept in the detail.
MAX_DETAIL: Final = 300


def _list_of_dicts(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


#: Per dialect: whether a 2xx JSON object has the fields the dialect always sends, and
#: what the detail says when it has not.
SUCCESS_SHAPES: Final[Mapping[str, tuple[Callable[[dict[str, Any]], bool], str]]] = {
    "openai": (lambda body: _list_of_dicts(body.get("choices")), "lacks 'choices'"),
    "anthropic": (
        lambda body: body.get("type") == "message" and isinstance(body.get("content"), list),
        "lacks 'type': 'message' or 'content'",
    ),
}
#: The dialects this module knows.
DIALECTS: Final = frozenset(SUCCESS_SHAPES)


# --- the answer -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class HttpAnswer:
    """What one HTTP answer means.

    ``code`` is ``None`` when no rule places the answer (a well-formed 2xx, a 1xx or 3xx,
    a status ≥ 600); ``retryable`` is the ``x-should-retry`` verdict, ``None`` when the
    header is absent or invalid. ``detail`` names status, error type/code and the
    provider's message (truncated) — or, for a body that is not JSON, only its content
    type and size, never the body.
    """

    code: Code | None
    detail: str
    http_status: int
    retry_after: float | None = None
    usage: Usage | None = None
    retryable: bool | None = None


_NOT_JSON: Final = object()


def read_answer(response: httpx.Response, dialect: str | None = None) -> HttpAnswer:
    """The meaning of ``response`` for ``dialect`` (``None`` or unknown: no 2xx shape
    check). Total: never raises, whatever the status, headers or body."""
    status = response.status_code
    body = _body(response)
    parsed = _parse_json(body)
    err_type, err_code, err_message = error_fields(parsed)
    code: Code | None
    if 200 <= status < 300:
        problem = malformed_success(parsed, dialect)
        if problem is None:
            code = None
            detail = f"classify() was given a well-formed HTTP {status}, which is not a failure"
        else:
            code = Code.MALFORMED_RESPONSE
            detail = f"HTTP {status} body {problem} ({_describe_body(response, body)})"
    else:
        code = status_code(status, err_type, err_code, err_message)
        detail = f"HTTP {status}"
        if err_type or err_code:
            detail += f" {err_type or '-'}/{err_code or '-'}"
        if err_message:
            detail += f": {err_message[:MAX_DETAIL]}"
        elif parsed is _NOT_JSON:
            detail += f" ({_describe_body(response, body)})"
    return HttpAnswer(
        code=code,
        detail=detail,
        http_status=status,
        retry_after=retry_after_from(response.headers),
        usage=usage_from(parsed),
        retryable=should_retry(response.headers),
    )


def status_code(
    status: int, err_type: str | None, err_code: str | None, err_message: str | None
) -> Code | None:
    """The code of an error answer (rules 1 to 4 of the module docstring), or ``None``."""
    markers = {m for m in (err_type, err_code) if m}
    for marker, code in BODY_CODES.items():
        if marker in markers:
            return code
    if status in MARKER_STATUSES:
        text = " ".join(filter(None, (err_type, err_code, err_message))).lower()
        if any(phrase in text for phrase in CONTEXT_MARKERS):
            return Code.CONTEXT_WINDOW_EXCEEDED
        if markers & CONTENT_MARKERS or any(words in text for words in CONTENT_WORDS):
            return Code.CONTENT_FILTER
    fixed = BY_STATUS.get(status)
    if fixed is not None:
        return fixed
    return BY_STATUS_CLASS.get(status // 100)


def malformed_success(parsed: Any, dialect: str | None) -> str | None:
    """Why a parsed 2xx body is malformed for ``dialect``, or ``None`` when it is not."""
    if parsed is _NOT_JSON:
        return "is not JSON"
    if not isinstance(parsed, dict):
        return "is not a JSON object"
    shape = SUCCESS_SHAPES.get(dialect) if dialect is not None else None
    if shape is not None and not shape[0](parsed):
        return shape[1]
    return None


def error_fields(parsed: Any) -> tuple[str | None, str | None, str | None]:
    """(type, code, message) of an OpenAI- or Anthropic-shaped error body
    (``{"error": {...}}``); a string ``error`` is the message."""
    if not isinstance(parsed, dict):
        return None, None, None
    error = parsed.get("error")
    if isinstance(error, str):
        return None, None, error
    if not isinstance(error, dict):
        return None, None, None
    err_type, err_code, message = (_str_or_none(error.get(name)) for name in ERROR_FIELDS)
    return err_type, err_code, message


def usage_from(parsed: Any) -> Usage | None:
    """Usage a body reports (OpenAI ``prompt_tokens``, Anthropic ``input_tokens``), or
    ``None``: input tokens are required, output tokens default to 0; a value that is not
    an int >= 0 voids it."""
    if not isinstance(parsed, dict):
        return None
    usage = parsed.get("usage")
    if not isinstance(usage, dict):
        return None
    inputs = _count(_first_present(usage, INPUT_TOKENS, None))
    outputs = _count(_first_present(usage, OUTPUT_TOKENS, 0))
    if inputs is None or outputs is None:
        return None
    return Usage(input_tokens=inputs, output_tokens=outputs)


def should_retry(headers: httpx.Headers) -> bool | None:
    """The ``x-should-retry`` verdict (:data:`SHOULD_RETRY`), or ``None``."""
    value = headers.get("x-should-retry")
    if value is None:
        return None
    return SHOULD_RETRY.get(value.strip().lower())


def retry_after_from(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` / ``retry-after``, or ``None``.

    ``retry-after-ms`` wins when both are present and valid. An HTTP-date value is measured
    from the response's ``Date`` header when it parses, else from ``now`` (default: the
    wall clock — an HTTP date is absolute, not trio time). A delay is ASCII digits with an
    optional fraction (:func:`_delay`); anything else that is not a valid date is ignored;
    a date in the past gives 0.
    """
    millis = _delay(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _delay(raw)
    if seconds is not None:
        return seconds
    when = _http_date(raw)
    if when is None:
        return None
    reference = _http_date(headers.get("date", ""))
    if reference is None:
        reference = time.time() if now is None else now
    return max(0.0, when - reference)


# --- helpers ----------------------------------------------------------------------------


def _body(response: httpx.Response) -> bytes:
    try:
        return response.content
    except httpx.ResponseNotRead:
        # A streaming answer whose body was never read: classify by status and headers.
        return b""


def _describe_body(response: httpx.Response, body: bytes) -> str:
    content_type = response.headers.get("content-type", "none")
    return f"content-type {content_type}, {len(body)} bytes"


def _parse_json(body: bytes) -> Any:
    if not body:
        return _NOT_JSON
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        # Not JSON (an HTML proxy page, a truncated body): the caller classifies that.
        return _NOT_JSON


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _first_present(mapping: Mapping[str, Any], keys: tuple[str, ...], default: Any) -> Any:
    for key in keys:
        if key in mapping:
            return mapping[key]
    return default


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


_DELAY = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _delay(value: str | None) -> float | None:
    """A header's delay: digits with an optional fraction, spaces around allowed (RFC
    9110 delta-seconds, plus the fractions some providers send). Anything else — a sign,
    an exponent, ``1_0``, ``inf`` — is not a delay."""
    if value is None:
        return None
    text = value.strip()
    if not _DELAY.fullmatch(text):
        return None
    number = float(text)  # 310 digits and more: inf, not a delay
    return number if math.isfinite(number) else None


def _http_date(value: str) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        # Not an HTTP date: the header is ignored, as RFC 9110 asks of invalid values.
        return None
