"""Every exit path of a pooled call, besides its own caller's cancel (test_pool_edges,
test_pool_cancel_properties): the provider actor stopped under it, a per-attempt
timeout, an enclosing scope cancelled by a crashing sibling."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from actors import Code
from actors.testing.chaos import Fault, FaultScript
from supervisors import Breaker, Budget, BudgetLimits, ProviderPool, Resilience
from tests.pool_helpers import cancelled_by_a_crashing_sibling, faults, fleet, request, rules


def slow_a() -> dict[str, FaultScript | None]:
    """A answers in 10 s (a stream: 10 s between events); B at once."""
    return {
        "A": faults(Fault(kind="latency", seconds=10), Fault(kind="slow_stream", seconds=10)),
        "B": None,
    }


async def _ask(pool: ProviderPool, stream: bool) -> str:
    if stream:
        async with pool.stream(request("a b c")) as events:
            async for _ in events:
                pass
        assert events.response is not None
        return events.response.provider
    return (await pool.complete(request("a b c"))).provider


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("hedge", [None, 8.0])
async def test_the_provider_actor_stopped_mid_request_moves_to_the_next_target(
    autojump_clock: MockClock, stream: bool, hedge: float | None
) -> None:
    async with fleet(slow_a()) as f:
        breaker = Breaker()
        pool = ProviderPool(
            f.targets("A", "B"),
            resilience=Resilience(retry=rules(), breaker=breaker),
            hedge_after=hedge,
        )
        served: list[str] = []

        async def ask() -> None:
            served.append(await _ask(pool, stream))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.sleep(1)
            await f.tree.root.terminate_child("A")
        assert served == ["B"]
        # The stop gives A's in-flight work its shutdown grace (ChildSpec's default 5 s);
        # when A is gone the request moves on at once.
        assert trio.current_time() == 6.0
        first = next(a for a in pool.ledger if a.provider == "A")
        assert first.outcome == "failed"
        assert first.code in (Code.OUTCOME_UNKNOWN, Code.CANCELLED, Code.ACTOR_STOPPED)
        await trio.sleep(30)
        [a_request] = f.servers["A"].requests
        assert a_request.disconnected is True  # its HTTP request did not go on for nobody
        assert str(await breaker.state_of("A")) == "closed"  # the stop is not A's fault
        # A stopped: skipped at once; restarted: it serves again.
        assert (await pool.complete(request())).provider == "B"
        await f.tree.root.restart_child("A")
        assert (await pool.complete(request())).provider == "A"


async def test_an_attempt_timeout_moves_to_the_next_target(autojump_clock: MockClock) -> None:
    async with fleet(slow_a()) as f:
        pool = ProviderPool(
            f.targets("A", "B"), resilience=Resilience(retry=rules()), attempt_timeout=2.0
        )
        reply = await pool.complete(request())
        assert (reply.provider, trio.current_time()) == ("B", 2.0)
        assert [(a.provider, a.outcome, a.code) for a in pool.ledger] == [
            ("A", "failed", Code.CALL_TIMEOUT),
            ("B", "ok", None),
        ]
        await trio.sleep(30)
        assert f.servers["A"].requests[0].disconnected is True


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("hedge", [None, 0.5])
async def test_an_enclosing_scope_cancelled_by_a_crashing_sibling(
    autojump_clock: MockClock, stream: bool, hedge: float | None
) -> None:
    slow = {
        "A": faults(Fault(kind="latency", seconds=10), Fault(kind="slow_stream", seconds=10)),
        "B": faults(Fault(kind="latency", seconds=10), Fault(kind="slow_stream", seconds=10)),
    }
    async with fleet(slow) as f:
        budget = Budget("enclosing", BudgetLimits())
        pool = ProviderPool(f.targets("A", "B"), budget=budget, hedge_after=hedge)
        seen = await cancelled_by_a_crashing_sibling(lambda: _ask(pool, stream))
        assert [type(exc) for exc in seen] == [trio.Cancelled]  # never a failure, no group
        assert all(a.outcome == "cancelled" for a in pool.ledger)
        assert len(pool.ledger) == (1 if hedge is None else 2)
        assert budget.tokens == 0
        await trio.sleep(30)
        requests = [r for s in f.servers.values() for r in s.requests]
        assert len(requests) == len(pool.ledger)
        assert all(r.disconnected for r in requests)
