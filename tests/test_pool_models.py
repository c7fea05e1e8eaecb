"""Each target is asked for its own model, on every path (issue 26).

Real provider actors against loopback chaos servers, on virtual time. Each server plays
a real provider that does not serve the other targets' models: a request for one of them
is answered 404 ``model_not_found``. The requests the servers recorded show the model
each target was sent.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors.testing.chaos import Fault, FaultScript
from supervisors import Breaker, BreakerConfig, ProviderPool, Resilience
from supervisors.state.base import BreakerState
from tests.pool_helpers import faults, fleet, request, rules

PRIMARY, SECONDARY = "alpha-large", "beta-sonnet"


def not_served(*models: str) -> list[Fault]:
    """What a provider answers a request for a model it does not have: 404."""
    return [Fault(kind="status", status=404, model=model, times=100) for model in models]


async def test_with_the_primary_breaker_open_the_secondary_gets_its_own_model(
    autojump_clock: MockClock,
) -> None:
    """The primary fails once (503): its breaker (threshold 1) opens. The next request,
    on the fast path (no budget, deadline or hedging), skips the primary and is sent to
    the secondary with the secondary's model: answered at once, its breakers closed."""
    scripts: dict[str, FaultScript | None] = {
        "A": faults(Fault(kind="status", status=503), *not_served(SECONDARY)),
        "B": faults(*not_served(PRIMARY)),
    }
    breaker = Breaker(BreakerConfig(failure_threshold=1))
    async with fleet(scripts) as f:
        pool = ProviderPool(
            [f.target("A", PRIMARY), f.target("B", SECONDARY)],
            resilience=Resilience(retry=rules(), breaker=breaker),
        )
        assert pool.deadline is None  # the rules have none: complete() takes the fast path
        first = await pool.complete(request("q0", model=PRIMARY))
        assert (first.provider, first.model) == ("B", SECONDARY)
        assert await breaker.state_of("A") is BreakerState.OPEN

        reply = await pool.complete(request("q1", model=PRIMARY))
        assert trio.current_time() < 1.0
        assert trio.current_time() == 0.0  # nothing waited for, nothing stalled
        assert (reply.provider, reply.model, reply.content) == ("B", SECONDARY, "echo: q1")
        assert [r.model for r in f.servers["A"].requests] == [PRIMARY]
        assert [r.model for r in f.servers["B"].requests] == [SECONDARY, SECONDARY]
        assert [r.fault for r in f.servers["B"].requests] == [None, None]
        assert await breaker.state_of("B") is BreakerState.CLOSED
        assert await breaker.state_of("B", SECONDARY) is BreakerState.CLOSED
        assert breaker.admit_fast("B", SECONDARY) is not None  # nothing counted
    rows = [(a.number, a.provider, a.model, a.outcome, a.code) for a in pool.ledger]
    assert rows == [
        (1, "A", PRIMARY, "failed", "unavailable"),
        (2, "B", SECONDARY, "ok", None),
        (1, "B", SECONDARY, "ok", None),
    ]


def _pool(f: Any, how: str) -> ProviderPool:
    targets = [f.target("A", PRIMARY), f.target("B", SECONDARY)]
    if how == "walk":
        return ProviderPool(targets, resilience=Resilience(retry=rules()), deadline=60)
    if how == "hedged":
        return ProviderPool(targets, resilience=Resilience(retry=rules()), hedge_after=0.5)
    return ProviderPool(targets, resilience=Resilience(retry=rules()))  # fast path, stream


@pytest.mark.parametrize("how", ["fast", "walk", "hedged", "stream"])
async def test_a_request_for_another_model_is_sent_with_the_first_targets_model(
    autojump_clock: MockClock, how: str
) -> None:
    """The caller names the secondary's model; the first attempt, to the primary, asks
    for the primary's model — on the fast path, the general walk, hedged, streamed."""
    scripts: dict[str, FaultScript | None] = {
        "A": faults(*not_served(SECONDARY)),
        "B": faults(*not_served(PRIMARY)),
    }
    async with fleet(scripts) as f:
        pool = _pool(f, how)
        asked = request("q", model=SECONDARY)
        if how == "stream":
            async with pool.stream(asked) as events:
                text = "".join([event.text async for event in events if event.kind == "text"])
            reply = events.response
            assert reply is not None and text == "echo: q"
        else:
            reply = await pool.complete(asked)
        assert trio.current_time() == 0.0
        assert (reply.provider, reply.model, reply.content) == ("A", PRIMARY, "echo: q")
        assert [(r.model, r.fault) for r in f.servers["A"].requests] == [(PRIMARY, None)]
        assert f.count("B") == 0
    rows = [(a.number, a.provider, a.model, a.outcome, a.code) for a in pool.ledger]
    assert rows == [(1, "A", PRIMARY, "ok", None)]
