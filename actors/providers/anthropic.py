"""The Anthropic adapter (``POST /v1/messages``)."""

from __future__ import annotations

import json
from typing import Any, Final

import attrs

from actors.errors import ActorError, Code, classify
from actors.providers.base import LlmRequest, LlmResponse, Message, StreamEvent, ToolCall
from actors.providers.http import HttpProvider, StreamState, error_response, structure
from actors.providers.sse import SseEvent
from actors.usage import Usage

API_VERSION: Final = "2023-06-01"

# The HTTP status each error type stands for, to classify an error event mid-stream.
_ERROR_STATUS: Final = {
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


class AnthropicProvider(HttpProvider):
    """Anthropic's Messages API."""

    dialect = "anthropic"
    path = "/v1/messages"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
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
            choice = request.tool_choice
            body["tool_choice"] = (
                {"type": "any"}
                if choice == "required"
                else {"type": choice}
                if choice in ("auto", "any", "none")
                else {"type": "tool", "name": choice}
            )
        if stream:
            body["stream"] = True
        return body

    def parse_response(self, data: Any, request: LlmRequest) -> LlmResponse:
        name = self.config.name
        message = structure(data, _Message, provider=name, model=request.model)
        if message.type != "message":
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE, f"answer type is {message.type!r}", provider=name
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
            provider=name,
            model=message.model or request.model,
        )

    def stream_events(self, event: SseEvent, state: StreamState) -> list[StreamEvent]:
        name = self.config.name
        data = self.event_json(event)
        if not isinstance(data, dict):
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE, "stream event is not an object", provider=name
            )
        kind = data.get("type", event.event)
        if kind == "error":
            error_type = (data.get("error") or {}).get("type", "api_error")
            status = _ERROR_STATUS.get(error_type, 500)
            raise classify(error_response(status, data), provider=name, dialect="anthropic")
        if kind == "message_start":
            usage = structure(
                (data.get("message") or {}).get("usage", {}), _Usage, provider=name, model=None
            )
            state.usage = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
            return [StreamEvent(kind="usage", usage=state.usage)]
        if kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                index = int(data.get("index", 0))
                state.tool_calls[index] = {"id": block.get("id", ""), "name": block.get("name", "")}
                return [
                    StreamEvent(
                        kind="tool_call",
                        index=index,
                        tool_call_id=block.get("id"),
                        tool_name=block.get("name"),
                    )
                ]
            return []
        if kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                text = str(delta.get("text", ""))
                state.text.append(text)
                return [StreamEvent(kind="text", text=text)]
            if delta.get("type") == "input_json_delta":
                index = int(data.get("index", 0))
                fragment = str(delta.get("partial_json", ""))
                call = state.tool_calls.setdefault(index, {})
                call["arguments"] = call.get("arguments", "") + fragment
                return [StreamEvent(kind="tool_call", index=index, arguments=fragment)]
            return []
        if kind == "message_delta":
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
        if kind == "message_stop":
            state.done = True
        return []  # ping, content_block_stop, unknown types
