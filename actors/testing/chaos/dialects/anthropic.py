"""The chaos server's Anthropic Messages API: bodies, stream events and errors, in the
shapes the official ``anthropic`` SDK validates (``Message``, the ``RawMessageStreamEvent``
union; its ``messages.stream()`` helper builds the final message from ``message_start``
and the events after it)."""

from __future__ import annotations

import json
from typing import Any, Final

from actors.testing.chaos.dialects.common import Answer, StreamPlan, sse

#: The id of every answer and of every tool call.
MESSAGE_ID: Final = "msg_chaos"
TOOL_USE_ID: Final = "toolu_chaos"
REQUEST_ID: Final = "req_chaos"

#: HTTP status -> (error type, message); ``{model}`` is the request's.
ERRORS: Final[dict[int, tuple[str, str]]] = {
    400: ("invalid_request_error", "chaos: invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API."),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "model: {model}"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}
#: Any other status.
OTHER_ERROR: Final = ("api_error", "Internal server error")


def _error(type_: str, message: str) -> bytes:
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": REQUEST_ID}
    return json.dumps(body).encode()


class AnthropicWire:
    """``POST /v1/messages`` as the chaos server speaks it."""

    def completion(self, answer: Answer) -> dict[str, Any]:
        call = answer.tool_call
        content: list[dict[str, Any]] = [{"type": "text", "text": answer.text}]
        if call:
            content = [
                {
                    "type": "tool_use",
                    "id": TOOL_USE_ID,
                    "name": call.name,
                    "input": json.loads(call.arguments),
                }
            ]
        return {
            **_message(answer, content),
            "stop_reason": "tool_use" if call else "end_turn",
            "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
        }

    def stream(self, answer: Answer, payload: dict[str, Any]) -> StreamPlan:
        """``message_start`` (the input tokens), a ``ping``, one content block — text of
        one delta a word, or a ``tool_use`` block whose ``input_json_delta`` fragments
        (an empty one first, as the API sends) make its arguments —, ``content_block_stop``,
        ``message_delta`` (stop reason, output tokens), ``message_stop``."""
        call = answer.tool_call
        start = {
            "type": "message_start",
            "message": {
                **_message(answer, []),
                "stop_reason": None,
                "usage": {"input_tokens": answer.input_tokens, "output_tokens": 0},
            },
        }
        events = [sse(start, "message_start"), sse({"type": "ping"}, "ping")]
        if call:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": TOOL_USE_ID,
                "name": call.name,
                "input": {},
            }
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in ["", *answer.argument_pieces]
            ]
        else:
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in answer.words]
        events.append(
            sse(
                {"type": "content_block_start", "index": 0, "content_block": block},
                "content_block_start",
            )
        )
        events += [
            sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
            for delta in deltas
        ]
        events.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
        finish = len(events)
        stop = {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": answer.output_tokens},
        }
        events.append(sse(stop, "message_delta"))
        events.append(sse({"type": "message_stop"}, "message_stop"))
        return StreamPlan(events=events, finish=finish)

    def error_body(self, status: int, model: str) -> bytes:
        type_, message = ERRORS.get(status, OTHER_ERROR)
        return _error(type_, message.format(model=model))

    def content_filter_body(self) -> bytes:
        return _error("invalid_request_error", "Output blocked by content filtering policy")

    def context_length_body(self) -> bytes:
        return _error("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")

    def stream_error(self) -> bytes:
        return sse(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "error",
        )


def _message(answer: Answer, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_sequence": None,
    }
