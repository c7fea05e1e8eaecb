"""The OpenAI-compatible dialect (``POST /v1/chat/completions``) and its adapter."""

from __future__ import annotations

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
    StreamState,
    event_json,
    structure,
    structure_event,
)
from actors.providers.http import HttpProvider
from actors.providers.sse import SseEvent
from actors.usage import Usage

#: The HTTP status an ``{"error": ...}`` chunk mid-stream stands for.
STREAM_ERROR_STATUS: Final = 500


# The answer's shapes, structured strictly (actors.providers.dialect): a value of the
# wrong JSON type is malformed_response naming the field; null is accepted only where the
# type says ``| None`` (absent).


@attrs.frozen
class _Function:
    name: str = ""
    arguments: str | None = None


@attrs.frozen
class _ToolCall:
    function: _Function
    id: str | None = None


@attrs.frozen
class _ChatMessage:
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


@attrs.frozen
class _Choice:
    message: _ChatMessage
    finish_reason: str | None = None


_NO_TOKENS: Final = Count(0)


@attrs.frozen
class _ChatUsage:
    prompt_tokens: Count = _NO_TOKENS
    completion_tokens: Count = _NO_TOKENS

    def usage(self) -> Usage:
        return Usage(input_tokens=self.prompt_tokens, output_tokens=self.completion_tokens)


@attrs.frozen
class _Completion:
    choices: list[_Choice]
    model: str | None = None
    usage: _ChatUsage | None = None


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
    tool_calls: list[_ToolCallDelta] | None = None


@attrs.frozen
class _StreamChoice:
    delta: _Delta = attrs.Factory(_Delta)
    finish_reason: str | None = None


@attrs.frozen
class _Chunk:
    choices: list[_StreamChoice] = attrs.Factory(list)
    usage: _ChatUsage | None = None


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


class OpenAIDialect(Dialect):
    """OpenAI-compatible chat completions: bearer authentication, ``choices``, SSE chunks
    ending with ``data: [DONE]`` (or, for servers that omit it, a finish reason)."""

    name = "openai"
    path = "/v1/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def request_body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [_message(m) for m in request.messages],
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = [t.openai() for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.response_format is not None:
            body["response_format"] = dict(request.response_format)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def parse_response(self, data: Any, request: LlmRequest, *, provider: str) -> LlmResponse:
        completion = structure(data, _Completion, provider=provider, model=request.model)
        if not completion.choices:
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE,
                "answer has no choices",
                provider=provider,
                model=request.model,
            )
        choice = completion.choices[0]
        return LlmResponse(
            content=choice.message.content or "",
            tool_calls=tuple(
                ToolCall(id=c.id or "", name=c.function.name, arguments=c.function.arguments or "")
                for c in choice.message.tool_calls or ()
            ),
            finish_reason=choice.finish_reason,
            usage=completion.usage.usage() if completion.usage else Usage(),
            provider=provider,
            model=completion.model or request.model,
        )

    def stream_events(
        self, event: SseEvent, state: StreamState, *, provider: str
    ) -> list[StreamEvent]:
        if event.data.strip() == "[DONE]":
            state.done = True
            return []
        data = event_json(event, provider=provider)
        if isinstance(data, dict) and "error" in data:
            state.error = ErrorAnswer(STREAM_ERROR_STATUS, data)
            return []
        chunk = structure_event(data, _Chunk, kind="chat.completion.chunk", provider=provider)
        events: list[StreamEvent] = []
        for choice in chunk.choices[:1]:
            if choice.delta.content:
                state.text.append(choice.delta.content)
                events.append(StreamEvent(kind="text", text=choice.delta.content))
            for delta in choice.delta.tool_calls or ():
                events.append(_tool_call_delta(delta, state))
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


def _tool_call_delta(delta: _ToolCallDelta, state: StreamState) -> StreamEvent:
    call = state.tool_calls.setdefault(delta.index, {})
    function = delta.function or _FunctionDelta()
    if delta.id:
        call["id"] = delta.id
    if function.name:
        call["name"] = function.name
    if function.arguments:
        call["arguments"] = call.get("arguments", "") + function.arguments
    return StreamEvent(
        kind="tool_call",
        index=delta.index,
        tool_call_id=delta.id,
        tool_name=function.name,
        arguments=function.arguments or "",
    )


OPENAI: Final = OpenAIDialect()


class OpenAIProvider(HttpProvider):
    """An OpenAI-compatible chat-completions endpoint: :class:`HttpProvider` speaking
    :class:`OpenAIDialect`."""

    def __init__(
        self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(config, OPENAI, transport=transport)


__all__ = ["OPENAI", "OpenAIDialect", "OpenAIProvider"]
