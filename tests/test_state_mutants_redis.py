"""The Redis state backend in shared mode, against a real redis-server: what each script's
reply becomes (snapshots and transitions, field by field), the keys and the arguments a
replica writes, and what :func:`open_redis_state` accepts. Real time (the scripts read
the server's clock)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import coredis
import coredis.exceptions
import pytest
import trio

from actors import ActorError
from actors.events import StateDegraded
from actors.testing import capture_events
from supervisors.state import (
    BreakerSnapshot,
    BucketSpec,
    RedisState,
    Reservation,
    Transition,
    open_redis_state,
    redis_scripts,
)
from supervisors.state.base import BreakerState
from tests.redis_server import RedisServer
from tests.test_state_mutants_degraded import Switch

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


@asynccontextmanager
async def raw(redis: RedisServer) -> AsyncIterator[coredis.Redis[str]]:
    client = coredis.Redis.from_url(redis.url, decode_responses=True)
    async with client:
        yield client


async def fail(
    state: RedisState,
    *,
    probe: bool = False,
    code: str = "timeout",
    threshold: int = 1,
    cooldown: float = 7.5,
    probe_after: float = 0.5,
    permanent: bool = False,
) -> Transition | None:
    return await state.breaker_failure(
        "a",
        now=0.0,
        probe=probe,
        code=code,
        threshold=threshold,
        cooldown=cooldown,
        probe_after=probe_after,
        permanent=permanent,
    )


async def admit(state: RedisState, lease_ttl: float = 5.0) -> BreakerSnapshot:
    return await state.breaker_admit("a", now=0.0, lease_ttl=lease_ttl)


def refused(snapshot: BreakerSnapshot, most: float) -> float:
    """A refusal's wait (checked to be in ``(most - 0.5, most]``), nothing else set."""
    assert (snapshot.admitted, snapshot.probe, snapshot.transition, snapshot.clean) == (
        False,
        False,
        None,
        False,
    )
    assert most - 0.5 < snapshot.retry_after <= most, snapshot
    return snapshot.retry_after


async def test_a_breakers_life_in_redis_snapshot_by_snapshot(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=1) as state, raw(redis) as client:
        assert await admit(state) == BreakerSnapshot(True, False, 0.0, None, True)
        assert await fail(state, threshold=2) is None
        assert await client.hget("ra:{a}:breaker", "f") == "1"
        assert await admit(state) == BreakerSnapshot(True, False, 0.0, None, False)
        assert await state.breaker_state("a", now=0.0) is CLOSED
        assert await fail(state, threshold=2) == Transition("a", CLOSED, OPEN, "timeout", 7.5)
        assert await client.hget("ra:{a}:breaker", "cd") == "7.5"
        refused(await admit(state), 0.5)
        assert await state.breaker_state("a", now=0.0) is OPEN
        assert await fail(state) is None  # a straggler: no verdict
        await trio.sleep(0.55)
        probing = Transition("a", OPEN, HALF_OPEN, "timeout", 7.5)
        assert await admit(state, lease_ttl=3.0) == BreakerSnapshot(True, True, 0.0, probing)
        assert await client.hget("ra:{a}:breaker", "lh") == state.holder
        refused(await admit(state), 3.0)
        assert await state.breaker_state("a", now=0.0) is HALF_OPEN
        assert await fail(state) is None  # not the probe
        reopened = await fail(state, probe=True, code="unavailable", cooldown=9.0)
        assert reopened == Transition("a", HALF_OPEN, OPEN, "unavailable", 9.0)
        gone = await fail(state, code="auth", cooldown=60.0, permanent=True)
        assert gone == Transition("a", OPEN, OPEN, "auth", math.inf)
        assert await admit(state) == BreakerSnapshot(False, False, math.inf)
        assert await state.breaker_reset("a") == Transition("a", OPEN, CLOSED, None, None)
        assert await state.breaker_reset("a") is None
        assert await client.exists(["ra:{a}:breaker"]) == 0
        assert not state.degraded


async def test_probe_successes_close_at_the_threshold(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=1) as state:
        assert await state.breaker_success("a", now=0.0, probe=True, success_threshold=1) is None
        await fail(state, probe_after=0.1)
        await trio.sleep(0.15)
        assert (await admit(state)).probe
        assert await state.breaker_success("a", now=0.0, probe=False, success_threshold=2) is None
        refused(await admit(state), 5.0)  # not the probe: its lease still held
        assert await state.breaker_success("a", now=0.0, probe=True, success_threshold=2) is None
        assert await admit(state) == BreakerSnapshot(True, True, 0.0)  # the lease freed
        closed = await state.breaker_success("a", now=0.0, probe=True, success_threshold=2)
        assert closed == Transition("a", HALF_OPEN, CLOSED, None, None)
        assert await admit(state) == BreakerSnapshot(True, False, 0.0, None, True)


async def test_a_reset_reports_the_state_it_ended(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=1) as state:
        await fail(state, threshold=3)
        assert await state.breaker_reset("a") is None  # closed, with a failure counted
        await fail(state, probe_after=0.05)
        await trio.sleep(0.1)
        await admit(state)
        assert await state.breaker_reset("a") == Transition("a", HALF_OPEN, CLOSED, None, None)
        assert await state.breaker_reset("a") is None  # closed and clean


async def test_a_release_frees_only_this_replicas_probe_lease(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=1) as state, raw(redis) as client:
        await state.breaker_release("a", probe=True)  # nothing to free
        assert await client.exists(["ra:{a}:breaker"]) == 0
        await fail(state, probe_after=0.05)
        await trio.sleep(0.1)
        await admit(state, lease_ttl=30.0)
        await state.breaker_release("a", probe=False)  # not a probe: no round trip
        refused(await admit(state), 30.0)
        await state.breaker_release("a", probe=True)
        assert await client.hget("ra:{a}:breaker", "lh") == ""
        assert (await admit(state)).probe


async def test_keys_and_what_a_replica_writes(redis: RedisServer) -> None:
    async with (
        open_redis_state(redis.url, replicas=1, namespace="fleetX", usage_ttl=1.5) as state,
        raw(redis) as client,
    ):
        specs = {
            "k": BucketSpec(capacity=4.0, rate=2.0),
            "m:requests": BucketSpec(capacity=8.0, rate=1.0),
        }
        granted = await state.reserve({"k": 3.0, "m:requests": 2.0}, specs, now=0.0, max_wait=0)
        assert granted == Reservation(True, 0.0)
        await state.breaker_failure(
            "p\x1fmodel\x1fbig",
            now=0.0,
            probe=False,
            code="model_not_found",
            threshold=1,
            cooldown=math.inf,
            probe_after=math.inf,
            permanent=True,
        )
        assert await state.add_usage("r1", tokens=3, cost=0.25, turns=1) == (3, 0.25, 1)
        assert await state.add_usage("r1", tokens=4, cost=0.5, turns=2) == (7, 0.75, 3)
        assert sorted(await client.keys("*")) == [
            "fleetX:{k}:bucket",
            "fleetX:{m}:requests",
            "fleetX:{p\x1fmodel\x1fbig}:breaker",
            "fleetX:{run:r1}:applied",
            "fleetX:{run:r1}:usage",
        ]
        assert float((await client.get("fleetX:{k}:bucket")).split()[0]) == pytest.approx(
            1.0, abs=0.1
        )
        assert await client.hgetall("fleetX:{p\x1fmodel\x1fbig}:breaker") == {
            "st": "open",
            "f": "0",
            "s": "0",
            "lu": "0",
            "lh": "",
            "code": "model_not_found",
            "perm": "1",
            "pa": "inf",
            "cd": "inf",
        }
        assert await client.hgetall("fleetX:{run:r1}:usage") == {"t": "7", "c": "0.75", "n": "3"}
        assert await client.smembers("fleetX:{run:r1}:applied") == {
            f"{state.holder}:1",
            f"{state.holder}:2",
        }
        assert await client.ttl("fleetX:{run:r1}:usage") == 2  # 1.5 s, rounded up
        assert await client.ttl("fleetX:{run:r1}:applied") == 2


async def test_each_bucket_keeps_its_own_capacity_and_rate(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=1) as state:
        specs = {"a:tokens": BucketSpec(10.0, 1.0), "a:requests": BucketSpec(2.0, 100.0)}
        for _ in range(2):  # the second time from the replica's cache of arguments
            first = await state.reserve(
                {"a:tokens": 20.0, "a:requests": 2.0}, specs, now=0.0, max_wait=None
            )
            assert first.granted and 9.5 < first.wait <= 10.0
            await state.refund({"a:tokens": 20.0, "a:requests": 2.0}, specs, now=0.0)
        no = await state.reserve({"a:requests": 5.0}, specs, now=0.0, max_wait=0.01)
        assert not no.granted and 0.025 < no.wait <= 0.03  # short by 3, at 100 a second
        yes = await state.reserve({"a:requests": 5.0}, specs, now=0.0, max_wait=0.05)
        assert yes.granted and 0.025 < yes.wait <= 0.03
        assert (await state.reserve({"a:tokens": 1.0}, specs, now=0.0, max_wait=0.5)).granted


async def test_totals_come_back_field_by_field(redis: RedisServer) -> None:
    async with open_redis_state(redis.url, replicas=1, usage_ttl=100) as state, raw(redis) as c:
        assert await state.add_usage("r", tokens=11, cost=0.125, turns=3) == (11, 0.125, 3)
        assert 98 <= await c.ttl("ra:{run:r}:usage") <= 100


@pytest.mark.parametrize("scheme", ["rediss", "unix"])
async def test_every_redis_scheme_opens_and_an_unreachable_server_degrades(
    redis: RedisServer, scheme: str
) -> None:
    url = f"rediss://127.0.0.1:{redis.port}/0" if scheme == "rediss" else "unix:///nonexistent"
    async with open_redis_state(url, replicas=1, timeout=0.3) as state:
        with capture_events(StateDegraded) as seen:
            assert await admit(state) == BreakerSnapshot(True, False, 0.0, None, True)
        assert [(e.operation, e.replicas) for e in seen] == [("breaker_admit", 1)]
        assert state.degraded


async def test_one_replica_and_a_url_that_is_not_a_string(redis: RedisServer) -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] redis state: url must be a "):
        async with open_redis_state(123, replicas=1):  # type: ignore[arg-type]
            pytest.fail("opened")
    async with open_redis_state(redis.url, replicas=1) as state:
        assert (state.replicas, state.namespace, state.timeout) == (1, "ra", 2.0)
        assert (state.retry_interval, state.usage_ttl) == (1.0, 7 * 24 * 3600)
        assert isinstance(state.timeout, float) and isinstance(state.retry_interval, float)


async def test_the_state_keeps_its_options(redis: RedisServer) -> None:
    async with open_redis_state(
        redis.url, replicas=3, namespace="n", timeout=0.25, retry_interval=2, usage_ttl=9.2
    ) as state:
        assert (state.replicas, state.namespace, state.timeout) == (3, "n", 0.25)
        assert (state.retry_interval, state.usage_ttl) == (2.0, 10)
        assert isinstance(state.retry_interval, float)
    with pytest.raises(ActorError, match=r"^\[config_invalid\] redis state: replicas must be "):
        RedisState(object(), replicas=0)
    with pytest.raises(ActorError, match=r"namespace must be .*, not None$"):
        RedisState(object(), replicas=1, namespace=None)  # type: ignore[arg-type]
    with pytest.raises(ActorError, match=r"namespace must be .*, not 'a}'$"):
        RedisState(object(), replicas=1, namespace="a}")


async def test_a_script_the_server_hashes_otherwise_is_an_error_not_an_outage(
    redis: RedisServer,
) -> None:
    class Otherwise(Switch):
        async def script_load(self, source: str) -> str:
            await super().script_load(source)
            return "0" * 40

    sha = hashlib.sha1(redis_scripts.BREAKER_RESET.encode()).hexdigest()
    async with raw(redis) as client:
        state = RedisState(Otherwise(client), replicas=1)
        with pytest.raises(
            RuntimeError, match=f"^Redis loaded BREAKER_RESET as {'0' * 40}, not {sha}$"
        ) as caught:
            await state.breaker_reset("a")  # a fresh server: NOSCRIPT, then loaded
        assert isinstance(caught.value.__cause__, coredis.exceptions.NoScriptError)
        assert not state.degraded
