"""In-process state: the default backend (one daemon, no shared state)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

import attrs

from supervisors.state.base import (
    GRANTED_NOW,
    BreakerSnapshot,
    BreakerState,
    BucketSpec,
    Reservation,
    StateBackend,
    Transition,
)

# The states as module constants: an enum member read through its class costs a
# metaclass lookup (about 70 ns on CPython 3.11), and the hot-path checks read them.
_CLOSED: Final = BreakerState.CLOSED
_OPEN: Final = BreakerState.OPEN
_HALF_OPEN: Final = BreakerState.HALF_OPEN


@attrs.define
class _Breaker:
    state: BreakerState = _CLOSED
    failures: int = 0
    successes: int = 0
    probe_at: float = 0.0  # first moment a probe may be admitted
    lease_until: float = -math.inf  # the probe lease (half-open) expires then
    code: str | None = None
    cooldown: float | None = None


@attrs.define
class Bucket:
    level: float
    updated: float
    capacity: float
    rate: float

    def refill(self, now: float) -> None:
        if now > self.updated:
            level = self.level + (now - self.updated) * self.rate
            self.level = level if level < self.capacity else self.capacity
            self.updated = now


class MemoryState(StateBackend):
    """:class:`~supervisors.state.base.StateBackend` in process memory.

    The methods do not await anything: each is atomic because trio runs one task at a
    time. They are ``async`` so every backend has one interface. For the hot path the
    breaker reads :meth:`breaker_clean` and the limiter holds :meth:`bucket` objects
    directly, so an uncontended call creates no coroutine for them.
    """

    def __init__(self) -> None:
        # Only breakers that are not closed-and-clean have an entry: an empty dict means
        # every breaker admits (read directly by the breaker's fast path).
        self.breakers: dict[str, _Breaker] = {}
        # Bumped whenever a breaker may admit sooner than breaker_blocked said (a success,
        # a freed probe lease, a reset, a reopening — a failed probe's new probe time
        # may come before the lease it ends): what a caller remembered of it is stale.
        self.generation = 0
        self._buckets: dict[str, Bucket] = {}
        self._usage: dict[str, tuple[int, float, int]] = {}

    # --- circuit breaker -------------------------------------------------------------

    def _breaker(self, key: str) -> _Breaker:
        breaker = self.breakers.get(key)
        if breaker is None:
            breaker = self.breakers[key] = _Breaker()
        return breaker

    def breaker_clean(self, key: str) -> bool:
        """Closed with no failure counted (no side effects): the hot path's check."""
        breaker = self.breakers.get(key)
        return breaker is None or (breaker.state is _CLOSED and breaker.failures == 0)

    def breaker_blocked(self, key: str, now: float) -> float | None:
        """Seconds until ``breaker_admit`` could admit a call — when it would refuse one
        now (open before its probe time; half-open with the probe lease held; ``inf``
        when open for good) — else ``None``. No side effects: the hot path's skip."""
        breaker = self.breakers.get(key)
        if breaker is None or breaker.state is _CLOSED:
            return None
        if breaker.state is _OPEN:
            return breaker.probe_at - now if now < breaker.probe_at else None
        return breaker.lease_until - now if now < breaker.lease_until else None

    def breaker_permanent(self, key: str) -> bool:
        """Open for good (until a reset). No side effects."""
        breaker = self.breakers.get(key)
        return breaker is not None and breaker.state is _OPEN and breaker.probe_at == math.inf

    async def breaker_admit(self, key: str, *, now: float, lease_ttl: float) -> BreakerSnapshot:
        breaker = self.breakers.get(key)
        if breaker is None:
            return _ADMITTED_CLEAN
        if breaker.state is _CLOSED:
            return _ADMITTED if breaker.failures else _ADMITTED_CLEAN
        transition = None
        if breaker.state is _OPEN:
            if now < breaker.probe_at:
                return BreakerSnapshot(False, False, breaker.probe_at - now)
            breaker.state = _HALF_OPEN
            breaker.successes = 0
            transition = Transition(key, _OPEN, _HALF_OPEN, breaker.code, breaker.cooldown)
        if now < breaker.lease_until:  # half-open, a probe is in flight
            return BreakerSnapshot(False, False, breaker.lease_until - now, transition)
        breaker.lease_until = now + lease_ttl
        return BreakerSnapshot(True, True, 0.0, transition)

    async def breaker_success(
        self, key: str, *, now: float, probe: bool, success_threshold: int
    ) -> Transition | None:
        breaker = self.breakers.get(key)
        if breaker is None:
            return None
        self.generation += 1
        if breaker.state is _CLOSED:
            del self.breakers[key]  # clean again
            return None
        if not probe or breaker.state is not _HALF_OPEN:
            return None  # a straggler from before the breaker opened: no verdict
        breaker.successes += 1
        breaker.lease_until = -math.inf
        if breaker.successes < success_threshold:
            return None
        before = breaker.state
        del self.breakers[key]  # closed and clean
        return Transition(key, before, _CLOSED, None, None)

    async def breaker_failure(
        self,
        key: str,
        *,
        now: float,
        probe: bool,
        code: str,
        threshold: int,
        cooldown: float,
        probe_after: float,
        permanent: bool,
    ) -> Transition | None:
        breaker = self._breaker(key)
        before = breaker.state
        if before is _OPEN and not permanent:
            return None  # already open: a straggler does not extend the cooldown
        if before is _HALF_OPEN and not probe and not permanent:
            return None
        if before is _CLOSED and not permanent:
            breaker.failures += 1
            if breaker.failures < threshold:
                return None
        # (Re)opened: a half-open breaker whose probe failed may probe again before the
        # lease it ends, so what a caller remembered of it is stale.
        self.generation += 1
        breaker.state = _OPEN
        breaker.failures = 0
        breaker.successes = 0
        breaker.lease_until = -math.inf
        breaker.code = code
        if permanent:
            breaker.probe_at = math.inf
            breaker.cooldown = math.inf
        else:
            breaker.probe_at = now + probe_after
            breaker.cooldown = cooldown
        return Transition(key, before, _OPEN, code, breaker.cooldown)

    async def breaker_release(self, key: str, *, probe: bool) -> None:
        breaker = self.breakers.get(key)
        if probe and breaker is not None and breaker.state is _HALF_OPEN:
            breaker.lease_until = -math.inf
            self.generation += 1

    async def breaker_reset(self, key: str) -> Transition | None:
        breaker = self.breakers.pop(key, None)
        self.generation += 1
        if breaker is None or breaker.state is _CLOSED:
            return None
        return Transition(key, breaker.state, _CLOSED, None, None)

    async def breaker_state(self, key: str, *, now: float) -> BreakerState:
        breaker = self.breakers.get(key)
        if breaker is None:
            return _CLOSED
        if breaker.state is _OPEN and now >= breaker.probe_at:  # never when permanent (inf)
            return _HALF_OPEN
        return breaker.state

    # --- token buckets ---------------------------------------------------------------

    def bucket(self, key: str, spec: BucketSpec, now: float) -> Bucket:
        """The bucket object itself, refilled to ``now`` (the limiter's fast path holds it)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(spec.capacity, now, spec.capacity, spec.rate)
        else:
            bucket.refill(now)
        return bucket

    async def reserve(
        self,
        amounts: Mapping[str, float],
        specs: Mapping[str, BucketSpec],
        *,
        now: float,
        max_wait: float | None,
    ) -> Reservation:
        wait = 0.0
        taken = []
        for key, amount in amounts.items():
            bucket = self.bucket(key, specs[key], now)
            taken.append((bucket, amount))
            short = amount - bucket.level
            if short > 0:
                need = short / bucket.rate if bucket.rate > 0 else math.inf
                wait = need if need > wait else wait
        if max_wait is not None and wait > max_wait:
            return Reservation(False, wait)
        for bucket, amount in taken:
            bucket.level -= amount
        return GRANTED_NOW if wait == 0.0 else Reservation(True, wait)

    async def refund(
        self, amounts: Mapping[str, float], specs: Mapping[str, BucketSpec], *, now: float
    ) -> None:
        for key, amount in amounts.items():
            bucket = self.bucket(key, specs[key], now)
            level = bucket.level + amount
            bucket.level = level if level < bucket.capacity else bucket.capacity

    # --- budgets ---------------------------------------------------------------------

    async def add_usage(
        self, run_id: str, *, tokens: int, cost: float, turns: int
    ) -> tuple[int, float, int]:
        old_tokens, old_cost, old_turns = self._usage.get(run_id, (0, 0.0, 0))
        totals = (old_tokens + tokens, old_cost + cost, old_turns + turns)
        self._usage[run_id] = totals
        return totals


_ADMITTED = BreakerSnapshot(True, False, 0.0)
_ADMITTED_CLEAN = BreakerSnapshot(True, False, 0.0, clean=True)

__all__ = ["MemoryState"]
