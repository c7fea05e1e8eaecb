"""MemoryState, operation by operation: every snapshot, transition and wait exact, the
side-effect-free reads (``breaker_blocked``, ``breaker_permanent``), the generation a
pool's fast path watches, and the token buckets' refill, reservation and refund.

MemoryState never reads a clock: each test passes ``now`` itself, so every time below
is exact virtual time without a clock at all.
"""

from __future__ import annotations

import math
from typing import Any

from supervisors.state import BreakerSnapshot, BucketSpec, MemoryState, Reservation, Transition
from supervisors.state.base import GRANTED_NOW, BreakerState

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


async def fail(
    state: MemoryState,
    now: float,
    *,
    key: str = "a",
    probe: bool = False,
    code: str = "unavailable",
    threshold: int = 1,
    cooldown: float = 60.0,
    probe_after: float = 10.0,
    permanent: bool = False,
) -> Transition | None:
    return await state.breaker_failure(
        key,
        now=now,
        probe=probe,
        code=code,
        threshold=threshold,
        cooldown=cooldown,
        probe_after=probe_after,
        permanent=permanent,
    )


async def succeed(
    state: MemoryState, now: float, *, key: str = "a", probe: bool = False, threshold: int = 1
) -> Transition | None:
    return await state.breaker_success(key, now=now, probe=probe, success_threshold=threshold)


async def opened_then_probing(state: MemoryState) -> None:
    """``a`` opened at 0 (probe at 10), its probe admitted at 10 with a 5 s lease."""
    assert await fail(state, 0.0) == Transition("a", CLOSED, OPEN, "unavailable", 60.0)
    snapshot = await state.breaker_admit("a", now=10.0, lease_ttl=5.0)
    assert snapshot == BreakerSnapshot(
        True, True, 0.0, Transition("a", OPEN, HALF_OPEN, "unavailable", 60.0)
    )


# --- failures --------------------------------------------------------------------------


async def test_failures_add_up_to_the_threshold_then_open() -> None:
    state = MemoryState()
    assert await fail(state, 0.0, threshold=3, code="timeout", cooldown=30.0) is None
    assert await fail(state, 1.0, threshold=3, code="timeout", cooldown=30.0) is None
    assert state.generation == 0  # nothing may admit sooner: a counted failure
    assert await state.breaker_admit("a", now=1.5, lease_ttl=5.0) == BreakerSnapshot(
        True, False, 0.0
    )
    assert not state.breaker_clean("a")
    assert state.breaker_blocked("a", 1.5) is None  # closed: admits
    opened = await fail(state, 2.0, threshold=3, code="timeout", cooldown=30.0, probe_after=20.0)
    assert opened == Transition("a", CLOSED, OPEN, "timeout", 30.0)
    assert state.generation == 1
    assert await state.breaker_state("a", now=2.0) is OPEN
    assert state.breaker_blocked("a", 2.0) == 20.0  # the probe time: now + probe_after
    assert state.breaker_blocked("a", 7.0) == 15.0
    assert await state.breaker_admit("a", now=7.0, lease_ttl=5.0) == BreakerSnapshot(
        False, False, 15.0
    )


async def test_a_straggler_failure_does_not_extend_an_open_breaker() -> None:
    state = MemoryState()
    await fail(state, 0.0, probe_after=20.0)
    assert await fail(state, 5.0, probe_after=20.0) is None
    assert await fail(state, 5.0, probe=True, probe_after=20.0) is None
    assert state.generation == 1
    assert state.breaker_blocked("a", 5.0) == 15.0  # still from 0, not from 5
    assert not state.breaker_permanent("a")
    # A permanent failure does re-open it, for good.
    assert await fail(state, 6.0, code="auth", permanent=True) == Transition(
        "a", OPEN, OPEN, "auth", math.inf
    )
    assert state.generation == 2
    assert state.breaker_permanent("a")
    assert state.breaker_blocked("a", 1e9) == math.inf
    assert await state.breaker_admit("a", now=1e9, lease_ttl=5.0) == BreakerSnapshot(
        False, False, math.inf
    )


async def test_only_the_probe_or_a_permanent_failure_reopens_a_half_open_breaker() -> None:
    state = MemoryState()
    await opened_then_probing(state)
    before = state.generation
    assert await fail(state, 11.0) is None  # not the probe: no verdict
    assert await state.breaker_state("a", now=11.0) is HALF_OPEN
    assert state.generation == before
    assert state.breaker_blocked("a", 11.0) == 4.0  # the lease still held
    reopened = await fail(state, 12.0, probe=True, code="timeout", cooldown=30.0)
    assert reopened == Transition("a", HALF_OPEN, OPEN, "timeout", 30.0)
    assert state.generation == before + 1
    assert state.breaker_blocked("a", 12.0) == 10.0  # a new probe time, the lease gone
    assert await state.breaker_admit("a", now=22.0, lease_ttl=5.0) == BreakerSnapshot(
        True, True, 0.0, Transition("a", OPEN, HALF_OPEN, "timeout", 30.0)
    )
    permanent = await fail(state, 23.0, code="payment", permanent=True)
    assert permanent == Transition("a", HALF_OPEN, OPEN, "payment", math.inf)
    assert state.breaker_permanent("a")


# --- admissions and successes -----------------------------------------------------------


async def test_half_open_admits_one_probe_per_lease() -> None:
    state = MemoryState()
    await opened_then_probing(state)
    assert await state.breaker_admit("a", now=12.0, lease_ttl=5.0) == BreakerSnapshot(
        False, False, 3.0
    )
    assert state.breaker_blocked("a", 12.0) == 3.0
    assert state.breaker_blocked("a", 15.0) is None  # the lease ended
    assert await state.breaker_admit("a", now=15.0, lease_ttl=2.0) == BreakerSnapshot(
        True, True, 0.0
    )
    assert state.breaker_blocked("a", 16.0) == 1.0


async def test_probe_successes_count_up_to_the_success_threshold() -> None:
    state = MemoryState()
    await opened_then_probing(state)
    before = state.generation
    assert await succeed(state, 11.0, probe=True, threshold=2) is None
    assert state.generation == before + 1
    assert await state.breaker_state("a", now=11.0) is HALF_OPEN
    assert state.breaker_blocked("a", 11.0) is None  # the lease was freed
    again = await state.breaker_admit("a", now=11.5, lease_ttl=5.0)
    assert again == BreakerSnapshot(True, True, 0.0)
    closed = await succeed(state, 12.0, probe=True, threshold=2)
    assert closed == Transition("a", HALF_OPEN, CLOSED, None, None)
    assert state.generation == before + 2
    assert "a" not in state.breakers and state.breaker_clean("a")
    assert await state.breaker_admit("a", now=12.0, lease_ttl=5.0) == BreakerSnapshot(
        True, False, 0.0, clean=True
    )


async def test_a_probe_count_starts_afresh_at_each_half_open() -> None:
    state = MemoryState()
    await opened_then_probing(state)
    assert await succeed(state, 11.0, probe=True, threshold=3) is None
    await state.breaker_admit("a", now=11.0, lease_ttl=5.0)
    assert await fail(state, 12.0, probe=True) is not None  # back to open: count gone
    await state.breaker_admit("a", now=22.0, lease_ttl=5.0)
    assert await succeed(state, 22.0, probe=True, threshold=2) is None
    await state.breaker_admit("a", now=22.0, lease_ttl=5.0)
    assert await succeed(state, 23.0, probe=True, threshold=2) == Transition(
        "a", HALF_OPEN, CLOSED, None, None
    )


async def test_a_success_that_is_not_a_live_probe_gives_no_verdict() -> None:
    state = MemoryState()
    await opened_then_probing(state)
    before = state.generation
    assert await succeed(state, 11.0, probe=False) is None
    assert await state.breaker_state("a", now=11.0) is HALF_OPEN
    assert state.breaker_blocked("a", 11.0) == 4.0  # the probe's lease still held
    assert state.generation == before + 1
    await fail(state, 12.0, probe=True)  # re-opened: probe at 22
    # The probe of before the re-opening reports a success: a straggler.
    assert await succeed(state, 13.0, probe=True) is None
    assert await state.breaker_state("a", now=13.0) is OPEN
    assert state.breaker_blocked("a", 13.0) == 9.0
    assert state.generation == before + 3


async def test_a_success_on_a_counted_breaker_clears_it() -> None:
    state = MemoryState()
    assert await succeed(state, 0.0) is None  # nothing known: nothing changes
    assert state.generation == 0 and state.breakers == {}
    await fail(state, 0.0, threshold=2)
    assert "a" in state.breakers
    assert await succeed(state, 1.0) is None
    assert state.generation == 1 and state.breakers == {}
    await fail(state, 2.0, threshold=2)
    assert await succeed(state, 3.0) is None
    assert state.generation == 2 and state.breakers == {}


# --- releases and resets --------------------------------------------------------------


async def test_a_release_frees_only_a_probe_lease() -> None:
    state = MemoryState()
    await state.breaker_release("a", probe=True)  # nothing known
    assert state.generation == 0
    await opened_then_probing(state)
    before = state.generation
    await state.breaker_release("a", probe=False)
    assert state.generation == before
    assert state.breaker_blocked("a", 11.0) == 4.0
    await state.breaker_release("a", probe=True)
    assert state.generation == before + 1
    assert state.breaker_blocked("a", 11.0) is None
    assert await state.breaker_state("a", now=11.0) is HALF_OPEN
    await state.breaker_release("a", probe=True)
    assert state.generation == before + 2


async def test_a_release_on_an_open_breaker_changes_nothing() -> None:
    state = MemoryState()
    await fail(state, 0.0)
    await state.breaker_release("a", probe=True)
    assert state.generation == 1
    assert state.breaker_blocked("a", 1.0) == 9.0


async def test_a_reset_closes_and_always_bumps_the_generation() -> None:
    state = MemoryState()
    assert await state.breaker_reset("a") is None
    assert state.generation == 1
    await fail(state, 0.0, threshold=2)
    assert await state.breaker_reset("a") is None  # closed (counted): no transition
    assert state.generation == 2 and state.breakers == {}
    await fail(state, 0.0, code="auth", permanent=True)
    assert await state.breaker_reset("a") == Transition("a", OPEN, CLOSED, None, None)
    assert state.generation == 4
    assert not state.breaker_permanent("a") and state.breaker_blocked("a", 0.0) is None
    await opened_then_probing(state)
    assert await state.breaker_reset("a") == Transition("a", HALF_OPEN, CLOSED, None, None)
    assert state.generation == 6


# --- the side-effect-free reads ---------------------------------------------------------


async def test_blocked_and_permanent_read_each_state() -> None:
    state = MemoryState()
    assert state.breaker_blocked("a", 0.0) is None
    assert state.breaker_permanent("a") is False
    await fail(state, 0.0, threshold=2)  # closed, one failure counted
    assert state.breaker_blocked("a", 0.0) is None
    assert state.breaker_permanent("a") is False
    await fail(state, 1.0, threshold=2, probe_after=4.0)  # open: probe at 5
    assert state.breaker_blocked("a", 2.0) == 3.0
    assert state.breaker_blocked("a", 5.0) is None  # the probe time came
    assert state.breaker_blocked("a", 6.0) is None
    assert state.breaker_permanent("a") is False
    assert await state.breaker_state("a", now=4.0) is OPEN  # reads change nothing
    await state.breaker_admit("a", now=6.0, lease_ttl=7.0)  # half-open, lease to 13
    assert state.breaker_blocked("a", 9.0) == 4.0
    assert state.breaker_blocked("a", 13.0) is None
    assert state.breaker_permanent("a") is False
    await fail(state, 9.0, code="auth", permanent=True)
    assert state.breaker_blocked("a", 9.0) == math.inf
    assert state.breaker_permanent("a") is True
    assert state.breaker_permanent("b") is False
    assert state.breaker_blocked("b", 9.0) is None


# --- token buckets ------------------------------------------------------------------------


def level(state: MemoryState, key: str, spec: BucketSpec, now: float) -> float:
    return state.bucket(key, spec, now).level


async def test_a_bucket_refills_at_its_rate_up_to_its_capacity() -> None:
    state = MemoryState()
    spec = BucketSpec(capacity=10.0, rate=2.0)
    assert await state.reserve({"k": 10.0}, {"k": spec}, now=0.0, max_wait=None) is GRANTED_NOW
    assert level(state, "k", spec, 0.0) == 0.0
    assert level(state, "k", spec, 3.0) == 6.0
    assert level(state, "k", spec, 100.0) == 10.0
    bucket = state.bucket("k", spec, 100.0)
    assert (bucket.level, bucket.updated, bucket.capacity, bucket.rate) == (10.0, 100.0, 10.0, 2.0)
    assert level(state, "k", spec, 50.0) == 10.0  # time never runs backwards here


async def test_an_infinite_rate_refills_once_time_passes_not_at_the_same_instant() -> None:
    state = MemoryState()
    spec = BucketSpec(capacity=10.0, rate=math.inf)
    assert await state.reserve({"k": 15.0}, {"k": spec}, now=0.0, max_wait=0.0) is GRANTED_NOW
    assert level(state, "k", spec, 0.0) == -5.0
    assert level(state, "k", spec, 0.5) == 10.0


async def test_the_longest_wait_of_several_buckets_is_the_reservations() -> None:
    state = MemoryState()
    specs = {"slow": BucketSpec(10.0, 1.0), "fast": BucketSpec(10.0, 5.0)}
    refused = await state.reserve({"slow": 20.0, "fast": 20.0}, specs, now=0.0, max_wait=9.5)
    assert refused == Reservation(False, 10.0)
    assert level(state, "slow", specs["slow"], 0.0) == 10.0  # nothing taken
    assert level(state, "fast", specs["fast"], 0.0) == 10.0
    granted = await state.reserve({"slow": 20.0, "fast": 20.0}, specs, now=0.0, max_wait=10.0)
    assert granted == Reservation(True, 10.0)
    assert level(state, "slow", specs["slow"], 0.0) == -10.0
    assert level(state, "fast", specs["fast"], 0.0) == -10.0
    # At 2 s: slow -8 (short by 9: 9 s), fast 0 (short by 5: 1 s): the longer wait.
    later = await state.reserve({"fast": 5.0, "slow": 1.0}, specs, now=2.0, max_wait=None)
    assert later == Reservation(True, 9.0)


async def test_a_bucket_that_never_refills() -> None:
    state = MemoryState()
    spec = {"k": BucketSpec(capacity=5.0, rate=0.0)}
    assert await state.reserve({"k": 5.0}, spec, now=0.0, max_wait=0.0) is GRANTED_NOW
    assert await state.reserve({"k": 1.0}, spec, now=100.0, max_wait=60.0) == Reservation(
        False, math.inf
    )
    assert level(state, "k", spec["k"], 100.0) == 0.0
    await state.refund({"k": 2.0}, spec, now=100.0)
    assert await state.reserve({"k": 2.0}, spec, now=100.0, max_wait=0.0) is GRANTED_NOW


async def test_a_refund_gives_back_up_to_capacity_and_a_negative_one_charges() -> None:
    state = MemoryState()
    specs: dict[str, Any] = {"k": BucketSpec(10.0, 1.0), "new": BucketSpec(8.0, 1.0)}
    await state.reserve({"k": 4.0}, specs, now=0.0, max_wait=None)
    await state.refund({"k": 2.0}, specs, now=0.0)
    assert level(state, "k", specs["k"], 0.0) == 8.0
    await state.refund({"k": 100.0}, specs, now=0.0)
    assert level(state, "k", specs["k"], 0.0) == 10.0  # capped
    await state.refund({"new": -3.0}, specs, now=1.0)  # a bucket never seen: full, then
    assert level(state, "new", specs["new"], 1.0) == 5.0
    await state.refund({"k": -12.0}, specs, now=1.0)
    assert await state.reserve({"k": 1.0}, specs, now=1.0, max_wait=None) == Reservation(True, 3.0)
