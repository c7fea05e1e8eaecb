"""What a pool accepts at the edges of its checks (config.py, target.py): zero and
sub-second attempt timeouts, a deadline of exactly 1 s, a window of 1; the exact message
of a refused attempt timeout; the chain a downgrade map makes (each model once, after a
model already present the rest still added, marked as downgrades, on the provider's
first actor)."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from supervisors import ProviderPool, RetryLater, Target


class Idle(Actor):
    async def handle(self, message: Any) -> Any:
        return None


@pytest.mark.parametrize("value", [0, 0.5, 1])
async def test_an_attempt_timeout_of_zero_or_under_a_second_is_taken(
    autojump_clock: MockClock, value: float
) -> None:
    async with open_runtime() as runtime:
        target = Target(ref=await runtime.spawn(Idle), provider="A", model="m1")
        pool = ProviderPool([target], attempt_timeout=value)
    assert pool.attempt_timeout == value
    assert type(pool.attempt_timeout) is float


async def test_a_negative_attempt_timeout_is_refused_with_the_bound_it_breaks(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        target = Target(ref=await runtime.spawn(Idle), provider="A", model="m1")
        with pytest.raises(ActorError) as caught:
            ProviderPool([target], attempt_timeout=-1)
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == (
        "attempt_timeout must be None or a finite number of seconds >= 0, got int"
    )


async def test_a_deadline_and_a_hedge_of_one_second_are_taken(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        target = Target(ref=await runtime.spawn(Idle), provider="A", model="m1", context_window=1)
        pool = ProviderPool([target], deadline=1, hedge_after=1)
    assert (pool.deadline, pool.hedge_after) == (1.0, 1.0)
    assert target.context_window == 1
    assert RetryLater(seconds=0).seconds == 0


async def test_a_downgrade_map_adds_each_new_model_once_on_the_first_actor(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        a1, a2, b = [await runtime.spawn(Idle) for _ in range(3)]
        targets = [
            Target(ref=a1, provider="A", model="m1"),
            Target(ref=b, provider="B", model="m1"),
            Target(ref=a2, provider="A", model="m2"),
        ]
        pool = ProviderPool(targets, downgrades={"A": ["m1", "m3", "m3", "m2", "m4"]})
    assert [(t.provider, t.model, t.downgrade) for t in pool.chain] == [
        ("A", "m1", False),
        ("B", "m1", False),
        ("A", "m2", False),
        ("A", "m3", True),
        ("A", "m4", True),
    ]
    assert [t.ref for t in pool.chain[3:]] == [a1, a1]


async def test_target_and_downgrade_refusals_name_the_type_given(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Idle)
        with pytest.raises(ActorError) as flag:
            Target(ref=ref, provider="A", model="m1", downgrade=1)  # type: ignore[arg-type]
        with pytest.raises(ActorError) as window:
            Target(ref=ref, provider="A", model="m1", context_window=0.5)  # type: ignore[arg-type]
        with pytest.raises(ActorError) as unknown:
            ProviderPool([Target(ref=ref, provider="A", model="m1")], downgrades={"Z": ["m2"]})
    assert flag.value.message == "Target.downgrade must be a bool, got int"
    assert (
        window.value.message == "Target.context_window must be None or an integer >= 1, got float"
    )
    assert unknown.value.message == "downgrades['Z'] must be the provider of a target, got str"
