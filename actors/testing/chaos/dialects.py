"""What the chaos server answers, per dialect (``openai`` or ``anthropic``).

Pure functions from a request payload to bytes or JSON-ready dicts, no I/O. The answer
is deterministic: ``"echo: <last user message>"``; when the request offers tools and the
last user message contains ``call:``, the answer is a call of the first tool with
``{"query": <the text after "call:">}`` (streamed answers are always text). Tokens are
counted as ``len // 4 + 1``: input over the system prompt and every message's content
(non-text content as JSON), output over the reply.
"""

from __future__ import annotations

import json
from typing import Any


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


def answer_for(route: str, payload: dict[str, Any]) -> tuple[str, tuple[int, int]]:
    """The reply text and ``(input, output)`` token counts for a request."""
    messages = payload.get("messages") or []
    last = ""
    prompt = str(payload.get("system", ""))
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        content_text = content if isinstance(content, str) else json.dumps(content)
        prompt += content_text
        if isinstance(message, dict) and message.get("role") == "user":
            last = content_text
    text = f"echo: {last}"
    return text, (_tokens(prompt), _tokens(text))


def _tool_call(payload: dict[str, Any], text: str) -> tuple[str, str, str] | None:
    tools = payload.get("tools") or []
    if not tools or "call:" not in text:
        return None
    first = tools[0]
    name = first.get("function", {}).get("name") or first.get("name") or "tool"
    argument = text.split("call:", 1)[1].strip()
    return "call_1", name, json.dumps({"query": argument})


def completion(
    route: str, payload: dict[str, Any], text: str, usage: tuple[int, int]
) -> dict[str, Any]:
    """The non-streaming response body of ``route``'s dialect (``openai``, else Anthropic)."""
    model = payload.get("model", "")
    call = _tool_call(payload, text)
    if route == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": None if call else text}
        if call:
            message["tool_calls"] = [
                {
                    "id": call[0],
                    "type": "function",
                    "function": {"name": call[1], "arguments": call[2]},
                }
            ]
        return {
            "id": "chatcmpl-chaos",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if call:
        content = [
            {"type": "tool_use", "id": call[0], "name": call[1], "input": json.loads(call[2])}
        ]
    return {
        "id": "msg_chaos",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def stream_events(
    route: str, payload: dict[str, Any], text: str, usage: tuple[int, int]
) -> list[bytes]:
    """Every SSE event of a streamed answer, in order, terminator included.

    OpenAI: a keep-alive comment, one chunk a word, the finish chunk, a usage chunk when
    ``stream_options.include_usage`` asks for it, then ``[DONE]``. Anthropic:
    ``message_start``, a ``ping``, one text block of one delta a word, ``message_delta``
    with the usage, ``message_stop``.
    """
    pieces = [word + " " for word in text.split(" ")]
    pieces[-1] = pieces[-1].rstrip(" ")
    model = payload.get("model", "")
    if route == "openai":
        events = [b": chaos keep-alive\n\n"]
        events += [
            _sse({"id": "c", "model": model, "choices": [{"index": 0, "delta": {"content": p}}]})
            for p in pieces
        ]
        events.append(
            _sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        )
        if (payload.get("stream_options") or {}).get("include_usage"):
            events.append(
                _sse(
                    {
                        "id": "c",
                        "choices": [],
                        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
                    }
                )
            )
        events.append(b"data: [DONE]\n\n")
        return events
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_chaos",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "usage": {"input_tokens": usage[0], "output_tokens": 0},
        },
    }
    events = [_sse(start, "message_start"), b'event: ping\ndata: {"type": "ping"}\n\n']
    events.append(
        _sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        )
    )
    events += [
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            "content_block_delta",
        )
        for p in pieces
    ]
    events.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    events.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        )
    )
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def error_body(route: str, status: int) -> bytes:
    """The dialect's error body for an HTTP ``status`` (its error type picked by status)."""
    if route == "openai":
        kinds = {
            401: ("invalid_request_error", "invalid_api_key"),
            429: ("requests", "rate_limit_exceeded"),
        }
        type_, code = kinds.get(status, ("server_error", None))
        return json.dumps(
            {"error": {"message": f"chaos {status}", "type": type_, "code": code}}
        ).encode()
    kinds_a = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    error = {"type": kinds_a.get(status, "api_error"), "message": f"chaos {status}"}
    return json.dumps({"type": "error", "error": error}).encode()


def content_filter_body(route: str) -> bytes:
    """The dialect's content-policy refusal body (sent with 400)."""
    if route == "openai":
        error = {"message": "filtered", "type": "invalid_request_error", "code": "content_filter"}
        return json.dumps({"error": error}).encode()
    error = {
        "type": "invalid_request_error",
        "message": "Output blocked by content filtering policy",
    }
    return json.dumps({"type": "error", "error": error}).encode()


def context_length_body(route: str) -> bytes:
    """The dialect's context-length error body (sent with 400)."""
    if route == "openai":
        error = {
            "message": "This model's maximum context length is 8192 tokens",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
        return json.dumps({"error": error}).encode()
    error = {
        "type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum",
    }
    return json.dumps({"type": "error", "error": error}).encode()


def stream_error(route: str) -> bytes:
    """The dialect's in-stream error event: the provider is overloaded."""
    if route == "openai":
        return _sse(
            {"error": {"message": "overloaded", "type": "server_error", "code": "overloaded"}}
        )
    return _sse(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"
    )
