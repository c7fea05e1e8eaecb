"""The Anthropic Messages dialect (``POST /v1/messages``) and its adapter.

Stream events are translated by dispatch tables: :data:`EVENT_HANDLERS` by event
``type`` (the JSON ``type``, else the SSE ``event`` name), :data:`BLOCK_STARTS` by
content block type, :data:`DELTA_HANDLERS` by delta type. Types without an entry
(``ping``, ``content_block_stop``, ``thinking_delta``, future ones) yield nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import httpx

from actors.errors import ActorError, Code
from actors.providers.base import (
    LlmRequest,
    LlmResponse,
    Message,
    ProviderConfig,
    StreamEvent,
    ToolCall,
)
from actors.providers.dialect import ErrorAnswer, StreamState, event_json, structure
from actors.providers.http import HttpProvider
from actors.providers.sse import SseEvent
from actors.usage import Usage

API_VERSION: Final = "2023-06-01"

#: The HTTP status each error type stands for, to classify an error event mid-stream;
#: an unknown type stands for a 500.
ERROR_STATUS: Final[Mapping[str, int]] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


@attrs.frozen
class _Block:
    type: str
    text: str = ""
    id: str = ""
    name: str = ""
    input: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen
class _Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@attrs.frozen
class _Message:
    type: str
    content: list[_Block]
    usage: _Usage
    model: str = ""
    stop_reason: str | None = None


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content,
        }
        return {"role": "user", "content": [block]}
    if message.tool_calls:
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": message.content}] if message.content else []
        )
        blocks += [
            {
                "type": "tool_use",
                "id": c.id,
                "name": c.name,
                "input": json.loads(c.arguments or "{}"),
            }
            for c in message.tool_calls
        ]
        return {"role": message.role, "content": blocks}
    return {"role": message.role, "content": message.content}


class AnthropicDialect:
    """Anthropic's Messages API: ``x-api-key`` and ``anthropic-version`` headers, a
    ``type: message`` answer of content blocks, SSE events ending with ``message_stop``."""

    name = "anthropic"
    path = "/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def request_body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [_message(m) for m in request.messages if m.role != "system"],
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
        if stream:
            body["stream"] = True
        return body

    def parse_response(self, data: Any, request: LlmRequest, *, provider: str) -> LlmResponse:
        message = structure(data, _Message, provider=provider, model=request.model)
        if message.type != "message":
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE, f"answer type is {message.type!r}", provider=provider
            )
        return LlmResponse(
            content="".join(b.text for b in message.content if b.type == "text"),
            tool_calls=tuple(
                ToolCall(id=b.id, name=b.name, arguments=json.dumps(b.input))
                for b in message.content
                if b.type == "tool_use"
            ),
            finish_reason=message.stop_reason,
            usage=Usage(
                input_tokens=message.usage.input_tokens, output_tokens=message.usage.output_tokens
            ),
            provider=provider,
            model=message.model or request.model,
        )

    def stream_events(
        self, event: SseEvent, state: StreamState, *, provider: str
    ) -> list[StreamEvent]:
        data = event_json(event, provider=provider)
        if not isinstance(data, dict):
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE, "stream event is not an object", provider=provider
            )
        handler = _lookup(EVENT_HANDLERS, data.get("type", event.event))
        return [] if handler is None else handler(data, state, provider)

    def complete_at_eof(self, state: StreamState) -> bool:
        return False  # only message_stop ends an answer


def _tool_choice(choice: str) -> dict[str, str]:
    if choice == "required":
        return {"type": "any"}
    if choice in ("auto", "any", "none"):
        return {"type": choice}
    return {"type": "tool", "name": choice}


# --- stream event handlers: (event JSON, state, provider) -> stream events -------------

Handler = Callable[[dict[str, Any], StreamState, str], list[StreamEvent]]


def _lookup(table: Mapping[str, Handler], kind: Any) -> Handler | None:
    """The handler for ``kind``; ``None`` for an unknown type or one that is not a string."""
    return table.get(kind) if isinstance(kind, str) else None


def _on_error(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    error_type = (data.get("error") or {}).get("type", "api_error")
    state.error = ErrorAnswer(ERROR_STATUS.get(error_type, 500), data)
    return []


def _on_message_start(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    usage = structure(
        (data.get("message") or {}).get("usage", {}), _Usage, provider=provider, model=None
    )
    state.usage = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return [StreamEvent(kind="usage", usage=state.usage)]


def _on_block_start(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    block = data.get("content_block") or {}
    handler = _lookup(BLOCK_STARTS, block.get("type"))
    return [] if handler is None else handler(data, state, provider)


def _start_tool_use(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    block = data.get("content_block") or {}
    index = int(data.get("index", 0))
    state.tool_calls[index] = {"id": block.get("id", ""), "name": block.get("name", "")}
    return [
        StreamEvent(
            kind="tool_call", index=index, tool_call_id=block.get("id"), tool_name=block.get("name")
        )
    ]


def _on_block_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    delta = data.get("delta") or {}
    handler = _lookup(DELTA_HANDLERS, delta.get("type"))
    return [] if handler is None else handler(data, state, provider)


def _text_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    text = str(data["delta"].get("text", ""))
    state.text.append(text)
    return [StreamEvent(kind="text", text=text)]


def _input_json_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    index = int(data.get("index", 0))
    fragment = str(data["delta"].get("partial_json", ""))
    call = state.tool_calls.setdefault(index, {})
    call["arguments"] = call.get("arguments", "") + fragment
    return [StreamEvent(kind="tool_call", index=index, arguments=fragment)]


def _on_message_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    output = (data.get("usage") or {}).get("output_tokens")
    if isinstance(output, int):
        base = state.usage or Usage()
        state.usage = Usage(input_tokens=base.input_tokens, output_tokens=output)
        events.append(StreamEvent(kind="usage", usage=state.usage))
    reason = (data.get("delta") or {}).get("stop_reason")
    if reason:
        state.finish_reason = reason
        events.append(StreamEvent(kind="finish", finish_reason=reason))
    return events


def _on_message_stop(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    state.done = True
    return []


#: Stream event type -> handler.
EVENT_HANDLERS: Final[Mapping[str, Handler]] = {
    "error": _on_error,
    "message_start": _on_message_start,
    "content_block_start": _on_block_start,
    "content_block_delta": _on_block_delta,
    "message_delta": _on_message_delta,
    "message_stop": _on_message_stop,
}
#: ``content_block_start`` block type -> handler.
BLOCK_STARTS: Final[Mapping[str, Handler]] = {"tool_use": _start_tool_use}
#: ``content_block_delta`` delta type -> handler.
DELTA_HANDLERS: Final[Mapping[str, Handler]] = {
    "text_delta": _text_delta,
    "input_json_delta": _input_json_delta,
}

ANTHROPIC: Final = AnthropicDialect()


class AnthropicProvider(HttpProvider):
    """Anthropic's Messages API: :class:`HttpProvider` speaking :class:`AnthropicDialect`."""

    def __init__(
        self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(config, ANTHROPIC, transport=transport)


__all__ = ["ANTHROPIC", "API_VERSION", "AnthropicDialect", "AnthropicProvider"]
