"""The race's corners: a stream that answers without any event, and a hedge that finds
no target free when it is due and starts when the next one is."""

from __future__ import annotations

from typing import Any

import trio
from trio.testing import MockClock

from actors import Actor, Usage, open_runtime
from actors.providers import LlmResponse
from supervisors import ProviderPool, Resilience, Target
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
