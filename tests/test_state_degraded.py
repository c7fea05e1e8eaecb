"""Degraded mode of the Redis state: Redis killed or hung mid-test → requests go on with
local state at 1/replicas of each limit (``state.degraded``); Redis back →
``state.recovered`` and shared state again. Real redis-server, real time."""

from __future__ import annotations

import pytest
import trio

from actors import ActorError, Code
from actors.events import StateDegraded, StateRecovered, StateUsageUnmerged
from actors.testing import capture_events
from supervisors import Breaker, BreakerConfig, RateLimit, RateLimiter
from supervisors.state import open_redis_state
from tests.redis_server import RedisServer

LIMITS = {"alpha": RateLimit(requests_per_minute=100)}
# Seconds a round trip may take before it counts as failed. Where Redis is killed (the
# connection is refused at once) it is long, so that a loaded machine never degrades a
# replica by a slow answer; where Redis is paused (it answers nothing) it is what the
# test waits for, and an upper bound adds LOADED to it.
SLOW_OK = 2.0
HUNG = 0.5
LOADED = 2.0


def refilled(per_minute: float, seconds: float) -> int:
    """Whole requests a bucket of ``per_minute`` refills in ``seconds``."""
    return int(per_minute / 60 * seconds)


async def admit_all(limiter: RateLimiter) -> int:
    """Permits granted without waiting, until the first refusal."""
    granted = 0
    while True:
        try:
            await limiter.acquire("alpha", deadline=trio.current_time())
        except ActorError as error:
            assert error.code is Code.RATE_LIMITED
            return granted
        granted += 1


async def until(predicate: object, timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():  # type: ignore[operator]
            await trio.sleep(0.01)


async def test_a_killed_redis_degrades_to_a_local_share_and_recovers(redis: RedisServer) -> None:
    options = {"replicas": 2, "timeout": SLOW_OK, "retry_interval": 0.1}
    async with (
        open_redis_state(redis.url, **options) as one,  # type: ignore[arg-type]
        open_redis_state(redis.url, **options) as two,  # type: ignore[arg-type]
    ):
        limiters = [RateLimiter(LIMITS, state=one), RateLimiter(LIMITS, state=two)]
        for n in range(20):
            await limiters[n % 2].acquire("alpha")
        redis.kill()
        with capture_events(StateDegraded, StateRecovered) as seen:
            started = trio.current_time()
            shares = [await admit_all(limiter) for limiter in limiters]
            took = trio.current_time() - started
            assert took < SLOW_OK  # no request waited on Redis
            # Each replica: half of what was left (80 of 100), never the full limit (and
            # what its half of the rate refilled meanwhile, on a loaded machine).
            assert all(40 <= share <= 40 + refilled(50, took) for share in shares), shares
            assert [(type(e).__name__, e.replicas, e.operation) for e in seen] == [  # type: ignore[union-attr]
                ("StateDegraded", 2, "reserve"),
                ("StateDegraded", 2, "reserve"),
            ]
            assert "ConnectionError" in seen[0].error  # type: ignore[union-attr]
            assert one.degraded and two.degraded
            redis.start()
            await until(lambda: not one.degraded and not two.degraded)
        recovered = [e for e in seen if isinstance(e, StateRecovered)]
        assert len(recovered) == 2 and all(e.backend == "redis" for e in recovered)
        assert all(0.0 < e.degraded_for < 5.0 for e in recovered)
        # Shared again: the restarted server (no persistence) holds a full bucket, and the
        # two replicas share it — together they get exactly its 100.
        started = trio.current_time()
        together = await admit_all(limiters[0]) + await admit_all(limiters[1])
        assert 100 <= together <= 100 + refilled(100, trio.current_time() - started)


async def test_a_hung_redis_degrades_after_the_timeout(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=4, timeout=HUNG, retry_interval=0.1) as state:
        limiter = RateLimiter(LIMITS, state=state)
        await limiter.acquire("alpha")
        redis.pause()
        try:
            with capture_events(StateDegraded) as seen:
                started = trio.current_time()
                await limiter.acquire("alpha")  # not failed: the local share admits it
                took = trio.current_time() - started
                assert HUNG <= took < HUNG + LOADED
            assert [(e.operation, e.error) for e in seen] == [("reserve", "timeout")]
            # 99 / 4 = 24.75 left, one taken (and what a quarter of the rate refilled).
            left = await admit_all(limiter)
            assert 23 <= left <= 23 + refilled(25, trio.current_time() - started), left
        finally:
            redis.resume()
        await until(lambda: not state.degraded)


async def test_usage_counted_while_degraded_is_added_on_recovery(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=2, timeout=HUNG, retry_interval=0.1) as state:
        assert await state.add_usage("r1", tokens=10, cost=1.0, turns=1) == (10, 1.0, 1)
        redis.pause()
        try:
            # The totals go on from what was last seen; nothing is lost.
            assert await state.add_usage("r1", tokens=5, cost=0.5, turns=1) == (15, 1.5, 2)
            assert await state.add_usage("r2", tokens=7, cost=0.0, turns=0) == (7, 0.0, 0)
        finally:
            redis.resume()
        with capture_events(StateRecovered) as seen:
            # Shared again at once; state.recovered once the usage is merged.
            await until(lambda: seen)
        assert [e.runs_merged for e in seen] == [2]
        assert await state.add_usage("r1", tokens=0, cost=0.0, turns=0) == (15, 1.5, 2)
        assert await state.add_usage("r2", tokens=1, cost=0.0, turns=0) == (8, 0.0, 0)


async def test_breakers_go_local_while_degraded_and_shared_after(redis: RedisServer) -> None:
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: LOADED})
    async with (
        open_redis_state(redis.url, replicas=2, timeout=HUNG, retry_interval=0.1) as one,
        open_redis_state(redis.url, replicas=2, timeout=HUNG, retry_interval=0.1) as two,
    ):
        first, second = Breaker(config, state=one), Breaker(config, state=two)
        redis.pause()
        try:
            admission = await first.admit("alpha")  # degraded: admitted locally
            await first.record(admission, ActorError.from_code(Code.UNAVAILABLE, "x"))
            opened = trio.current_time()
            with pytest.raises(ActorError, match=r"^\[circuit_open\] "):
                await first.admit("alpha")
            assert trio.current_time() - opened < LOADED  # or it proved nothing
            await trio.sleep(LOADED + 0.05 - (trio.current_time() - opened))
            probe = await first.admit("alpha")  # a local probe lease
            assert probe.probe
        finally:
            redis.resume()
        await until(lambda: not one.degraded)
        await first.record(probe, None)  # the local probe's verdict stays local
        assert await second.state_of("alpha") == "closed"
        assert await first.state_of("alpha") == "closed"


async def test_redis_down_when_opened_starts_degraded_and_recovers(redis: RedisServer) -> None:
    redis.kill()
    async with open_redis_state(
        redis.url, replicas=2, timeout=SLOW_OK, retry_interval=0.1
    ) as state:
        limiter = RateLimiter(LIMITS, state=state)
        with capture_events(StateDegraded) as seen:
            assert await admit_all(limiter) == 50  # never seen: a full share
        assert len(seen) == 1
        redis.start()
        await until(lambda: not state.degraded)
        started = trio.current_time()
        shared = await admit_all(limiter)
        assert 100 <= shared <= 100 + refilled(100, trio.current_time() - started), shared


async def test_a_cancel_during_a_hung_round_trip_takes_effect_after_the_timeout(
    redis: RedisServer,
) -> None:
    async with open_redis_state(redis.url, replicas=2, timeout=HUNG, retry_interval=0.1) as state:
        limiter = RateLimiter(LIMITS, state=state)
        redis.pause()
        try:

            async def caller() -> None:
                await limiter.acquire("alpha")
                await trio.sleep_forever()

            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(caller)
                    await trio.sleep(0.05)
                    started = trio.current_time()
                    scope.cancel()
            assert scope.cancelled_caught
            # The round trip in flight ended at its timeout (HUNG after it began), not
            # when Redis came back.
            assert trio.current_time() - started < HUNG + LOADED
            assert state.degraded
        finally:
            redis.resume()


async def test_only_the_most_recent_runs_totals_are_remembered(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import supervisors.state.redis_usage as backend

    monkeypatch.setattr(backend, "_USAGE_KEPT", 2)  # a bounded memory, made tiny
    async with open_redis_state(redis.url, replicas=2, timeout=HUNG, retry_interval=0.1) as state:
        await state.add_usage("r1", tokens=10, cost=0.0, turns=0)
        await state.add_usage("r2", tokens=5, cost=0.0, turns=0)
        await state.add_usage("r3", tokens=7, cost=0.0, turns=0)
        redis.pause()
        try:
            # r1 was forgotten (least recently used): while degraded it counts from 0;
            # r2 goes on from what was seen.
            assert await state.add_usage("r2", tokens=1, cost=0.0, turns=0) == (6, 0.0, 0)
            assert await state.add_usage("r1", tokens=1, cost=0.0, turns=0) == (1, 0.0, 0)
        finally:
            redis.resume()
        await until(lambda: not state.degraded)
        # Nothing was lost in Redis: both increments were added on recovery.
        assert await state.add_usage("r1", tokens=0, cost=0.0, turns=0) == (11, 0.0, 0)
        assert await state.add_usage("r2", tokens=0, cost=0.0, turns=0) == (6, 0.0, 0)


async def test_usage_added_while_the_merge_runs_is_not_lost(redis: RedisServer) -> None:
    # 300 increments pending for r0 make the merge take 300 round trips; meanwhile usage
    # keeps coming, as fast as it can, for r0 and for runs the merge never saw. Every
    # answer is the run's exact total, and so is Redis's once it is all merged.
    async with open_redis_state(redis.url, replicas=2, timeout=HUNG, retry_interval=0.05) as state:
        redis.pause()
        try:
            for _ in range(300):
                await state.add_usage("r0", tokens=1, cost=0.0, turns=0)
        finally:
            redis.resume()
        expected = {"r0": 300}
        during: list[bool] = []
        with capture_events(StateRecovered) as recovered, trio.fail_after(60):
            while not recovered:
                run_id = f"r{len(during) % 7}"
                expected[run_id] = expected.get(run_id, 0) + 1
                answer = await state.add_usage(run_id, tokens=1, cost=0.0, turns=0)
                assert answer == (expected[run_id], 0.0, 0), (run_id, answer)
                during.append(state.degraded)
        assert True in during and False in during  # added while degraded, and during the merge
        assert [e.runs_merged for e in recovered] == [7]
        for run_id, tokens in expected.items():
            assert await state.add_usage(run_id, tokens=0, cost=0.0, turns=0) == (tokens, 0.0, 0)


@pytest.mark.parametrize("leave", ["normally", "by a cancel around the block"])
async def test_closing_the_state_while_the_recovery_merges_is_clean(
    redis: RedisServer, leave: str
) -> None:
    # The recovery's round trip in flight ends before the client closes (it raised
    # "Connection pool is not initialized or has exited" out of the block before), and
    # the close merges what is left: nothing is reported lost, Redis has it all.
    for attempt in range(2):
        run_id = f"r{attempt}"
        with capture_events(StateUsageUnmerged) as unmerged, trio.CancelScope() as scope:
            async with open_redis_state(
                redis.url, replicas=2, timeout=HUNG, retry_interval=0.05
            ) as state:
                redis.pause()
                try:
                    for _ in range(500):
                        await state.add_usage(run_id, tokens=1, cost=0.0, turns=0)
                finally:
                    redis.resume()
                with trio.fail_after(30):
                    while state.degraded:
                        await trio.sleep(0.001)
                # Shared again, the merge of 500 increments under way: leave now.
                if leave != "normally":
                    scope.cancel()
                    await trio.sleep_forever()
        assert unmerged == []
        async with open_redis_state(redis.url, replicas=2) as fresh:
            assert await fresh.add_usage(run_id, tokens=0, cost=0.0, turns=0) == (500, 0.0, 0)


async def test_usage_still_local_when_the_state_closes_is_merged_or_reported(
    redis: RedisServer,
) -> None:
    # Redis back but not retried yet (a long retry interval): the close merges it.
    with capture_events(StateUsageUnmerged) as unmerged:
        async with open_redis_state(
            redis.url, replicas=2, timeout=HUNG, retry_interval=3600
        ) as state:
            redis.pause()
            try:
                assert await state.add_usage("r1", tokens=5, cost=0.25, turns=1) == (5, 0.25, 1)
                assert await state.add_usage("r2", tokens=7, cost=0.0, turns=0) == (7, 0.0, 0)
            finally:
                redis.resume()
            assert state.degraded
    assert unmerged == []
    async with open_redis_state(redis.url, replicas=2) as fresh:
        assert await fresh.add_usage("r1", tokens=0, cost=0.0, turns=0) == (5, 0.25, 1)
        assert await fresh.add_usage("r2", tokens=0, cost=0.0, turns=0) == (7, 0.0, 0)
    # Redis down at the close, left by a cancel: reported, with what was lost.
    with capture_events(StateUsageUnmerged) as unmerged, trio.CancelScope() as scope:
        async with open_redis_state(
            redis.url, replicas=2, timeout=HUNG, retry_interval=3600
        ) as state:
            redis.kill()
            await state.add_usage("r1", tokens=1, cost=0.5, turns=1)
            await state.add_usage("r1", tokens=2, cost=0.25, turns=1)
            await state.add_usage("r3", tokens=4, cost=0.0, turns=0)
            scope.cancel()
            await trio.sleep_forever()
    assert [e.fields() for e in unmerged] == [
        {"backend": "redis", "runs": 2, "increments": 3, "tokens": 7, "cost": 0.75}
    ]
