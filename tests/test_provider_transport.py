"""Both dialects over an injected ``httpx.MockTransport``: no sockets, exact fields.

``HttpProvider(config, dialect, transport=...)`` carries a dialect over any httpx
transport; these tests answer with a handler and assert what the adapter sent and the
exact result or typed error. The loopback conformance suite (tests/test_providers.py)
keeps using the chaos server over real HTTP (checked at the end).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.lowlevel
from trio.testing import MockClock

from actors import ActorError, Code, Usage, open_runtime
from actors.providers import (
    AnthropicDialect,
    AnthropicProvider,
    HttpProvider,
    LlmRequest,
    LlmResponse,
    Message,
    OpenAIDialect,
    OpenAIProvider,
    ProviderClient,
    ProviderConfig,
)
from actors.testing.chaos import chaos_server
from tests.provider_helpers import sse, stream_through

KEY = "sk-transport-KEY-0123456789abcdef"
REQUEST = LlmRequest(model="m-1", messages=[Message(role="user", content="hello")])
Handler = Callable[[httpx.Request], httpx.Response]


@attrs.frozen
class Dialected:
    """One dialect's side of a test: its adapter, path, and canned answers."""

    provider: type[HttpProvider]
    path: str
    ok: dict[str, Any]
    rate_limited: dict[str, Any]
    rate_limited_detail: str

    def auth(self, request: httpx.Request) -> str | None:
        if self.provider is OpenAIProvider:
            return request.headers.get("authorization")
        return request.headers.get("x-api-key")


OPENAI = Dialected(
    provider=OpenAIProvider,
    path="/v1/chat/completions",
    ok={
        "id": "c-1",
        "model": "m-1-2026",
        "choices": [{"message": {"content": "hi there"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    },
    rate_limited={"error": {"message": "slow down", "type": "requests", "code": "rate_limit"}},
    rate_limited_detail="HTTP 429 requests/rate_limit: slow down",
)
ANTHROPIC = Dialected(
    provider=AnthropicProvider,
    path="/v1/messages",
    ok={
        "type": "message",
        "model": "m-1-2026",
        "content": [{"type": "text", "text": "hi there"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    },
    rate_limited={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
    rate_limited_detail="HTTP 429 rate_limit_error/-: slow down",
)
DIALECTS = [pytest.param(OPENAI, id="openai"), pytest.param(ANTHROPIC, id="anthropic")]


async def call(
    dialected: Dialected, handler: Handler, request: LlmRequest = REQUEST
) -> tuple[LlmResponse | ActorError, list[httpx.Request]]:
    """One completion through the adapter over a mock transport; the requests it sent."""
    sent: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return handler(request)

    config = ProviderConfig(name="p", base_url="https://llm.invalid", api_key=KEY)
    async with open_runtime() as runtime:
        ref = await runtime.spawn(
            lambda: dialected.provider(config, transport=httpx.MockTransport(recording))
        )
        try:
            return await ProviderClient(ref, "p").complete(request), sent
        except ActorError as err:
            return err, sent


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_success(dialected: Dialected, autojump_clock: MockClock) -> None:
    answer, sent = await call(dialected, lambda _: httpx.Response(200, json=dialected.ok))
    assert answer == LlmResponse(
        content="hi there",
        finish_reason="stop" if dialected is OPENAI else "end_turn",
        usage=Usage(input_tokens=3, output_tokens=2),
        provider="p",
        model="m-1-2026",
        latency=0.0,
    )
    assert len(sent) == 1
    request = sent[0]
    assert (request.method, str(request.url)) == ("POST", f"https://llm.invalid{dialected.path}")
    expected_auth = f"Bearer {KEY}" if dialected is OPENAI else KEY
    assert dialected.auth(request) == expected_auth
    if dialected is ANTHROPIC:
        assert request.headers["anthropic-version"] == "2023-06-01"
    body = json.loads(request.content)
    assert (body["model"], body["max_tokens"], body["messages"]) == (
        "m-1",
        1024,
        [{"role": "user", "content": "hello"}],
    )
    assert "stream" not in body


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_429_with_retry_after(dialected: Dialected, autojump_clock: MockClock) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"retry-after": "7"}, json=dialected.rate_limited)

    err, sent = await call(dialected, handler)
    assert isinstance(err, ActorError)
    assert (err.code, err.retryable, err.retry_after, err.http_status) == (
        Code.RATE_LIMITED,
        True,
        7.0,
        429,
    )
    assert (err.provider, err.model, err.usage) == ("p", "m-1", None)
    assert err.message == dialected.rate_limited_detail
    assert len(sent) == 1  # one attempt: the adapter never retries


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_a_key_echoed_in_an_error_body_is_redacted(
    dialected: Dialected, autojump_clock: MockClock
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        echoed = f"key {dialected.auth(request)} was refused"
        return httpx.Response(401, json={"error": {"type": "auth", "message": echoed}})

    err, _ = await call(dialected, handler)
    assert isinstance(err, ActorError)
    assert (err.code, err.http_status) == (Code.AUTH, 401)
    assert KEY not in repr(err)
    assert KEY not in str(err)
    assert "[REDACTED]" in err.message


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_malformed_json_body(dialected: Dialected, autojump_clock: MockClock) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "application/json"}, content=b'{"choices": ['
        )

    err, _ = await call(dialected, handler)
    assert isinstance(err, ActorError)
    assert (err.code, err.retryable, err.http_status, err.retry_after) == (
        Code.MALFORMED_RESPONSE,
        True,
        200,
        None,
    )
    assert (err.provider, err.model) == ("p", "m-1")
    assert err.message == "HTTP 200 body is not JSON (content-type application/json, 13 bytes)"


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_a_body_of_the_other_dialect_is_malformed(
    dialected: Dialected, autojump_clock: MockClock
) -> None:
    other = ANTHROPIC if dialected is OPENAI else OPENAI
    err, _ = await call(dialected, lambda _: httpx.Response(200, json=other.ok))
    assert isinstance(err, ActorError)
    assert (err.code, err.http_status, err.provider, err.model) == (
        Code.MALFORMED_RESPONSE,
        None,
        "p",
        "m-1",
    )
    assert err.message.startswith("provider answer does not match its schema: ")


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_connect_error(dialected: Dialected, autojump_clock: MockClock) -> None:
    raised: list[httpx.ConnectError] = []

    def handler(request: httpx.Request) -> httpx.Response:
        raised.append(httpx.ConnectError("connection refused", request=request))
        raise raised[0]

    err, sent = await call(dialected, handler)
    assert isinstance(err, ActorError)
    assert (err.code, err.retryable, err.http_status, err.retry_after) == (
        Code.NETWORK,
        True,
        None,
        None,
    )
    assert (err.provider, err.model) == ("p", "m-1")
    assert err.message == "ConnectError: connection refused"
    assert err.__cause__ is raised[0]
    assert len(sent) == 1


# --- streams over the mock transport ---------------------------------------------------


OPENAI_STREAM_HEAD = (
    (None, {"choices": [{"delta": {"content": "hi "}}]}),
    (None, {"choices": [{"delta": {"content": "there"}}], "usage": None}),
)
ANTHROPIC_STREAM_HEAD = (
    ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
    ("ping", {"type": "ping"}),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi "}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "there"}},
    ),
)


async def stream(dialected: Dialected, body: bytes) -> LlmResponse | ActorError:
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["stream"] is True
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    config = ProviderConfig(name="p", base_url="https://llm.invalid", api_key=KEY)
    request = attrs.evolve(REQUEST, stream=True)
    return await stream_through(dialected.provider, config, handler, request)


async def test_openai_stream(autojump_clock: MockClock) -> None:
    body = sse(
        *OPENAI_STREAM_HEAD,
        (None, {"choices": [{"delta": {}, "finish_reason": "stop"}]}),
        (None, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        (None, "[DONE]"),
    )
    answer = await stream(OPENAI, body)
    assert answer == LlmResponse(
        content="hi there",
        finish_reason="stop",
        usage=Usage(input_tokens=3, output_tokens=2),
        provider="p",
        model="m-1",
    )


async def test_anthropic_stream(autojump_clock: MockClock) -> None:
    body = sse(
        *ANTHROPIC_STREAM_HEAD,
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    )
    answer = await stream(ANTHROPIC, body)
    assert answer == LlmResponse(
        content="hi there",
        finish_reason="end_turn",
        usage=Usage(input_tokens=3, output_tokens=2),
        provider="p",
        model="m-1",
    )


@pytest.mark.parametrize(
    ("dialected", "error", "code", "status"),
    [
        pytest.param(
            OPENAI,
            (None, {"error": {"message": "boom", "type": "server_error"}}),
            Code.UNAVAILABLE,
            500,
            id="openai-error-chunk",
        ),
        pytest.param(
            ANTHROPIC,
            ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
            Code.UNAVAILABLE,
            529,
            id="anthropic-overloaded",
        ),
        pytest.param(
            ANTHROPIC,
            (
                "error",
                {"type": "error", "error": {"type": "invalid_request_error", "message": "x"}},
            ),
            Code.BAD_REQUEST,
            400,
            id="anthropic-invalid-request",
        ),
        pytest.param(
            ANTHROPIC,
            ("error", {"type": "error", "error": {"type": "brand_new_error", "message": "x"}}),
            Code.UNAVAILABLE,
            500,
            id="anthropic-unknown-type",
        ),
    ],
)
async def test_an_error_event_mid_stream_is_classified_as_its_status(
    dialected: Dialected,
    error: tuple[str | None, Any],
    code: Code,
    status: int,
    autojump_clock: MockClock,
) -> None:
    head = OPENAI_STREAM_HEAD if dialected is OPENAI else ANTHROPIC_STREAM_HEAD
    err = await stream(dialected, sse(*head, error))
    assert isinstance(err, ActorError)
    assert (err.code, err.http_status, err.provider, err.model) == (code, status, "p", "m-1")
    assert err.partial_text == "hi there"
    usage = None if dialected is OPENAI else Usage(input_tokens=3)
    assert err.usage == usage


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_a_stream_without_its_terminator_fails(
    dialected: Dialected, autojump_clock: MockClock
) -> None:
    head = OPENAI_STREAM_HEAD if dialected is OPENAI else ANTHROPIC_STREAM_HEAD
    err = await stream(dialected, sse(*head))
    assert isinstance(err, ActorError)
    assert (err.code, err.retryable, err.message) == (
        Code.NETWORK,
        True,
        "stream ended without its terminator",
    )
    assert err.partial_text == "hi there"


@pytest.mark.parametrize(
    "event",
    [
        ("content_block_start", {"type": "content_block_start", "content_block": "text"}),
        ("content_block_delta", {"type": "content_block_delta", "delta": ["text_delta"]}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": "first",
                "content_block": {"type": "tool_use", "id": "t", "name": "n"},
            },
        ),
        ("message_delta", {"type": "message_delta", "usage": 7}),
    ],
    ids=["block-not-object", "delta-not-object", "index-not-int", "usage-not-object"],
)
async def test_a_stream_event_of_the_wrong_shape_is_malformed(
    event: tuple[str | None, Any], autojump_clock: MockClock
) -> None:
    """A field of the wrong type is the provider's malformed answer, never ``internal``;
    what the stream delivered before it is kept."""
    err = await stream(ANTHROPIC, sse(*ANTHROPIC_STREAM_HEAD, event))
    assert isinstance(err, ActorError)
    assert (err.code, err.provider, err.model, err.partial_text) == (
        Code.MALFORMED_RESPONSE,
        "p",
        "m-1",
        "hi there",
    )
    assert err.message.startswith("provider answer has the wrong shape (")


# --- the dialects are plain values; the default transport is httpx's own ---------------


def test_dialects_name_their_classification_and_path() -> None:
    assert (OpenAIDialect().name, OpenAIDialect().path) == ("openai", "/v1/chat/completions")
    assert (AnthropicDialect().name, AnthropicDialect().path) == ("anthropic", "/v1/messages")


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_without_a_transport_the_adapter_speaks_real_http(dialected: Dialected) -> None:
    route = "openai" if dialected is OPENAI else "anthropic"
    async with chaos_server() as server, open_runtime() as runtime:
        config = ProviderConfig(name="p", base_url=server.url, api_key=KEY, read_timeout=5)
        ref = await runtime.spawn(lambda: dialected.provider(config))
        answer = await ProviderClient(ref, "p").complete(REQUEST)
    assert isinstance(answer, LlmResponse)
    assert answer.content == "echo: hello"
    assert server.count(route) == 1


def test_the_loopback_suite_still_uses_the_chaos_server() -> None:
    """tests/test_providers.py runs over real loopback HTTP: it opens the chaos server and
    never injects a transport."""
    source = Path(__file__).with_name("test_providers.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    keywords = {node.arg for node in ast.walk(tree) if isinstance(node, ast.keyword)}
    assert "chaos_server" in names
    assert "transport" not in keywords
    assert "MockTransport" not in source


# --- exit paths of a call in flight over an injected transport ---------------------------


class _Hanging(httpx.AsyncBaseTransport):
    """Answers nothing until cancelled; records that its request was cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.started += 1
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")  # pragma: no cover


CONFIG = ProviderConfig(name="p", base_url="https://llm.invalid", api_key=KEY)


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_a_callers_own_cancel_cancels_its_request_and_the_adapter_serves_on(
    dialected: Dialected, autojump_clock: MockClock
) -> None:
    hanging = _Hanging()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: dialected.provider(CONFIG, transport=hanging))
        client = ProviderClient(ref, "p")
        with trio.move_on_after(5) as scope:
            await client.complete(REQUEST)
        assert scope.cancelled_caught
        await trio.lowlevel.checkpoint()  # the adapter sees the caller leave
        assert (hanging.started, hanging.cancelled) == (1, 1)
        with trio.move_on_after(5):  # the next call reaches the transport: still serving
            await client.complete(REQUEST)
        assert hanging.started == 2


@pytest.mark.parametrize("dialected", DIALECTS)
async def test_an_enclosing_cancel_answers_cancelled_and_cancels_the_request(
    dialected: Dialected, autojump_clock: MockClock
) -> None:
    """A scope around the runtime is cancelled while a caller outside it waits: the caller
    is answered ``cancelled`` with the scope's reason; the request is cancelled."""
    hanging = _Hanging()
    answers: list[tuple[Code, str]] = []

    async def caller(client: ProviderClient) -> None:
        try:
            await client.complete(REQUEST)
        except ActorError as err:
            answers.append((err.code, err.message))

    async with trio.open_nursery() as callers:
        with trio.CancelScope() as around:
            async with open_runtime() as runtime:
                ref = await runtime.spawn(lambda: dialected.provider(CONFIG, transport=hanging))
                callers.start_soon(caller, ProviderClient(ref, "p"))
                await trio.sleep(1)
                around.cancel(reason="daemon shutting down")
    assert (hanging.started, hanging.cancelled) == (1, 1)
    assert [code for code, _ in answers] == [Code.CANCELLED]
    assert "daemon shutting down" in answers[0][1]
    assert trio.current_time() == 1.0


@pytest.mark.parametrize("transport", ["not a transport", 42])
async def test_a_transport_of_the_wrong_type_is_a_start_failure(
    transport: Any, autojump_clock: MockClock
) -> None:
    async with open_runtime() as runtime:
        with pytest.raises(ActorError) as info:
            await runtime.spawn(lambda: OpenAIProvider(CONFIG, transport=transport))
    assert (info.value.code, info.value.provider) == (Code.VALIDATION, "p")
    assert info.value.message.startswith("transport must be an httpx.AsyncBaseTransport, not ")
