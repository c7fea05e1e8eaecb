"""What both dialects of the chaos server share: the answer to a request, SSE framing.

The answer is deterministic, decided in this order:

1. **After a tool result** — the conversation ends with tool results (OpenAI: one or more
   ``role: "tool"`` messages, their ``content``; Anthropic: a ``user`` message whose
   content list holds ``tool_result`` blocks, their ``content``: a string, or its
   ``text`` blocks' text): the text ``"echo: <tool result text>"`` (several results, or
   text blocks, joined by newlines), never a tool call — an agent loop ends after one
   round. A ``call:`` or ``reply:`` inside a tool result is not interpreted: only user
   messages script the answer.
2. **A tool call** — the request offers tools and the last user message contains
   ``call:``: a call of the first tool with ``{"query": <the text after the first
   "call:", stripped>}`` — streamed or not. It wins over ``reply:`` in the same message,
   which then changes nothing (not even the usage).
3. **A scripted reply** — the last user message contains ``reply:``: the text is exactly
   what follows the first ``reply:``, stripped of surrounding whitespace (maybe empty),
   e.g. ``reply: {"label": "bug"}`` answers ``{"label": "bug"}``.
4. Otherwise ``"echo: <last user message>"``.

"The last user message" is the content of the last ``role: "user"`` message (non-text
content as JSON); none: ``""``. Tokens are counted as ``len // 4 + 1``: input over the
system prompt and every message's content (non-text content as JSON), output over the
answer's text — for a tool call over ``"echo: <last user message>"``.
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
class AnswerToolCall:
    """The tool call an answer makes: the first offered tool, called with ``arguments``
    (JSON text)."""

    name: str
    arguments: str


@attrs.frozen
class Answer:
    """What the server answers one request, apart from the dialect it says it in."""

    model: str
    text: str
    tool_call: AnswerToolCall | None
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
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        content_text = content if isinstance(content, str) else json.dumps(content)
        prompt += content_text
        if isinstance(message, dict) and message.get("role") == "user":
            last = content_text
    echo = f"echo: {last}"
    results = _tool_results(messages)
    if results is not None:
        text, tool_call = f"echo: {results}", None
    else:
        tool_call = _tool_call(payload, echo)
        scripted = _scripted_reply(last)
        text = echo if tool_call or scripted is None else scripted
    model = payload.get("model")
    return Answer(
        model=model if isinstance(model, str) else "",
        text=text,
        tool_call=tool_call,
        input_tokens=tokens(prompt),
        output_tokens=tokens(text),
    )


def _tool_call(payload: dict[str, Any], text: str) -> AnswerToolCall | None:
    tools = payload.get("tools")
    if not isinstance(tools, list) or not tools or "call:" not in text:
        return None
    first = tools[0] if isinstance(tools[0], dict) else {}
    function = first.get("function")
    name = (function.get("name") if isinstance(function, dict) else None) or first.get("name")
    argument = text.split("call:", 1)[1].strip()
    return AnswerToolCall(
        name=name if isinstance(name, str) else "tool", arguments=json.dumps({"query": argument})
    )


def _scripted_reply(last: str) -> str | None:
    """The text after the first ``reply:`` in ``last``, stripped; ``None`` without one."""
    if "reply:" not in last:
        return None
    return last.split("reply:", 1)[1].strip()


def _tool_results(messages: Any) -> str | None:
    """The text of the tool results that end the conversation, joined by newlines:
    OpenAI's trailing ``role: "tool"`` messages, or the ``tool_result`` blocks of
    Anthropic's last message (a ``user`` message with list content). ``None`` when the
    last message is neither."""
    if not isinstance(messages, list) or not messages:
        return None
    trailing: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        trailing.insert(0, _text_of(message.get("content")))
    if trailing:
        return "\n".join(trailing)
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    content = last.get("content")
    blocks = [
        block
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    return "\n".join(_text_of(block.get("content")) for block in blocks) if blocks else None


def _text_of(content: Any) -> str:
    """A tool result's text: a string as it is; a list of blocks, the ``text`` of its
    ``text`` blocks joined by newlines (others skipped); absent, ``""``; anything else
    as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return json.dumps(content)


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
