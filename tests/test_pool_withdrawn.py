"""A pool call that never reached a provider: a caller cancelled before its attempt
started (the fast path, the walk with a deadline, a hedged race), or while its message
waited queued behind a busy provider actor (withdrawn, never handled), leaves no ledger
entry and gives its limiter reservation back whole. One cancelled while the provider
had it keeps both (the provider may have received the request). MockClock, autojump;
a limiter that does not refill, so every level is exact."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorRef, Usage, open_runtime
from actors.providers import LlmResponse
from supervisors import ProviderPool, RateLimit, RateLimiter, Resilience, Target
from tests.pool_helpers import request

#: 60 requests and 6000 tokens, all but never refilled (levels rounded to 6 places):
#: what an attempt keeps stays taken.
STILL = RateLimit(
    requests_per_minute=1e-9, request_burst=60, tokens_per_minute=1e-9, token_burst=6000
)
#: The limiter's estimate of request(): its prompt and its max_tokens.
ESTIMATE = request().estimated_prompt_tokens() + request().max_tokens


class Slow(Actor):
    """Answers every message after 10 s; counts what it handled."""

    def __init__(self) -> None:
        self.handled = 0

    async def handle(self, message: Any) -> Any:
        self.handled += 1
        await trio.sleep(10)
        if isinstance(message, str):
            return message
        return LlmResponse(content="ok", usage=Usage(input_tokens=1, output_tokens=1), model="m1")


def levels(limiter: RateLimiter) -> tuple[float, float]:
    state: Any = limiter.state  # a MemoryState
    now = trio.current_time()
    specs = STILL.specs("A")
    return (
        round(state.bucket("A:requests", specs["A:requests"], now).level, 6),
        round(state.bucket("A:tokens", specs["A:tokens"], now).level, 6),
    )


def pool_on(ref: ActorRef, limiter: RateLimiter, **fields: Any) -> ProviderPool:
    target = Target(ref=ref, provider="A", model="m1")
    return ProviderPool([target], resilience=Resilience(limiter=limiter), **fields)


SHAPES = [{}, {"deadline": 60.0}, {"hedge_after": 1.0}]
SHAPE_IDS = ["fast-path", "walk-with-deadline", "hedged"]


@pytest.mark.parametrize("fields", SHAPES, ids=SHAPE_IDS)
async def test_a_caller_already_cancelled_sends_nothing_and_takes_nothing(
    autojump_clock: MockClock, fields: dict[str, Any]
) -> None:
    slow = Slow()
    limiter = RateLimiter({"A": STILL})
    async with open_runtime() as runtime:
        pool = pool_on(await runtime.spawn(lambda: slow), limiter, **fields)
        with trio.CancelScope() as scope:
            scope.cancel()
            await pool.complete(request())
        assert scope.cancelled_caught
        await trio.sleep(20)
    assert (slow.handled, list(pool.ledger.entries)) == (0, [])
    assert levels(limiter) == (60.0, 6000.0)


@pytest.mark.parametrize("fields", SHAPES, ids=SHAPE_IDS)
async def test_a_caller_cancelled_while_queued_is_withdrawn_with_no_entry(
    autojump_clock: MockClock, fields: dict[str, Any]
) -> None:
    slow = Slow()
    limiter = RateLimiter({"A": STILL})
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: slow)
        pool = pool_on(ref, limiter, **fields)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: ref.call("busy", timeout=None))  # busy until 10 s
            await trio.sleep(1)
            with trio.move_on_after(0.5) as scope:  # before any hedge: queued throughout
                await pool.complete(request())
            assert scope.cancelled_caught
            assert levels(limiter) == (60.0, 6000.0)  # given back at once, whole
    assert trio.current_time() == 10.0
    assert (slow.handled, list(pool.ledger.entries)) == (1, [])  # "busy" only


@pytest.mark.parametrize("fields", SHAPES, ids=SHAPE_IDS)
async def test_a_caller_cancelled_while_handled_keeps_the_entry_and_the_reservation(
    autojump_clock: MockClock, fields: dict[str, Any]
) -> None:
    slow = Slow()
    limiter = RateLimiter({"A": STILL})
    async with open_runtime() as runtime:
        pool = pool_on(await runtime.spawn(lambda: slow), limiter, **fields)
        with trio.move_on_after(0.5):
            await pool.complete(request())
    assert slow.handled == 1
    assert [(entry.outcome, entry.number) for entry in pool.ledger.entries] == [("cancelled", 1)]
    assert levels(limiter) == (59.0, 6000.0 - ESTIMATE)  # the provider may have it
