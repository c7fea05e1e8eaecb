"""The one place that turns foreign failures into typed :class:`ActorError`\\ s.

``classify`` accepts an exception (httpx transport errors, ``HTTPStatusError``, anything
else) or an ``httpx.Response``, and always returns an :class:`ActorError`; it never
raises for any status, header map or body. What it cannot place becomes ``internal``
(not retryable) and is logged at error level as ``classify.unplaced`` — never a silent
"unknown".

Cancellation is not an error class: passing ``trio.Cancelled``, ``KeyboardInterrupt`` or
``SystemExit`` raises ``TypeError``. Exception groups are reduced with
:func:`actors.errors.normalize`, which applies the cancellation-wins rule.

HTTP answers are mapped per *dialect* (``"openai"`` for OpenAI-compatible APIs,
``"anthropic"``); the dialect defaults to ``provider`` when that names one. Rules, in
order (see ``docs/errors.md`` for the table):

* a body error of type ``overloaded_error`` → ``unavailable`` (retryable), any status;
* ``insufficient_quota`` in the body → ``payment`` (fatal), even on a 429;
* 400/413/422 with a context-length marker → ``context_window_exceeded``; with a content
  policy marker → ``content_filter``;
* then by status: 400, 413, 422 and other 4xx → ``bad_request``; 401/403 → ``auth``;
  402 → ``payment``; 404 → ``model_not_found``; 408 → ``timeout``; 409 →
  ``unavailable``; 429 → ``rate_limited``; 5xx and 529 → ``unavailable``;
* a 2xx body that is not JSON or lacks the fields the dialect always sends →
  ``malformed_response``;
* ``x-should-retry: true|false`` overrides ``retryable`` either way;
* ``retry_after`` comes from ``retry-after-ms`` (float milliseconds) first, then
  ``retry-after`` as seconds or as an HTTP date (measured from the response's ``Date``
  header when present, else from the wall clock), never negative.
"""

from __future__ import annotations

import json
import math
import time
from email.utils import parsedate_to_datetime
from typing import Any, Final

import httpx
import trio

from actors.codes import Code
from actors.error_types import ActorError
from actors.observe import get_logger
from actors.usage import Usage

_log = get_logger("actors.classify")

DIALECTS: Final = frozenset({"openai", "anthropic"})

_CONTEXT_MARKERS: Final = (
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "context window",
)
_CONTENT_MARKERS: Final = frozenset({"content_filter", "content_policy_violation"})
# Providers that have no code for it say it in words (Anthropic, Azure OpenAI).
_CONTENT_WORDS: Final = ("content filtering policy", "content management policy")
_MAX_DETAIL: Final = 300
_NOT_JSON: Final = object()


def classify(
    obj: object,
    *,
    provider: str | None = None,
    dialect: str | None = None,
    **context: Any,
) -> ActorError:
    """Return the typed error for ``obj``; see the module docstring for the rules.

    ``context`` sets :class:`ActorError` context fields (``model``, ``run_id``, …) on the
    result. An :class:`ActorError` is returned as it is.
    """
    if isinstance(obj, trio.Cancelled | KeyboardInterrupt | SystemExit):
        raise TypeError(
            f"{type(obj).__name__} is not classified: cancellation and interpreter exits "
            "take their own path and are never retried"
        )
    if isinstance(obj, ActorError):
        return obj
    if isinstance(obj, BaseExceptionGroup):
        # Imported here: actors.errors builds on this module, groups go back to it.
        from actors.errors import normalize

        return normalize(obj)
    if dialect is None and provider in DIALECTS:
        dialect = provider
    if isinstance(obj, httpx.Response):
        return _classify_response(obj, provider=provider, dialect=dialect, context=context)
    if isinstance(obj, httpx.HTTPStatusError):
        err = _classify_response(obj.response, provider=provider, dialect=dialect, context=context)
        err.__cause__ = obj
        return err
    if isinstance(obj, httpx.HTTPError | httpx.InvalidURL | httpx.StreamError):
        return _classify_transport(obj, provider=provider, context=context)
    return _unplaced(obj, provider=provider, context=context)


def _classify_transport(
    exc: Exception, *, provider: str | None, context: dict[str, Any]
) -> ActorError:
    name = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        code = Code.TIMEOUT
    elif isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError | httpx.ProxyError):
        code = Code.NETWORK
    elif isinstance(exc, httpx.DecodingError):
        code = Code.MALFORMED_RESPONSE
    else:
        # LocalProtocolError, UnsupportedProtocol, TooManyRedirects, InvalidURL, StreamError:
        # our request or our code is wrong; retrying repeats it.
        return _unplaced(exc, provider=provider, context=context)
    return ActorError.from_code(code, f"{name}: {exc}", cause=exc, provider=provider, **context)


def _unplaced(
    obj: object, *, provider: str | None, context: dict[str, Any], detail: str | None = None
) -> ActorError:
    """``internal``, logged loudly: ``obj`` is something no rule places."""
    kind = type(obj).__name__
    # Unplaced is never retryable, whatever an x-should-retry header said.
    fields = {k: v for k, v in context.items() if k != "retryable"}
    fields["provider"] = provider
    err = ActorError.from_code(
        Code.INTERNAL,
        detail or f"unclassified {kind}: {obj}",
        cause=obj if isinstance(obj, BaseException) else None,
        **fields,
    )
    _log.error("classify.unplaced", kind=kind, provider=provider, error=err)
    return err


def _classify_response(
    response: httpx.Response,
    *,
    provider: str | None,
    dialect: str | None,
    context: dict[str, Any],
) -> ActorError:
    status = response.status_code
    body = _body(response)
    parsed = _parse_json(body)
    err_type, err_code, err_message = _error_fields(parsed)
    fields: dict[str, Any] = {
        "provider": provider,
        "http_status": status,
        "retry_after": retry_after_from(response.headers),
        "usage": _usage(parsed),
        **context,
    }
    should_retry = _should_retry(response.headers)
    if should_retry is not None:
        fields["retryable"] = should_retry

    if 200 <= status < 300:
        problem = _malformed_success(parsed, dialect)
        if problem is None:
            detail = f"classify() was given a well-formed HTTP {status}, which is not a failure"
            return _unplaced(response, provider=provider, context=fields, detail=detail)
        detail = f"HTTP {status} body {problem} ({_describe_body(response, body)})"
        return ActorError.from_code(Code.MALFORMED_RESPONSE, detail, **fields)

    code = _status_code(status, err_type, err_code, err_message)
    detail = f"HTTP {status}"
    if err_type or err_code:
        detail += f" {err_type or '-'}/{err_code or '-'}"
    if err_message:
        detail += f": {err_message[:_MAX_DETAIL]}"
    elif parsed is _NOT_JSON:
        detail += f" ({_describe_body(response, body)})"
    if code is None:
        return _unplaced(response, provider=provider, context=fields, detail=detail)
    return ActorError.from_code(code, detail, **fields)


def _status_code(
    status: int, err_type: str | None, err_code: str | None, err_message: str | None
) -> Code | None:
    markers = {m for m in (err_type, err_code) if m}
    if "overloaded_error" in markers:
        return Code.UNAVAILABLE
    if "insufficient_quota" in markers:
        return Code.PAYMENT
    if status in (400, 413, 422):
        text = " ".join(filter(None, (err_type, err_code, err_message))).lower()
        if any(marker in text for marker in _CONTEXT_MARKERS):
            return Code.CONTEXT_WINDOW_EXCEEDED
        if markers & _CONTENT_MARKERS or any(words in text for words in _CONTENT_WORDS):
            return Code.CONTENT_FILTER
        return Code.BAD_REQUEST
    fixed = _BY_STATUS.get(status)
    if fixed is not None:
        return fixed
    if 400 <= status < 500:
        return Code.BAD_REQUEST
    if 500 <= status < 600:
        return Code.UNAVAILABLE
    return None


_BY_STATUS: Final[dict[int, Code]] = {
    401: Code.AUTH,
    403: Code.AUTH,
    402: Code.PAYMENT,
    404: Code.MODEL_NOT_FOUND,
    408: Code.TIMEOUT,
    409: Code.UNAVAILABLE,
    429: Code.RATE_LIMITED,
    529: Code.UNAVAILABLE,
}


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


def _error_fields(parsed: Any) -> tuple[str | None, str | None, str | None]:
    """(type, code, message) of an OpenAI- or Anthropic-shaped error body."""
    if not isinstance(parsed, dict):
        return None, None, None
    error = parsed.get("error")
    if isinstance(error, str):
        return None, None, error
    if not isinstance(error, dict):
        return None, None, None
    return (
        _str_or_none(error.get("type")),
        _str_or_none(error.get("code")),
        _str_or_none(error.get("message")),
    )


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _malformed_success(parsed: Any, dialect: str | None) -> str | None:
    """Why a 2xx body is malformed for ``dialect``, or ``None`` when it is well-formed."""
    if parsed is _NOT_JSON:
        return "is not JSON"
    if not isinstance(parsed, dict):
        return "is not a JSON object"
    if dialect == "openai" and not _list_of_dicts(parsed.get("choices")):
        return "lacks 'choices'"
    if dialect == "anthropic" and (
        parsed.get("type") != "message" or not isinstance(parsed.get("content"), list)
    ):
        return "lacks 'type': 'message' or 'content'"
    return None


def _list_of_dicts(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _usage(parsed: Any) -> Usage | None:
    """Usage reported in a body (OpenAI ``prompt_tokens``, Anthropic ``input_tokens``)."""
    if not isinstance(parsed, dict):
        return None
    usage = parsed.get("usage")
    if not isinstance(usage, dict):
        return None
    inputs = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
    outputs = _count(usage.get("completion_tokens", usage.get("output_tokens", 0)))
    if inputs is None or outputs is None:
        return None
    return Usage(input_tokens=inputs, output_tokens=outputs)


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _should_retry(headers: httpx.Headers) -> bool | None:
    value = headers.get("x-should-retry")
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


def retry_after_from(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` / ``retry-after``, or ``None``.

    ``retry-after-ms`` wins when both are present and valid. An HTTP-date value is measured
    from the response's ``Date`` header when it parses, else from ``now`` (default: the
    wall clock — an HTTP date is absolute, not trio time). Garbage, negative or non-finite
    values are ignored; a date in the past gives 0.
    """
    millis = _finite(headers.get("retry-after-ms"))
    if millis is not None and millis >= 0:
        return millis / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _finite(raw)
    if seconds is not None:
        return seconds if seconds >= 0 else None
    when = _http_date(raw)
    if when is None:
        return None
    reference = _http_date(headers.get("date", ""))
    if reference is None:
        reference = time.time() if now is None else now
    return max(0.0, when - reference)


def _finite(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _http_date(value: str) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        # Not an HTTP date: the header is ignored, as RFC 9110 asks of invalid values.
        return None
