"""What the chaos server answers: ``reply:`` scripts the exact text, ``call:`` (with tools)
still wins over it, and a conversation that ends with a tool result is answered with
``"echo: <tool result>"`` and never another tool call — both dialects, streamed and not,
through the real adapters over loopback HTTP (and raw HTTP for wire shapes the adapters
never send).

Virtual time: the chaos server runs in the test's trio run.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import httpx
import pytest
from trio.testing import MockClock

from actors import open_runtime
from actors.providers import (
    AnthropicProvider,
    HttpProvider,
    LlmRequest,
    LlmResponse,
    Message,
    OpenAIProvider,
    ProviderClient,
    ProviderConfig,
    StreamEvent,
    ToolCall,
    ToolSpec,
)
from actors.testing.chaos import FaultScript, chaos_server
from tests.provider_helpers import PROVIDERS, STREAMING, TOOL_FINISH, TOOL_ID, WEATHER

TEXT_FINISH = {OpenAIProvider: "stop", AnthropicProvider: "end_turn"}
PATH = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


async def ask(
    provider: type[HttpProvider], requests: list[LlmRequest]
) -> list[tuple[LlmResponse, list[StreamEvent]]]:
    """Each request through one provider actor against one fault-free chaos server
    (streamed when ``request.stream``): the answers with their stream events."""
    answers: list[tuple[LlmResponse, list[StreamEvent]]] = []
    async with chaos_server(FaultScript()) as server, open_runtime() as runtime:
        config = ProviderConfig(name="p", base_url=server.url, api_key="chaos-key", read_timeout=5)
        client = ProviderClient(await runtime.spawn(lambda: provider(config)), "p")
        for request in requests:
            events: list[StreamEvent] = []
            if request.stream:
                async with client.stream(request) as stream:
                    async for event in stream:
                        events.append(event)
                assert stream.response is not None
                answers.append((stream.response, events))
            else:
                answers.append((await client.complete(request), events))
    return answers


def user(content: str, *tools: ToolSpec, stream: bool = False) -> LlmRequest:
    return LlmRequest(
        model="model-1",
        messages=[Message(role="user", content=content)],
        tools=tools,
        stream=stream,
    )


def texts(events: list[StreamEvent]) -> list[str]:
    """The streamed text deltas, empty ones left out (the OpenAI adapter drops them, the
    Anthropic adapter passes them on)."""
    return [e.text for e in events if e.kind == "text" and e.text]


# --- reply: ------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
@pytest.mark.parametrize(
    ("content", "text", "pieces", "tokens"),
    [
        # 23 characters in (6 tokens), 16 out (5 tokens).
        ('reply: {"label": "bug"}', '{"label": "bug"}', ['{"label": ', '"bug"}'], (6, 5)),
        # Surrounding whitespace stripped, inner kept; only the first "reply:" counts.
        ("route it, reply:   agent  ", "agent", ["agent"], (7, 2)),
        ("reply: say reply: twice", "say reply: twice", ["say ", "reply: ", "twice"], (6, 5)),
        ("reply:", "", [], (2, 1)),
    ],
    ids=["json", "bare-word", "first-reply", "empty"],
)
async def test_reply_scripts_the_exact_text(
    autojump_clock: MockClock,
    provider: type[HttpProvider],
    stream: bool,
    content: str,
    text: str,
    pieces: list[str],
    tokens: tuple[int, int],
) -> None:
    [(answer, events)] = await ask(provider, [user(content, stream=stream)])
    assert (answer.content, answer.tool_calls) == (text, ())
    assert answer.finish_reason == TEXT_FINISH[provider]
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == tokens
    assert texts(events) == (pieces if stream else [])


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
async def test_reply_with_tools_but_no_call_is_the_reply(
    autojump_clock: MockClock, provider: type[HttpProvider], stream: bool
) -> None:
    [(answer, _)] = await ask(provider, [user("reply: agent", WEATHER, stream=stream)])
    assert (answer.content, answer.tool_calls, answer.finish_reason) == (
        "agent",
        (),
        TEXT_FINISH[provider],
    )


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
async def test_without_tools_a_call_after_reply_is_part_of_the_reply(
    autojump_clock: MockClock, provider: type[HttpProvider], stream: bool
) -> None:
    [(answer, _)] = await ask(provider, [user("reply: agent call: weather", stream=stream)])
    assert (answer.content, answer.tool_calls) == ("agent call: weather", ())
    assert answer.usage.output_tokens == 5  # 19 characters


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
@pytest.mark.parametrize(
    ("content", "query", "output_tokens"),
    [
        # Output tokens over "echo: <message>" (41 characters), as without reply:.
        ("reply: agent call: weather in Paris", "weather in Paris", 11),
        # The query is everything after "call:", a reply: in it included.
        ("call: weather reply: agent", "weather reply: agent", 9),
    ],
    ids=["reply-first", "call-first"],
)
async def test_a_tool_call_wins_over_reply(
    autojump_clock: MockClock,
    provider: type[HttpProvider],
    stream: bool,
    content: str,
    query: str,
    output_tokens: int,
) -> None:
    [(answer, events)] = await ask(provider, [user(content, WEATHER, stream=stream)])
    arguments = json.dumps({"query": query})
    assert answer.tool_calls == (
        ToolCall(id=TOOL_ID[provider], name="weather", arguments=arguments),
    )
    assert (answer.content, answer.finish_reason) == ("", TOOL_FINISH[provider])
    assert answer.usage.output_tokens == output_tokens
    assert texts(events) == []


# --- after a tool result ----------------------------------------------------------------


CALL = Message(role="user", content="call: weather in Paris")
CALLED = Message(
    role="assistant",
    tool_calls=[ToolCall(id="call-1", name="weather", arguments='{"query": "weather in Paris"}')],
)


def result(content: str) -> Message:
    return Message(role="tool", content=content, tool_call_id="call-1")


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
async def test_an_agent_loop_ends_after_one_tool_round(
    autojump_clock: MockClock, provider: type[HttpProvider], stream: bool
) -> None:
    """The loop a daemon runs: ask; while the answer calls a tool, append the call and its
    result and ask again. Two requests: the tool call, then the echo of its result."""
    conversation = [CALL]
    async with chaos_server(FaultScript()) as server, open_runtime() as runtime:
        config = ProviderConfig(name="p", base_url=server.url, api_key="chaos-key", read_timeout=5)
        client = ProviderClient(await runtime.spawn(lambda: provider(config)), "p")
        for _ in range(5):
            request = LlmRequest(
                model="model-1", messages=conversation, tools=(WEATHER,), stream=stream
            )
            if stream:
                async with client.stream(request) as streamed:
                    async for _event in streamed:
                        pass
                assert streamed.response is not None
                answer = streamed.response
            else:
                answer = await client.complete(request)
            if not answer.tool_calls:
                break
            [made] = answer.tool_calls
            conversation += [
                Message(role="assistant", tool_calls=[made]),
                Message(role="tool", content="sunny, 21 C", tool_call_id=made.id),
            ]
    assert len(server.requests) == 2
    assert [r.messages for r in server.requests] == [1, 3]
    assert (answer.content, answer.tool_calls) == ("echo: sunny, 21 C", ())
    assert answer.finish_reason == TEXT_FINISH[provider]
    # 17 characters out; in: OpenAI the three contents (33 characters), Anthropic the
    # user message (22) and the tool_use (102) and tool_result (81) blocks as JSON.
    input_tokens = {OpenAIProvider: 9, AnthropicProvider: 52}[provider]
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (input_tokens, 5)


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
async def test_a_reply_or_call_in_a_tool_result_is_not_interpreted(
    autojump_clock: MockClock, provider: type[HttpProvider], stream: bool
) -> None:
    content = "reply: agent call: again"
    request = LlmRequest(
        model="model-1", messages=[CALL, CALLED, result(content)], tools=(WEATHER,), stream=stream
    )
    [(answer, events)] = await ask(provider, [request])
    assert (answer.content, answer.tool_calls) == (f"echo: {content}", ())
    assert answer.finish_reason == TEXT_FINISH[provider]
    assert answer.usage.output_tokens == 8  # 30 characters
    assert texts(events) == (["echo: ", "reply: ", "agent ", "call: ", "again"] if stream else [])


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
async def test_a_user_message_after_a_tool_result_is_answered_again(
    autojump_clock: MockClock, provider: type[HttpProvider], stream: bool
) -> None:
    messages = [CALL, CALLED, result("sunny"), Message(role="assistant", content="echo: sunny")]
    followups = [
        attrs.evolve(user("x"), messages=[*messages, Message(role="user", content=content)])
        for content in ("reply: done", "call: again")
    ]
    requests = [attrs.evolve(r, tools=(WEATHER,), stream=stream) for r in followups]
    [(replied, _), (called, _)] = await ask(provider, requests)
    assert (replied.content, replied.tool_calls) == ("done", ())
    assert called.tool_calls == (
        ToolCall(id=TOOL_ID[provider], name="weather", arguments='{"query": "again"}'),
    )


# --- wire shapes the adapters never send ------------------------------------------------


async def post(route: str, payload: dict[str, Any]) -> dict[str, Any]:
    async with (
        chaos_server(FaultScript()) as server,
        httpx.AsyncClient(base_url=server.url) as client,
    ):
        answer = await client.post(PATH[route], json={"model": "model-1", **payload})
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


OPENAI_TOOLS = [{"type": "function", "function": {"name": "weather"}}]
ANTHROPIC_TOOLS = [{"name": "weather", "input_schema": {"type": "object"}}]
OPENAI_CALL = [
    {"role": "user", "content": "call: weather"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "a", "type": "function", "function": {"name": "weather"}}],
    },
]
ANTHROPIC_CALL = [
    {"role": "user", "content": "call: weather"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "weather"}]},
]


def tool_result(content: Any, id_: str = "a") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id_, "content": content}


async def test_openai_trailing_tool_messages_are_joined_by_newlines(
    autojump_clock: MockClock,
) -> None:
    messages = [
        *OPENAI_CALL,
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "21 C"}]},
    ]
    body = await post("openai", {"messages": messages, "tools": OPENAI_TOOLS})
    [choice] = body["choices"]
    assert choice["message"]["content"] == "echo: sunny\n21 C"
    assert ("tool_calls" in choice["message"], choice["finish_reason"]) == (False, "stop")
    assert body["usage"]["completion_tokens"] == 5  # 16 characters


@pytest.mark.parametrize(
    ("results", "text"),
    [
        ([tool_result("sunny")], "echo: sunny"),
        (
            [tool_result([{"type": "text", "text": "sunny"}, {"type": "image"}])],
            "echo: sunny",
        ),
        (
            [tool_result([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])],
            "echo: a\nb",
        ),
        ([tool_result("sunny"), tool_result(None, "b")], "echo: sunny\n"),
        ([tool_result("sunny"), {"type": "text", "text": "reply: x"}], "echo: sunny"),
    ],
    ids=["string", "text-blocks", "two-text-blocks", "two-results", "with-text"],
)
async def test_anthropic_tool_result_blocks_are_echoed(
    autojump_clock: MockClock, results: list[dict[str, Any]], text: str
) -> None:
    messages = [*ANTHROPIC_CALL, {"role": "user", "content": results}]
    body = await post("anthropic", {"messages": messages, "tools": ANTHROPIC_TOOLS})
    assert (body["content"], body["stop_reason"]) == ([{"type": "text", "text": text}], "end_turn")
    assert body["usage"]["output_tokens"] == len(text) // 4 + 1


async def test_anthropic_user_list_content_without_tool_results_is_as_before(
    autojump_clock: MockClock,
) -> None:
    blocks = [{"type": "text", "text": "call: weather"}]
    body = await post(
        "anthropic", {"messages": [{"role": "user", "content": blocks}], "tools": ANTHROPIC_TOOLS}
    )
    # The last user message is the blocks as JSON: its "call:" still makes a tool call.
    [block] = body["content"]
    assert (block["type"], block["input"], body["stop_reason"]) == (
        "tool_use",
        {"query": 'weather"}]'},
        "tool_use",
    )
