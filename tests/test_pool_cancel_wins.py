"""Issue 26, through the pool: a provider actor that fails *while* the tree around it is
aborted never makes ``pool.complete`` a provider failure — its caller gets ``cancelled``
with the abort's reason, the failure kept as the cause, the breaker untouched, the
limiter's reservation settled, and nothing retried or failed over.

Seeded schedules (``random.Random(seed)``): how many callers, what each provider does
under the cancel (raise a ``ValueError`` from ``except trio.Cancelled``, a group holding
``trio.Cancelled`` and a ``ValueError``, a shielded cleanup then a raise), which pool
path (the fast path, or the walk with a deadline), and when the abort lands (a virtual
time, then a number of checkpoints). ``MockClock(autojump_threshold=0)``: exact times.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from actors import Actor, ActorError, Code, Usage
from actors.providers import LlmResponse
from supervisors import (
    Breaker,
    BreakerConfig,
    ChildSpec,
    ProviderPool,
    RateLimit,
    RateLimiter,
    Resilience,
    SupervisorSpec,
    Target,
    open_tree,
)
from tests.cancel_helpers import holds_value_error
from tests.pool_helpers import request

SEEDS = range(12)
REASON = "operator stop"
MODES = ("raise", "group", "stubborn")


class Misbehaving(Actor):
    """Answers after 2 s; cancelled meanwhile, fails as its mode says instead of letting
    the cancel out."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def handle(self, message: Any) -> LlmResponse:
        if self.mode == "group":

            async def breaks() -> None:
                try:
                    await trio.sleep(2)
                except trio.Cancelled:
                    raise ValueError("cleanup broke") from None

            async with trio.open_nursery() as nursery:
                nursery.start_soon(breaks)
                await trio.sleep(3)
        else:
            try:
                await trio.sleep(2)
            except trio.Cancelled:
                if self.mode == "stubborn":
                    with trio.CancelScope(shield=True):
                        await trio.sleep(0.5)
                raise ValueError("cleanup broke") from None
        request = message.request
        return LlmResponse(
            content="ok", usage=Usage(input_tokens=1, output_tokens=1), model=request.model
        )


@asynccontextmanager
async def tree_outside(mode: str, ends: list[ActorError]) -> AsyncIterator[Any]:
    """The tree in a task of its own (its callers are outside its block: only the abort
    reaches them); how it ended goes to ``ends``."""

    async def run_tree(*, task_status: trio.TaskStatus[Any]) -> None:
        spec = SupervisorSpec(
            children=[
                ChildSpec(id="alpha", actor=lambda: Misbehaving(mode)),
                ChildSpec(id="beta", actor=lambda: Misbehaving(mode)),
            ]
        )
        try:
            async with open_tree(spec) as tree:
                task_status.started(tree)
                await trio.sleep_forever()
        except ActorError as end:
            ends.append(end)

    async with trio.open_nursery() as nursery:
        yield await nursery.start(run_tree)


async def _aborted(seed: int) -> None:
    rng = random.Random(seed)
    mode = rng.choice(MODES)
    callers = rng.randint(1, 3)
    deadline = rng.choice([None, 600.0])
    cancel_at, checkpoints = rng.choice([0.0, 0.5, 1.0, 1.5]), rng.randint(0, 6)
    breaker = Breaker(BreakerConfig(failure_threshold=1))
    limiter = RateLimiter({"alpha": RateLimit(requests_per_minute=60)})
    answers: list[Any] = []
    ends: list[ActorError] = []
    async with tree_outside(mode, ends) as tree:
        pool = ProviderPool(
            [
                Target(ref=tree.ref("alpha"), provider="alpha", model="alpha-large"),
                Target(ref=tree.ref("beta"), provider="beta", model="beta-small"),
            ],
            resilience=Resilience(breaker=breaker, limiter=limiter),
            deadline=deadline,
        )

        async def call() -> None:
            try:
                answers.append(await pool.complete(request(model="alpha-large")))
            except ActorError as error:
                answers.append(error)

        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(call)
            await trio.sleep_until(cancel_at)
            for _ in range(checkpoints):
                await trio.lowlevel.checkpoint()
            tree.abort(REASON)
    assert [(end.code, end.message) for end in ends] == [(Code.CANCELLED, REASON)]
    assert len(answers) == callers
    for answer in answers:
        assert isinstance(answer, ActorError), answer  # 2 s answers: the abort comes first
        assert (answer.code, answer.message) == (Code.CANCELLED, REASON)
        if answer.delivered:  # the provider had it: its failure under the cancel is kept
            assert holds_value_error(answer), "the provider's failure is kept as the cause"
    assert trio.current_time() == cancel_at + (0.5 if mode == "stubborn" else 0.0)
    # Nothing failed over, nothing counted against a provider, no probe held.
    assert [(e.provider, e.code) for e in pool.ledger.entries] == [("alpha", "cancelled")] * callers
    for provider in ("alpha", "beta"):
        assert (await breaker.state_of(provider)).value == "closed"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_provider_failing_while_its_tree_is_aborted_is_cancelled_for_the_pool(
    seed: int,
) -> None:
    trio.run(_aborted, seed, clock=trio.testing.MockClock(autojump_threshold=0))
