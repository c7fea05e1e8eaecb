"""A streaming request's 2xx answer must be an event stream: anything else is
``malformed_response`` naming what came — not ``network`` ("stream ended without its
terminator"). Over ``httpx.MockTransport``, virtual time."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from trio.testing import MockClock

from actors import ActorError, Code
from actors.providers import (
    AnthropicProvider,
    HttpProvider,
    LlmRequest,
    LlmResponse,
    Message,
    OpenAIProvider,
    ProviderConfig,
)
from tests.provider_helpers import sse, stream_through

REQUEST = LlmRequest(model="m-1", messages=[Message(role="user", content="hello")], stream=True)
OPENAI_WHOLE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m-1",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
ANTHROPIC_WHOLE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m-1",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
OPENAI_STREAM = sse(
    (None, {"choices": [{"delta": {"content": "hi"}}]}),
    (None, {"choices": [{"delta": {}, "finish_reason": "stop"}]}),
    (None, "[DONE]"),
)
ANTHROPIC_STREAM = sse(
    ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    ),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ("message_stop", {"type": "message_stop"}),
)


async def stream(
    provider: type[HttpProvider], body: bytes, headers: dict[str, str]
) -> LlmResponse | ActorError:
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["stream"] is True
        return httpx.Response(200, headers=headers, content=body)

    config = ProviderConfig(name="p", base_url="https://llm.invalid", api_key="chaos-test-key")
    return await stream_through(provider, config, handler, REQUEST)


@pytest.mark.parametrize(
    ("provider", "whole"),
    [
        pytest.param(OpenAIProvider, OPENAI_WHOLE, id="openai"),
        pytest.param(AnthropicProvider, ANTHROPIC_WHOLE, id="anthropic"),
    ],
)
async def test_a_whole_json_answer_to_a_streaming_request_is_malformed(
    autojump_clock: MockClock, provider: type[HttpProvider], whole: dict[str, Any]
) -> None:
    body = json.dumps(whole).encode()
    err = await stream(provider, body, {"content-type": "application/json"})
    assert isinstance(err, ActorError)
    assert (err.code, err.http_status, err.provider, err.model) == (
        Code.MALFORMED_RESPONSE,
        200,
        "p",
        "m-1",
    )
    assert err.retryable  # as the code table says for malformed_response
    assert err.message == (
        "HTTP 200 streaming answer is not an event stream (text/event-stream): "
        "content-type application/json (a whole answer where a stream was asked for)"
    )


@pytest.mark.parametrize(
    ("headers", "came"),
    [
        ({"content-type": "text/html; charset=utf-8"}, "content-type text/html; charset=utf-8"),
        ({}, "no content-type"),
    ],
    ids=["html", "none"],
)
@pytest.mark.parametrize(
    ("provider", "body"),
    [
        pytest.param(OpenAIProvider, OPENAI_STREAM, id="openai"),
        pytest.param(AnthropicProvider, ANTHROPIC_STREAM, id="anthropic"),
    ],
)
async def test_an_answer_of_another_type_is_malformed_even_when_it_holds_events(
    autojump_clock: MockClock,
    provider: type[HttpProvider],
    body: bytes,
    headers: dict[str, str],
    came: str,
) -> None:
    err = await stream(provider, body, headers)
    assert isinstance(err, ActorError)
    assert err.code is Code.MALFORMED_RESPONSE
    assert err.message.endswith(f"not an event stream (text/event-stream): {came}")


@pytest.mark.parametrize("content_type", ["text/event-stream; charset=utf-8", "Text/Event-Stream"])
@pytest.mark.parametrize(
    ("provider", "body", "finish"),
    [
        pytest.param(OpenAIProvider, OPENAI_STREAM, "stop", id="openai"),
        pytest.param(AnthropicProvider, ANTHROPIC_STREAM, "end_turn", id="anthropic"),
    ],
)
async def test_an_event_stream_with_parameters_or_in_capitals_is_read(
    autojump_clock: MockClock,
    provider: type[HttpProvider],
    body: bytes,
    finish: str,
    content_type: str,
) -> None:
    answer = await stream(provider, body, {"content-type": content_type})
    assert isinstance(answer, LlmResponse), answer
    assert (answer.content, answer.finish_reason) == ("hi", finish)


@pytest.mark.parametrize(
    ("error_type", "code", "status"),
    [("billing_error", Code.PAYMENT, 402), ("not_found_error", Code.MODEL_NOT_FOUND, 404)],
)
async def test_an_anthropic_error_event_is_classified_by_its_type(
    autojump_clock: MockClock, error_type: str, code: Code, status: int
) -> None:
    body = sse(
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        ("error", {"type": "error", "error": {"type": error_type, "message": "no"}}),
    )
    err = await stream(AnthropicProvider, body, {"content-type": "text/event-stream"})
    assert isinstance(err, ActorError)
    assert (err.code, err.http_status) == (code, status)
