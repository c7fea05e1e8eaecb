"""Budgets: fail / warn / pause, failed attempts counted, turns and wall clock."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code, Usage
from actors.testing import capture_events
from supervisors import Budget, BudgetLimits, BudgetRequest, Price


async def test_fail_at_the_token_cap(autojump_clock: MockClock) -> None:
    budget = Budget("r1", BudgetLimits(tokens=1000))
    await budget.charge(Usage(input_tokens=500, output_tokens=100))
    with pytest.raises(ActorError) as caught:
        await budget.charge(Usage(input_tokens=300, output_tokens=200))
    assert (caught.value.code, caught.value.retryable, caught.value.run_id) == (
        Code.BUDGET_EXCEEDED,
        False,
        "r1",
    )
    assert budget.tokens == 1100


async def test_a_failed_attempts_usage_pushes_over_the_cap(autojump_clock: MockClock) -> None:
    budget = Budget("r1", BudgetLimits(tokens=1000))
    await budget.charge(Usage(input_tokens=900))
    failed = ActorError.from_code(
        Code.NETWORK, "stream cut", usage=Usage(input_tokens=150, output_tokens=20)
    )
    with pytest.raises(ActorError) as caught:
        await budget.charge_error(failed)
    assert caught.value.code is Code.BUDGET_EXCEEDED
    assert budget.tokens == 1070
    with pytest.raises(ActorError):
        await budget.check()  # no further attempt may start


async def test_warn_emits_and_goes_on(autojump_clock: MockClock) -> None:
    budget = Budget(
        "r1",
        BudgetLimits(cost=1.0, on_exceed="warn"),
        prices={("alpha", "*"): Price(input_per_mtok=1000, output_per_mtok=2000)},
    )
    with capture_events("budget.warning") as events:
        await budget.charge(Usage(input_tokens=500), provider="alpha", model="m")  # $0.50
        await budget.charge(Usage(input_tokens=350), provider="alpha", model="m")  # $0.85
        await budget.charge(Usage(output_tokens=100), provider="alpha", model="m")  # $1.05
        await budget.charge(Usage(output_tokens=100), provider="alpha", model="m")  # $1.25
    assert [(e.dimension, e.exceeded, round(e.used, 2)) for e in events] == [
        ("cost", False, 0.85),
        ("cost", True, 1.05),
        ("cost", True, 1.25),
    ]
    assert budget.cost == pytest.approx(1.25)


async def test_pause_asks_for_approval(autojump_clock: MockClock) -> None:
    asked: list[BudgetRequest] = []

    async def approve(request: BudgetRequest) -> BudgetLimits | None:
        asked.append(request)
        await trio.sleep(60)  # a person takes a minute
        if len(asked) == 1:
            return BudgetLimits(tokens=2000, on_exceed="pause")
        return None

    budget = Budget("r1", BudgetLimits(tokens=1000, on_exceed="pause"), approve=approve)
    with capture_events("budget.paused") as events:
        await budget.charge(Usage(input_tokens=1200))  # paused, raised to 2000
        assert trio.current_time() == 60
        with pytest.raises(ActorError) as caught:
            await budget.charge(Usage(input_tokens=1000))  # paused, refused
    assert caught.value.code is Code.BUDGET_EXCEEDED
    assert [(r.dimension, r.used) for r in asked] == [("tokens", 1200), ("tokens", 2200)]
    assert len(events) == 2


async def test_pause_without_a_hook_fails(autojump_clock: MockClock) -> None:
    budget = Budget("r1", BudgetLimits(tokens=10, on_exceed="pause"))
    with pytest.raises(ActorError):
        await budget.charge(Usage(input_tokens=11))


async def test_turn_limit_and_run_timeout(autojump_clock: MockClock) -> None:
    budget = Budget("r1", BudgetLimits(turns=2, seconds=30))
    await budget.turn()
    await budget.turn()
    with pytest.raises(ActorError) as turns:
        await budget.turn()
    assert turns.value.code is Code.TURN_LIMIT
    await budget.check()
    assert budget.deadline == 30
    await trio.sleep(31)
    with pytest.raises(ActorError) as clock:
        await budget.check()
    assert clock.value.code is Code.RUN_TIMEOUT


async def test_reported_cost_wins_over_the_price_table(autojump_clock: MockClock) -> None:
    budget = Budget(
        "r1", BudgetLimits(), prices={("a", "m"): Price(input_per_mtok=1, output_per_mtok=1)}
    )
    await budget.charge(Usage(input_tokens=10, cost=0.5), provider="a", model="m")
    await budget.charge(Usage(input_tokens=1_000_000), provider="a", model="m")
    assert budget.cost == pytest.approx(1.5)


async def test_reaching_a_cap_is_fine_but_blocks_the_next_attempt(
    autojump_clock: MockClock,
) -> None:
    budget = Budget("r1", BudgetLimits(tokens=100))
    await budget.charge(Usage(input_tokens=100))  # exactly at the cap: no error
    with pytest.raises(ActorError) as caught:
        await budget.check()
    assert caught.value.code is Code.BUDGET_EXCEEDED
