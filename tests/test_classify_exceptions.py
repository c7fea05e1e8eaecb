"""classify() on exceptions: httpx transport errors, refusals, and the internal catch-all."""

from __future__ import annotations

import logging

import httpx
import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code, InternalError, ProviderError, classify
from actors.testing import capture_events

REQUEST = httpx.Request("POST", "http://127.0.0.1:1/v1/messages")


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx.ConnectError("refused", request=REQUEST), Code.NETWORK),
        (httpx.ConnectTimeout("slow connect", request=REQUEST), Code.TIMEOUT),
        (httpx.ReadTimeout("slow read", request=REQUEST), Code.TIMEOUT),
        (httpx.WriteTimeout("slow write", request=REQUEST), Code.TIMEOUT),
        (httpx.PoolTimeout("no connection", request=REQUEST), Code.TIMEOUT),
        (httpx.RemoteProtocolError("peer closed", request=REQUEST), Code.NETWORK),
        (httpx.ReadError("connection reset", request=REQUEST), Code.NETWORK),
        (httpx.WriteError("broken pipe", request=REQUEST), Code.NETWORK),
        (httpx.ProxyError("proxy", request=REQUEST), Code.NETWORK),
        (httpx.DecodingError("bad gzip", request=REQUEST), Code.MALFORMED_RESPONSE),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_transport_errors_are_retryable_provider_errors(exc: Exception, code: Code) -> None:
    err = classify(exc, provider="alpha", attempt=2)
    assert isinstance(err, ProviderError)
    assert (err.code, err.retryable, err.provider, err.attempt) == (code, True, "alpha", 2)
    assert err.__cause__ is exc


@pytest.mark.parametrize(
    "exc",
    [
        httpx.LocalProtocolError("we sent garbage"),
        httpx.UnsupportedProtocol("ftp://"),
        httpx.TooManyRedirects("loop", request=REQUEST),
        ValueError("boom"),
        RuntimeError("boom"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_everything_else_is_internal_and_loud(exc: Exception) -> None:
    with capture_events("classify.unplaced") as events:
        err = classify(exc)
    assert isinstance(err, InternalError)
    assert (err.code, err.retryable) == (Code.INTERNAL, False)
    assert err.__cause__ is exc
    assert len(events) == 1
    assert type(events[0]).level == logging.ERROR
    assert events[0].kind == type(exc).__name__
    assert events[0].error.correlation_id == err.correlation_id


def test_a_non_exception_is_internal() -> None:
    err = classify("a string")
    assert err.code is Code.INTERNAL
    assert err.__cause__ is None


def test_an_actor_error_passes_through_unchanged() -> None:
    original = ActorError.from_code(Code.TOOL_DENIED, "grant missing")
    assert classify(original) is original


async def test_cancelled_is_refused(autojump_clock: MockClock) -> None:
    with trio.CancelScope() as scope:
        scope.cancel(reason="test")
        try:
            await trio.sleep(1)
        except trio.Cancelled as cancelled:
            with pytest.raises(TypeError, match="Cancelled is not classified"):
                classify(cancelled)
            raise


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=["kbint", "exit"])
def test_interpreter_exits_are_refused(exc: BaseException) -> None:
    with pytest.raises(TypeError, match="never retried"):
        classify(exc)
