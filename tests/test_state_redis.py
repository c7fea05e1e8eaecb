"""The Redis state backend against a real redis-server: each operation, shared between
two replicas (two backends on one server), the keys, cancellation and bad arguments.
Real time throughout (the scripts read the server's clock)."""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import coredis
import pytest
import trio
from coredis._utils import hash_slot

from actors import ActorError, Code
from actors.events import BreakerTransition
from actors.testing import capture_events
from supervisors import Breaker, BreakerConfig, RateLimit, RateLimiter
from supervisors.resilience.budget import Budget, BudgetLimits
from supervisors.state import BucketSpec, RedisState, open_redis_state
from tests.redis_server import RedisServer

Open = Callable[..., AbstractAsyncContextManager[RedisState]]


@pytest.fixture
def replica(redis: RedisServer) -> Open:
    def open_one(**kwargs: object) -> AbstractAsyncContextManager[RedisState]:
        kwargs.setdefault("replicas", 2)
        return open_redis_state(redis.url, **kwargs)  # type: ignore[arg-type]

    return open_one


@asynccontextmanager
async def raw(redis: RedisServer) -> AsyncIterator[coredis.Redis[str]]:
    client = coredis.Redis.from_url(redis.url, decode_responses=True)
    async with client:
        yield client


async def level_of(client: coredis.Redis[str], key: str) -> float:
    """A bucket's stored level (``"<level> <time>"``)."""
    value = await client.get(key)
    assert value is not None, key
    return float(value.split()[0])


async def test_a_breaker_opened_by_one_replica_refuses_on_every_other(replica: Open) -> None:
    async with replica() as one, replica() as two:
        first, second = Breaker(state=one), Breaker(state=two)
        admission = await first.admit("alpha")
        with capture_events(BreakerTransition) as moves:
            await first.record(admission, ActorError.from_code(Code.UNAVAILABLE, "down"))
        assert [(m.before, m.after, m.code, m.cooldown) for m in moves] == [
            ("closed", "open", "unavailable", 60.0)
        ]
        with pytest.raises(ActorError, match=r"^\[circuit_open\] ") as refused:
            await second.admit("alpha")
        assert refused.value.retry_after is not None
        assert 29.0 < refused.value.retry_after <= 30.0  # the early probe: 60 - 30 s
        assert await second.state_of("alpha") == "open"
        assert await second.state_of("beta") == "closed"
        await second.admit("beta")  # another provider is not affected


async def test_failures_are_counted_across_replicas_up_to_the_threshold(replica: Open) -> None:
    config = BreakerConfig(failure_threshold=3)
    async with replica() as one, replica() as two:
        breakers = [Breaker(config, state=one), Breaker(config, state=two)]
        for n, breaker in enumerate([*breakers, breakers[0]]):
            assert await breakers[1].state_of("alpha") == "closed", n
            admission = await breaker.admit("alpha")
            await breaker.record(admission, ActorError.from_code(Code.TIMEOUT, "slow"))
        assert await breakers[1].state_of("alpha") == "open"
        # A success in between resets the count (consecutive failures).
        await breakers[0].reset("alpha")
        for breaker in breakers:
            await breaker.record(
                await breaker.admit("alpha"), ActorError.from_code(Code.TIMEOUT, "x")
            )
        await breakers[1].record(await breakers[1].admit("alpha"), None)
        await breakers[0].record(
            await breakers[0].admit("alpha"), ActorError.from_code(Code.TIMEOUT, "x")
        )
        assert await breakers[0].state_of("alpha") == "closed"


async def test_half_open_admits_exactly_one_probe_across_replicas(replica: Open) -> None:
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: 0.2}, probe_lease=5.0)
    async with replica() as one, replica() as two:
        breakers = [Breaker(config, state=one), Breaker(config, state=two)]
        await breakers[0].record(
            await breakers[0].admit("alpha"), ActorError.from_code(Code.UNAVAILABLE, "x")
        )
        await trio.sleep(0.25)
        admitted: list[tuple[int, object]] = []
        refused: list[ActorError] = []

        async def attempt(n: int) -> None:
            try:
                admitted.append((n % 2, await breakers[n % 2].admit("alpha")))
            except ActorError as error:
                refused.append(error)

        with capture_events(BreakerTransition) as moves:
            async with trio.open_nursery() as nursery:
                for n in range(20):
                    nursery.start_soon(attempt, n)
        assert len(admitted) == 1 and admitted[0][1].probe  # type: ignore[attr-defined]
        assert len(refused) == 19
        assert all(e.code is Code.CIRCUIT_OPEN for e in refused)
        assert all(e.retry_after is not None and 4.0 < e.retry_after <= 5.0 for e in refused)
        assert [(m.before, m.after) for m in moves] == [("open", "half_open")]
        # Only the holder frees the lease: a release by the other replica does nothing.
        holder = admitted[0][0]
        states = [one, two]
        await states[1 - holder].breaker_release("alpha", probe=True)
        with pytest.raises(ActorError, match=r"^\[circuit_open\] "):
            await breakers[1 - holder].admit("alpha")
        await states[holder].breaker_release("alpha", probe=True)
        assert (await breakers[1 - holder].admit("alpha")).probe


async def test_a_probe_success_closes_and_a_probe_failure_reopens(replica: Open) -> None:
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: 0.2})
    async with replica() as one, replica() as two:
        first, second = Breaker(config, state=one), Breaker(config, state=two)
        await first.record(await first.admit("alpha"), ActorError.from_code(Code.UNAVAILABLE, "x"))
        await trio.sleep(0.25)
        probe = await second.admit("alpha")
        with capture_events(BreakerTransition) as moves:
            await second.record(probe, ActorError.from_code(Code.UNAVAILABLE, "again"))
        assert [(m.before, m.after, m.cooldown) for m in moves] == [("half_open", "open", 0.2)]
        await trio.sleep(0.25)
        probe = await first.admit("alpha")
        with capture_events(BreakerTransition) as moves:
            await first.record(probe, None)
        assert [(m.before, m.after) for m in moves] == [("half_open", "closed")]
        assert await second.state_of("alpha") == "closed"


async def test_a_permanent_open_waits_for_a_reset_seen_by_all(replica: Open) -> None:
    async with replica() as one, replica() as two:
        first, second = Breaker(state=one), Breaker(state=two)
        await first.record(await first.admit("alpha"), ActorError.from_code(Code.AUTH, "bad key"))
        with pytest.raises(ActorError, match=r"^\[circuit_open\] ") as refused:
            await second.admit("alpha")
        assert refused.value.retry_after is None  # open for good: no time to wait
        with capture_events(BreakerTransition) as moves:
            await second.reset("alpha")
        assert [(m.before, m.after) for m in moves] == [("open", "closed")]
        await first.admit("alpha")


async def test_a_cancelled_probe_frees_its_lease_for_the_fleet(replica: Open) -> None:
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: 0.2}, probe_lease=60.0)
    async with replica() as one, replica() as two:
        first, second = Breaker(config, state=one), Breaker(config, state=two)
        await first.record(await first.admit("alpha"), ActorError.from_code(Code.UNAVAILABLE, "x"))
        await trio.sleep(0.25)
        with trio.move_on_after(0.05):
            async with first.guard("alpha"):
                await trio.sleep_forever()
        probe = await second.admit("alpha")  # the lease was freed, not left for 60 s
        assert probe.probe


async def test_a_bucket_grants_its_capacity_then_refuses_without_taking(
    replica: Open, redis: RedisServer
) -> None:
    limits = {"alpha": RateLimit(requests_per_minute=5, tokens_per_minute=1000)}
    async with replica() as one, replica() as two:
        limiters = [RateLimiter(limits, state=one), RateLimiter(limits, state=two)]
        now = trio.current_time()
        for n in range(5):
            await limiters[n % 2].acquire("alpha", tokens=100, deadline=now)
        with pytest.raises(ActorError, match=r"^\[rate_limited\] local rate limit for alpha"):
            await limiters[0].acquire("alpha", tokens=100, deadline=trio.current_time())
        async with raw(redis) as client:
            keys = sorted(await client.keys("*"))
            assert keys == ["ra:{alpha}:requests", "ra:{alpha}:tokens"]
            tokens = await level_of(client, "ra:{alpha}:tokens")
            assert 500.0 <= tokens < 501.0  # the refusal took nothing
            assert 0 < await client.pttl("ra:{alpha}:tokens") <= 31_000  # expires when full
            assert hash_slot(keys[0].encode()) == hash_slot(keys[1].encode())


async def test_a_reservation_waits_and_a_cancelled_wait_gives_back_exactly(
    replica: Open, redis: RedisServer
) -> None:
    spec = {"k:tokens": BucketSpec(capacity=10.0, rate=100.0)}
    async with replica() as one, raw(redis) as client:
        first = await one.reserve({"k:tokens": 10.0}, spec, now=0.0, max_wait=None)
        assert first.granted and first.wait == 0.0
        second = await one.reserve({"k:tokens": 5.0}, spec, now=0.0, max_wait=None)
        assert second.granted and 0.04 < second.wait <= 0.05
        refused = await one.reserve({"k:tokens": 5.0}, spec, now=0.0, max_wait=0.01)
        assert not refused.granted and 0.09 < refused.wait <= 0.1
        level = await level_of(client, "ra:{k}:tokens")
        assert -5.0 <= level < -4.0  # the refusal took nothing
        await one.refund({"k:tokens": 1000.0}, spec, now=0.0)
        assert await level_of(client, "ra:{k}:tokens") == 10.0  # capped

        limiter = RateLimiter({"w": RateLimit(tokens_per_minute=60)}, state=one)
        await limiter.acquire("w", tokens=60)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(limiter.acquire, "w", tokens=30))  # 30 s
            await trio.sleep(0.1)
            level = await level_of(client, "ra:{w}:tokens")
            assert -30.0 <= level < -29.0  # reserved, waiting
            nursery.cancel_scope.cancel()
        level = await level_of(client, "ra:{w}:tokens")
        assert 0.0 <= level < 0.5  # what it reserved came back (plus the refill)


async def test_budgets_add_up_across_replicas(replica: Open, redis: RedisServer) -> None:
    async with replica() as one, replica() as two:
        assert await one.add_usage("r1", tokens=10, cost=0.5, turns=1) == (10, 0.5, 1)
        assert await two.add_usage("r1", tokens=5, cost=0.25, turns=0) == (15, 0.75, 1)
        assert await two.add_usage("r2", tokens=1, cost=0.0, turns=0) == (1, 0.0, 0)
        budget = Budget("r1", BudgetLimits(tokens=20), state=two)
        await budget.turn()
        assert (budget.tokens, budget.cost, budget.turns) == (15, 0.75, 2)
        async with raw(redis) as client:
            assert 0 < await client.ttl("ra:{run:r1}:usage") <= 7 * 24 * 3600


async def test_namespaces_keep_fleets_apart(replica: Open) -> None:
    async with replica(namespace="a") as one, replica(namespace="b") as two:
        await Breaker(state=one).record(
            await Breaker(state=one).admit("alpha"), ActorError.from_code(Code.AUTH, "x")
        )
        await Breaker(state=two).admit("alpha")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replicas": 0}, r"replicas must be an integer >= 1, got 0"),
        ({"replicas": True}, r"replicas must be an integer >= 1, got True"),
        ({"replicas": 2.0}, r"replicas must be an integer >= 1, got 2.0"),
        (
            {"replicas": 2, "timeout": math.nan},
            r"timeout must be a finite number of seconds > 0, got nan",
        ),
        ({"replicas": 2, "timeout": 0}, r"timeout must be a finite number of seconds > 0, got 0"),
        (
            {"replicas": 2, "retry_interval": -1},
            r"retry_interval must be a finite number of seconds > 0",
        ),
        (
            {"replicas": 2, "usage_ttl": math.inf},
            r"usage_ttl must be a finite number of seconds > 0",
        ),
        ({"replicas": 2, "namespace": ""}, r"namespace must be a non-empty string"),
        ({"replicas": 2, "namespace": "a{b}"}, r"namespace must be a non-empty string without"),
    ],
)
async def test_bad_arguments_are_config_invalid(
    redis: RedisServer, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] redis state: " + message):
        async with open_redis_state(redis.url, **kwargs):  # type: ignore[arg-type]
            pytest.fail("opened")


async def test_a_bad_url_is_config_invalid() -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] redis state: url must be"):
        async with open_redis_state("http://127.0.0.1:1", replicas=1):
            pytest.fail("opened")


async def test_an_error_in_the_block_comes_out_unwrapped(replica: Open) -> None:
    with pytest.raises(KeyError, match="mine"):
        async with replica():
            raise KeyError("mine")


async def test_an_infinite_max_wait_is_no_limit(replica: Open) -> None:
    spec = {"k:tokens": BucketSpec(capacity=10.0, rate=1.0)}
    async with replica() as one:
        assert (await one.reserve({"k:tokens": 10.0}, spec, now=0.0, max_wait=math.inf)).granted
        waited = await one.reserve({"k:tokens": 5.0}, spec, now=0.0, max_wait=math.inf)
        assert waited.granted and 4.9 < waited.wait <= 5.0
        assert not one.degraded  # a bad argument never looks like Redis failing


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_a_number_the_scripts_cannot_take_is_refused_not_a_degradation(
    replica: Open, bad: float
) -> None:
    spec = {"k:tokens": BucketSpec(capacity=10.0, rate=1.0)}
    async with replica() as one:
        with pytest.raises(
            ActorError, match=r"^\[input_validation\] redis state: amount of k:tokens must be"
        ):
            await one.reserve({"k:tokens": bad}, spec, now=0.0, max_wait=None)
        with pytest.raises(
            ActorError, match=r"^\[input_validation\] redis state: amount of k:tokens must be"
        ):
            await one.refund({"k:tokens": bad}, spec, now=0.0)
        with pytest.raises(ActorError, match=r"^\[input_validation\] redis state: cost must be"):
            await one.add_usage("r", tokens=1, cost=bad, turns=0)
        assert not one.degraded
        assert await one.add_usage("r", tokens=1, cost=0.5, turns=0) == (1, 0.5, 0)


async def test_a_cancel_around_the_state_closes_its_connections(
    replica: Open, redis: RedisServer
) -> None:
    async with raw(redis) as client:
        before = len(await client.client_list())
        with trio.CancelScope() as scope:
            async with replica() as state:
                await Breaker(state=state).admit("alpha")  # a connection in use
                assert len(await client.client_list()) > before
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
        with trio.fail_after(5):
            while len(await client.client_list()) > before:
                await trio.sleep(0.01)


async def test_an_open_breaker_reads_half_open_once_its_probe_time_came(replica: Open) -> None:
    # StateBackend.breaker_state: a reader sees what a caller would now — the probe is
    # due, so the next caller is admitted as the probe. A permanent open stays open.
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: 2.0})
    async with replica() as one, replica() as two:
        first, second = Breaker(config, state=one), Breaker(config, state=two)
        await first.record(await first.admit("alpha"), ActorError.from_code(Code.UNAVAILABLE, "x"))
        await first.record(await first.admit("beta"), ActorError.from_code(Code.AUTH, "key"))
        assert [await second.state_of(p) for p in ("alpha", "beta")] == ["open", "open"]
        await trio.sleep(2.05)
        assert [await second.state_of(p) for p in ("alpha", "beta")] == ["half_open", "open"]
        assert await one.breaker_state("gamma", now=0.0) == "closed"  # never seen
        probe = await first.admit("alpha")  # reading changed nothing: the probe is free
        assert probe.probe
        assert await second.state_of("alpha") == "half_open"
        await first.record(probe, None)
        assert await second.state_of("alpha") == "closed"
