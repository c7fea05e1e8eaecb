"""Every attempt is accounted: failed, partial and answered attempts in the ledger, with
tokens and cost, charged to the budget."""

from __future__ import annotations

import logging

import pytest
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing import capture_events
from actors.testing.chaos import Fault
from supervisors import Budget, BudgetLimits, Price, ProviderPool, Resilience
from supervisors.pool import Ledger
from tests.pool_helpers import faults, fleet, request, rules

# $1 per input token, $2 per output token: exact in floating point.
PRICES = {
    ("A", "m1"): Price(input_per_mtok=1_000_000, output_per_mtok=2_000_000),
    ("B", "*"): Price(input_per_mtok=3_000_000, output_per_mtok=0),
}


async def test_failed_partial_and_answered_attempts_are_all_in_the_ledger_and_budget(
    autojump_clock: MockClock,
) -> None:
    script = faults(Fault(kind="cut_stream", after=4), Fault(kind="status", status=503))
    async with fleet({"A": script, "B": None}) as f:
        budget = Budget("run-1", BudgetLimits(tokens=10_000))
        pool = ProviderPool(
            f.targets("A", "B"),
            resilience=Resilience(retry=rules()),
            budget=budget,
            prices=PRICES,
        )
        with pytest.raises(ActorError, match="stream"):
            async with pool.stream(request("one two three four five")) as events:
                async for _ in events:
                    pass
        reply = await pool.complete(request("hello there"))
    partial, failed, ok = list(pool.ledger)
    assert (partial.provider, partial.outcome, partial.usage_estimated) == ("A", "partial", True)
    assert (failed.provider, failed.outcome, failed.usage, failed.cost) == (
        "A",
        "failed",
        None,
        None,
    )
    assert (ok.provider, ok.outcome, ok.usage) == ("B", "ok", reply.usage)
    assert partial.usage is not None
    assert partial.cost == partial.usage.input_tokens + 2 * partial.usage.output_tokens
    assert ok.cost == 3 * reply.usage.input_tokens
    assert budget.tokens == partial.tokens + ok.tokens > 0
    assert budget.cost == partial.cost + ok.cost
    total = pool.ledger.total
    assert (total.attempts, total.tokens, total.cost) == (3, budget.tokens, budget.cost)
    by_outcome = pool.ledger.by_outcome
    assert {k: v.attempts for k, v in by_outcome.items()} == {"partial": 1, "failed": 1, "ok": 1}
    by_target = pool.ledger.by_target
    assert {k: v.attempts for k, v in by_target.items()} == {("A", "m1"): 2, ("B", "m1"): 1}
    assert by_target["B", "m1"].cost == ok.cost


async def test_each_attempt_is_one_event_with_its_ledger_facts(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": faults(Fault(kind="status", status=503)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), prices=PRICES)
        with capture_events("pool.attempt", "pool.attempt_failed") as records:
            reply = await pool.complete(request("hi", metadata={"request_id": "req-7"}))
    failed, ok = records
    assert (failed.name, failed.level) == ("pool.attempt_failed", logging.INFO)
    assert (ok.name, ok.level) == ("pool.attempt", logging.DEBUG)
    assert (failed.request_id, failed.number, failed.provider, failed.outcome, failed.code) == (
        "req-7",
        1,
        "A",
        "failed",
        "unavailable",
    )
    assert (ok.request_id, ok.number, ok.provider, ok.outcome, ok.code) == (
        "req-7",
        2,
        "B",
        "ok",
        None,
    )
    assert (ok.input_tokens, ok.output_tokens) == (
        reply.usage.input_tokens,
        reply.usage.output_tokens,
    )
    assert ok.cost == 3 * reply.usage.input_tokens
    assert [a.request_id for a in pool.ledger.of("req-7")] == ["req-7", "req-7"]


async def test_a_budget_at_its_cap_stops_the_chain_before_any_attempt(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": None}) as f:
        budget = Budget("run-2", BudgetLimits(tokens=1))
        pool = ProviderPool(f.targets("A"), budget=budget)
        with pytest.raises(ActorError) as caught:
            await pool.complete(request("a question long enough to pass one token"))
        assert caught.value.code is Code.BUDGET_EXCEEDED  # the charge went past the cap
        with pytest.raises(ActorError, match="over the cap") as refused:
            await pool.complete(request())
        assert refused.value.code is Code.BUDGET_EXCEEDED
        assert f.count("A") == 1  # the second request was refused before any attempt
        assert len(pool.ledger) == 1


async def test_a_call_may_bring_its_own_budget(autojump_clock: MockClock) -> None:
    async with fleet({"A": None}) as f:
        pool_budget = Budget("pool", BudgetLimits())
        run_budget = Budget("run", BudgetLimits())
        pool = ProviderPool(f.targets("A"), budget=pool_budget)
        await pool.complete(request(), budget=run_budget)
        await pool.complete(request(), budget=None)
        assert (pool_budget.tokens, run_budget.tokens > 0) == (0, True)


def test_the_ledger_keeps_the_last_entries_and_all_totals() -> None:
    from supervisors.pool import Attempt

    ledger = Ledger(keep=2)
    for number in range(1, 4):
        ledger.record(
            Attempt(
                request_id="r",
                number=number,
                provider="A",
                model="m",
                outcome="ok",
                code=None,
                started_at=0.0,
                latency=0.0,
                usage=None,
                cost=None,
            )
        )
    assert [a.number for a in ledger] == [2, 3]
    assert len(ledger) == 2
    assert ledger.total.attempts == 3
    assert ledger.cost(None, "A", "m") is None
