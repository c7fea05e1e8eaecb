"""Provider-neutral types: requests, responses, stream events, capabilities, config.

Node runners depend on :class:`LlmProvider` (a protocol) and these attrs values, never
on a vendor's JSON. Adapters (:mod:`actors.providers.openai`,
:mod:`actors.providers.anthropic`) translate both ways and classify every failure.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Literal, Protocol

import attrs
import trio

from actors.checks import (
    env_variable,
    http_url,
    int_at_least,
    non_empty_str,
    seconds,
    validator,
)
from actors.errors import ActorError, Code, Failure, fail
from actors.providers.keys import api_key_of
from actors.usage import Usage

Role = Literal["system", "user", "assistant", "tool"]
ROLES: Final = ("system", "user", "assistant", "tool")

# --- validation of what callers build ----------------------------------------------
# The request-side types check their fields when built: a malformed request fails its
# builder with ``input_validation`` naming the field, before anything is sent or queued
# (a provider actor would otherwise trip over it mid-request). Values are not echoed:
# message content is the user's payload.


_new_object = object.__new__
_set_field = object.__setattr__  # a frozen attrs class is set this way by its own __init__


def _expect(expected: str, ok: Callable[[Any], bool]) -> Callable[[Any, Any, Any], None]:
    def validator(instance: Any, attribute: Any, value: Any) -> None:
        if not ok(value):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION,
                f"{type(instance).__name__}.{attribute.name} must be {expected}, "
                f"got {type(value).__name__}",
            )

    return validator


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _name(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _all(kind: type) -> Callable[[Any], bool]:
    return lambda value: all(isinstance(item, kind) for item in value)


def _as_tuple(value: Any) -> Any:
    """Lists and tuples become tuples; anything else (a string, a dict) is kept as it is
    for the validator to refuse, rather than splitting it into pieces."""
    return tuple(value) if isinstance(value, list | tuple) else value


def _tuple_of(kind: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, tuple) and _all(kind)(value)


def _optional(ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or ok(value)


def _mapping(value: Any) -> bool:
    return isinstance(value, Mapping)


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool the model may call; ``parameters`` is a JSON schema."""

    name: str = attrs.field(validator=_expect("a non-empty string", _name))
    description: str = attrs.field(default="", validator=_expect("a string", _text))
    parameters: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object"}, validator=_expect("a mapping", _mapping)
    )

    def openai(self) -> dict[str, Any]:
        """This tool in the OpenAI (chat completions) ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    def anthropic(self) -> dict[str, Any]:
        """This tool in the Anthropic (messages) ``tools`` format."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.parameters),
        }


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call the model made; ``arguments`` is JSON text as the model wrote it."""

    id: str
    name: str
    arguments: str = "{}"


@attrs.frozen(kw_only=True)
class Message:
    """One message of a conversation: its ``role`` (``system``, ``user``, ``assistant``,
    ``tool``), its text ``content``, the ``tool_calls`` of an assistant message, and the
    ``tool_call_id`` a ``tool`` message answers. Bad fields raise ``input_validation``
    naming the field."""

    role: Role = attrs.field(
        validator=_expect(f"one of {', '.join(ROLES)}", lambda value: value in ROLES)
    )
    content: str = attrs.field(default="", validator=_expect("a string", _text))
    tool_calls: tuple[ToolCall, ...] = attrs.field(
        default=(),
        converter=_as_tuple,
        validator=_expect("a list of ToolCall", _tuple_of(ToolCall)),
    )
    tool_call_id: str | None = attrs.field(
        default=None, validator=_expect("a string or None", _optional(_text))
    )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _temperature(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int too large for a float
        return False


@attrs.frozen(kw_only=True)
class LlmRequest:
    """One model request. Every field is checked when it is built: a malformed one
    raises ``input_validation`` naming the field (``LlmRequest.messages must be a
    non-empty list of Message, got str``)."""

    model: str = attrs.field(validator=_expect("a non-empty string", _name))
    messages: tuple[Message, ...] = attrs.field(
        converter=_as_tuple,
        validator=_expect(
            "a non-empty list of Message",
            lambda value: isinstance(value, tuple) and bool(value) and _all(Message)(value),
        ),
    )
    tools: tuple[ToolSpec, ...] = attrs.field(
        default=(),
        converter=_as_tuple,
        validator=_expect("a list of ToolSpec", _tuple_of(ToolSpec)),
    )
    tool_choice: str | None = attrs.field(
        default=None, validator=_expect("a string or None", _optional(_text))
    )
    max_tokens: int = attrs.field(default=1024, validator=_expect("an integer >= 1", _positive_int))
    temperature: float | None = attrs.field(
        default=None, validator=_expect("None or a finite number >= 0", _temperature)
    )
    response_format: Mapping[str, Any] | None = attrs.field(
        default=None, validator=_expect("a mapping or None", _optional(_mapping))
    )
    stream: bool = attrs.field(
        default=False, validator=_expect("a bool", lambda value: isinstance(value, bool))
    )
    metadata: Mapping[str, str] = attrs.field(
        factory=dict, validator=_expect("a mapping", _mapping)
    )

    def estimated_prompt_tokens(self) -> int:
        """A rough count (4 characters a token) for limits and context checks."""
        chars = sum(len(m.content) for m in self.messages)
        chars += sum(len(t.name) + len(t.description) for t in self.tools)
        return chars // 4 + 1


@attrs.frozen(kw_only=True)
class LlmResponse:
    """A whole answer: its text (``content``), the ``tool_calls`` the model asked for,
    ``finish_reason`` as the provider said it, ``usage`` (tokens; zeros when the provider
    reports none), which ``provider`` and ``model`` answered, and ``latency`` (seconds
    from sending to the last byte)."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage = attrs.field(factory=Usage)
    provider: str = ""
    model: str = ""
    latency: float = 0.0


StreamKind = Literal["text", "tool_call", "usage", "finish"]


@attrs.frozen(kw_only=True)
class StreamEvent:
    """One piece of a streamed answer.

    ``text``: a text delta. ``tool_call``: a fragment of tool call number ``index``
    (``id``/``name`` on its first fragment, ``arguments`` appended). ``usage``: tokens
    reported so far. ``finish``: the finish reason; the stream is complete.
    """

    kind: StreamKind
    text: str = ""
    index: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None
    arguments: str = ""
    usage: Usage | None = None
    finish_reason: str | None = None


@attrs.frozen(kw_only=True)
class Capabilities:
    """What a model can do: call tools, stream, and how many tokens of context it takes
    (``context_window``). Per model in :attr:`ProviderConfig.models`; the pool skips a
    target whose model cannot do what a request needs."""

    tools: bool = True
    streaming: bool = True
    context_window: int = 128_000


SecretSource = Callable[[], str]


@attrs.frozen(kw_only=True)
class ProviderConfig:
    """One provider endpoint.

    The API key comes from ``api_key`` (a string or a callable secret provider) or the
    environment variable ``api_key_env``; it is read and registered with the redaction
    processor when the adapter starts, and never logged. Neither field: the endpoint
    needs no key (no auth header is sent). A key named but missing — the variable not
    set, an empty key, a callable returning none — is ``config_invalid`` at start,
    naming the variable, never showing a key.

    ``read_timeout`` bounds each wait for the next bytes (not a whole answer).
    ``max_response_bytes`` caps a non-streaming body, an error body, one SSE event, and
    the answer a stream assembles (text and tool calls, UTF-8 bytes) — not a stream's
    total on the wire; more is ``malformed_response``.

    Checked as it is built, with the checks of :mod:`actors.checks` that a deployment
    file's ``[providers]`` go through too: ``config_invalid`` naming the field for a
    ``name`` that is not a non-empty string, a ``base_url`` that is not an ``http://``
    or ``https://`` URL with a host, an ``api_key_env`` that is not the name of an
    environment variable (not shown: it may be the key itself), a timeout that is not
    finite seconds > 0, a size or count that is not an ``int`` >= 1. The key itself is
    checked when the adapter starts.
    """

    name: str = attrs.field(validator=validator(non_empty_str))
    base_url: str = attrs.field(validator=validator(http_url))
    api_key: str | SecretSource | None = attrs.field(default=None, repr=False)
    api_key_env: str | None = attrs.field(
        default=None, validator=validator(env_variable(optional=True))
    )
    models: Mapping[str, Capabilities] = attrs.field(factory=dict)
    default_capabilities: Capabilities = attrs.field(factory=Capabilities)
    connect_timeout: float = attrs.field(default=5.0, validator=validator(seconds()))
    read_timeout: float = attrs.field(default=60.0, validator=validator(seconds()))
    max_response_bytes: int = attrs.field(default=8 << 20, validator=validator(int_at_least(1)))
    max_connections: int = attrs.field(default=100, validator=validator(int_at_least(1)))
    max_in_flight: int = attrs.field(default=256, validator=validator(int_at_least(1)))

    def capabilities(self, model: str) -> Capabilities:
        """What ``model`` can do: its entry in ``models``, else ``default_capabilities``."""
        return self.models.get(model, self.default_capabilities)

    def resolve_api_key(self) -> str | None:
        """The key to send (:func:`actors.providers.keys.api_key_of`, which says when it
        is ``config_invalid``): ``None`` when the config names no key at all."""
        return api_key_of(self.name, self.api_key, self.api_key_env)

    def refusal(self, request: LlmRequest) -> Failure | None:
        """``capability_missing`` as a value (naming what is missing), or ``None`` when
        the model can serve ``request``. Decided before any HTTP call."""
        caps = self.capabilities(request.model)
        missing = []
        if request.tools and not caps.tools:
            missing.append("tools")
        if request.stream and not caps.streaming:
            missing.append("streaming")
        if request.estimated_prompt_tokens() + request.max_tokens > caps.context_window:
            missing.append(f"context window of {caps.context_window} tokens")
        if not missing:
            return None
        return fail(
            Code.CAPABILITY_MISSING,
            f"{self.name}/{request.model} lacks: {', '.join(missing)}",
            provider=self.name,
            model=request.model,
        )


# --- messages to a provider actor ---------------------------------------------------


@attrs.frozen
class Complete:
    """Call message: one non-streaming completion, answered with an :class:`LlmResponse`.

    A bare :class:`LlmRequest` sent to a provider actor is read as ``Complete(request)``.
    """

    request: LlmRequest = attrs.field(
        validator=_expect("an LlmRequest", lambda value: isinstance(value, LlmRequest))
    )

    @classmethod
    def unchecked(cls, request: LlmRequest) -> Complete:
        """``Complete(request)`` without the validator, for a caller that has checked
        ``request`` is an :class:`LlmRequest` (a pool checks each request once, then sends
        it on every attempt). Anything else makes a message the provider will reject."""
        message = _new_object(cls)
        _set_field(message, "request", request)
        return message


@attrs.frozen
class Stream:
    """Call message: stream the answer into ``sink`` (backpressure), then answer with the
    assembled :class:`LlmResponse`."""

    request: LlmRequest = attrs.field(
        validator=_expect("an LlmRequest", lambda value: isinstance(value, LlmRequest))
    )
    sink: trio.MemorySendChannel[StreamEvent] = attrs.field(
        validator=_expect(
            "a trio.MemorySendChannel",
            lambda value: isinstance(value, trio.MemorySendChannel),
        )
    )


class EventStream(Protocol):
    """A streamed answer as its consumer sees it: events by ``async for``; after a
    complete stream ``response`` is the assembled answer, after a failed one ``error``
    is what the iteration raised (typed, with the partial text)."""

    response: LlmResponse | None
    error: ActorError | None

    def __aiter__(self) -> AsyncIterator[StreamEvent]: ...

    async def __anext__(self) -> StreamEvent: ...


class LlmProvider(Protocol):
    """What a node runner needs from a model provider: a provider actor's
    :class:`~actors.providers.ProviderClient`, or a provider pool."""

    name: str

    async def complete(self, request: LlmRequest) -> LlmResponse:
        """The whole answer to ``request``, or its typed failure (``ActorError``)."""
        ...

    def stream(self, request: LlmRequest) -> AbstractAsyncContextManager[EventStream]:
        """``async with provider.stream(request) as events:`` the answer as it comes
        (an :class:`EventStream`); leaving the block early closes the request."""
        ...


class StreamReader:
    """The events of one streamed answer; iterate it with ``async for``.

    When the stream fails, iteration raises the typed error (with the partial text and
    usage on it). After a complete stream, :attr:`response` is the assembled answer.
    """

    def __init__(self, receive: trio.MemoryReceiveChannel[StreamEvent]) -> None:
        self._receive = receive
        self.response: LlmResponse | None = None
        self.error: ActorError | None = None

    def __aiter__(self) -> StreamReader:
        return self

    async def __anext__(self) -> StreamEvent:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            if self.error is not None:
                raise self.error from None
            raise StopAsyncIteration from None
