"""Helpers for provider tests over ``httpx.MockTransport``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from actors import ActorError, open_runtime
from actors.providers import (
    AnthropicProvider,
    HttpProvider,
    LlmRequest,
    LlmResponse,
    OpenAIProvider,
    ProviderClient,
    ProviderConfig,
    ToolSpec,
)

#: Both adapters, as a pytest parameter list.
PROVIDERS = [
    pytest.param(OpenAIProvider, id="openai"),
    pytest.param(AnthropicProvider, id="anthropic"),
]


#: A test run both ways: a complete answer and a stream.
STREAMING = pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
#: The tool the chaos tests offer.
WEATHER = ToolSpec(name="weather", description="today's weather")
#: What the chaos server names its tool calls, and how it says an answer is one, by adapter.
TOOL_ID = {OpenAIProvider: "call_chaos", AnthropicProvider: "toolu_chaos"}
TOOL_FINISH = {OpenAIProvider: "tool_calls", AnthropicProvider: "tool_use"}


def sse(*events: tuple[str | None, Any]) -> bytes:
    """A ``text/event-stream`` body: one event per ``(name, data)``; ``data`` that is not a
    string is JSON-encoded, a ``None`` name writes no ``event:`` line."""
    lines = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
        lines.append("")
    return ("\n".join(lines) + "\n").encode()


async def stream_through(
    provider: Callable[..., HttpProvider],
    config: ProviderConfig,
    handler: Callable[[httpx.Request], httpx.Response],
    request: LlmRequest,
) -> LlmResponse | ActorError:
    """Stream ``request`` through an adapter actor over ``httpx.MockTransport(handler)``,
    reading every event: the assembled response, or the typed failure."""
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: provider(config, transport=httpx.MockTransport(handler)))
        try:
            async with ProviderClient(ref, config.name).stream(request) as events:
                async for _ in events:
                    pass
        except ActorError as err:
            return err
        assert events.response is not None
        return events.response
