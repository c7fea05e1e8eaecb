"""Budget usage while the Redis state is degraded, exact: what is counted locally is
added to Redis on recovery, once per increment (a lost reply's increment is sent again
with its id), a merge cut short keeps what it did not add for the next try, and the
totals a replica goes on from are the latest it saw, for its most recently used runs.
The real redis-server behind the switch of tests/test_state_mutants_degraded.py, on a
frozen :class:`trio.testing.MockClock`."""

from __future__ import annotations

import pytest
from trio.testing import MockClock

from actors.events import StateRecovered
from actors.testing import capture_events
from supervisors.state import RedisState
from tests.redis_server import RedisServer
from tests.test_state_mutants_degraded import jump, quiet, settle, switched


async def test_usage_counted_meanwhile_is_merged_once_and_totals_go_on_from_redis(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis) as (state, switch):
        other = RedisState(switch.inner, replicas=2)  # another replica, never degraded
        switch.lose_replies = True  # applied on the server, the reply lost
        assert await state.add_usage("r1", tokens=1, cost=0.5, turns=1) == (1, 0.5, 1)
        switch.lose_replies, switch.down = False, True
        assert await state.add_usage("r1", tokens=2, cost=0.25, turns=0) == (3, 0.75, 1)
        assert await state.add_usage("r2", tokens=7, cost=0.0, turns=0) == (7, 0.0, 0)
        assert await other.add_usage("r1", tokens=100, cost=1.0, turns=10) == (101, 1.5, 11)
        switch.down = False
        with capture_events(StateRecovered) as seen:
            await jump(mock_clock, 1.0, switch)
            await settle(state, degraded=False)
            await quiet(switch)  # shared again at once; recovered once the merge is done
        assert [e.runs_merged for e in seen] == [2]
        # The lost reply's increment was sent again with its id: applied once.
        assert await other.add_usage("r1", tokens=0, cost=0.0, turns=0) == (103, 1.75, 11)
        assert await other.add_usage("r2", tokens=0, cost=0.0, turns=0) == (7, 0.0, 0)
        switch.down = True  # a second outage goes on from the totals merged
        assert await state.add_usage("r1", tokens=1, cost=0.0, turns=0) == (104, 1.75, 11)
        switch.down = False
        await jump(mock_clock, 1.0, switch)
        await settle(state, degraded=False)
        await quiet(switch)
        assert await other.add_usage("r1", tokens=0, cost=0.0, turns=0) == (104, 1.75, 11)


async def test_the_runs_remembered_are_the_most_recently_used(
    redis: RedisServer, mock_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import supervisors.state.redis_usage as backend

    monkeypatch.setattr(backend, "_USAGE_KEPT", 2)  # a bounded memory, made tiny
    async with switched(redis) as (state, switch):
        await state.add_usage("r1", tokens=1, cost=0.0, turns=0)
        await state.add_usage("r2", tokens=2, cost=0.0, turns=0)
        await state.add_usage("r1", tokens=10, cost=0.0, turns=0)  # r2 is the oldest now
        await state.add_usage("r3", tokens=3, cost=0.0, turns=0)
        switch.down = True
        assert await state.add_usage("r1", tokens=0, cost=0.0, turns=0) == (11, 0.0, 0)
        assert await state.add_usage("r3", tokens=0, cost=0.0, turns=0) == (3, 0.0, 0)
        assert await state.add_usage("r2", tokens=0, cost=0.0, turns=0) == (0, 0.0, 0)


async def test_a_merge_cut_short_keeps_what_was_not_added_for_the_next_try(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis) as (state, switch):
        switch.down = True
        assert await state.add_usage("r1", tokens=1, cost=0.5, turns=1) == (1, 0.5, 1)
        assert await state.add_usage("r2", tokens=2, cost=0.0, turns=1) == (2, 0.0, 1)
        assert await state.add_usage("r2", tokens=3, cost=0.0, turns=1) == (5, 0.0, 2)
        switch.down, switch.scripts_left = False, 2  # r1's and r2's first, then no more
        with capture_events(StateRecovered) as seen:
            await jump(mock_clock, 1.0, switch)
            await quiet(switch)
            assert state.degraded and seen == []
            switch.scripts_left = None
            await jump(mock_clock, 1.0, switch)
            await settle(state, degraded=False)
            await quiet(switch)  # shared again at once; recovered once the merge is done
        assert [(e.degraded_for, e.runs_merged) for e in seen] == [(2.0, 1)]  # r2 left
        other = RedisState(switch.inner, replicas=2)
        assert await other.add_usage("r1", tokens=0, cost=0.0, turns=0) == (1, 0.5, 1)
        assert await other.add_usage("r2", tokens=0, cost=0.0, turns=0) == (5, 0.0, 2)
