"""The Anthropic Messages dialect (``POST /v1/messages``) and its adapter.

Stream events are translated by dispatch tables: :data:`EVENT_HANDLERS` by event
``type`` (the JSON ``type``, else the SSE ``event`` name), :data:`BLOCK_STARTS` by
content block type, :data:`DELTA_HANDLERS` by delta type. Types without an entry
(``ping``, ``content_block_stop``, ``thinking_delta``, future ones) yield nothing.

Each handler structures the event it reads into a small attrs class with the dialects'
strict converter (:func:`~actors.providers.dialect.structure_event`): every value it
takes — text, tool ids and names, ``partial_json``, ``stop_reason``, indexes, token
counts — has its exact JSON type, or the event is ``malformed_response`` naming the
field. An ``error`` event of any shape stands for an HTTP error (its ``error.type``'s
status, else 500) and is classified as one.
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
from actors.providers.dialect import (
    Count,
    Dialect,
    ErrorAnswer,
    JsonObject,
    StreamState,
    event_json,
    structure,
    structure_event,
)
from actors.providers.http import HttpProvider
from actors.providers.sse import SseEvent
from actors.usage import Usage

API_VERSION: Final = "2023-06-01"

#: The HTTP status each error type stands for, to classify an error event mid-stream;
#: an unknown type stands for a 500.
ERROR_STATUS: Final[Mapping[str, int]] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


# The answer's shapes, structured strictly (actors.providers.dialect): a value of the
# wrong JSON type is malformed_response naming the field; null is accepted only where the
# type says ``| None`` (absent).


@attrs.frozen
class _Block:
    type: str
    text: str = ""
    id: str = ""
    name: str = ""
    input: JsonObject = attrs.Factory(lambda: JsonObject({}))


_NO_TOKENS: Final = Count(0)


@attrs.frozen
class _Usage:
    input_tokens: Count = _NO_TOKENS
    output_tokens: Count = _NO_TOKENS

    def usage(self) -> Usage:
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)


@attrs.frozen
class _Message:
    type: str
    content: list[_Block]
    usage: _Usage
    model: str | None = None
    stop_reason: str | None = None


# --- the stream events' shapes (what each handler reads) -------------------------------


@attrs.frozen
class _StartedMessage:
    usage: _Usage | None = None


@attrs.frozen
class _MessageStart:
    message: _StartedMessage | None = None


@attrs.frozen
class _BlockStart:
    """A ``content_block_start``; its block is read by the handler for its type."""

    index: int = 0
    content_block: dict[str, Any] | None = None


@attrs.frozen
class _ToolUse:
    id: str = ""
    name: str = ""


@attrs.frozen
class _ToolUseStart:
    content_block: _ToolUse
    index: int = 0


@attrs.frozen
class _BlockDelta:
    """A ``content_block_delta``; its delta is read by the handler for its type."""

    index: int = 0
    delta: dict[str, Any] | None = None


@attrs.frozen
class _Text:
    text: str = ""


@attrs.frozen
class _TextDelta:
    delta: _Text


@attrs.frozen
class _PartialJson:
    partial_json: str = ""


@attrs.frozen
class _JsonDelta:
    delta: _PartialJson
    index: int = 0


@attrs.frozen
class _Stop:
    stop_reason: str | None = None


@attrs.frozen
class _OutputUsage:
    output_tokens: Count | None = None


@attrs.frozen
class _MessageDelta:
    delta: _Stop | None = None
    usage: _OutputUsage | None = None


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


class AnthropicDialect(Dialect):
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
            body["tools"] = [t.anthropic() for t in request.tools]
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
                ToolCall(id=b.id, name=b.name, arguments=json.dumps(b.input, allow_nan=False))
                for b in message.content
                if b.type == "tool_use"
            ),
            finish_reason=message.stop_reason,
            usage=message.usage.usage(),
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
    error = data.get("error")
    error_type = error.get("type") if isinstance(error, dict) else None
    status = ERROR_STATUS.get(error_type, 500) if isinstance(error_type, str) else 500
    state.error = ErrorAnswer(status, data)
    return []


def _on_message_start(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    event = structure_event(data, _MessageStart, kind="message_start", provider=provider)
    usage = event.message.usage if event.message is not None else None
    state.usage = usage.usage() if usage is not None else Usage()
    return [StreamEvent(kind="usage", usage=state.usage)]


def _on_block_start(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    event = structure_event(data, _BlockStart, kind="content_block_start", provider=provider)
    handler = _lookup(BLOCK_STARTS, (event.content_block or {}).get("type"))
    return [] if handler is None else handler(data, state, provider)


def _start_tool_use(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    event = structure_event(data, _ToolUseStart, kind="content_block_start", provider=provider)
    block = event.content_block
    state.tool_calls[event.index] = {"id": block.id, "name": block.name}
    start = StreamEvent(
        kind="tool_call",
        index=event.index,
        tool_call_id=block.id or None,  # absent: None, as on OpenAI's later fragments
        tool_name=block.name or None,
    )
    return [start]


def _on_block_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    event = structure_event(data, _BlockDelta, kind="content_block_delta", provider=provider)
    handler = _lookup(DELTA_HANDLERS, (event.delta or {}).get("type"))
    return [] if handler is None else handler(data, state, provider)


def _text_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    text = structure_event(data, _TextDelta, kind="content_block_delta", provider=provider)
    state.text.append(text.delta.text)
    return [StreamEvent(kind="text", text=text.delta.text)]


def _input_json_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    event = structure_event(data, _JsonDelta, kind="content_block_delta", provider=provider)
    fragment = event.delta.partial_json
    call = state.tool_calls.setdefault(event.index, {})
    call["arguments"] = call.get("arguments", "") + fragment
    return [StreamEvent(kind="tool_call", index=event.index, arguments=fragment)]


def _on_message_delta(data: dict[str, Any], state: StreamState, provider: str) -> list[StreamEvent]:
    event = structure_event(data, _MessageDelta, kind="message_delta", provider=provider)
    events: list[StreamEvent] = []
    output = event.usage.output_tokens if event.usage is not None else None
    if output is not None:
        base = state.usage or Usage()
        state.usage = Usage(input_tokens=base.input_tokens, output_tokens=output)
        events.append(StreamEvent(kind="usage", usage=state.usage))
    reason = event.delta.stop_reason if event.delta is not None else None
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
