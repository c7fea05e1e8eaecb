"""The ledger entry of each way an attempt ends, pinned field by field: a reported cost
without a price table, an answer that is not a provider's, a cut by the deadline, a
refusal (no entry), and ``usage_estimated`` only where the pool estimated."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, open_runtime
from actors.providers import LlmResponse
from supervisors import AllProvidersFailed, Breaker, ProviderPool, Resilience, Target
from supervisors.state import MemoryState
from tests.pool_helpers import request, rules


class Replies(Actor):
    """Answers every request with ``reply`` after ``delay`` seconds."""

    def __init__(self, reply: Any, delay: float = 0.0) -> None:
        self.reply, self.delay = reply, delay

    async def handle(self, message: Any) -> Any:
        await trio.sleep(self.delay)
        return self.reply


class Shared:
    """A breaker state that is not the in-process one (every call is MemoryState's)."""

    def __init__(self) -> None:
        self.inner = MemoryState()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def answer(cost: float | None = None) -> LlmResponse:
    usage = Usage(input_tokens=3, output_tokens=5, cost=cost)
    return LlmResponse(content="ok", usage=usage, provider="A", model="m1")


async def _pool(reply: Any, delay: float = 0.0, **options: Any) -> tuple[Any, ProviderPool]:
    """One request to a pool over one actor answering ``reply``: the answer or error."""
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Replies(reply, delay))
        pool = ProviderPool([Target(ref=ref, provider="A", model="m1")], **options)
        try:
            got: Any = await pool.complete(request())
        except ActorError as error:
            got = error
    return got, pool


@pytest.mark.parametrize("deadline", [None, 100.0])
async def test_a_reported_cost_is_the_entrys_cost_without_a_price_table(
    autojump_clock: MockClock, deadline: float | None
) -> None:
    got, pool = await _pool(answer(cost=0.5), deadline=deadline)
    assert got.content == "ok"
    [entry] = pool.ledger
    assert (entry.outcome, entry.usage, entry.cost) == ("ok", answer(0.5).usage, 0.5)
    assert (entry.usage_estimated, entry.hedge) == (False, False)
    assert pool.ledger.total.cost == 0.5


@pytest.mark.parametrize("deadline", [None, 100.0])
@pytest.mark.parametrize(
    ("reply", "what"),
    [
        ("text", "a str, not an LlmResponse"),
        (
            LlmResponse(content="x", usage=None),  # type: ignore[arg-type]
            "an LlmResponse whose usage is a NoneType",
        ),
    ],
)
async def test_an_answer_that_is_not_a_providers_is_internal_naming_the_target(
    autojump_clock: MockClock, deadline: float | None, reply: Any, what: str
) -> None:
    got, pool = await _pool(reply, deadline=deadline)
    assert isinstance(got, ActorError)
    assert got.code is Code.INTERNAL
    assert got.message == f"target A/m1 answered {what}"
    assert (got.provider, got.model) == ("A", "m1")
    [entry] = pool.ledger
    assert (entry.outcome, entry.code, entry.usage, entry.usage_estimated) == (
        "failed",
        Code.INTERNAL,
        None,
        False,
    )


async def test_an_attempt_cut_by_the_deadline_is_a_failed_timeout_entry(
    autojump_clock: MockClock,
) -> None:
    got, pool = await _pool(answer(), delay=50, deadline=10.0)
    assert isinstance(got, AllProvidersFailed)
    assert got.category is Code.TIMEOUT
    [entry] = pool.ledger
    assert (entry.number, entry.outcome, entry.code, entry.usage, entry.cost) == (
        1,
        "failed",
        Code.TIMEOUT,
        None,
        None,
    )
    assert (entry.started_at, entry.latency, entry.usage_estimated) == (0.0, 10.0, False)
    assert got.attempts == (entry,)


async def test_a_fast_attempt_refused_by_a_shared_breaker_leaves_no_entry(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker(state=Shared())
    auth = ActorError.from_code(Code.AUTH, "bad key")
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Replies(answer()))
        pool = ProviderPool(
            [Target(ref=ref, provider="A", model="m1")],
            resilience=Resilience(retry=rules(), breaker=breaker),
        )
        admission = await breaker.admit("A", "m1")
        await breaker.record(admission, auth)  # open for good, in the shared state
        with pytest.raises(AllProvidersFailed) as caught:
            await pool.complete(request())
    assert caught.value.attempts == ()
    assert caught.value.category is Code.CIRCUIT_OPEN
    assert list(pool.ledger) == []
