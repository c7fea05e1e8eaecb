"""Provider answers built to hurt: each test pins one hostile-test finding.

Both adapters over an ``httpx.MockTransport`` under the mock clock: a stream kept open
after its terminator, values of the wrong JSON type, non-standard JSON, answers that
used to end as ``internal`` or lose what was streamed, and the stream size cap.
"""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import httpx
import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code, Usage, open_runtime
from actors.providers import (
    AnthropicProvider,
    HttpProvider,
    LlmRequest,
    LlmResponse,
    Message,
    OpenAIProvider,
    ProviderClient,
    ProviderConfig,
    SseEvent,
    SseParser,
    StreamEvent,
)
from actors.providers.http import TRAILING_BYTES, TRAILING_GRACE
from tests.provider_helpers import sse

KEY = "sk-hostile-KEY-0123456789abcdef"
REQUEST = LlmRequest(model="m-1", messages=[Message(role="user", content="hello")])
STREAM_REQUEST = attrs.evolve(REQUEST, stream=True)
SSE_HEADERS = {"content-type": "text/event-stream"}


OPENAI_HEAD = (
    (None, {"choices": [{"delta": {"content": "hi "}}]}),
    (None, {"choices": [{"delta": {"content": "there"}}]}),
)
OPENAI_TAIL = (
    (None, {"choices": [{"delta": {}, "finish_reason": "stop"}]}),
    (None, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
    (None, "[DONE]"),
)
ANTHROPIC_HEAD = (
    ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi "}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "there"}},
    ),
)
ANTHROPIC_TAIL = (
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
COMPLETE = {
    OpenAIProvider: sse(*OPENAI_HEAD, *OPENAI_TAIL),
    AnthropicProvider: sse(*ANTHROPIC_HEAD, *ANTHROPIC_TAIL),
}
FINISH = {OpenAIProvider: "stop", AnthropicProvider: "end_turn"}
PROVIDERS = [
    pytest.param(OpenAIProvider, id="openai"),
    pytest.param(AnthropicProvider, id="anthropic"),
]


def answer(provider: type[HttpProvider]) -> LlmResponse:
    """The assembled answer of ``COMPLETE[provider]`` at virtual time 0."""
    return LlmResponse(
        content="hi there",
        finish_reason=FINISH[provider],
        usage=Usage(input_tokens=3, output_tokens=2),
        provider="p",
        model="m-1",
    )


def config(**fields: Any) -> ProviderConfig:
    return ProviderConfig(name="p", base_url="https://llm.invalid", api_key=KEY, **fields)


def responding(
    body: bytes | Any, *, status: int = 200
) -> Callable[[httpx.Request], httpx.Response]:
    """A handler answering ``body``: bytes as an event stream, anything else as JSON."""

    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, bytes):
            return httpx.Response(status, headers=SSE_HEADERS, content=body)
        return httpx.Response(status, json=body)

    return handler


def raw_json(text: str) -> Callable[[httpx.Request], httpx.Response]:
    """A handler answering ``text`` as an application/json body, byte for byte."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "application/json"}, content=text.encode()
        )

    return handler


async def complete(
    provider: type[HttpProvider], handler: Callable[[httpx.Request], httpx.Response]
) -> LlmResponse | ActorError:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(
            lambda: provider(config(), transport=httpx.MockTransport(handler))
        )
        try:
            return await ProviderClient(ref, "p").complete(REQUEST)
        except ActorError as err:
            return err


async def stream(
    provider: type[HttpProvider],
    handler: Callable[[httpx.Request], httpx.Response],
    **config_fields: Any,
) -> tuple[LlmResponse | ActorError, list[StreamEvent]]:
    """One stream to its end: the answer or the error, and the events received."""
    received: list[StreamEvent] = []
    cfg = config(**config_fields)
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: provider(cfg, transport=httpx.MockTransport(handler)))
        try:
            async with ProviderClient(ref, "p").stream(STREAM_REQUEST) as events:
                async for event in events:
                    received.append(event)
        except ActorError as err:
            return err, received
        assert events.response is not None
        return events.response, received


def failed(result: LlmResponse | ActorError) -> ActorError:
    assert isinstance(result, ActorError), result
    return result


# --- 1. a stream kept open after its terminator still answers --------------------------


class KeptOpen(httpx.AsyncByteStream):
    """A complete answer, then a keep-alive comment every ``every`` seconds, forever;
    records when the adapter closes it."""

    def __init__(self, body: bytes, every: float) -> None:
        self.body = body
        self.every = every
        self.closed_at: float | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.body
        while True:
            await trio.sleep(self.every)
            yield b": keep-alive\n\n"

    async def aclose(self) -> None:
        self.closed_at = trio.current_time()


@pytest.mark.parametrize("every", [15.0, 0.1], ids=["pings-every-15s", "pings-every-100ms"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_kept_open_after_its_terminator_answers_after_the_grace(
    provider: type[HttpProvider], every: float, autojump_clock: MockClock
) -> None:
    """The answer is complete at the terminator: it comes TRAILING_GRACE later at most,
    and stopping the read leaves no async generator to the garbage collector (trio
    would warn about each, this test's own ``KeptOpen.__aiter__`` among them)."""
    upstream = KeptOpen(COMPLETE[provider], every)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE_HEADERS, stream=upstream)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with trio.fail_after(60):
            result, events = await stream(provider, handler)
        gc.collect()
    assert result == attrs.evolve(answer(provider), latency=TRAILING_GRACE)
    assert [e.text for e in events if e.kind == "text"] == ["hi ", "there"]
    assert upstream.closed_at == TRAILING_GRACE
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_caller_timeout_longer_than_the_grace_gets_the_complete_answer(
    provider: type[HttpProvider], autojump_clock: MockClock
) -> None:
    upstream = KeptOpen(COMPLETE[provider], 1.0)
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers=SSE_HEADERS, stream=upstream)
    )
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: provider(config(), transport=transport))
        async with ProviderClient(ref, "p", timeout=10).stream(STREAM_REQUEST) as events:
            texts = [event.text async for event in events if event.kind == "text"]
    assert texts == ["hi ", "there"]
    assert events.response == attrs.evolve(answer(provider), latency=TRAILING_GRACE)
    assert trio.current_time() == TRAILING_GRACE


class Flood(httpx.AsyncByteStream):
    """A complete answer, then ``total`` bytes of comments in 1 KiB chunks, with no
    checkpoint between them; counts what was pulled after the answer."""

    def __init__(self, body: bytes, total: int) -> None:
        self.parts = [body, *[b": " + b"x" * 1021 + b"\n"] * (total // 1024)]
        self.pulled_after_body = 0

    def __aiter__(self) -> Flood:
        return self

    async def __anext__(self) -> bytes:
        if not self.parts:
            raise StopAsyncIteration
        part = self.parts.pop(0)
        if not part.startswith(b": "):
            return part
        self.pulled_after_body += len(part)
        return part


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_what_follows_a_terminator_is_read_up_to_a_byte_cap(
    provider: type[HttpProvider], autojump_clock: MockClock
) -> None:
    flood = Flood(COMPLETE[provider], 1 << 20)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE_HEADERS, stream=flood)

    result, _ = await stream(provider, handler)
    assert result == answer(provider)
    assert TRAILING_BYTES < flood.pulled_after_body <= TRAILING_BYTES + 1024


@pytest.mark.parametrize(
    "junk",
    [b"\xff\xfe not UTF-8\n\n", b'data: {"choices": "not a list"}\n\n', "data: é".encode()[:-1]],
    ids=["invalid-utf8", "malformed-event", "cut-inside-utf8"],
)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_nothing_after_the_terminator_is_parsed(
    provider: type[HttpProvider], junk: bytes, autojump_clock: MockClock
) -> None:
    result, _ = await stream(provider, responding(COMPLETE[provider] + junk))
    assert result == answer(provider)


# --- 2. every value at its exact JSON type ---------------------------------------------

SCHEMA = "provider answer does not match its schema: "


def openai_body(message: Any = None, **fields: Any) -> dict[str, Any]:
    choice = {"message": {"content": "hi"} if message is None else message}
    return {"choices": [{**choice, "finish_reason": "stop"}], **fields}


def anthropic_body(*blocks: Any, **fields: Any) -> dict[str, Any]:
    content = list(blocks) or [{"type": "text", "text": "hi"}]
    base = {"type": "message", "content": content, "usage": {"input_tokens": 3}}
    return {**base, **fields}


@pytest.mark.parametrize(
    ("provider", "body", "detail"),
    [
        pytest.param(
            OpenAIProvider,
            openai_body({"content": ["part", {"type": "text"}]}),
            "expected a string, got an array @ $.choices[0].message.content",
            id="openai-content-list",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body({"content": {"text": "hi"}}),
            "expected a string, got an object @ $.choices[0].message.content",
            id="openai-content-object",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body({"content": 12}),
            "expected a string, got an integer @ $.choices[0].message.content",
            id="openai-content-number",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body({"content": True}),
            "expected a string, got a boolean @ $.choices[0].message.content",
            id="openai-content-bool",
        ),
        pytest.param(
            OpenAIProvider,
            {"choices": [{"message": {"content": "hi"}, "finish_reason": {"a": 1}}]},
            "expected a string, got an object @ $.choices[0].finish_reason",
            id="openai-finish-reason-object",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body(model=[1, 2]),
            "expected a string, got an array @ $.model",
            id="openai-model-list",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body(
                {"tool_calls": [{"id": "t", "function": {"name": "f", "arguments": {"x": 1}}}]}
            ),
            "expected a string, got an object @ $.choices[0].message.tool_calls[0]"
            ".function.arguments",
            id="openai-tool-arguments-object",
        ),
        pytest.param(
            OpenAIProvider,
            {"choices": [{"message": []}]},
            "expected an object, got an array @ $.choices[0].message",
            id="openai-message-list",
        ),
        pytest.param(
            OpenAIProvider,
            {"choices": {"0": {"message": {"content": "hi"}}}},
            "expected an array, got an object @ $.choices",
            id="openai-choices-object",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body(usage=[1, 2]),
            "expected an object, got an array @ $.usage",
            id="openai-usage-list",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body(usage={"prompt_tokens": "7"}),
            "expected a non-negative integer, got a string @ $.usage.prompt_tokens",
            id="openai-usage-string",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body(usage={"prompt_tokens": 7.9}),
            "expected a non-negative integer, got a number @ $.usage.prompt_tokens",
            id="openai-usage-float",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body(usage={"prompt_tokens": True}),
            "expected a non-negative integer, got a boolean @ $.usage.prompt_tokens",
            id="openai-usage-bool",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body(usage={"completion_tokens": -5}),
            "expected a non-negative integer, got a negative integer @ $.usage.completion_tokens",
            id="openai-usage-negative",
        ),
        pytest.param(
            OpenAIProvider,
            None,
            "expected an object, got null @ $",
            id="openai-body-null",
        ),
        pytest.param(
            OpenAIProvider,
            openai_body({"content": "\ud800"}),
            "expected a string, got one with a lone surrogate (not Unicode text) @ "
            "$.choices[0].message.content",
            id="openai-lone-surrogate",
        ),
        pytest.param(
            AnthropicProvider,
            anthropic_body({"type": "text", "text": {"a": 1}}),
            "expected a string, got an object @ $.content[0].text",
            id="anthropic-text-object",
        ),
        pytest.param(
            AnthropicProvider,
            anthropic_body({"type": "text", "text": None}),
            "expected a string, got null @ $.content[0].text",
            id="anthropic-text-null",
        ),
        pytest.param(
            AnthropicProvider,
            anthropic_body({"type": "tool_use", "id": 5, "name": {"n": 1}, "input": {}}),
            "expected a string, got an integer @ $.content[0].id; "
            "expected a string, got an object @ $.content[0].name",
            id="anthropic-tool-id-and-name",
        ),
        pytest.param(
            AnthropicProvider,
            '{"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "f", '
            '"input": {"x": [1e999]}}], "usage": {"input_tokens": 3}}',
            "expected a finite number, got an infinite one @ $.content[0].input",
            id="anthropic-tool-input-infinite",
        ),
        pytest.param(
            AnthropicProvider,
            anthropic_body(
                {"type": "tool_use", "id": "t", "name": "f", "input": {"x": ["\udfff"]}}
            ),
            "expected a string, got one with a lone surrogate (not Unicode text) @ "
            "$.content[0].input",
            id="anthropic-tool-input-surrogate",
        ),
        pytest.param(
            AnthropicProvider,
            anthropic_body(type=["message"]),
            "expected a string, got an array @ $.type",
            id="anthropic-type-list",
        ),
        pytest.param(
            AnthropicProvider,
            anthropic_body(stop_reason={"x": 1}),
            "expected a string, got an object @ $.stop_reason",
            id="anthropic-stop-reason-object",
        ),
        pytest.param(
            AnthropicProvider,
            anthropic_body(usage={"input_tokens": 3, "output_tokens": False}),
            "expected a non-negative integer, got a boolean @ $.usage.output_tokens",
            id="anthropic-usage-bool",
        ),
    ],
)
async def test_a_value_of_the_wrong_json_type_is_malformed_naming_the_field(
    provider: type[HttpProvider], body: Any, detail: str, autojump_clock: MockClock
) -> None:
    """Nothing is coerced: a list, an object, a number or null where a string belongs is
    never turned into text, a string or a bool is never a count. (``body``: a value sent
    as JSON, or a string sent as it is.)"""
    text = body if isinstance(body, str) else json.dumps(body)
    err = failed(await complete(provider, raw_json(text)))
    assert (err.code, err.provider, err.model) == (Code.MALFORMED_RESPONSE, "p", "m-1")
    assert err.message == SCHEMA + detail


@pytest.mark.parametrize(
    ("provider", "text", "detail"),
    [
        pytest.param(
            OpenAIProvider,
            '{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":NaN}}',
            "NaN is not a JSON value",
            id="openai-nan",
        ),
        pytest.param(
            AnthropicProvider,
            '{"type":"message","content":[{"type":"tool_use","id":"t","name":"f",'
            '"input":{"x":-Infinity}}],"usage":{"input_tokens":1}}',
            "-Infinity is not a JSON value",
            id="anthropic-infinity-in-tool-input",
        ),
    ],
)
async def test_non_standard_json_constants_are_not_json(
    provider: type[HttpProvider], text: str, detail: str, autojump_clock: MockClock
) -> None:
    err = failed(await complete(provider, raw_json(text)))
    assert (err.code, err.http_status, err.message) == (
        Code.MALFORMED_RESPONSE,
        200,
        f"HTTP 200 body is not JSON ({detail})",
    )


async def test_null_where_the_api_may_send_it_is_absent(autojump_clock: MockClock) -> None:
    body = {
        "model": None,
        "choices": [{"message": {"content": None, "tool_calls": None}, "finish_reason": None}],
        "usage": None,
    }
    result = await complete(OpenAIProvider, responding(body))
    assert result == LlmResponse(content="", provider="p", model="m-1")


STREAM_WRONG_TYPES = [
    pytest.param(
        OpenAIProvider,
        (None, {"choices": [{"delta": {"content": ["a", "b"]}}]}),
        "chat.completion.chunk event: expected a string, got an array @ $.choices[0].delta.content",
        id="openai-delta-content-list",
    ),
    pytest.param(
        OpenAIProvider,
        (None, [1, 2, 3]),
        "chat.completion.chunk event: expected an object, got an array @ $",
        id="openai-chunk-list",
    ),
    pytest.param(
        OpenAIProvider,
        (None, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": "2"}}),
        "chat.completion.chunk event: expected a non-negative integer, got a string @ "
        "$.usage.completion_tokens",
        id="openai-usage-string",
    ),
    pytest.param(
        AnthropicProvider,
        (
            "content_block_delta",
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": None}},
        ),
        "content_block_delta event: expected a string, got null @ $.delta.text",
        id="anthropic-text-null",
    ),
    pytest.param(
        AnthropicProvider,
        (
            "content_block_delta",
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": {"a": 1}}},
        ),
        "content_block_delta event: expected a string, got an object @ $.delta.text",
        id="anthropic-text-object",
    ),
    pytest.param(
        AnthropicProvider,
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 7},
            },
        ),
        "content_block_delta event: expected a string, got an integer @ $.delta.partial_json",
        id="anthropic-partial-json-number",
    ),
    pytest.param(
        AnthropicProvider,
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": 5, "name": {"n": 1}},
            },
        ),
        "content_block_start event: expected a string, got an integer @ $.content_block.id; "
        "expected a string, got an object @ $.content_block.name",
        id="anthropic-tool-id-and-name",
    ),
    pytest.param(
        AnthropicProvider,
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": {"r": 1}}},
        ),
        "message_delta event: expected a string, got an object @ $.delta.stop_reason",
        id="anthropic-stop-reason-object",
    ),
    pytest.param(
        AnthropicProvider,
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": True}}),
        "message_delta event: expected a non-negative integer, got a boolean @ "
        "$.usage.output_tokens",
        id="anthropic-output-tokens-bool",
    ),
    pytest.param(
        AnthropicProvider,
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": "99"}}),
        "message_delta event: expected a non-negative integer, got a string @ "
        "$.usage.output_tokens",
        id="anthropic-output-tokens-string",
    ),
    pytest.param(
        AnthropicProvider,
        ("message_delta", {"type": "message_delta", "usage": [2]}),
        "message_delta event: expected an object, got an array @ $.usage",
        id="anthropic-usage-list",
    ),
]


@pytest.mark.parametrize(("provider", "event", "detail"), STREAM_WRONG_TYPES)
async def test_a_stream_value_of_the_wrong_json_type_is_malformed_keeping_what_came(
    provider: type[HttpProvider],
    event: tuple[str | None, Any],
    detail: str,
    autojump_clock: MockClock,
) -> None:
    head = OPENAI_HEAD if provider is OpenAIProvider else ANTHROPIC_HEAD
    tail = OPENAI_TAIL if provider is OpenAIProvider else ANTHROPIC_TAIL
    result, events = await stream(provider, responding(sse(*head, event, *tail)))
    err = failed(result)
    assert (err.code, err.provider, err.model) == (Code.MALFORMED_RESPONSE, "p", "m-1")
    assert err.message == f"provider answer has the wrong shape ({detail})"
    assert err.partial_text == "hi there"
    assert err.usage == (None if provider is OpenAIProvider else Usage(input_tokens=3))
    assert [e.text for e in events if e.kind == "text"] == ["hi ", "there"]


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        pytest.param(
            '{"type": "content_block_start", "index": 1e999, '
            '"content_block": {"type": "tool_use", "id": "t", "name": "n"}}',
            "provider answer has the wrong shape (content_block_start event: expected an "
            "integer, got a number @ $.index)",
            id="index-1e999",
        ),
        pytest.param(
            '{"type": "content_block_start", "index": NaN, '
            '"content_block": {"type": "tool_use", "id": "t", "name": "n"}}',
            "stream event is not JSON (NaN is not a JSON value)",
            id="index-nan",
        ),
        pytest.param(
            '{"type": "content_block_delta", "delta": {"type": "text_delta", "text": "\\ud800"}}',
            "provider answer has the wrong shape (content_block_delta event: expected a "
            "string, got one with a lone surrogate (not Unicode text) @ $.delta.text)",
            id="text-lone-surrogate",
        ),
        pytest.param(
            '{"type": "content_block_delta", "delta": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "stream event is not JSON (nested too deeply)",
            id="nested-too-deeply",
        ),
    ],
)
async def test_a_stream_event_that_used_to_end_as_internal_is_malformed(
    data: str, detail: str, autojump_clock: MockClock
) -> None:
    """``int(1e999)`` raised OverflowError and a deep event RecursionError: both ended
    as ``internal``, losing the text and usage already streamed."""
    body = sse(*ANTHROPIC_HEAD, (None, data), *ANTHROPIC_TAIL)
    err = failed((await stream(AnthropicProvider, responding(body)))[0])
    assert (err.code, err.message) == (Code.MALFORMED_RESPONSE, detail)
    assert (err.partial_text, err.usage) == ("hi there", Usage(input_tokens=3))


async def test_a_body_nested_too_deeply_is_malformed_not_internal(
    autojump_clock: MockClock,
) -> None:
    text = '{"choices":' + "[" * 100_000 + "]" * 100_000 + "}"
    err = failed(await complete(OpenAIProvider, raw_json(text)))
    assert (err.code, err.message) == (
        Code.MALFORMED_RESPONSE,
        f"HTTP 200 body is not JSON (content-type application/json, {len(text)} bytes)",
    )


@pytest.mark.parametrize(
    "error",
    [pytest.param("boom", id="string"), pytest.param({"type": ["x"]}, id="type-not-string")],
)
async def test_an_anthropic_error_event_of_any_shape_is_the_error_it_stands_for(
    error: Any, autojump_clock: MockClock
) -> None:
    event = ("error", {"type": "error", "error": error})
    err = failed((await stream(AnthropicProvider, responding(sse(*ANTHROPIC_HEAD, event))))[0])
    assert (err.code, err.http_status, err.retryable) == (Code.UNAVAILABLE, 500, True)
    assert (err.partial_text, err.usage) == ("hi there", Usage(input_tokens=3))


# --- 3. nothing streamed is lost, whatever fails; SSE retry as the rules say ------------


@pytest.mark.parametrize(
    "retry",
    [b"\xc2\xb2", b"9" * 5000, b"-1", b"1.5", b"9" * 19],
    ids=["superscript-two", "5000-digits", "negative", "fraction", "19-digits"],
)
async def test_an_sse_retry_that_is_not_ascii_digits_is_ignored(
    retry: bytes, autojump_clock: MockClock
) -> None:
    body = b"retry: " + retry + b"\n" + COMPLETE[OpenAIProvider]
    result, _ = await stream(OpenAIProvider, responding(body))
    assert result == answer(OpenAIProvider)


def test_the_sse_parser_reads_a_retry_of_1_to_18_ascii_digits() -> None:
    parser = SseParser()
    events = parser.feed(
        b"retry: 123456789012345678\ndata: a\n\nretry: 1234567890123456789\ndata: b\n\n"
        b"retry: \xc2\xb2\ndata: c\n\nretry:\ndata: d\n\n"
    )
    retry = 123456789012345678
    assert events == [
        SseEvent(data="a", retry=retry),
        SseEvent(data="b", retry=retry),
        SseEvent(data="c", retry=retry),
        SseEvent(data="d", retry=retry),
    ]


class Breaking(httpx.AsyncByteStream):
    """Part of an answer, then an exception no transport should raise."""

    def __init__(self, head: bytes, exc: Exception) -> None:
        self.head = head
        self.exc = exc

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        raise self.exc


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(RuntimeError("transport bug"), id="runtime-error"),
        pytest.param(ExceptionGroup("group", [KeyError("k")]), id="exception-group"),
    ],
)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_failure_escaping_mid_stream_keeps_the_text_and_usage(
    provider: type[HttpProvider], exc: Exception, autojump_clock: MockClock
) -> None:
    head = sse(*(OPENAI_HEAD if provider is OpenAIProvider else ANTHROPIC_HEAD))
    if provider is OpenAIProvider:
        head += sse((None, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}))

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE_HEADERS, stream=Breaking(head, exc))

    err = failed((await stream(provider, handler))[0])
    assert (err.code, err.provider, err.model) == (Code.INTERNAL, "p", "m-1")
    assert err.partial_text == "hi there"
    expected = Usage(input_tokens=3, output_tokens=1 if provider is OpenAIProvider else 0)
    assert err.usage == expected


# --- 4. max_response_bytes caps what a stream assembles, not its framing ---------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_streamed_answer_over_max_response_bytes_is_malformed(
    provider: type[HttpProvider], autojump_clock: MockClock
) -> None:
    if provider is OpenAIProvider:
        delta: tuple[str | None, Any] = (None, {"choices": [{"delta": {"content": "y" * 50}}]})
        body = sse(*[delta] * 40, *OPENAI_TAIL)
    else:
        text = {"type": "text_delta", "text": "y" * 50}
        delta = ("content_block_delta", {"type": "content_block_delta", "delta": text})
        body = sse(ANTHROPIC_HEAD[0], *[delta] * 40, *ANTHROPIC_TAIL)
    result, events = await stream(provider, responding(body), max_response_bytes=1000)
    err = failed(result)
    assert (err.code, err.retryable, err.message) == (
        Code.MALFORMED_RESPONSE,
        True,
        "streamed answer larger than 1000 bytes",
    )
    assert [e.text for e in events if e.kind == "text"] == ["y" * 50] * 20
    assert err.partial_text == "y" * 1050  # up to the event that crossed the cap


async def test_tool_calls_count_towards_the_streamed_answer(autojump_clock: MockClock) -> None:
    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "x" * 600}}
    delta = (None, {"choices": [{"delta": {"tool_calls": [call]}}]})
    result, events = await stream(
        OpenAIProvider, responding(sse(delta, delta, *OPENAI_TAIL)), max_response_bytes=1000
    )
    assert failed(result).message == "streamed answer larger than 1000 bytes"
    assert len(events) == 1


async def test_a_stream_larger_than_the_cap_on_the_wire_only_is_not_capped(
    autojump_clock: MockClock,
) -> None:
    """Envelopes and keep-alive comments are not the answer: 40 events of 150 bytes and
    40 comments (about 8 KB on the wire) carrying a 400-byte answer pass a 1000 cap."""
    envelope = {"id": "chatcmpl-" + "0" * 100, "object": "chat.completion.chunk"}
    delta = (None, {**envelope, "choices": [{"delta": {"content": "z" * 10}}]})
    body = (b": " + b"p" * 100 + b"\n\n").join([sse(delta)] * 40) + sse(*OPENAI_TAIL)
    assert len(body) > 8000
    result, _ = await stream(OpenAIProvider, responding(body), max_response_bytes=1000)
    assert isinstance(result, LlmResponse)
    assert result.content == "z" * 400


# --- 8. a consumer that stops reading holds the request until it leaves or times out ----


class Endless(httpx.AsyncByteStream):
    """One text event every 0.1 s; records when it is closed. (An iterator, not an async
    generator: the consumer leaving cancels the adapter while it waits on the channel,
    and trio would warn about a generator of this file left suspended.)"""

    def __init__(self) -> None:
        self.closed_at: float | None = None
        self.sent = 0

    def __aiter__(self) -> Endless:
        return self

    async def __anext__(self) -> bytes:
        if self.sent:
            await trio.sleep(0.1)
        self.sent += 1
        return sse((None, {"choices": [{"delta": {"content": "t"}}]}))

    async def aclose(self) -> None:
        self.closed_at = trio.current_time()


@pytest.mark.parametrize(("timeout", "closed_at"), [(None, 500.0), (10.0, 10.0)])
async def test_a_consumer_that_stops_reading_holds_the_upstream_until_it_leaves_or_times_out(
    timeout: float | None, closed_at: float, autojump_clock: MockClock
) -> None:
    """Backpressure: the adapter waits on the channel, so read_timeout (60 s) never fires;
    the upstream is closed when the block is left, or at the caller's timeout — which is
    ``call_timeout`` without partial text."""
    upstream = Endless()
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers=SSE_HEADERS, stream=upstream)
    )
    errors: list[ActorError] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: OpenAIProvider(config(), transport=transport))
        async with ProviderClient(ref, "p", timeout=timeout).stream(STREAM_REQUEST) as events:
            assert (await events.__anext__()).text == "t"
            await trio.sleep(500)
            try:
                async for _ in events:
                    break  # it is still there: leave
            except ActorError as err:
                errors.append(err)
    assert upstream.closed_at == closed_at
    if timeout is None:
        assert errors == []
    else:
        assert [(e.code, e.partial_text) for e in errors] == [(Code.CALL_TIMEOUT, None)]


def test_events_before_invalid_utf8_come_first_then_the_error() -> None:
    """A terminator followed by junk in the same chunk must still arrive: the events the
    chunk completed before the invalid byte are returned, the error comes next."""
    parser = SseParser()
    assert parser.feed(b"data: [DONE]\n\n\xff junk\n\n") == [SseEvent(data="[DONE]")]
    with pytest.raises(ActorError, match=r"^\[malformed_response\] event stream is not UTF-8"):
        parser.close()
    with pytest.raises(ActorError, match=r"event stream is not UTF-8: invalid start byte"):
        SseParser().feed(b"data: half\xff\n\n")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_streamed_tool_call_is_assembled_from_well_typed_fragments(
    provider: type[HttpProvider], autojump_clock: MockClock
) -> None:
    """The strict handlers still read a well-formed tool call: id and name on the first
    fragment, arguments appended."""
    if provider is OpenAIProvider:
        first = {"index": 0, "id": "call-1", "function": {"name": "weather", "arguments": '{"q"'}}
        rest = {"index": 0, "function": {"arguments": ': "Paris"}'}}
        body = sse(
            (None, {"choices": [{"delta": {"tool_calls": [first]}}]}),
            (None, {"choices": [{"delta": {"tool_calls": [rest]}}]}),
            *OPENAI_TAIL,
        )
    else:
        start = {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "call-1", "name": "weather", "input": {}},
        }

        def fragment(text: str) -> tuple[str, dict[str, Any]]:
            delta = {"type": "input_json_delta", "partial_json": text}
            return (
                "content_block_delta",
                {"type": "content_block_delta", "index": 1, "delta": delta},
            )

        body = sse(
            ANTHROPIC_HEAD[0],
            ("content_block_start", start),
            fragment('{"q"'),
            fragment(': "Paris"}'),
            *ANTHROPIC_TAIL,
        )
    result, events = await stream(provider, responding(body))
    assert isinstance(result, LlmResponse), result
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("call-1", "weather", {"q": "Paris"})
    ]
    calls = [(e.tool_call_id, e.tool_name, e.arguments) for e in events if e.kind == "tool_call"]
    if provider is OpenAIProvider:
        assert calls == [("call-1", "weather", '{"q"'), (None, None, ': "Paris"}')]
    else:
        assert calls == [
            ("call-1", "weather", ""),
            (None, None, '{"q"'),
            (None, None, ': "Paris"}'),
        ]
