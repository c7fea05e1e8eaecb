"""What a provider API speaks, apart from how it is carried: the :class:`Dialect` protocol.

A dialect (:class:`~actors.providers.openai.OpenAIDialect`,
:class:`~actors.providers.anthropic.AnthropicDialect`) turns an
:class:`~actors.providers.base.LlmRequest` into a path, headers and a JSON body, and an
answer — a JSON body or SSE events — into the provider-neutral result types. It does no
I/O and classifies nothing: :class:`~actors.providers.http.HttpProvider` owns the httpx
client, the call and the classification.

A dialect raises ``malformed_response`` (an :class:`~actors.errors.ActorError`) for an
answer of the wrong shape, naming the field (:func:`structure`, :func:`structure_event`).
An error event received mid-stream is not raised: the dialect records the HTTP answer it
stands for in :attr:`StreamState.error` and the HTTP provider classifies it like that
answer.

Provider JSON is read strictly — it is untrusted input, and a value coerced into the
wrong type would pass a provider's bug on as model output:

* :func:`loads` accepts standard JSON only. ``NaN``, ``Infinity`` and ``-Infinity``,
  which Python's :mod:`json` reads, are not JSON (RFC 8259) and raise :class:`NotJson`,
  as do a syntax error and nesting too deep for the parser.
* The converter behind :func:`structure` takes every value at its exact JSON type: a
  ``str`` field wants a string (never ``str()`` of a list, a number or ``null``), an
  ``int`` an integer (not a bool, not ``7.9``, not ``"7"``), a ``float`` a finite number
  (an integer is fine, a bool is not), a ``bool`` a boolean, a list an array, a mapping
  or an attrs class an object. :data:`Count` is a non-negative integer (token counts);
  :data:`JsonObject` an object whose whole tree is JSON (tool arguments).
* A string holding a lone surrogate (``"\\ud800"``, which JSON's escapes allow) is not
  text — it cannot be encoded — and is refused wherever a string is read.

``null`` is a value, not an absence: a field that may be ``null`` says so in its type
(``str | None``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, NewType, Protocol

import attrs
import cattrs
from cattrs.cols import is_mapping, is_sequence, list_structure_factory
from cattrs.gen import make_dict_structure_fn, make_mapping_structure_fn
from cattrs.v import format_exception

from actors.errors import ActorError, Code
from actors.providers.base import LlmRequest, LlmResponse, StreamEvent
from actors.providers.sse import SseEvent
from actors.usage import Usage

#: A token count: a non-negative JSON integer.
Count = NewType("Count", int)
#: A JSON object whose every value is standard JSON (finite numbers, Unicode strings).
JsonObject = NewType("JsonObject", dict[str, Any])


class NotJson(ValueError):
    """Text that is not standard JSON. ``reason`` says why (for the error message);
    ``constant`` is the non-standard constant (``NaN``, ``Infinity``, ``-Infinity``) when
    that is the reason — Python's own :mod:`json` would have read it."""

    def __init__(self, reason: str, *, constant: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.constant = constant


class WrongType(TypeError):
    """A JSON value of the wrong type; the message says what was expected and what came
    (by JSON type — values are not echoed)."""


_JSON_KINDS: Mapping[type, str] = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _kind(value: Any) -> str:
    return _JSON_KINDS.get(type(value), type(value).__name__)


def _refuse_constant(name: str) -> Any:
    raise NotJson(f"{name} is not a JSON value", constant=name)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def loads(text: str | bytes) -> Any:
    """Parse standard JSON; :class:`NotJson` for anything else (see the module docstring).
    Bytes are decoded as :func:`json.loads` decodes them (UTF-8, -16 or -32)."""
    try:
        if isinstance(text, bytes):
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        return _DECODER.decode(text)
    except NotJson:
        raise
    except RecursionError:
        raise NotJson("nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise NotJson(type(exc).__name__) from None


def _text(value: Any) -> bool:
    """Whether a ``str`` is Unicode text (no lone surrogate)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _str(value: Any, _: Any) -> str:
    if type(value) is not str:
        raise WrongType(f"expected a string, got {_kind(value)}")
    if not _text(value):
        raise WrongType("expected a string, got one with a lone surrogate (not Unicode text)")
    return value


def _int(value: Any, _: Any) -> int:
    if type(value) is not int:
        raise WrongType(f"expected an integer, got {_kind(value)}")
    return value


def _count(value: Any, _: Any) -> int:
    if type(value) is not int or value < 0:
        got = "a negative integer" if type(value) is int else _kind(value)
        raise WrongType(f"expected a non-negative integer, got {got}")
    return value


def _float(value: Any, _: Any) -> float:
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise WrongType("expected a finite number, got an integer too large") from None
    if type(value) is not float:
        raise WrongType(f"expected a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise WrongType("expected a finite number, got an infinite one")
    return value


def _bool(value: Any, _: Any) -> bool:
    if type(value) is not bool:
        raise WrongType(f"expected a boolean, got {_kind(value)}")
    return value


def _json_object(value: Any, _: Any) -> dict[str, Any]:
    """An object whose whole tree is standard JSON, walked without recursion (a tree as
    deep as the parser allows must not exhaust the stack here)."""
    if type(value) is not dict:
        raise WrongType(f"expected an object, got {_kind(value)}")
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            for key, inner in item.items():
                _str(key, str)
                pending.append(inner)
        elif kind is list:
            pending.extend(item)
        elif kind is str:
            _str(item, str)
        elif kind is float:
            _float(item, float)
        elif kind not in (int, bool, type(None)):
            raise WrongType(f"expected JSON values only, got {_kind(item)}")
    return value


def _exactly(
    json_type: type, expected: str, build: Callable[[Any, cattrs.Converter], Any]
) -> Callable[[Any, cattrs.Converter], Any]:
    """A hook factory: cattrs' own hook for the type, behind a check of the JSON type
    (cattrs would read a string as a list of characters, a list as an object)."""

    def factory(cls: Any, converter: cattrs.Converter) -> Any:
        inner = build(cls, converter)

        def hook(value: Any, target: Any) -> Any:
            if type(value) is not json_type:
                raise WrongType(f"expected {expected}, got {_kind(value)}")
            return inner(value, target)

        return hook

    return factory


def _strict_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=False)
    for cls, hook in (
        (str, _str),
        (int, _int),
        (float, _float),
        (bool, _bool),
        (Count, _count),
        (JsonObject, _json_object),
    ):
        converter.register_structure_hook(cls, hook)
    converter.register_structure_hook_factory(
        attrs.has, _exactly(dict, "an object", make_dict_structure_fn)
    )
    converter.register_structure_hook_factory(
        is_sequence, _exactly(list, "an array", list_structure_factory)
    )
    converter.register_structure_hook_factory(
        is_mapping, _exactly(dict, "an object", make_mapping_structure_fn)
    )
    return converter


_converter = _strict_converter()


@attrs.frozen
class ErrorAnswer:
    """The HTTP answer an error event received mid-stream stands for."""

    status: int
    body: Mapping[str, Any]


@attrs.define
class StreamState:
    """What a stream delivered so far (for the assembled answer or the failure).

    A dialect sets ``done`` on the stream's terminator and ``error`` on an error event;
    events after either are not read.
    """

    text: list[str] = attrs.Factory(list)
    tool_calls: dict[int, dict[str, str]] = attrs.Factory(dict)
    usage: Usage | None = None
    finish_reason: str | None = None
    done: bool = False
    error: ErrorAnswer | None = None


class Dialect(Protocol):
    """One provider API's wire format. ``provider`` arguments are the configured provider
    name, for the errors a dialect raises."""

    #: The :func:`~actors.errors.classify` dialect (``"openai"``, ``"anthropic"``).
    name: str
    #: The endpoint, relative to ``ProviderConfig.base_url``.
    path: str

    def headers(self, api_key: str | None) -> dict[str, str]:
        """Headers sent with every request (authentication, API version)."""
        ...

    def request_body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``; ``stream`` asks for an SSE answer."""
        ...

    def parse_response(self, data: Any, request: LlmRequest, *, provider: str) -> LlmResponse:
        """The answer of a non-streaming 2xx whose body parsed as JSON ``data``."""
        ...

    def stream_events(
        self, event: SseEvent, state: StreamState, *, provider: str
    ) -> list[StreamEvent]:
        """Translate one SSE event into stream events, updating ``state``."""
        ...

    def complete_at_eof(self, state: StreamState) -> bool:
        """Whether a stream that closed cleanly before its terminator is still complete."""
        ...


def structure(data: Any, cls: type[Any], *, provider: str, model: str | None) -> Any:
    """Structure an untrusted JSON answer body as ``cls`` (strictly: see the module
    docstring); ``malformed_response`` naming every field that does not fit
    (``provider answer does not match its schema: expected a string, got an array @
    $.choices[0].message.content``)."""
    try:
        return _converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        raise ActorError.from_code(
            Code.MALFORMED_RESPONSE,
            "provider answer does not match its schema: " + _problems(exc, cls),
            provider=provider,
            model=model,
        ) from exc


def structure_event(data: Any, cls: type[Any], *, kind: str, provider: str) -> Any:
    """Structure one stream event's JSON as ``cls``, as :func:`structure` does; the error
    names the event and the field (``provider answer has the wrong shape
    (content_block_start event: expected an integer, got a string @ $.index)``)."""
    try:
        return _converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        raise ActorError.from_code(
            Code.MALFORMED_RESPONSE,
            f"provider answer has the wrong shape ({kind} event: {_problems(exc, cls)})",
            provider=provider,
        ) from exc


def _problems(exc: Exception, cls: type[Any]) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc, format_exception=_describe))
    return f"{_describe(exc, cls)} @ $"


def _describe(exc: BaseException, cls: type[Any] | None) -> str:
    return str(exc) if isinstance(exc, WrongType) else format_exception(exc, cls)


def event_json(event: SseEvent, *, provider: str) -> Any:
    """The JSON of one stream event (standard JSON only: :func:`loads`), or
    ``malformed_response``."""
    try:
        return loads(event.data)
    except NotJson as exc:
        raise ActorError.from_code(
            Code.MALFORMED_RESPONSE, f"stream event is not JSON ({exc.reason})", provider=provider
        ) from None


__all__ = [
    "Count",
    "Dialect",
    "ErrorAnswer",
    "JsonObject",
    "NotJson",
    "StreamState",
    "WrongType",
    "event_json",
    "loads",
    "structure",
    "structure_event",
]
