"""The Redis state where its survivors of ``make mutate`` were: usage reported under a
cancel already delivered (still counted: no cancel point before the round trip, shared
or degraded), the totals a replica goes on from after a merge cut short (what Redis
answered plus what is still pending), and a breaker hash without a cooldown. The real
redis-server, behind the switch of tests/test_state_mutants_degraded.py where an outage
is needed, on a frozen :class:`trio.testing.MockClock`."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from supervisors.state import BreakerSnapshot, RedisState, Transition
from supervisors.state.base import BreakerState
from tests.redis_server import RedisServer
from tests.test_state_mutants_degraded import jump, quiet, switched

OPEN, HALF_OPEN = BreakerState.OPEN, BreakerState.HALF_OPEN


async def test_usage_reported_under_a_cancel_is_still_counted(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis) as (state, switch):
        other = RedisState(switch.inner, replicas=2)
        totals = None
        with trio.CancelScope() as scope:
            scope.cancel()
            totals = await state.add_usage("r", tokens=5, cost=0.5, turns=1)  # shared
        assert totals == (5, 0.5, 1)
        assert await other.add_usage("r", tokens=0, cost=0.0, turns=0) == (5, 0.5, 1)
        switch.down = True
        assert await state.add_usage("r", tokens=1, cost=0.0, turns=0) == (6, 0.5, 1)
        assert state.degraded
        totals = None
        with trio.CancelScope() as scope:
            scope.cancel()
            totals = await state.add_usage("r", tokens=2, cost=0.25, turns=1)  # degraded
        assert totals == (8, 0.75, 2)


async def test_after_a_merge_cut_short_a_run_goes_on_from_redis_plus_its_pending_usage(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis) as (state, switch):
        await state.add_usage("warm", tokens=0, cost=0.0, turns=0)  # the script loaded
        switch.down = True
        assert await state.add_usage("r", tokens=2, cost=0.0, turns=1) == (2, 0.0, 1)
        assert await state.add_usage("r", tokens=3, cost=0.5, turns=1) == (5, 0.5, 2)
        switch.down, switch.scripts_left = False, 1  # the first increment only, then down
        await jump(mock_clock, 1.0, switch)
        await quiet(switch)
        assert state.degraded
        # Redis answered (2, 0.0, 1) for the first; the second is still pending here.
        assert await state.add_usage("r", tokens=1, cost=0.0, turns=0) == (6, 0.5, 2)
        other = RedisState(switch.inner, replicas=2)
        assert await other.add_usage("r", tokens=0, cost=0.0, turns=0) == (2, 0.0, 1)


async def test_a_breaker_hash_without_a_cooldown_half_opens_with_none(
    redis: RedisServer,
) -> None:
    """A hash another writer left without ``cd`` (an older replica, an operator's
    ``HSET``): its transition has no cooldown, not an error."""
    async with switched(redis) as (state, switch):
        await switch.inner.hset("ra:{a}:breaker", {"st": "open", "pa": "0", "code": "timeout"})
        snapshot = await state.breaker_admit("a", now=0.0, lease_ttl=5.0)
        assert snapshot == BreakerSnapshot(
            True, True, 0.0, Transition("a", OPEN, HALF_OPEN, "timeout", None)
        )
