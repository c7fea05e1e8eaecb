"""Fault scripts: what the chaos server does wrong, and when.

A :class:`FaultScript` holds one queue of :class:`Fault` per route (``openai``,
``anthropic``, ``*`` for any); a fault with ``times=n`` is queued ``n`` times. The server
asks :meth:`FaultScript.next` once per routed request. :func:`load_script` reads a script from
TOML; the fault kinds and what a client sees for each are tabled in
:mod:`actors.testing.chaos`.
"""

from __future__ import annotations

import random
import tomllib
from collections import deque
from typing import Literal

import attrs
import cattrs

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

STREAM_ONLY = frozenset({"cut_stream", "stream_error", "slow_stream"})


@attrs.define(kw_only=True)
class Fault:
    """One thing to do wrong, to the next ``times`` requests on ``route`` that it fits.

    What each ``kind`` does, and which fields it reads, is tabled in
    :mod:`actors.testing.chaos`; fields a kind does not read are ignored.
    """

    kind: FaultKind
    route: Route = "*"
    status: int = 500
    headers: dict[str, str] = attrs.Factory(dict)
    body: str | None = None
    seconds: float = 0.0
    after: int = 2
    clean: bool = True
    times: int = 1


@attrs.define(kw_only=True)
class FaultScript:
    """The faults a server will play: queued per route, consumed in order.

    A request with no queued fault that fits may still get one by chance: each kind in
    ``probabilities`` (in name order, one draw each from a generator seeded with
    ``seed``) yields a fault of that kind, with status 503 for ``status`` and 502
    otherwise. Use :meth:`push` to queue more while the server runs.
    """

    faults: list[Fault] = attrs.Factory(list)
    probabilities: dict[FaultKind, float] = attrs.Factory(dict)
    seed: int = 0
    _queues: dict[str, deque[Fault]] = attrs.field(init=False, factory=dict)
    _random: random.Random = attrs.field(init=False, factory=random.Random)

    def __attrs_post_init__(self) -> None:
        self._random.seed(self.seed)
        self.push(*self.faults)

    def next(self, route: str, *, stream: bool = False) -> Fault | None:
        """The next fault for a request on ``route``: its own queue first, then ``*``,
        then chance. Stream-only faults (``cut_stream``, ``stream_error``,
        ``slow_stream``) wait in the queue for the next streaming request."""
        for key in (route, "*"):
            queue = self._queues.get(key)
            if not queue:
                continue
            for fault in queue:
                if stream or fault.kind not in STREAM_ONLY:
                    queue.remove(fault)
                    return fault
        for kind, probability in sorted(self.probabilities.items()):
            if self._random.random() < probability:
                return Fault(kind=kind, status=503 if kind == "status" else 502)
        return None

    def push(self, *faults: Fault) -> None:
        """Queue more faults while the server runs."""
        for fault in faults:
            for _ in range(fault.times):
                self._queues.setdefault(fault.route, deque()).append(fault)


def load_script(text: str) -> FaultScript:
    """A :class:`FaultScript` from TOML (``seed``, ``[probabilities]``, ``[[faults]]``).

    Raises ``config_invalid`` naming every offending field (``$.faults[0].kind``).
    """
    try:
        return cattrs.Converter(forbid_extra_keys=True).structure(tomllib.loads(text), FaultScript)
    except (cattrs.BaseValidationError, tomllib.TOMLDecodeError) as exc:
        problems = (
            cattrs.transform_error(exc)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "invalid fault script: " + "; ".join(problems)
        ) from exc
