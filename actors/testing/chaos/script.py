"""Fault scripts: what the chaos server does wrong, and when.

A :class:`FaultScript` holds one queue of :class:`Fault` per route (``openai``,
``anthropic``, ``*`` for any); a fault with ``times=n`` is queued ``n`` times. The server
asks :meth:`FaultScript.next` once per routed request. :func:`load_script` reads a script from
TOML; the fault kinds and what a client sees for each are tabled in
:mod:`actors.testing.chaos`.

The rule every fault keeps: it applies to the request it is recorded against, or the
script is refused when it is built (``Fault(...)``, :func:`load_script`: ``config_invalid``
naming the field). So a fault that fits no request waits in its queue rather than be
recorded and ignored: a stream-only kind waits for a streaming request, a fault with a
``model`` for a request for that model.
"""

from __future__ import annotations

import random
import re
import tomllib
from collections import deque
from typing import Any, Literal, get_args

import attrs
import cattrs
from cattrs.v import format_exception

from actors.checks import (
    fraction,
    int_at_least,
    is_bool,
    is_str,
    non_empty_str,
    one_of,
    optional,
    seconds,
    validator,
)
from actors.errors import ActorError, Code

FaultKind = Literal[
    "status",
    "html",
    "malformed_json",
    "latency",
    "hang",
    "reset_before",
    "reset_mid",
    "cut_stream",
    "stream_error",
    "slow_stream",
    "content_filter",
    "context_length",
]
Route = Literal["openai", "anthropic", "*"]
#: Every fault kind, in :data:`FaultKind`'s order (what ``Fault.kind`` accepts).
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
#: Every route (what ``Fault.route`` accepts).
ROUTES: tuple[str, ...] = get_args(Route)

#: Kinds that only a streaming request can be given (they wait in the queue for one).
STREAM_ONLY = frozenset({"cut_stream", "stream_error", "slow_stream"})

#: An HTTP header name (an RFC 9110 token).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: Statuses that cannot carry the body every fault sends.
_BODILESS = frozenset({204, 304})
#: Headers the server frames the answer with: a fault may not set them.
_FRAMING = frozenset({"content-length", "transfer-encoding", "connection"})


def _invalid(
    instance: Any, attribute: attrs.Attribute[Any], problem: str, key: str = ""
) -> ActorError:
    """``config_invalid`` naming the field (``Fault.seconds must be ...``; ``key``: the
    entry of a mapping field)."""
    where = f"{type(instance).__name__}.{attribute.name}{key}"
    return ActorError.from_code(Code.CONFIG_INVALID, f"{where} {problem}")


def _status(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 200 <= value <= 999:
        raise _invalid(
            instance, attribute, f"must be an HTTP status from 200 to 999, got {value!r}"
        )
    if value in _BODILESS:
        raise _invalid(instance, attribute, f"must be a status with a body, got {value}")


def _headers(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, dict):
        raise _invalid(
            instance, attribute, f"must be a table of header names to values, got {value!r:.60}"
        )
    for name, text in value.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise _invalid(instance, attribute, f"has {name!r:.60}: {text!r:.60}, not two strings")
        if not _TOKEN.fullmatch(name):
            raise _invalid(instance, attribute, f"has {name!r}, which is not a header name")
        if name.lower() in _FRAMING:
            raise _invalid(instance, attribute, f"has {name}, which frames the answer")
        if any(char in text for char in "\r\n\x00"):
            raise _invalid(instance, attribute, f"has {name} with CR, LF or NUL in its value")


@attrs.define(kw_only=True)
class Fault:
    """One thing to do wrong, to the next ``times`` requests on ``route`` that it fits.

    What each ``kind`` does, and which fields it reads, is tabled in
    :mod:`actors.testing.chaos`; fields a kind does not read are ignored. ``model``,
    when set, narrows the requests the fault fits to those whose JSON ``model`` equals
    it; a request for another model passes it by and it stays queued, in its place.

    Values the server could not play raise ``config_invalid`` naming the field (the
    checks of :mod:`actors.checks`, as for every config): a ``kind`` or ``route`` it does
    not know (a typo would otherwise be a chaos test with no chaos in it), a ``model``
    that is not a non-empty string, a ``status`` outside 200 to 999 or one without a
    body (204, 304), a negative, NaN or infinite ``seconds``, a negative ``after`` or
    ``times``, a header that is not a header or that frames the answer
    (``content-length``, ``transfer-encoding``, ``connection``), a ``body`` that is not a
    string, a ``clean`` that is not a bool.
    """

    kind: FaultKind = attrs.field(validator=validator(one_of(FAULT_KINDS)))
    route: Route = attrs.field(default="*", validator=validator(one_of(ROUTES)))
    model: str | None = attrs.field(default=None, validator=validator(optional(non_empty_str)))
    status: int = attrs.field(default=500, validator=_status)
    headers: dict[str, str] = attrs.field(factory=dict, validator=_headers)
    body: str | None = attrs.field(default=None, validator=validator(optional(is_str)))
    seconds: float = attrs.field(default=0.0, validator=validator(seconds(zero=True)))
    after: int = attrs.field(default=2, validator=validator(int_at_least(0)))
    clean: bool = attrs.field(default=True, validator=validator(is_bool))
    times: int = attrs.field(default=1, validator=validator(int_at_least(0)))

    def fits(self, *, stream: bool, model: str | None) -> bool:
        """Whether the fault can be played on a request (see the class docstring)."""
        if self.kind in STREAM_ONLY and not stream:
            return False
        return self.model is None or self.model == model


def _probabilities(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, dict):
        raise _invalid(instance, attribute, f"must be a table of fault kinds, got {value!r:.60}")
    for kind, probability in value.items():
        problem = one_of(FAULT_KINDS)(kind)
        if problem is not None:
            raise _invalid(instance, attribute, f"has a key that {problem}")
        problem = fraction(probability)
        if problem is not None:
            raise _invalid(instance, attribute, problem, key=f".{kind}")


def _faults(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, list):
        raise _invalid(instance, attribute, f"must be a list of Fault, got {value!r:.60}")
    for index, fault in enumerate(value):
        if not isinstance(fault, Fault):
            problem = f"must be a Fault, got {type(fault).__name__}"
            raise _invalid(instance, attribute, problem, key=f"[{index}]")


@attrs.define(kw_only=True)
class FaultScript:
    """The faults a server will play: queued per route, consumed in order.

    A request with no queued fault that fits may still get one by chance: each kind in
    ``probabilities`` that fits the request (stream-only kinds fit streaming requests
    only), in name order, gets one draw from a generator seeded with ``seed`` and yields
    a fault of that kind, with status 503 for ``status`` and 502 otherwise. Use
    :meth:`push` to queue more while the server runs.
    """

    faults: list[Fault] = attrs.field(factory=list, validator=_faults)
    probabilities: dict[FaultKind, float] = attrs.field(factory=dict, validator=_probabilities)
    seed: int = attrs.field(default=0, validator=validator(int_at_least(0)))
    _queues: dict[str, deque[Fault]] = attrs.field(init=False, factory=dict)
    _random: random.Random = attrs.field(init=False, factory=random.Random)

    def __attrs_post_init__(self) -> None:
        self._random.seed(self.seed)
        self.push(*self.faults)

    def next(self, route: str, *, stream: bool = False, model: str | None = None) -> Fault | None:
        """The next fault for a request on ``route`` (``stream``: whether it streams;
        ``model``: its JSON ``model``): the first that fits in its route's queue, then in
        ``*``'s, then chance. Faults that do not fit stay queued, in order."""
        for key in (route, "*"):
            queue = self._queues.get(key)
            if not queue:
                continue
            for fault in queue:
                if fault.fits(stream=stream, model=model):
                    queue.remove(fault)
                    return fault
        for kind, probability in sorted(self.probabilities.items()):
            if kind in STREAM_ONLY and not stream:
                continue
            if self._random.random() < probability:
                return Fault(kind=kind, status=503 if kind == "status" else 502)
        return None

    def push(self, *faults: Fault) -> None:
        """Queue more faults while the server runs."""
        for fault in faults:
            for _ in range(fault.times):
                self._queues.setdefault(fault.route, deque()).append(fault)


def _describe(exc: BaseException, cls: type[Any] | None) -> str:
    if isinstance(exc, ActorError):
        return exc.message
    if isinstance(exc, TypeError) and str(exc).startswith("expected "):
        return str(exc)
    return format_exception(exc, cls)


def _exactly(*kinds: type) -> Any:
    """A structure hook taking a TOML value of one of ``kinds`` as it is: nothing is
    coerced (``model = 3`` is not ``"3"``, ``status = 4.5`` not ``4``)."""

    def hook(value: Any, target: Any) -> Any:
        if isinstance(value, bool) is not (bool in kinds) or not isinstance(value, kinds):
            raise TypeError(f"expected {target.__name__}, got {type(value).__name__}")
        return target(value)

    return hook


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    for target, kinds in ((str, (str,)), (int, (int,)), (float, (int, float)), (bool, (bool,))):
        converter.register_structure_hook(target, _exactly(*kinds))
    return converter


def load_script(text: str) -> FaultScript:
    """A :class:`FaultScript` from TOML (``seed``, ``[probabilities]``, ``[[faults]]``).

    Raises ``config_invalid`` naming every offending field (``$.faults[0].kind``; a value
    the server could not play, in words: ``Fault.seconds must be a finite number >= 0,
    got -1.0 @ $.faults[0]``).
    """
    try:
        return _converter().structure(tomllib.loads(text), FaultScript)
    except (cattrs.BaseValidationError, tomllib.TOMLDecodeError, ActorError) as exc:
        if isinstance(exc, cattrs.BaseValidationError):
            problems = cattrs.transform_error(exc, format_exception=_describe)
        elif isinstance(exc, ActorError):  # a FaultScript field, checked when it is built
            problems = [f"{exc.message} @ $"]
        else:
            problems = [str(exc)]
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "invalid fault script: " + "; ".join(problems)
        ) from exc
