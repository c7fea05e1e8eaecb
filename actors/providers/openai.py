"""The OpenAI-compatible adapter (``POST /v1/chat/completions``)."""

from __future__ import annotations

from typing import Any

import attrs

from actors.errors import ActorError, Code, classify
from actors.providers.base import LlmRequest, LlmResponse, Message, StreamEvent, ToolCall
from actors.providers.http import HttpProvider, StreamState, error_response, structure
from actors.providers.sse import SseEvent
from actors.usage import Usage


@attrs.frozen
class _Function:
    name: str = ""
    arguments: str = ""


@attrs.frozen
class _ToolCall:
    function: _Function
    id: str = ""


@attrs.frozen
class _Message:
    content: str | None = None
    tool_calls: list[_ToolCall] = attrs.Factory(list)


@attrs.frozen
class _Choice:
    message: _Message
    finish_reason: str | None = None


@attrs.frozen
class _Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def usage(self) -> Usage:
        return Usage(input_tokens=self.prompt_tokens, output_tokens=self.completion_tokens)


@attrs.frozen
class _Completion:
    choices: list[_Choice]
    model: str = ""
    usage: _Usage | None = None


@attrs.frozen
class _FunctionDelta:
    name: str | None = None
    arguments: str | None = None


@attrs.frozen
class _ToolCallDelta:
    index: int = 0
    id: str | None = None
    function: _FunctionDelta | None = None


@attrs.frozen
class _Delta:
    content: str | None = None
    tool_calls: list[_ToolCallDelta] = attrs.Factory(list)


@attrs.frozen
class _StreamChoice:
    delta: _Delta = attrs.Factory(_Delta)
    finish_reason: str | None = None


@attrs.frozen
class _Chunk:
    choices: list[_StreamChoice] = attrs.Factory(list)
    usage: _Usage | None = None


def _message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


class OpenAIProvider(HttpProvider):
    """An OpenAI-compatible chat-completions endpoint."""

    dialect = "openai"
    path = "/v1/chat/completions"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def request_body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [_message(m) for m in request.messages],
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.response_format is not None:
            body["response_format"] = dict(request.response_format)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def parse_response(self, data: Any, request: LlmRequest) -> LlmResponse:
        name = self.config.name
        completion = structure(data, _Completion, provider=name, model=request.model)
        if not completion.choices:
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE, "answer has no choices", provider=name, model=request.model
            )
        choice = completion.choices[0]
        return LlmResponse(
            content=choice.message.content or "",
            tool_calls=tuple(
                ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
                for c in choice.message.tool_calls
            ),
            finish_reason=choice.finish_reason,
            usage=completion.usage.usage() if completion.usage else Usage(),
            provider=name,
            model=completion.model or request.model,
        )

    def stream_events(self, event: SseEvent, state: StreamState) -> list[StreamEvent]:
        if event.data.strip() == "[DONE]":
            state.done = True
            return []
        name = self.config.name
        data = self.event_json(event)
        if isinstance(data, dict) and "error" in data:
            raise classify(error_response(500, data), provider=name, dialect="openai")
        chunk = structure(data, _Chunk, provider=name, model=None)
        events: list[StreamEvent] = []
        for choice in chunk.choices[:1]:
            if choice.delta.content:
                state.text.append(choice.delta.content)
                events.append(StreamEvent(kind="text", text=choice.delta.content))
            for delta in choice.delta.tool_calls:
                call = state.tool_calls.setdefault(delta.index, {})
                function = delta.function or _FunctionDelta()
                if delta.id:
                    call["id"] = delta.id
                if function.name:
                    call["name"] = function.name
                if function.arguments:
                    call["arguments"] = call.get("arguments", "") + function.arguments
                events.append(
                    StreamEvent(
                        kind="tool_call",
                        index=delta.index,
                        tool_call_id=delta.id,
                        tool_name=function.name,
                        arguments=function.arguments or "",
                    )
                )
            if choice.finish_reason:
                state.finish_reason = choice.finish_reason
                events.append(StreamEvent(kind="finish", finish_reason=choice.finish_reason))
        if chunk.usage is not None:
            state.usage = chunk.usage.usage()
            events.append(StreamEvent(kind="usage", usage=state.usage))
        return events

    def complete_at_eof(self, state: StreamState) -> bool:
        # Some OpenAI-compatible servers omit [DONE]; a finish reason ends the answer.
        return state.finish_reason is not None
