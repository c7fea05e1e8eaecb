"""What both dialects of the chaos server share: the answer to a request, SSE framing.

The answer is deterministic, computed from the conversation's last user message:

* ``"echo: <last user message>"`` by default;
* when that message contains ``reply:``, exactly the text after the first ``reply:``
  (stripped) — a test scripts the model's output (JSON, a node name);
* when the request offers tools and that message contains ``call:``, a call of the first
  tool with ``{"query": <the text after "call:">}`` instead (a tool call wins over
  ``reply:``) — streamed or not.

When the conversation **ends with a tool result** (an OpenAI ``tool`` message, an
Anthropic ``user`` message of ``tool_result`` blocks), the answer is text:
``"echo: <the tool result>"`` — never a tool call, and a ``reply:`` or ``call:`` inside
the result is not read (only user messages script answers): the model "reads" the
result and answers, so an agent's tool loop ends. Tokens are counted as
``len // 4 + 1``: input over the system prompt and every message's content (non-text
content as JSON), output over the answer's text (a tool call's too).
"""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

import attrs

#: The ``created`` timestamp of every OpenAI answer (fixed: answers are deterministic).
CREATED: Final = 1_700_000_000
#: Characters of a tool call's JSON arguments per streamed fragment.
ARGUMENT_PIECE: Final = 8


@attrs.frozen
class ToolCall:
    """The tool call an answer makes: the first offered tool, called with ``arguments``
    (JSON text)."""

    name: str
    arguments: str


@attrs.frozen
class Answer:
    """What the server answers one request, apart from the dialect it says it in."""

    model: str
    text: str
    tool_call: ToolCall | None
    input_tokens: int
    output_tokens: int

    @property
    def words(self) -> list[str]:
        """The text in streamed pieces: one a word, each but the last with its space."""
        pieces = [word + " " for word in self.text.split(" ")]
        pieces[-1] = pieces[-1].rstrip(" ")
        return pieces

    @property
    def argument_pieces(self) -> list[str]:
        """The tool call's arguments in streamed fragments of :data:`ARGUMENT_PIECE`
        characters."""
        text = self.tool_call.arguments if self.tool_call else ""
        return [text[i : i + ARGUMENT_PIECE] for i in range(0, len(text), ARGUMENT_PIECE)]


@attrs.frozen
class StreamPlan:
    """The SSE events of a streamed answer, in order, terminator included; ``finish`` is
    the index of the first event that completes the answer (OpenAI's finish chunk,
    Anthropic's ``message_delta``): a stream cut before it is never complete."""

    events: list[bytes]
    finish: int


class WireDialect(Protocol):
    """One API as the chaos server speaks it."""

    def completion(self, answer: Answer) -> dict[str, Any]:
        """The non-streaming 200 body."""
        ...

    def stream(self, answer: Answer, payload: dict[str, Any]) -> StreamPlan:
        """The streamed answer (``payload``: the request, for its stream options)."""
        ...

    def error_body(self, status: int, model: str) -> bytes:
        """The error body the API sends with HTTP ``status`` for a request for ``model``."""
        ...

    def content_filter_body(self) -> bytes:
        """The content-policy refusal (sent with 400)."""
        ...

    def context_length_body(self) -> bytes:
        """The context-length error (sent with 400)."""
        ...

    def stream_error(self) -> bytes:
        """The in-stream error event: the provider is overloaded."""
        ...


def tokens(text: str) -> int:
    return len(text) // 4 + 1


def answer_for(payload: dict[str, Any]) -> Answer:
    """The answer to a request whose JSON body is ``payload`` (see the module docstring)."""
    messages = payload.get("messages") or []
    last = ""
    prompt = str(payload.get("system", ""))
    result: str | None = None
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        content_text = content if isinstance(content, str) else json.dumps(content)
        prompt += content_text
        result = _tool_result(message)
        if result is None and isinstance(message, dict) and message.get("role") == "user":
            last = content_text
    model = payload.get("model")
    if result is not None:
        text, call = f"echo: {result}", None
    else:
        call = _tool_call(payload, last)
        text = last.split("reply:", 1)[1].strip() if "reply:" in last else f"echo: {last}"
        if call is not None:
            text = f"echo: {last}"
    return Answer(
        model=model if isinstance(model, str) else "",
        text=text,
        tool_call=call,
        input_tokens=tokens(prompt),
        output_tokens=tokens(text),
    )


def _tool_result(message: Any) -> str | None:
    """The text of a tool result message (OpenAI ``role: tool``; Anthropic ``user``
    content of ``tool_result`` blocks), else ``None``."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if message.get("role") == "tool":
        return content if isinstance(content, str) else json.dumps(content)
    if message.get("role") != "user" or not isinstance(content, list) or not content:
        return None
    if not all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None
    parts = [b.get("content") for b in content]
    return "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def _tool_call(payload: dict[str, Any], text: str) -> ToolCall | None:
    tools = payload.get("tools")
    if not isinstance(tools, list) or not tools or "call:" not in text:
        return None
    first = tools[0] if isinstance(tools[0], dict) else {}
    function = first.get("function")
    name = (function.get("name") if isinstance(function, dict) else None) or first.get("name")
    argument = text.split("call:", 1)[1].strip()
    return ToolCall(
        name=name if isinstance(name, str) else "tool", arguments=json.dumps({"query": argument})
    )


def sse(data: Any, event: str | None = None) -> bytes:
    """One SSE event: ``data`` as JSON, with an ``event:`` line when ``event`` is given."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def is_json_event(event: bytes) -> bool:
    """Whether ``event`` carries a JSON object (not a comment, not ``[DONE]``)."""
    return b"data: {" in event


def truncate_event(event: bytes) -> bytes:
    """``event`` with its JSON data cut in half (the event itself still ends properly)."""
    head, _, rest = event.partition(b"data: ")
    data = rest.rstrip(b"\n")
    return head + b"data: " + data[: len(data) // 2] + b"\n\n"
