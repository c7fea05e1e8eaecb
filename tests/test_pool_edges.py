"""Edges found by a hostile pass: what a caller gets on each of them."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, open_runtime
from actors.providers import LlmResponse, StreamEvent
from actors.testing import capture_events
from actors.testing.chaos import Fault
from supervisors import (
    AllProvidersFailed,
    Budget,
    BudgetLimits,
    Price,
    ProviderPool,
    Resilience,
    RetryLater,
    Target,
)
from tests.pool_helpers import faults, fleet, request, rules


class OneEvent(Actor):
    """A provider whose stream is one event, answered through a deferred reply."""

    max_deferred = 4

    async def handle(self, message: Any) -> Any:
        return self.defer(self.work, message)

    async def work(self, message: Any) -> LlmResponse:
        await message.sink.send(StreamEvent(kind="text", text="only"))
        return LlmResponse(content="only", provider="W", model="m1")


class Answers(Actor):
    """Answers every request with ``reply``."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    async def handle(self, message: Any) -> Any:
        return self.reply


@pytest.mark.parametrize("hedge", [None, 1.0])
async def test_a_stream_of_one_event_hands_it_over(
    autojump_clock: MockClock, hedge: float | None
) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(OneEvent)
        pool = ProviderPool([Target(ref=ref, provider="W", model="m1")], hedge_after=hedge)
        async with pool.stream(request()) as events:
            got = [(event.kind, event.text) async for event in events]
        assert got == [("text", "only")]
        assert events.response is not None and events.response.content == "only"


@pytest.mark.parametrize("hedge", [None, 0.5])
async def test_a_cancelled_caller_gets_trio_cancelled_not_a_group(
    autojump_clock: MockClock, hedge: float | None
) -> None:
    slow = {
        "A": faults(Fault(kind="latency", seconds=5, times=4)),
        "B": faults(Fault(kind="latency", seconds=5, times=4)),
    }
    async with fleet(slow) as f:
        pool = ProviderPool(f.targets("A", "B"), hedge_after=hedge)
        for streamed in (False, True):
            caught = None
            with trio.move_on_after(1.5):
                try:
                    if streamed:
                        async with pool.stream(request()) as events:
                            async for _ in events:
                                pass
                    else:
                        await pool.complete(request())
                except trio.Cancelled as exc:
                    caught = exc
                    raise
            assert isinstance(caught, trio.Cancelled), (streamed, hedge)


async def test_a_deadline_cut_in_a_hedged_race_escalates_once_with_its_category(
    autojump_clock: MockClock,
) -> None:
    slow = {
        "A": faults(Fault(kind="latency", seconds=10, times=2)),
        "B": faults(Fault(kind="latency", seconds=10, times=2)),
    }
    asked: list[AllProvidersFailed] = []

    async def hook(failure: AllProvidersFailed) -> RetryLater | None:
        asked.append(failure)
        return RetryLater(seconds=1) if len(asked) == 1 else None

    async with fleet(slow) as f:
        pool = ProviderPool(
            f.targets("A", "B"),
            resilience=Resilience(retry=rules()),
            deadline=2,
            hedge_after=0.5,
            on_exhausted=hook,
        )
        with capture_events("pool.escalated") as audit, pytest.raises(AllProvidersFailed):
            await pool.complete(request())
        assert [(a.category, len(a.attempts)) for a in asked] == [
            (Code.TIMEOUT, 2),
            (Code.TIMEOUT, 4),  # the retry ran: two more attempts, cut again
        ]
        assert [e.decision for e in audit] == ["retry", "none"]
        assert trio.current_time() == 5.0  # cut at 2, retry at 3, cut again at 5


@pytest.mark.parametrize(
    ("reply", "what"),
    [
        ("hello", "a str, not an LlmResponse"),
        (LlmResponse(content="x", usage=None), "an LlmResponse whose usage is a NoneType"),  # type: ignore[arg-type]
        (LlmResponse(content="x", usage="lots"), "an LlmResponse whose usage is a str"),  # type: ignore[arg-type]
    ],
)
async def test_a_broken_answer_is_internal_and_typed(
    autojump_clock: MockClock, reply: Any, what: str
) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Answers(reply))
        pool = ProviderPool([Target(ref=ref, provider="W", model="m1")])
        with pytest.raises(ActorError, match=f"target W/m1 answered {what}") as caught:
            await pool.complete(request())
        assert caught.value.code is Code.INTERNAL
        with pytest.raises(ActorError, match=f"answered {what}"):
            async with pool.stream(request()) as events:
                async for _ in events:
                    pass


async def test_a_reported_cost_that_is_not_a_cost_is_priced_instead(
    autojump_clock: MockClock,
) -> None:
    bogus = LlmResponse(
        content="x", usage=Usage(input_tokens=2, output_tokens=1, cost=float("nan"))
    )
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Answers(bogus))
        budget = Budget("b", BudgetLimits(cost=10.0))
        pool = ProviderPool(
            [Target(ref=ref, provider="W", model="m1")],
            budget=budget,
            prices={("W", "*"): Price(input_per_mtok=1e6, output_per_mtok=1e6)},
        )
        await pool.complete(request())
        [entry] = pool.ledger
        assert entry.cost == 3.0
        assert budget.cost == 3.0


async def test_reading_a_stream_after_its_block_or_from_two_tasks_is_typed(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": faults(Fault(kind="slow_stream", seconds=1, times=2))}) as f:
        pool = ProviderPool(f.targets("A"))
        async with pool.stream(request("one two three")) as never_read:
            pass
        with pytest.raises(ActorError, match="block was left before the stream ended") as caught:
            await never_read.__anext__()
        assert caught.value.code is Code.CANCELLED
        async with pool.stream(request("one two three")) as events:
            first = await events.__anext__()
            assert first.kind == "text"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(events.__anext__)
                await trio.sleep(0.1)
                with pytest.raises(ActorError, match="another task is reading") as two:
                    await events.__anext__()
                assert two.value.code is Code.INPUT_VALIDATION
        with pytest.raises(ActorError, match="block was left"):
            await events.__anext__()


class StreamsText(Actor):
    """Streams something that is not a StreamEvent: not a provider actor."""

    async def handle(self, message: Any) -> Any:
        await message.sink.send("not an event")
        return LlmResponse(content="x")


async def test_a_target_streaming_something_else_is_internal(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(StreamsText)
        pool = ProviderPool([Target(ref=ref, provider="W", model="m1")])
        with pytest.raises(ActorError, match="W/m1 streamed a str, not a StreamEvent") as caught:
            async with pool.stream(request()) as events:
                async for _ in events:
                    pass
        assert caught.value.code is Code.INTERNAL


async def test_a_retry_later_walks_the_chain_again_from_the_top(
    autojump_clock: MockClock,
) -> None:
    slow = {
        "A": faults(Fault(kind="latency", seconds=10)),
        "B": faults(Fault(kind="latency", seconds=10)),
    }
    decisions = [RetryLater(seconds=1)]

    async def hook(failure: AllProvidersFailed) -> RetryLater | None:
        return decisions.pop(0) if decisions else None

    async with fleet(slow) as f:
        pool = ProviderPool(
            f.targets("A", "B"), resilience=Resilience(retry=rules()), deadline=2, on_exhausted=hook
        )
        reply = await pool.complete(request())
        assert (reply.provider, trio.current_time()) == ("A", 3.0)  # A cut at 2, again at 3
        assert f.times("B") == []
