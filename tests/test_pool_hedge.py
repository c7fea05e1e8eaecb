"""Hedging: a second target started beside a slow first one; the first answer wins and
the loser's request is cancelled — recorded as cancelled, no breaker verdict, no charge."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from actors import Code
from actors.testing import capture_events
from actors.testing.chaos import Fault
from supervisors import Breaker, Budget, BudgetLimits, ProviderPool, Resilience
from tests.pool_helpers import faults, fleet, request, rules


async def test_the_slower_of_two_healthy_targets_is_cancelled(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    budget = Budget("hedge", BudgetLimits())
    async with fleet({"A": faults(Fault(kind="latency", seconds=5)), "B": None}) as f:
        pool = ProviderPool(
            f.targets("A", "B"),
            resilience=Resilience(retry=rules(), breaker=breaker),
            budget=budget,
            hedge_after=1.0,
        )
        with capture_events(
            "pool.attempt", "pool.attempt_failed", "pool.attempt_cancelled"
        ) as events:
            reply = await pool.complete(request())
        assert reply.provider == "B"
        assert trio.current_time() == 1.0
        # The loser is logged as cancelled, not as a failure (issue 28).
        assert sorted((e.name, e.provider, e.outcome) for e in events) == [  # type: ignore[attr-defined]
            ("pool.attempt", "B", "ok"),
            ("pool.attempt_cancelled", "A", "cancelled"),
        ]
        await trio.sleep(10)  # let the server notice
        [a_request] = f.servers["A"].requests
        assert a_request.disconnected is True
    a_entry, b_entry = sorted(pool.ledger, key=lambda entry: entry.number)
    assert (a_entry.provider, a_entry.outcome, a_entry.hedge, a_entry.code) == (
        "A",
        "cancelled",
        False,
        None,
    )
    assert (a_entry.started_at, a_entry.latency) == (0.0, 1.0)
    assert (b_entry.provider, b_entry.outcome, b_entry.hedge) == ("B", "ok", True)
    assert b_entry.started_at == 1.0
    assert budget.tokens == b_entry.tokens  # the cancelled attempt charged nothing
    assert str(await breaker.state_of("A")) == "closed"


async def test_a_first_answer_before_hedge_after_starts_no_hedge(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": faults(Fault(kind="latency", seconds=0.5)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), hedge_after=1.0)
        reply = await pool.complete(request())
        assert reply.provider == "A"
        assert trio.current_time() == 0.5
        assert f.count("B") == 0
        assert [a.outcome for a in pool.ledger] == ["ok"]


async def test_a_failure_before_the_hedge_rotates_as_usual(autojump_clock: MockClock) -> None:
    async with fleet({"A": faults(Fault(kind="status", status=503)), "B": None}) as f:
        pool = ProviderPool(
            f.targets("A", "B"), resilience=Resilience(retry=rules()), hedge_after=1.0
        )
        reply = await pool.complete(request())
        assert reply.provider == "B"
        assert trio.current_time() == 0.0
        assert [(a.provider, a.outcome, a.hedge) for a in pool.ledger] == [
            ("A", "failed", False),
            ("B", "ok", False),
        ]


async def test_a_hedge_that_fails_leaves_the_first_attempt_running(
    autojump_clock: MockClock,
) -> None:
    # B fails at 1 s (retry in 1 s); A is still slow, so B is hedged again at 2 s.
    scripts = {
        "A": faults(Fault(kind="latency", seconds=5)),
        "B": faults(Fault(kind="status", status=503)),
    }
    async with fleet(scripts) as f:
        pool = ProviderPool(
            f.targets("A", "B"), resilience=Resilience(retry=rules()), hedge_after=1.0
        )
        reply = await pool.complete(request())
        assert reply.provider == "B"
        assert trio.current_time() == 2.0
        assert f.times("B") == [1.0, 2.0]
    entries = sorted(pool.ledger, key=lambda entry: entry.number)
    assert [(a.provider, a.outcome, a.hedge, a.code) for a in entries] == [
        ("A", "cancelled", False, None),
        ("B", "failed", True, Code.UNAVAILABLE),
        ("B", "ok", True, None),
    ]


async def test_a_slow_first_attempt_wins_when_the_hedge_fails_for_good(
    autojump_clock: MockClock,
) -> None:
    scripts = {
        "A": faults(Fault(kind="latency", seconds=3)),
        "B": faults(Fault(kind="status", status=400)),  # bad_request: B is out, not fatal?
    }
    scripts["B"] = faults(Fault(kind="status", status=503, times=10))
    async with fleet(scripts) as f:
        once = Resilience(retry=rules().__class__(by_code={}))  # no retries at all
        pool = ProviderPool(f.targets("A", "B"), resilience=once, hedge_after=1.0)
        reply = await pool.complete(request())
        assert reply.provider == "A"
        assert trio.current_time() == 3.0
        assert f.times("B") == [1.0]
    entries = sorted(pool.ledger, key=lambda entry: entry.number)
    assert [(a.provider, a.outcome, a.hedge) for a in entries] == [
        ("A", "ok", False),
        ("B", "failed", True),
    ]


async def test_a_stream_hedges_on_its_first_event(autojump_clock: MockClock) -> None:
    async with fleet({"A": faults(Fault(kind="latency", seconds=5)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), hedge_after=2.0)
        async with pool.stream(request("hello")) as events:
            text = "".join([e.text async for e in events if e.kind == "text"])
        assert text == "echo: hello"
        assert events.response is not None and events.response.provider == "B"
        assert trio.current_time() == 2.0
    assert sorted((a.provider, a.outcome) for a in pool.ledger) == [
        ("A", "cancelled"),
        ("B", "ok"),
    ]


async def test_a_fatal_hedge_ends_the_request_and_cancels_the_first(
    autojump_clock: MockClock,
) -> None:
    scripts = {
        "A": faults(Fault(kind="latency", seconds=5)),
        "B": faults(Fault(kind="status", status=401)),
    }
    async with fleet(scripts) as f:
        pool = ProviderPool(f.targets("A", "B"), hedge_after=1.0)
        with pytest.raises(Exception) as caught:
            await pool.complete(request())
        assert getattr(caught.value, "code", None) is Code.AUTH
        assert trio.current_time() == 1.0
    assert sorted((a.provider, a.outcome) for a in pool.ledger) == [
        ("A", "cancelled"),
        ("B", "failed"),
    ]
