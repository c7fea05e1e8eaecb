"""The official ``openai`` and ``anthropic`` SDKs accept the chaos server: their strict
response validation, their streaming helpers and final-answer accumulators, and their
typed errors.

The chaos server runs in the test's trio run on the real clock (the SDKs use real sockets
and real time); the synchronous SDK clients run in a worker thread and only ever talk to
127.0.0.1, with a dummy key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import anthropic
import openai
import pytest
import trio
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from actors.testing.chaos import ChaosServer, Fault, FaultScript, chaos_server

T = TypeVar("T")
KEY = "sk-chaos-dummy-key"
PROMPT = [{"role": "user", "content": "hello chaos world"}]
CALL = [{"role": "user", "content": "call: weather in Paris"}]
ARGUMENTS = {"query": "weather in Paris"}
SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}
OPENAI_TOOLS: Any = [
    {
        "type": "function",
        "function": {"name": "weather", "description": "today's weather", "parameters": SCHEMA},
    }
]
# The stream() helper parses tool arguments for strict function tools only.
OPENAI_STRICT_TOOLS: Any = [
    {"type": "function", "function": {**OPENAI_TOOLS[0]["function"], "strict": True}}
]
ANTHROPIC_TOOLS: Any = [
    {"name": "weather", "description": "today's weather", "input_schema": SCHEMA}
]


async def with_openai(use: Callable[[openai.OpenAI], T], *faults: Fault) -> tuple[T, ChaosServer]:
    async with chaos_server(FaultScript(faults=list(faults))) as server:

        def run() -> T:
            with openai.OpenAI(
                base_url=server.url + "/v1",
                api_key=KEY,
                max_retries=0,
                timeout=5,
                _strict_response_validation=True,
            ) as client:
                return use(client)

        return await trio.to_thread.run_sync(run), server


async def with_anthropic(
    use: Callable[[anthropic.Anthropic], T], *faults: Fault
) -> tuple[T, ChaosServer]:
    async with chaos_server(FaultScript(faults=list(faults))) as server:

        def run() -> T:
            with anthropic.Anthropic(
                base_url=server.url,
                api_key=KEY,
                max_retries=0,
                timeout=5,
                _strict_response_validation=True,
            ) as client:
                return use(client)

        return await trio.to_thread.run_sync(run), server


# --- OpenAI ----------------------------------------------------------------------------


async def test_openai_create() -> None:
    answer, server = await with_openai(
        lambda client: client.chat.completions.create(model="m-1", messages=PROMPT)
    )
    assert isinstance(answer, ChatCompletion)
    ChatCompletion.model_validate(answer.model_dump())
    assert (answer.object, answer.model, answer.created) == (
        "chat.completion",
        "m-1",
        1_700_000_000,
    )
    choice = answer.choices[0]
    assert (choice.message.role, choice.message.content) == ("assistant", "echo: hello chaos world")
    assert (choice.finish_reason, choice.message.tool_calls) == ("stop", None)
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (5, 6)
    assert answer.usage.total_tokens == 11
    assert server.requests[0].headers["user-agent"].startswith("OpenAI/Python")


async def test_openai_create_with_a_tool_call() -> None:
    answer, _ = await with_openai(
        lambda client: client.chat.completions.create(
            model="m-1", messages=CALL, tools=OPENAI_TOOLS
        )
    )
    choice = answer.choices[0]
    assert (choice.finish_reason, choice.message.content) == ("tool_calls", None)
    [call] = choice.message.tool_calls or []
    assert call.type == "function"
    assert (call.id, call.function.name) == ("call_chaos", "weather")
    assert json.loads(call.function.arguments) == ARGUMENTS


def _chunks(client: openai.OpenAI, **options: Any) -> list[ChatCompletionChunk]:
    with client.chat.completions.create(
        model="m-1", stream=True, stream_options={"include_usage": True}, **options
    ) as stream:
        return list(stream)


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool-call"])
async def test_openai_create_streaming(tools: bool) -> None:
    if tools:
        options: dict[str, Any] = {"messages": CALL, "tools": OPENAI_TOOLS}
    else:
        options = {"messages": PROMPT}
    chunks, _ = await with_openai(lambda client: _chunks(client, **options))
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert {(c.object, c.model, c.created) for c in chunks} == {
        ("chat.completion.chunk", "m-1", 1_700_000_000)
    }
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == ("tool_calls" if tools else "stop")
    assert set(finishes[:-1]) == {None}
    usage = chunks[-1].usage
    assert (chunks[-1].choices, usage and usage.total_tokens) == ([], 6 + 8 if tools else 11)
    if tools:
        fragments = [t for d in deltas for t in d.tool_calls or []]
        assert (fragments[0].index, fragments[0].id, fragments[0].type) == (
            0,
            "call_chaos",
            "function",
        )
        assert fragments[0].function is not None and fragments[0].function.name == "weather"
        text = "".join(f.function.arguments or "" for f in fragments if f.function)
        assert json.loads(text) == ARGUMENTS
        assert len(fragments) > 2  # the arguments come in pieces
    else:
        assert "".join(d.content or "" for d in deltas) == "echo: hello chaos world"


def _final_completion(client: openai.OpenAI, **options: Any) -> tuple[Any, list[str]]:
    with client.chat.completions.stream(
        model="m-1", stream_options={"include_usage": True}, **options
    ) as stream:
        kinds = [event.type for event in stream]
        return stream.get_final_completion(), kinds


async def test_openai_stream_helper_and_final_completion() -> None:
    (final, kinds), _ = await with_openai(lambda client: _final_completion(client, messages=PROMPT))
    choice = final.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("echo: hello chaos world", "stop")
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (5, 6)
    assert "content.delta" in kinds and "content.done" in kinds


async def test_openai_stream_helper_with_a_tool_call() -> None:
    (final, kinds), _ = await with_openai(
        lambda client: _final_completion(client, messages=CALL, tools=OPENAI_STRICT_TOOLS)
    )
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert (call.id, call.function.name) == ("call_chaos", "weather")
    assert call.function.parsed_arguments == ARGUMENTS
    assert "tool_calls.function.arguments.done" in kinds


async def test_openai_rate_limit_error() -> None:
    fault = Fault(kind="status", status=429, headers={"retry-after": "2"})

    def ask(client: openai.OpenAI) -> openai.RateLimitError:
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model="m-1", messages=PROMPT)
        return caught.value

    error, server = await with_openai(ask, fault)
    assert (error.status_code, error.code, error.type) == (429, "rate_limit_exceeded", "requests")
    assert error.response.headers["retry-after"] == "2"
    assert server.count() == 1


# --- Anthropic -------------------------------------------------------------------------


async def test_anthropic_create() -> None:
    answer, server = await with_anthropic(
        lambda client: client.messages.create(model="m-1", max_tokens=64, messages=PROMPT)
    )
    assert isinstance(answer, anthropic.types.Message)
    anthropic.types.Message.model_validate(answer.model_dump())
    assert (answer.type, answer.role, answer.model) == ("message", "assistant", "m-1")
    [block] = answer.content
    assert block.type == "text" and block.text == "echo: hello chaos world"
    assert (answer.stop_reason, answer.stop_sequence) == ("end_turn", None)
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (5, 6)
    assert "anthropic-version" in server.requests[0].headers


async def test_anthropic_create_with_a_tool_call() -> None:
    answer, _ = await with_anthropic(
        lambda client: client.messages.create(
            model="m-1", max_tokens=64, messages=CALL, tools=ANTHROPIC_TOOLS
        )
    )
    [block] = answer.content
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("toolu_chaos", "weather", ARGUMENTS)
    assert answer.stop_reason == "tool_use"


def _events(client: anthropic.Anthropic, **options: Any) -> list[Any]:
    with client.messages.create(model="m-1", max_tokens=64, stream=True, **options) as stream:
        return list(stream)


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool-call"])
async def test_anthropic_create_streaming(tools: bool) -> None:
    if tools:
        options: dict[str, Any] = {"messages": CALL, "tools": ANTHROPIC_TOOLS}
    else:
        options = {"messages": PROMPT}
    events, _ = await with_anthropic(lambda client: _events(client, **options))
    kinds = [e.type for e in events]
    deltas = kinds.count("content_block_delta")
    assert kinds == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0].message.usage.input_tokens == (6 if tools else 5)
    assert events[-2].delta.stop_reason == ("tool_use" if tools else "end_turn")
    assert events[-2].usage.output_tokens == (8 if tools else 6)
    if tools:
        assert events[1].content_block.type == "tool_use"
        assert events[1].content_block.name == "weather"
        text = "".join(e.delta.partial_json for e in events[2 : 2 + deltas])
        assert json.loads(text) == ARGUMENTS
    else:
        text = "".join(e.delta.text for e in events[2 : 2 + deltas])
        assert text == "echo: hello chaos world"


def _final_message(client: anthropic.Anthropic, **options: Any) -> tuple[Any, str]:
    with client.messages.stream(model="m-1", max_tokens=64, **options) as stream:
        text = "".join(stream.text_stream)
        return stream.get_final_message(), text


async def test_anthropic_stream_helper_and_final_message() -> None:
    (final, text), _ = await with_anthropic(lambda client: _final_message(client, messages=PROMPT))
    assert text == "echo: hello chaos world"
    assert [(b.type, b.text) for b in final.content] == [("text", "echo: hello chaos world")]
    assert (final.stop_reason, final.stop_sequence) == ("end_turn", None)
    assert (final.usage.input_tokens, final.usage.output_tokens) == (5, 6)


async def test_anthropic_stream_helper_with_a_tool_call() -> None:
    (final, text), _ = await with_anthropic(
        lambda client: _final_message(client, messages=CALL, tools=ANTHROPIC_TOOLS)
    )
    assert text == ""
    [block] = final.content
    assert (block.type, block.id, block.name, block.input) == (
        "tool_use",
        "toolu_chaos",
        "weather",
        ARGUMENTS,
    )
    assert (final.stop_reason, final.usage.output_tokens) == ("tool_use", 8)


async def test_anthropic_rate_limit_error() -> None:
    fault = Fault(kind="status", status=429, headers={"retry-after": "2"})

    def ask(client: anthropic.Anthropic) -> anthropic.RateLimitError:
        with pytest.raises(anthropic.RateLimitError) as caught:
            client.messages.create(model="m-1", max_tokens=64, messages=PROMPT)
        return caught.value

    error, server = await with_anthropic(ask, fault)
    assert error.status_code == 429
    assert error.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": error.body["error"]["message"]},
        "request_id": "req_chaos",
    }
    assert error.response.headers["retry-after"] == "2"
    assert server.count() == 1
