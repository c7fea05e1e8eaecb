"""The state protocol: the few atomic operations breakers, limiters and budgets need.

Every method takes ``now`` (trio time, supplied by the caller) so backends never read a
clock of their own, and tests stay on virtual time. Each method is a single atomic step:
read, decide, write — what one Redis Lua script does.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

import attrs


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@attrs.frozen
class Transition:
    """A breaker changed state (for the ``breaker.transition`` event)."""

    key: str
    before: BreakerState
    after: BreakerState
    code: str | None
    cooldown: float | None


@attrs.frozen
class BreakerSnapshot:
    """What ``breaker_admit`` decided."""

    admitted: bool
    probe: bool  # the caller holds the single half-open probe lease
    retry_after: float  # when rejected: seconds until the next probe may be tried
    transition: Transition | None = None
    clean: bool = False  # closed with no failures counted: a success changes nothing


@attrs.frozen
class BucketSpec:
    """A token bucket: ``capacity`` tokens, refilled at ``rate`` tokens per second."""

    capacity: float
    rate: float


@attrs.frozen
class Reservation:
    """Whether the tokens were taken, and ``wait`` seconds until they are available."""

    granted: bool
    wait: float


GRANTED_NOW = Reservation(True, 0.0)


class StateBackend(Protocol):
    """Atomic operations on shared resilience state."""

    # --- circuit breaker -------------------------------------------------------------

    async def breaker_admit(self, key: str, *, now: float, lease_ttl: float) -> BreakerSnapshot:
        """Admit a call: always when closed; when open, only once the probe time came
        (moving to half-open); in half-open, only if the one probe lease is free."""
        ...

    async def breaker_success(
        self, key: str, *, now: float, probe: bool, success_threshold: int
    ) -> Transition | None:
        """A call succeeded: reset failures; a probe counts toward closing."""
        ...

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
        """A call failed in a way that counts: maybe open (or re-open) the breaker."""
        ...

    async def breaker_release(self, key: str, *, probe: bool) -> None:
        """A call ended without a verdict (cancelled, or an error that does not count):
        free the probe lease it held; nothing else changes."""
        ...

    async def breaker_reset(self, key: str) -> Transition | None:
        """Operator reset: closed, counters cleared (also ends a permanent open)."""
        ...

    async def breaker_state(self, key: str, *, now: float) -> BreakerState:
        """The breaker's state as a reader sees it at ``now`` (an open breaker whose probe
        time came reads half-open); changes nothing."""
        ...

    # --- token buckets ---------------------------------------------------------------

    async def reserve(
        self,
        amounts: Mapping[str, float],
        specs: Mapping[str, BucketSpec],
        *,
        now: float,
        max_wait: float | None,
    ) -> Reservation:
        """Take ``amounts`` from several buckets at once, FIFO: a reservation may drive
        a bucket negative and waits until it refills. If the wait would exceed
        ``max_wait``, nothing is taken and ``granted`` is False."""
        ...

    async def refund(
        self, amounts: Mapping[str, float], specs: Mapping[str, BucketSpec], *, now: float
    ) -> None:
        """Give tokens back (a negative amount charges more), capped at capacity."""
        ...

    # --- budgets ---------------------------------------------------------------------

    async def add_usage(
        self, run_id: str, *, tokens: int, cost: float, turns: int
    ) -> tuple[int, float, int]:
        """Add to a run's totals; returns the new (tokens, cost, turns)."""
        ...
