"""Calls that overlap: a success resets the failures counted while it was in flight —
consecutive failures are counted the same whether calls overlap or not."""

from __future__ import annotations

from trio.testing import MockClock

from actors import ActorError, Code
from supervisors import Breaker, BreakerConfig


def unavailable() -> ActorError:
    return ActorError.from_code(Code.UNAVAILABLE, "503", provider="p")


async def test_a_success_admitted_clean_resets_failures_counted_meanwhile(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=2))
    first, second = await breaker.admit("p", "m"), await breaker.admit("p", "m")
    assert first.clean and second.clean
    await breaker.record(first, unavailable())
    assert breaker.unchanged_by_success(second) is False  # a failure was counted since
    await breaker.record(second, None)  # the success ends the run of failures
    third = await breaker.admit("p", "m")
    await breaker.record(third, unavailable())
    assert str(await breaker.state_of("p")) == "closed"  # one failure in a row, not two


async def test_the_same_calls_one_at_a_time_agree(autojump_clock: MockClock) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=2))
    for outcome in (unavailable(), None, unavailable()):
        admission = await breaker.admit("p")
        await breaker.record(admission, outcome)
    assert str(await breaker.state_of("p")) == "closed"


async def test_a_clean_success_with_clean_breakers_changes_nothing(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker()
    admission = await breaker.admit("p", "m")
    assert breaker.unchanged_by_success(admission) is True
    await breaker.record(admission, None)
    assert str(await breaker.state_of("p")) == "closed"


async def test_through_a_guard_too(autojump_clock: MockClock) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=2))
    first = await breaker.admit("p")
    async with breaker.guard("p"):
        await breaker.record(first, unavailable())
    third = await breaker.admit("p")
    await breaker.record(third, unavailable())
    assert str(await breaker.state_of("p")) == "closed"
