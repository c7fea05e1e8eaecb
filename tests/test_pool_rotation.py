"""The pool's order of strategies, on virtual time against real loopback chaos servers:
rotation without sleeping, retries interleaved, one sleep when everyone cools down."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from actors import Code, open_runtime
from actors.testing import capture_events
from actors.testing.chaos import Fault
from supervisors import (
    AllProvidersFailed,
    Breaker,
    BreakerConfig,
    ProviderPool,
    Resilience,
    Target,
)
from tests.pool_helpers import faults, fleet, request, rules
from tests.test_pool_waits import _steps


def status(code: int, times: int = 1, **headers: str) -> Fault:
    return Fault(kind="status", status=code, times=times, headers=dict(headers))


async def test_a_down_b_serves_without_sleeping_then_a_is_skipped(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=2))
    async with fleet({"A": faults(status(503, times=10)), "B": None}) as f:
        pool = ProviderPool(
            f.targets("A", "B"), resilience=Resilience(retry=rules(), breaker=breaker)
        )
        with capture_events("breaker.transition") as transitions:
            served = [await pool.complete(request(f"q{n}")) for n in range(3)]
        assert trio.current_time() == 0.0  # nothing slept
        assert [r.provider for r in served] == ["B", "B", "B"]
        assert [r.content for r in served] == ["echo: q0", "echo: q1", "echo: q2"]
        assert (f.count("A"), f.count("B")) == (2, 3)  # the third request skipped A
    assert [(t.provider, t.before, t.after, t.code) for t in transitions] == [
        ("A", "closed", "open", "unavailable")
    ]
    numbers = [(a.number, a.provider, a.outcome) for a in pool.ledger]
    assert numbers == [(1, "A", "failed"), (2, "B", "ok")] * 2 + [(1, "B", "ok")]
    assert len({a.request_id for a in pool.ledger}) == 3


async def test_retry_after_on_a_and_backoff_on_b_interleave_with_exact_times(
    autojump_clock: MockClock,
) -> None:
    scripts = {
        "A": faults(status(429, **{"retry-after": "30"})),
        "B": faults(status(503, times=3)),
    }
    breaker = Breaker(BreakerConfig(failure_threshold=10))
    async with fleet(scripts) as f:
        pool = ProviderPool(
            f.targets("A", "B"), resilience=Resilience(retry=rules(), breaker=breaker)
        )
        with capture_events("retry.scheduled") as retries:
            reply = await pool.complete(request())
        assert reply.provider == "B"
        assert trio.current_time() == 7.0  # 1 + 2 + 4: the scheduled delays, nothing more
        assert f.times("A") == [0.0]
        assert f.times("B") == [0.0, 1.0, 3.0, 7.0]
    assert [(r.error.provider, r.delay, r.source) for r in retries] == [
        ("A", 30.0, "header"),
        ("B", 1.0, "schedule"),
        ("B", 2.0, "schedule"),
        ("B", 4.0, "schedule"),
    ]
    assert [(a.provider, a.outcome, a.started_at) for a in pool.ledger] == [
        ("A", "failed", 0.0),
        ("B", "failed", 0.0),
        ("B", "failed", 1.0),
        ("B", "failed", 3.0),
        ("B", "ok", 7.0),
    ]


async def test_everyone_cooling_down_sleeps_once_until_the_earliest_probe(
    autojump_clock: MockClock,
) -> None:
    scripts = {
        "A": faults(status(429, **{"retry-after": "10"})),
        "B": faults(status(429, **{"retry-after": "20"})),
    }
    breaker = Breaker()  # threshold 1: both open, A until 10, B until 20 (Retry-After)
    async with fleet(scripts) as f:
        resilience = Resilience(retry=rules(), breaker=breaker)
        short = ProviderPool(f.targets("A", "B"), resilience=resilience, deadline=5)
        with pytest.raises(AllProvidersFailed, match="every target failed") as caught:
            await short.complete(request())
        assert trio.current_time() == 0.0  # past the deadline: at once, no sleep
        failure = caught.value
        assert failure.code is Code.ALL_PROVIDERS_FAILED
        assert failure.category is Code.RATE_LIMITED
        assert failure.retry_after == 10.0  # the earliest across targets
        assert [(a.provider, a.code) for a in failure.attempts] == [
            ("A", Code.RATE_LIMITED),
            ("B", Code.RATE_LIMITED),
        ]
        assert failure.__cause__ is not None

        long = ProviderPool(f.targets("A", "B"), resilience=resilience, deadline=15)
        reply = await long.complete(request())
        assert reply.provider == "A"
        assert trio.current_time() == 10.0  # one sleep, to A's probe
        assert f.times("A") == [0.0, 10.0]
        assert f.times("B") == [0.0]


async def test_a_target_ready_exactly_at_the_deadline_is_not_waited_for(
    autojump_clock: MockClock,
) -> None:
    # An attempt starting at the deadline could not run: the chain ends at once.
    async with fleet({"A": faults(status(429, times=2, **{"retry-after": "5"}))}) as f:
        at_deadline = ProviderPool(f.targets("A"), resilience=Resilience(retry=rules()), deadline=5)
        with pytest.raises(AllProvidersFailed) as caught:
            await at_deadline.complete(request())
        assert trio.current_time() == 0.0
        assert caught.value.retry_after == 5.0
        just_before = ProviderPool(
            f.targets("A"), resilience=Resilience(retry=rules()), deadline=5.001
        )
        reply = await just_before.complete(request())
        assert reply.provider == "A"
        assert trio.current_time() == 5.0
        assert f.times("A") == [0.0, 0.0, 5.0]


async def test_one_target_waits_for_its_breaker_probe_instead_of_failing(
    autojump_clock: MockClock,
) -> None:
    # The documented defaults: Breaker() opens on the first 503 (cooldown 60 s, early
    # probe at 30 s); the pool waits for the probe rather than fail with circuit_open.
    async with fleet({"A": faults(status(503))}) as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(breaker=Breaker()))
        reply = await pool.complete(request())
        assert reply.provider == "A"
        assert trio.current_time() == 30.0
        assert f.times("A") == [0.0, 30.0]
        assert [a.outcome for a in pool.ledger] == ["failed", "ok"]


async def test_a_single_provider_daemon_serves_every_task_through_faults(
    autojump_clock: MockClock,
) -> None:
    # 8 % 503s and two 429s, the documented Breaker() defaults: every task is served.
    script = faults(
        status(429, **{"retry-after": "2"}),
        status(429, **{"retry-after": "2"}),
    )
    script.probabilities = {"status": 0.08}
    script.seed = 7
    async with fleet({"A": script}) as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(breaker=Breaker()))
        served = [await pool.complete(request(f"task {n}")) for n in range(40)]
    assert len(served) == 40
    assert {r.provider for r in served} == {"A"}
    failed = [a for a in pool.ledger if a.outcome == "failed"]
    assert len(failed) >= 2  # the two 429s at least, every one in the ledger
    assert pool.ledger.total.attempts == 40 + len(failed)


async def test_no_sleep_after_the_last_attempt(autojump_clock: MockClock) -> None:
    async with fleet({"A": faults(status(503, times=10))}) as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(retry=rules()))
        with pytest.raises(AllProvidersFailed) as caught:
            await pool.complete(request())
        assert f.times("A") == [0.0, 1.0, 3.0, 7.0]
        assert trio.current_time() == 7.0  # raised as the fourth attempt failed
        assert caught.value.category is Code.UNAVAILABLE
        assert caught.value.retry_after is None
        assert len(caught.value.attempts) == 4


async def test_a_request_waiting_on_a_probe_in_flight_wakes_at_its_verdict(
    autojump_clock: MockClock,
) -> None:
    # "first" fails, the breaker opens (probe at 30 s); at 30 s "first" probes (the answer
    # takes 1 s) and holds the probe lease. "second" waits for the verdict (31 s), not
    # the lease's end (60 s).
    script = faults(status(503), Fault(kind="latency", seconds=1))
    async with fleet({"A": script}) as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(breaker=Breaker()))
        served: dict[str, float] = {}

        async def ask(name: str, delay: float) -> None:
            await trio.sleep(delay)
            await pool.complete(request(name))
            served[name] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "first", 0)
            nursery.start_soon(ask, "second", 0.5)
        assert served == {"first": 31.0, "second": 31.0}
        assert f.times("A") == [0.0, 30.0, 31.0]  # one probe, then the second request


# --- the cursor, on actors that answer by script (no HTTP) ------------------------------


async def test_the_rotation_goes_on_after_the_slot_it_picked(autojump_clock: MockClock) -> None:
    # A's rate limit says "retry now": A is admissible again at once. After B (picked by
    # the rotation) fails, the rotation goes on with C — not back to A.
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(
            runtime, seen, A=[("rate_limited", 0.0), "ok"], B=["unavailable", "ok"], C=["ok"]
        )
        targets = [Target(ref=refs[n], provider=n, model="m1") for n in ("A", "B", "C")]
        reply = await ProviderPool(targets, resilience=Resilience(retry=rules())).complete(
            request()
        )
    assert reply.content == "C"
    assert seen == [("A", "m1", 0.0), ("B", "m1", 0.0), ("C", "m1", 0.0)]


async def test_the_rotation_goes_on_after_a_preferred_slot(autojump_clock: MockClock) -> None:
    # A/m1 is gone: A/m2 (the same provider's next model) is preferred; after it fails the
    # rotation goes on after A/m2 (with C), not from where A/m1 left it (B).
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(
            runtime, seen, A=["model_not_found", "unavailable", "ok"], B=["ok"], C=["ok"]
        )
        targets = [
            Target(ref=refs["A"], provider="A", model="m1"),
            Target(ref=refs["B"], provider="B", model="m1"),
            Target(ref=refs["A"], provider="A", model="m2"),
            Target(ref=refs["C"], provider="C", model="m1"),
        ]
        reply = await ProviderPool(targets, resilience=Resilience(retry=rules())).complete(
            request()
        )
    assert reply.content == "C"
    assert seen == [("A", "m1", 0.0), ("A", "m2", 0.0), ("C", "m1", 0.0)]
