"""Provider conformance: both adapters against the chaos server over real loopback HTTP.

Runs on the real clock (a mock clock would jump to httpx's timeouts while a reply is in
flight); timeouts are sub-second so the suite stays fast.
"""

from __future__ import annotations

import io
import json
from typing import Any

import attrs
import pytest
import trio

from actors import ActorError, Code, open_runtime, register_secret
from actors.providers import (
    AnthropicProvider,
    Capabilities,
    HttpProvider,
    LlmRequest,
    LlmResponse,
    Message,
    OpenAIProvider,
    ProviderClient,
    ProviderConfig,
    ToolSpec,
)
from actors.testing import capture_events
from actors.testing.chaos import ChaosServer, Fault, FaultScript, chaos_server
from tests.provider_helpers import PROVIDERS

REQUEST = LlmRequest(model="m-1", messages=[Message(role="user", content="hello chaos world")])
CANARY = "sk-test-CANARY-1234567890"


async def run(
    provider: type[HttpProvider],
    *faults: Fault,
    stream: bool = False,
    request: LlmRequest = REQUEST,
    **config: Any,
) -> tuple[LlmResponse | ActorError, ChaosServer]:
    """One request through a provider actor against a chaos server with ``faults``."""
    options: dict[str, Any] = {"read_timeout": 0.5, "api_key": CANARY, **config}
    async with chaos_server(FaultScript(faults=list(faults))) as server, open_runtime() as runtime:
        cfg = ProviderConfig(name="p", base_url=server.url, **options)
        ref = await runtime.spawn(lambda: provider(cfg))
        client = ProviderClient(ref, "p")
        try:
            if stream:
                async with client.stream(attrs.evolve(request, stream=True)) as events:
                    async for _ in events:
                        pass
                assert events.response is not None
                return events.response, server
            return await client.complete(request), server
        except ActorError as err:
            return err, server


# (id, fault, stream, code, retryable, retry_after)
FAULTS: list[tuple[str, Fault, bool, Code, bool, float | None]] = [
    (
        "429-retry-after",
        Fault(kind="status", status=429, headers={"retry-after": "2"}),
        False,
        Code.RATE_LIMITED,
        True,
        2.0,
    ),
    (
        "429-retry-after-ms",
        Fault(kind="status", status=429, headers={"retry-after-ms": "1500", "retry-after": "9"}),
        False,
        Code.RATE_LIMITED,
        True,
        1.5,
    ),
    (
        "429-http-date",
        Fault(
            kind="status",
            status=429,
            headers={
                "date": "Wed, 21 Oct 2026 07:28:00 GMT",
                "retry-after": "Wed, 21 Oct 2026 07:28:30 GMT",
            },
        ),
        False,
        Code.RATE_LIMITED,
        True,
        30.0,
    ),
    (
        "503-should-retry-false",
        Fault(kind="status", status=503, headers={"x-should-retry": "false"}),
        False,
        Code.UNAVAILABLE,
        False,
        None,
    ),
    ("500", Fault(kind="status", status=500), False, Code.UNAVAILABLE, True, None),
    ("529", Fault(kind="status", status=529), False, Code.UNAVAILABLE, True, None),
    ("401", Fault(kind="status", status=401), False, Code.AUTH, False, None),
    ("404", Fault(kind="status", status=404), False, Code.MODEL_NOT_FOUND, False, None),
    ("html-502", Fault(kind="html", status=502), False, Code.UNAVAILABLE, True, None),
    ("malformed-json", Fault(kind="malformed_json"), False, Code.MALFORMED_RESPONSE, True, None),
    (
        "wrong-shape",
        Fault(kind="status", status=200, body='{"choices": [{"nope": 1}], "type": "message"}'),
        False,
        Code.MALFORMED_RESPONSE,
        True,
        None,
    ),
    ("hang", Fault(kind="hang", seconds=5), False, Code.TIMEOUT, True, None),
    ("reset-before", Fault(kind="reset_before"), False, Code.NETWORK, True, None),
    ("reset-mid", Fault(kind="reset_mid"), False, Code.NETWORK, True, None),
    ("content-filter", Fault(kind="content_filter"), False, Code.CONTENT_FILTER, False, None),
    (
        "context-length",
        Fault(kind="context_length"),
        False,
        Code.CONTEXT_WINDOW_EXCEEDED,
        False,
        None,
    ),
    (
        "stream-429",
        Fault(kind="status", status=429, headers={"retry-after": "3"}),
        True,
        Code.RATE_LIMITED,
        True,
        3.0,
    ),
    (
        "stream-cut-clean",
        Fault(kind="cut_stream", after=4, clean=True),
        True,
        Code.NETWORK,
        True,
        None,
    ),
    (
        "stream-cut-reset",
        Fault(kind="cut_stream", after=4, clean=False),
        True,
        Code.NETWORK,
        True,
        None,
    ),
    ("stream-error-event", Fault(kind="stream_error", after=4), True, Code.UNAVAILABLE, True, None),
    ("stream-hang", Fault(kind="hang", seconds=5), True, Code.TIMEOUT, True, None),
    ("stream-reset-before", Fault(kind="reset_before"), True, Code.NETWORK, True, None),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("fault", "stream", "code", "retryable", "retry_after"),
    [pytest.param(*row[1:], id=row[0]) for row in FAULTS],
)
async def test_fault_is_classified(
    provider: type[HttpProvider],
    fault: Fault,
    stream: bool,
    code: Code,
    retryable: bool,
    retry_after: float | None,
) -> None:
    outcome, server = await run(provider, fault, stream=stream)
    assert isinstance(outcome, ActorError), outcome
    assert (outcome.code, outcome.retryable, outcome.retry_after) == (code, retryable, retry_after)
    assert (outcome.provider, outcome.model) == ("p", "m-1")
    assert server.count() == 1  # one attempt per call: the adapter never retries


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_success_carries_text_and_usage(provider: type[HttpProvider], stream: bool) -> None:
    outcome, _ = await run(provider, stream=stream)
    assert isinstance(outcome, LlmResponse), outcome
    assert outcome.content == "echo: hello chaos world"
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (5, 6)
    assert (outcome.provider, outcome.model) == ("p", "m-1")
    assert outcome.finish_reason in ("stop", "end_turn")


@pytest.mark.parametrize(
    ("provider", "usage"),
    [
        pytest.param(OpenAIProvider, None, id="openai"),
        pytest.param(AnthropicProvider, 5, id="anthropic"),
    ],
)
@pytest.mark.parametrize("kind", ["cut_stream", "stream_error"])
async def test_a_broken_stream_keeps_partial_text_and_usage(
    provider: type[HttpProvider], usage: int | None, kind: str
) -> None:
    outcome, _ = await run(provider, Fault(kind=kind, after=4), stream=True)  # type: ignore[arg-type]
    assert isinstance(outcome, ActorError)
    assert outcome.partial_text is not None and outcome.partial_text.startswith("echo:")
    assert outcome.partial_text != "echo: hello chaos world"
    # Anthropic reports input tokens in message_start; OpenAI sends usage only at the end.
    assert (outcome.usage.input_tokens if outcome.usage else None) == usage


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_calls(provider: type[HttpProvider]) -> None:
    request = LlmRequest(
        model="m-1",
        messages=[Message(role="user", content="call: weather in Paris")],
        tools=[ToolSpec(name="weather", description="today's weather")],
    )
    outcome, server = await run(provider, request=request)
    assert isinstance(outcome, LlmResponse), outcome
    assert [(c.name, json.loads(c.arguments)) for c in outcome.tool_calls] == [
        ("weather", {"query": "weather in Paris"})
    ]
    assert server.requests[0].messages == 1


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("capabilities", "request_", "missing"),
    [
        (Capabilities(tools=False), attrs.evolve(REQUEST, tools=(ToolSpec(name="t"),)), "tools"),
        (Capabilities(streaming=False), attrs.evolve(REQUEST, stream=True), "streaming"),
        (Capabilities(context_window=100), attrs.evolve(REQUEST, max_tokens=500), "context window"),
    ],
    ids=["tools", "streaming", "context"],
)
async def test_capability_missing_before_any_http(
    provider: type[HttpProvider], capabilities: Capabilities, request_: LlmRequest, missing: str
) -> None:
    outcome, server = await run(
        provider, request=request_, models={"m-1": capabilities}, stream=False
    )
    assert isinstance(outcome, ActorError)
    assert outcome.code is Code.CAPABILITY_MISSING
    assert missing in outcome.message
    assert server.count() == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_response_size_cap(provider: type[HttpProvider]) -> None:
    outcome, _ = await run(provider, max_response_bytes=64)
    assert isinstance(outcome, ActorError)
    assert outcome.code is Code.MALFORMED_RESPONSE


async def _leave_by_cancel(client: ProviderClient) -> None:
    with trio.move_on_after(0.12):
        async with client.stream(attrs.evolve(REQUEST, stream=True)) as events:
            async for _ in events:
                pass


async def _leave_by_break(client: ProviderClient) -> None:
    async with client.stream(attrs.evolve(REQUEST, stream=True)) as events:
        async for _ in events:
            break


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("leave", [_leave_by_cancel, _leave_by_break], ids=["cancelled", "break"])
async def test_a_consumer_that_leaves_closes_the_upstream(
    provider: type[HttpProvider], leave: Any
) -> None:
    fault = Fault(kind="slow_stream", seconds=0.05)
    async with chaos_server(FaultScript(faults=[fault])) as server, open_runtime() as runtime:
        cfg = ProviderConfig(name="p", base_url=server.url, read_timeout=2)
        client = ProviderClient(await runtime.spawn(lambda: provider(cfg)), "p")
        await leave(client)
        with trio.fail_after(2):  # the chaos server sees the disconnect
            while not server.requests[0].disconnected:
                await trio.sleep(0.02)
    assert server.count() == 1


async def test_no_api_key_anywhere(log_stream: io.StringIO) -> None:
    register_secret(CANARY)
    faults = [Fault(kind="status", status=401), Fault(kind="reset_mid")]
    outcomes = []
    with capture_events() as events:
        for provider in (OpenAIProvider, AnthropicProvider):
            for fault in faults:
                outcome, server = await run(provider, fault)
                outcomes.append(outcome)
                for record in server.requests:
                    assert CANARY not in json.dumps(attrs.asdict(record))
                    assert not {"authorization", "x-api-key"} & {k.lower() for k in record.headers}
    assert all(isinstance(o, ActorError) for o in outcomes)
    texts = [log_stream.getvalue(), json.dumps(events, default=str)]
    texts += [f"{o} {o.message} {o.user_message} {o!r}" for o in outcomes]
    for text in texts:
        assert CANARY not in text
