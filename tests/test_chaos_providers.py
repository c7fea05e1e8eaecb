"""Both adapters against the chaos server: tool calls streamed and not, the APIs' real
error bodies for 401 / 402 / 404, and a fault that fits one model.

Virtual time: the chaos server runs in the test's trio run.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import httpx
import pytest
from trio.testing import MockClock

from actors import ActorError, Code, open_runtime
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
from actors.testing.chaos import Fault, FaultScript, chaos_server
from tests.provider_helpers import PROVIDERS, STREAMING, TOOL_FINISH, TOOL_ID, WEATHER

TOOL_REQUEST = LlmRequest(
    model="model-1",
    messages=[Message(role="user", content="call: weather in Paris")],
    tools=(WEATHER,),
)
TEXT_FINISH = {OpenAIProvider: "stop", AnthropicProvider: "end_turn"}


async def call(
    provider: type[HttpProvider],
    requests: list[LlmRequest],
    *faults: Fault,
) -> tuple[list[tuple[LlmResponse | ActorError, list[StreamEvent]]], list[Any]]:
    """Each request through one provider actor (streamed when ``request.stream``), against
    one chaos server with ``faults``; the outcomes with their stream events, and the
    server's records."""
    outcomes: list[tuple[LlmResponse | ActorError, list[StreamEvent]]] = []
    async with chaos_server(FaultScript(faults=list(faults))) as server, open_runtime() as runtime:
        config = ProviderConfig(
            name="p", base_url=server.url, api_key="chaos-test-key", read_timeout=5
        )
        client = ProviderClient(await runtime.spawn(lambda: provider(config)), "p")
        for request in requests:
            events: list[StreamEvent] = []
            try:
                if request.stream:
                    async with client.stream(request) as stream:
                        async for event in stream:
                            events.append(event)
                    assert stream.response is not None
                    outcomes.append((stream.response, events))
                else:
                    outcomes.append((await client.complete(request), events))
            except ActorError as err:
                outcomes.append((err, events))
    return outcomes, server.requests


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
async def test_a_call_message_makes_a_tool_call_streamed_or_not(
    autojump_clock: MockClock, provider: type[HttpProvider], stream: bool
) -> None:
    [(answer, _)], _ = await call(provider, [attrs.evolve(TOOL_REQUEST, stream=stream)])
    assert isinstance(answer, LlmResponse), answer
    arguments = json.dumps({"query": "weather in Paris"})
    assert answer.tool_calls == (
        ToolCall(id=TOOL_ID[provider], name="weather", arguments=arguments),
    )
    assert (answer.content, answer.finish_reason) == ("", TOOL_FINISH[provider])
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (6, 8)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_streamed_tool_call_arrives_in_fragments(
    autojump_clock: MockClock, provider: type[HttpProvider]
) -> None:
    [(answer, events)], _ = await call(provider, [attrs.evolve(TOOL_REQUEST, stream=True)])
    assert isinstance(answer, LlmResponse), answer
    calls = [e for e in events if e.kind == "tool_call"]
    # The head names the call; the arguments follow in pieces of 8 characters (Anthropic
    # sends an empty fragment first, as its API does).
    assert (calls[0].tool_call_id, calls[0].tool_name, calls[0].arguments) == (
        TOOL_ID[provider],
        "weather",
        "",
    )
    fragments = [c.arguments for c in calls[1:]]
    assert fragments == ([] if provider is OpenAIProvider else [""]) + [
        '{"query"',
        ': "weath',
        "er in Pa",
        'ris"}',
    ]
    assert all((c.index, c.tool_call_id, c.tool_name) == (0, None, None) for c in calls[1:])
    assert [e.finish_reason for e in events if e.kind == "finish"] == [TOOL_FINISH[provider]]
    assert not [e for e in events if e.kind == "text"]


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
@pytest.mark.parametrize(
    ("content", "tools"),
    [("call: weather in Paris", ()), ("weather in Paris", (WEATHER,))],
    ids=["no-tools", "no-call"],
)
async def test_no_tool_call_without_tools_or_without_a_call(
    autojump_clock: MockClock,
    provider: type[HttpProvider],
    stream: bool,
    content: str,
    tools: tuple[ToolSpec, ...],
) -> None:
    request = LlmRequest(
        model="model-1", messages=[Message(role="user", content=content)], tools=tools
    )
    [(answer, _)], _ = await call(provider, [attrs.evolve(request, stream=stream)])
    assert isinstance(answer, LlmResponse), answer
    assert (answer.content, answer.tool_calls) == (f"echo: {content}", ())
    assert answer.finish_reason == TEXT_FINISH[provider]


@pytest.mark.parametrize("provider", PROVIDERS)
@STREAMING
@pytest.mark.parametrize(
    ("status", "code", "detail"),
    [
        (
            404,
            Code.MODEL_NOT_FOUND,
            {
                OpenAIProvider: "HTTP 404 invalid_request_error/model_not_found: The model "
                "`model-1` does not exist or you do not have access to it.",
                AnthropicProvider: "HTTP 404 not_found_error/-: model: model-1",
            },
        ),
        (
            401,
            Code.AUTH,
            {
                # (The redaction of "api_key: <value>" shapes takes the message's first
                # word for a key's value.)
                OpenAIProvider: "HTTP 401 invalid_request_error/invalid_api_key: [REDACTED] "
                "API key provided.",
                AnthropicProvider: "HTTP 401 authentication_error/-: invalid x-api-key",
            },
        ),
        (
            402,
            Code.PAYMENT,
            {
                OpenAIProvider: "HTTP 402 insufficient_quota/insufficient_quota: You exceeded "
                "your current quota",
                AnthropicProvider: "HTTP 402 billing_error/-: Your credit balance is too low",
            },
        ),
    ],
    ids=["404", "401", "402"],
)
async def test_the_apis_error_bodies_are_classified(
    autojump_clock: MockClock,
    provider: type[HttpProvider],
    stream: bool,
    status: int,
    code: Code,
    detail: dict[type[HttpProvider], str],
) -> None:
    request = attrs.evolve(TOOL_REQUEST, stream=stream)
    [(error, _)], _ = await call(provider, [request], Fault(kind="status", status=status))
    assert isinstance(error, ActorError)
    assert (error.code, error.http_status, error.retryable) == (code, status, False)
    assert error.message.startswith(detail[provider])


@pytest.mark.parametrize(
    ("route", "body"),
    [
        (
            "openai",
            {
                "error": {
                    "message": "The model `model-1` does not exist or you do not have access "
                    "to it.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "model_not_found",
                }
            },
        ),
        (
            "anthropic",
            {
                "type": "error",
                "error": {"type": "not_found_error", "message": "model: model-1"},
                "request_id": "req_chaos",
            },
        ),
    ],
)
async def test_the_404_body_is_the_apis_model_not_found(
    autojump_clock: MockClock, route: str, body: dict[str, Any]
) -> None:
    path = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}[route]
    fault = Fault(kind="status", status=404)
    async with (
        chaos_server(FaultScript(faults=[fault])) as server,
        httpx.AsyncClient(base_url=server.url) as client,
    ):
        answer = await client.post(path, json={"model": "model-1", "messages": []})
    assert (answer.status_code, answer.json()) == (404, body)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_model_not_found_on_one_model_only(
    autojump_clock: MockClock, provider: type[HttpProvider]
) -> None:
    one = LlmRequest(model="model-1", messages=[Message(role="user", content="hi")])
    two = attrs.evolve(one, model="model-2")
    faults = [Fault(kind="status", status=404, model="model-1", times=2)]
    outcomes, records = await call(
        provider, [two, one, two, attrs.evolve(one, stream=True), one], *faults
    )
    codes = [o.code if isinstance(o, ActorError) else o.model for o, _ in outcomes]
    assert codes == ["model-2", Code.MODEL_NOT_FOUND, "model-2", Code.MODEL_NOT_FOUND, "model-1"]
    assert [(r.model, r.fault) for r in records] == [
        ("model-2", None),
        ("model-1", "status"),
        ("model-2", None),
        ("model-1", "status"),
        ("model-1", None),
    ]
