"""The race's corners: a stream that answers without any event, a hedge that finds no
target free when it is due and starts when the next one is, at most two attempts at once
when hedging, and a stream charged past its budget after its events."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, open_runtime
from actors.providers import LlmResponse, StreamEvent
from supervisors import Budget, BudgetLimits, ProviderPool, Resilience, Target
from tests.pool_helpers import request, rules
from tests.test_pool_waits import _steps


class Late(Actor):
    """Answers "late" after 10 s."""

    async def handle(self, message: Any) -> Any:
        await trio.sleep(10)
        usage = Usage(input_tokens=1, output_tokens=1)
        return LlmResponse(content="late", usage=usage, provider="B", model="m1")


class Silent(Actor):
    """Answers a stream without streaming anything."""

    async def handle(self, message: Any) -> Any:
        usage = Usage(input_tokens=1, output_tokens=0)
        return LlmResponse(content="", usage=usage, provider="N", model="m1")


async def test_a_stream_answered_without_events_ends_with_the_answer(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Silent)
        pool = ProviderPool([Target(ref=ref, provider="N", model="m1")])
        async with pool.stream(request()) as events:
            got = [event async for event in events]
    assert got == []
    assert events.error is None
    assert events.response is not None and events.response.provider == "N"
    assert [(a.provider, a.outcome) for a in pool.ledger] == [("N", "ok")]


async def test_a_hedge_due_while_the_others_wait_starts_when_one_is_free(
    autojump_clock: MockClock,
) -> None:
    # A is rate limited at 0 for 5 s; B (slow) starts at 0. The hedge is due at 1 but no
    # target is free: it is started at 5, when A is — and A answers before B would.
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=[("rate_limited", 5.0), "ok"])
        targets = [
            Target(ref=refs["A"], provider="A", model="m1"),
            Target(ref=await runtime.spawn(Late), provider="B", model="m1"),
        ]
        pool = ProviderPool(targets, resilience=Resilience(retry=rules()), hedge_after=1.0)
        reply = await pool.complete(request())
        assert (reply.content, trio.current_time()) == ("A", 5.0)
    assert seen == [("A", "m1", 0.0), ("A", "m1", 5.0)]
    assert [(a.provider, a.outcome, a.started_at, a.hedge) for a in pool.ledger] == [
        ("A", "failed", 0.0, False),
        ("A", "ok", 5.0, True),
        ("B", "cancelled", 0.0, False),
    ]


async def test_hedging_runs_at_most_two_attempts_at_once(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        targets = [
            Target(ref=await runtime.spawn(Late), provider=name, model="m1")
            for name in ("A", "B", "C")
        ]
        pool = ProviderPool(targets, hedge_after=1.0)
        reply = await pool.complete(request())
        assert (reply.content, trio.current_time()) == ("late", 10.0)
    assert [(a.provider, a.outcome, a.started_at) for a in pool.ledger] == [
        ("A", "ok", 0.0),
        ("B", "cancelled", 1.0),
    ]


class Costly(Actor):
    """Streams "a", then answers 1 s later with 100 tokens used."""

    async def handle(self, message: Any) -> Any:
        await message.sink.send(StreamEvent(kind="text", text="a"))
        await trio.sleep(1)
        usage = Usage(input_tokens=50, output_tokens=50)
        return LlmResponse(content="a", usage=usage, provider="A", model="m1")


async def test_a_stream_charged_past_its_budget_fails_with_budget_exceeded(
    autojump_clock: MockClock,
) -> None:
    budget = Budget("run-1", BudgetLimits(tokens=10))
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Costly)
        pool = ProviderPool([Target(ref=ref, provider="A", model="m1")], budget=budget)
        received: list[str] = []
        with pytest.raises(ActorError) as caught:
            async with pool.stream(request()) as events:
                async for event in events:
                    received.append(event.text)
    assert received == ["a"]
    assert caught.value.code is Code.BUDGET_EXCEEDED
    assert events.error is caught.value
    assert budget.tokens == 100
    assert [(a.outcome, a.usage) for a in pool.ledger] == [
        ("ok", Usage(input_tokens=50, output_tokens=50))
    ]
