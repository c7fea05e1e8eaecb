"""The chaos server's OpenAI chat completions: bodies, stream chunks and errors, in the
shapes the official ``openai`` SDK validates (``ChatCompletion``,
``ChatCompletionChunk``; its ``chat.completions.stream()`` helper keeps only chunks with
``"object": "chat.completion.chunk"``)."""

from __future__ import annotations

import json
from typing import Any, Final

from actors.testing.chaos.dialects.common import CREATED, Answer, StreamPlan, sse

#: The id of every answer and of every tool call.
COMPLETION_ID: Final = "chatcmpl-chaos"
TOOL_CALL_ID: Final = "call_chaos"

#: HTTP status -> (error type, error code, message); ``{model}`` is the request's.
ERRORS: Final[dict[int, tuple[str, str | None, str]]] = {
    400: ("invalid_request_error", None, "chaos: invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    402: (
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for {model} on requests per min (RPM). Please try again later.",
    ),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
#: Any other status.
OTHER_ERROR: Final = (
    "server_error",
    None,
    "The server had an error while processing your request. Sorry about that!",
)


def _error(message: str, type_: str, code: str | None) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": type_, "param": None, "code": code}}
    ).encode()


class OpenAIWire:
    """``POST /v1/chat/completions`` as the chaos server speaks it."""

    def completion(self, answer: Answer) -> dict[str, Any]:
        call = answer.tool_call
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if call else answer.text,
            "refusal": None,
            "annotations": [],
        }
        if call:
            message["tool_calls"] = [
                {
                    "id": TOOL_CALL_ID,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": "tool_calls" if call else "stop",
        }
        return {
            "id": COMPLETION_ID,
            "object": "chat.completion",
            "created": CREATED,
            "model": answer.model,
            "choices": [choice],
            "usage": _usage(answer),
            "system_fingerprint": None,
        }

    def stream(self, answer: Answer, payload: dict[str, Any]) -> StreamPlan:
        """A keep-alive comment; the first chunk (``role``; the tool call's id, type and
        name when there is one); a chunk a word, or a chunk per fragment of the
        arguments; the finish chunk; a usage chunk when ``stream_options.include_usage``
        asks for it (every chunk then carries ``"usage": null`` but that one); ``[DONE]``."""
        options = payload.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        call = answer.tool_call

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return sse(_chunk(answer, [choice], include_usage))

        events = [b": chaos keep-alive\n\n"]
        if call:
            head = {
                "index": 0,
                "id": TOOL_CALL_ID,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            events.append(chunk({"role": "assistant", "content": None, "tool_calls": [head]}))
            events += [
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                for piece in answer.argument_pieces
            ]
        else:
            events.append(chunk({"role": "assistant", "content": "", "refusal": None}))
            events += [chunk({"content": piece}) for piece in answer.words]
        finish = len(events)
        events.append(chunk({}, "tool_calls" if call else "stop"))
        if include_usage:
            usage = _chunk(answer, [], include_usage=False)
            events.append(sse({**usage, "usage": _usage(answer)}))
        events.append(b"data: [DONE]\n\n")
        return StreamPlan(events=events, finish=finish)

    def error_body(self, status: int, model: str) -> bytes:
        type_, code, message = ERRORS.get(status, OTHER_ERROR)
        return _error(message.format(model=model), type_, code)

    def content_filter_body(self) -> bytes:
        return _error(
            "Your request was rejected as a result of our safety system.",
            "invalid_request_error",
            "content_filter",
        )

    def context_length_body(self) -> bytes:
        return _error(
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 10000 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
        )

    def stream_error(self) -> bytes:
        error = {
            "message": "overloaded",
            "type": "server_error",
            "param": None,
            "code": "overloaded",
        }
        return sse({"error": error})


def _chunk(answer: Answer, choices: list[dict[str, Any]], include_usage: bool) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": answer.model,
        "system_fingerprint": None,
        "choices": choices,
    }
    if include_usage:
        chunk["usage"] = None
    return chunk


def _usage(answer: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
    }
