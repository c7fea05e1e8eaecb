"""The one place that turns a foreign failure into a typed :class:`ActorError`.

``classify`` accepts one exception (httpx transport errors, ``HTTPStatusError``, anything
else) or an ``httpx.Response``, and always returns an :class:`ActorError`; it never
raises for any status, header map or body. What it cannot place becomes ``internal``
(not retryable) and is logged at error level as ``classify.unplaced`` — never a silent
"unknown".

Refused with ``TypeError``: ``trio.Cancelled``, ``KeyboardInterrupt`` and ``SystemExit``
(cancellation and interpreter exits take their own path and are never retried), and an
exception group — groups are reduced by :func:`actors.errors.normalize` (cancellation
wins, then a fatal member), which classifies each leaf here. The public
``actors.classify`` (:func:`actors.errors.classify`) hands groups to ``normalize``.

This module is a leaf of the error modules: it imports :mod:`actors.codes`,
:mod:`actors.error_types`, :mod:`actors.http_status`, :mod:`actors.events` and
:mod:`actors.observe`, never :mod:`actors.errors`.

Transport errors: httpx timeouts → ``timeout``; network, remote-protocol and proxy
errors → ``network``; decoding errors → ``malformed_response``; any other httpx error
(our request or our code is wrong) → ``internal``.

HTTP answers are read by :func:`actors.http_status.read_answer` per *dialect*
(``"openai"`` for OpenAI-compatible APIs, ``"anthropic"``); the dialect defaults to
``provider`` when that names one. ``x-should-retry`` overrides ``retryable`` (and any
``retryable`` in ``context``) except on an unplaced answer, which is never retryable.
"""

from __future__ import annotations

from typing import Any

import httpx
import trio

from actors.codes import Code
from actors.error_types import ActorError
from actors.events import ClassifyUnplaced
from actors.http_status import DIALECTS, read_answer, retry_after_from
from actors.observe import emit

__all__ = ["classify", "retry_after_from"]


#: httpx errors that place, by the first matching class; other httpx errors are unplaced.
TRANSPORT_CODES: tuple[tuple[type[Exception] | tuple[type[Exception], ...], Code], ...] = (
    (httpx.TimeoutException, Code.TIMEOUT),
    ((httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError), Code.NETWORK),
    (httpx.DecodingError, Code.MALFORMED_RESPONSE),
)


def classify(
    obj: object,
    *,
    provider: str | None = None,
    dialect: str | None = None,
    **context: Any,
) -> ActorError:
    """Return the typed error for one failure ``obj``; see the module docstring.

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
        raise TypeError(
            "an exception group is not classified here: actors.normalize reduces it "
            "(cancellation wins, then a fatal member) and classifies each member"
        )
    if dialect is None and provider in DIALECTS:
        dialect = provider
    if isinstance(obj, httpx.Response):
        return _classify_response(obj, provider=provider, dialect=dialect, context=context)
    if isinstance(obj, httpx.HTTPStatusError):
        return _classify_response(
            obj.response, provider=provider, dialect=dialect, context=context, cause=obj
        )
    if isinstance(obj, httpx.HTTPError | httpx.InvalidURL | httpx.StreamError):
        return _classify_transport(obj, provider=provider, context=context)
    return _unplaced(obj, provider=provider, context=context)


def _classify_transport(
    exc: Exception, *, provider: str | None, context: dict[str, Any]
) -> ActorError:
    for kinds, code in TRANSPORT_CODES:
        if isinstance(exc, kinds):
            detail = f"{type(exc).__name__}: {exc}"
            return ActorError.from_code(code, detail, cause=exc, provider=provider, **context)
    # LocalProtocolError, UnsupportedProtocol, TooManyRedirects, InvalidURL, StreamError:
    # our request or our code is wrong; retrying repeats it.
    return _unplaced(exc, provider=provider, context=context)


def _classify_response(
    response: httpx.Response,
    *,
    provider: str | None,
    dialect: str | None,
    context: dict[str, Any],
    cause: BaseException | None = None,
) -> ActorError:
    answer = read_answer(response, dialect)
    fields: dict[str, Any] = {
        "provider": provider,
        "http_status": answer.http_status,
        "retry_after": answer.retry_after,
        "usage": answer.usage,
        **context,
    }
    if answer.retryable is not None:
        fields["retryable"] = answer.retryable
    if answer.code is None:
        return _unplaced(
            response, provider=provider, context=fields, detail=answer.detail, cause=cause
        )
    return ActorError.from_code(answer.code, answer.detail, cause=cause, **fields)


def _unplaced(
    obj: object,
    *,
    provider: str | None,
    context: dict[str, Any],
    detail: str | None = None,
    cause: BaseException | None = None,
) -> ActorError:
    """``internal``, logged loudly: ``obj`` is something no rule places. The error has its
    cause (``cause``, else ``obj`` itself when it is an exception) before it is reported."""
    kind = type(obj).__name__
    # Unplaced is never retryable, whatever an x-should-retry header said.
    fields = {k: v for k, v in context.items() if k != "retryable"}
    fields["provider"] = provider
    err = ActorError.from_code(
        Code.INTERNAL,
        detail or f"unclassified {kind}: {obj}",
        cause=cause if cause is not None else obj if isinstance(obj, BaseException) else None,
        **fields,
    )
    emit(ClassifyUnplaced(kind=kind, provider=provider, error=err))
    return err
