"""Pins of actors.classify: each transport type, each refusal, what an answer carries over.

Each test fails if one transport exception type, one refusal message, one context field
or one piece of the ``classify.unplaced`` record changes (``make mutate
MODULE=actors/classify.py`` measures how well they do).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx
import pytest
import trio
from trio.testing import MockClock

from actors import (
    ActorError,
    Code,
    InternalError,
    ProviderError,
    Usage,
    classify,
    normalize,
)
from actors.classify import classify as classify_one
from actors.events import ClassifyUnplaced
from actors.observe import cause_chain
from actors.testing import capture_events

REQUEST = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
OAI_OK = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
ANT_OK = json.dumps({"type": "message", "content": []}).encode()


def exact(text: str) -> str:
    return f"^{re.escape(text)}$"


# --- transport errors ------------------------------------------------------------------------

TRANSPORT = [
    (httpx.TimeoutException("t", request=REQUEST), Code.TIMEOUT),
    (httpx.ConnectTimeout("t", request=REQUEST), Code.TIMEOUT),
    (httpx.ReadTimeout("t", request=REQUEST), Code.TIMEOUT),
    (httpx.WriteTimeout("t", request=REQUEST), Code.TIMEOUT),
    (httpx.PoolTimeout("t", request=REQUEST), Code.TIMEOUT),
    (httpx.NetworkError("n", request=REQUEST), Code.NETWORK),
    (httpx.ConnectError("n", request=REQUEST), Code.NETWORK),
    (httpx.ReadError("n", request=REQUEST), Code.NETWORK),
    (httpx.WriteError("n", request=REQUEST), Code.NETWORK),
    (httpx.CloseError("n", request=REQUEST), Code.NETWORK),
    (httpx.RemoteProtocolError("n", request=REQUEST), Code.NETWORK),
    (httpx.ProxyError("n", request=REQUEST), Code.NETWORK),
    (httpx.DecodingError("d", request=REQUEST), Code.MALFORMED_RESPONSE),
]


@pytest.mark.parametrize(("exc", "code"), TRANSPORT, ids=lambda v: type(v).__name__)
def test_each_transport_type(exc: Exception, code: Code) -> None:
    with capture_events(ClassifyUnplaced) as events:
        err = classify(exc, provider="alpha", model="m-1", attempt=3)
    assert isinstance(err, ProviderError)
    assert (err.code, err.retryable, err.provider, err.model, err.attempt) == (
        code,
        True,
        "alpha",
        "m-1",
        3,
    )
    assert err.message == f"{type(exc).__name__}: {exc}"
    assert err.__cause__ is exc
    assert events == []


def test_the_first_matching_transport_class_wins() -> None:
    class TimedOutRead(httpx.ReadTimeout, httpx.ReadError):
        pass

    assert classify(TimedOutRead("both", request=REQUEST)).code is Code.TIMEOUT


def test_context_can_override_a_transport_default() -> None:
    err = classify(httpx.ConnectError("refused"), retryable=False, run_id="r-1")
    assert (err.code, err.retryable, err.run_id) == (Code.NETWORK, False, "r-1")


UNPLACED_HTTPX = [
    httpx.LocalProtocolError("we sent garbage"),
    httpx.ProtocolError("protocol"),
    httpx.TransportError("transport"),
    httpx.UnsupportedProtocol("ftp://"),
    httpx.TooManyRedirects("loop", request=REQUEST),
    httpx.RequestError("request", request=REQUEST),
    httpx.HTTPError("http"),
    httpx.InvalidURL("no host"),
    httpx.StreamConsumed(),
    httpx.StreamClosed(),
    httpx.ResponseNotRead(),
    httpx.RequestNotRead(),
]


@pytest.mark.parametrize("exc", UNPLACED_HTTPX, ids=lambda v: type(v).__name__)
def test_other_httpx_errors_are_internal_and_loud(exc: Exception) -> None:
    kind = type(exc).__name__
    with capture_events(ClassifyUnplaced) as events:
        err = classify(exc, provider="alpha", model="m-1", retryable=True)
    assert isinstance(err, InternalError)
    assert (err.code, err.retryable, err.provider, err.model) == (
        Code.INTERNAL,
        False,
        "alpha",
        "m-1",
    )
    assert err.message == f"unclassified {kind}: {exc}"
    assert err.__cause__ is exc
    assert [(e.kind, e.provider, e.error.correlation_id) for e in events] == [
        (kind, "alpha", err.correlation_id)
    ]


# --- anything else ----------------------------------------------------------------------------


def test_a_foreign_exception_is_internal_with_its_context() -> None:
    exc = ValueError("boom")
    with capture_events(ClassifyUnplaced) as events:
        err = classify(exc, provider="beta", run_id="r-9", retryable=True)
    assert (err.code, err.retryable, err.provider, err.run_id) == (
        Code.INTERNAL,
        False,
        "beta",
        "r-9",
    )
    assert err.message == "unclassified ValueError: boom"
    assert err.__cause__ is exc
    assert len(events) == 1
    assert (events[0].kind, events[0].provider) == ("ValueError", "beta")
    assert type(events[0]).level == logging.ERROR


def test_a_non_exception_is_internal_without_a_cause() -> None:
    with capture_events(ClassifyUnplaced) as events:
        err = classify(42, provider="beta")
    assert (err.code, err.provider, err.__cause__) == (Code.INTERNAL, "beta", None)
    assert err.message == "unclassified int: 42"
    assert [(e.kind, e.provider) for e in events] == [("int", "beta")]


def test_normalize_classifies_a_foreign_exception() -> None:
    exc = RuntimeError("late")
    assert normalize(exc).message == "unclassified RuntimeError: late"
    as_step = normalize(exc, step=True)
    assert (as_step.code, as_step.message) == (
        Code.EXECUTION_FAILED,
        "unclassified RuntimeError: late",
    )
    assert normalize(httpx.ReadTimeout("slow")).code is Code.TIMEOUT


def test_an_actor_error_is_returned_as_it_is_whatever_the_context() -> None:
    original = ActorError.from_code(Code.AUTH, "no key")
    assert classify(original, provider="x", retryable=True) is original
    assert classify_one(original, provider="x") is original


# --- refusals ---------------------------------------------------------------------------------

EXIT_TAIL = (
    " is not classified: cancellation and interpreter exits "
    "take their own path and are never retried"
)
GROUP_REFUSAL = (
    "an exception group is not classified here: actors.normalize reduces it "
    "(cancellation wins, then a fatal member) and classifies each member"
)


@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt(), SystemExit(3)], ids=["KeyboardInterrupt", "SystemExit"]
)
def test_interpreter_exits_are_refused_exactly(exc: BaseException) -> None:
    with pytest.raises(TypeError, match=exact(type(exc).__name__ + EXIT_TAIL)):
        classify(exc)


async def test_cancelled_is_refused_exactly(autojump_clock: MockClock) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled as cancelled:
            with pytest.raises(TypeError, match=exact("Cancelled" + EXIT_TAIL)):
                classify_one(cancelled)
            raise


def test_the_module_function_refuses_an_exception_group() -> None:
    group = ExceptionGroup("two", [ValueError("a"), httpx.ReadTimeout("b")])
    with pytest.raises(TypeError, match=exact(GROUP_REFUSAL)):
        classify_one(group)
    assert classify(group).code is Code.INTERNAL


# --- HTTP answers: dialect --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "dialect", "content", "code"),
    [
        ("openai", None, ANT_OK, Code.MALFORMED_RESPONSE),
        ("openai", None, OAI_OK, Code.INTERNAL),
        ("anthropic", None, OAI_OK, Code.MALFORMED_RESPONSE),
        ("anthropic", None, ANT_OK, Code.INTERNAL),
        ("anthropic", "openai", ANT_OK, Code.MALFORMED_RESPONSE),
        ("anthropic", "openai", OAI_OK, Code.INTERNAL),
        ("openai", "anthropic", OAI_OK, Code.MALFORMED_RESPONSE),
        ("beta", None, b"{}", Code.INTERNAL),
        (None, None, b"{}", Code.INTERNAL),
        (None, "openai", b"{}", Code.MALFORMED_RESPONSE),
        ("beta", "anthropic", ANT_OK, Code.INTERNAL),
    ],
)
def test_the_dialect_defaults_to_a_provider_that_names_one(
    provider: str | None, dialect: str | None, content: bytes, code: Code
) -> None:
    response = httpx.Response(200, content=content)
    assert classify(response, provider=provider, dialect=dialect).code is code
    exc = httpx.HTTPStatusError("200", request=REQUEST, response=response)
    assert classify(exc, provider=provider, dialect=dialect).code is code


# --- HTTP answers: what the error carries -----------------------------------------------------


def test_an_error_answer_carries_status_retry_after_usage_and_context() -> None:
    content = {
        "error": {"type": "rate_limit_error", "message": "slow down"},
        "usage": {"input_tokens": 40, "output_tokens": 2},
    }
    response = httpx.Response(429, headers={"retry-after-ms": "1500"}, json=content)
    err = classify(response, provider="anthropic", model="m-2", attempt=1)
    assert isinstance(err, ProviderError)
    assert (err.code, err.retryable, err.retry_after, err.http_status) == (
        Code.RATE_LIMITED,
        True,
        1.5,
        429,
    )
    assert err.usage == Usage(input_tokens=40, output_tokens=2)
    assert (err.provider, err.model, err.attempt) == ("anthropic", "m-2", 1)
    assert err.message == "HTTP 429 rate_limit_error/-: slow down"
    assert err.__cause__ is None


def test_an_http_status_error_is_classified_by_its_response_and_kept_as_cause() -> None:
    response = httpx.Response(
        400,
        request=REQUEST,
        json={"error": {"type": "invalid_request_error", "message": "prompt is too long"}},
        headers={"retry-after": "2"},
    )
    exc = httpx.HTTPStatusError("400", request=REQUEST, response=response)
    err = classify(exc, provider="anthropic", run_id="r-3")
    assert (err.code, err.retryable, err.retry_after, err.http_status) == (
        Code.CONTEXT_WINDOW_EXCEEDED,
        False,
        2.0,
        400,
    )
    assert (err.provider, err.run_id) == ("anthropic", "r-3")
    assert err.message == "HTTP 400 invalid_request_error/-: prompt is too long"
    assert err.__cause__ is exc


@pytest.mark.parametrize(
    ("status", "verdict", "context", "retryable"),
    [
        (400, "true", {}, True),
        (400, "false", {}, False),
        (400, "true", {"retryable": False}, True),
        (503, "false", {}, False),
        (503, "true", {}, True),
        (503, "false", {"retryable": True}, False),
        (400, "maybe", {}, False),
        (503, "maybe", {}, True),
        (503, "maybe", {"retryable": False}, False),
        (400, None, {"retryable": True}, True),
        (400, None, {}, False),
        (503, None, {}, True),
    ],
)
def test_x_should_retry_overrides_context_and_default(
    status: int, verdict: str | None, context: dict[str, Any], retryable: bool
) -> None:
    headers = {} if verdict is None else {"x-should-retry": verdict}
    err = classify(httpx.Response(status, headers=headers), **context)
    assert (err.code, err.retryable) == (
        {400: Code.BAD_REQUEST, 503: Code.UNAVAILABLE}[status],
        retryable,
    )


# --- HTTP answers no rule places ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "content", "detail"),
    [
        (200, OAI_OK, "classify() was given a well-formed HTTP 200, which is not a failure"),
        (302, b"", "HTTP 302 (content-type none, 0 bytes)"),
        (600, b'{"error": {"message": "odd"}}', "HTTP 600: odd"),
    ],
)
def test_an_unplaced_answer_is_internal_and_never_retryable(
    status: int, content: bytes, detail: str
) -> None:
    response = httpx.Response(
        status, headers={"x-should-retry": "true", "retry-after": "5"}, content=content
    )
    with capture_events(ClassifyUnplaced) as events:
        err = classify(response, provider="openai", model="m-1", retryable=True)
    assert isinstance(err, InternalError)
    assert (err.code, err.retryable, err.message) == (Code.INTERNAL, False, detail)
    assert (err.provider, err.model, err.http_status, err.retry_after) == (
        "openai",
        "m-1",
        status,
        5.0,
    )
    assert err.__cause__ is None
    assert [(e.kind, e.provider, e.error.correlation_id) for e in events] == [
        ("Response", "openai", err.correlation_id)
    ]


def test_an_unplaced_http_status_error_keeps_the_exception_as_cause() -> None:
    response = httpx.Response(302, request=REQUEST, headers={"location": "/x"})
    exc = httpx.HTTPStatusError("302", request=REQUEST, response=response)
    with capture_events(ClassifyUnplaced) as events:
        err = classify(exc, provider="openai")
    assert (err.code, err.provider, err.message) == (
        Code.INTERNAL,
        "openai",
        "HTTP 302 (content-type none, 0 bytes)",
    )
    assert err.__cause__ is exc
    assert [(e.kind, e.provider, cause_chain(e.error)) for e in events] == [
        ("Response", "openai", ["HTTPStatusError"])
    ]
