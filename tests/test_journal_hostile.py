"""Probes of the journal as a hostile user would write them: resumes raced, cancelled,
after a halt in the same process, past the run's wall clock."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio

from actors import ActorError
from actors.journal import MemoryStore, record_of
from supervisors import BudgetLimits
from supervisors.runs import Approval, Edge, NodeContext, Step, Workflow
from tests.journal_helpers import FlakyStore, crashed, journalled
from tests.runs_helpers import assert_well_formed, names, of

CALLS: list[str] = []


async def _step(ctx: NodeContext) -> dict[str, Any]:
    CALLS.append(ctx.key)
    return {ctx.node_id: ctx.key}


WF = Workflow(
    name="gate",
    nodes=[
        Step(id="a", fn=_step, writes=["a"]),
        Approval(id="ok"),
        Step(id="b", fn=_step, writes=["b"]),
    ],
    edges=[Edge(source="a", target="ok"), Edge(source="ok", target="b")],
)


async def _paused(run_id: str = "r", **start: Any) -> MemoryStore:
    store = MemoryStore()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(WF, run_id=run_id, **start)
        async for record in run.events():
            if record.name == "approval:requested":
                break
        kept = crashed(store)
        run.cancel("test over")
    return kept


async def test_two_resumes_of_one_run_at_once_start_it_once(autojump_clock: Any) -> None:
    CALLS.clear()
    kept = await _paused()
    results: list[Any] = []
    async with journalled(kept, workflows=[WF], resume=False) as (_, runs, _journal):

        async def resume() -> None:
            try:
                results.append(await runs.resume("r"))
            except ActorError as error:
                results.append(error)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(resume)
            nursery.start_soon(resume)
        started = [r for r in results if not isinstance(r, ActorError)]
        refused = [r for r in results if isinstance(r, ActorError)]
        assert len(started) == 1 and len(refused) == 1
        assert str(refused[0].code) == "name_taken"
        (run,) = started
        while run.pending != ("ok",):
            await trio.sleep(0.1)
        run.decide("ok", "approve", by="ops")
        assert (await run.wait()).status == "completed"
    assert CALLS == ["r:a:1", "r:b:1"]  # a ran once, before the crash; b once
    assert [record_of(e).seq for e in kept.entries("r")] == list(range(len(run.history)))


async def test_a_caller_cancelled_while_resuming_leaves_no_run_and_it_stays_resumable(
    autojump_clock: Any,
) -> None:
    CALLS.clear()
    kept = await _paused()
    cancelled = 0
    got: Any = None
    async with journalled(kept, workflows=[WF], resume=False) as (tree, runs, _journal):
        for checkpoints in (0, 1, 2, 3, 5, 8, 13, 21, 34, 55):
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:

                    async def canceller(n: int = checkpoints) -> None:
                        for _ in range(n):
                            await trio.lowlevel.checkpoint()
                        scope.cancel()

                    nursery.start_soon(canceller)
                    got = await runs.resume("r")
            if got is not None:
                break  # the cancel came after resume returned: the run is the caller's
            cancelled += 1
            await trio.sleep(1)
            assert runs.live == {}
            assert tree.root.child("runs").which_children() == []
        run = got if got is not None else await runs.resume("r")
        while run.pending != ("ok",):
            await trio.sleep(0.1)
        run.decide("ok", "approve", by="ops")
        assert (await run.wait()).status == "completed"
    assert cancelled >= 3
    assert CALLS == ["r:a:1", "r:b:1"]  # a before the crash, never again; b once
    assert [e.name for e in map(record_of, kept.entries("r"))].count("run:cancelled") == 0


async def test_a_halted_run_resumes_in_the_same_process_once_the_store_is_back(
    autojump_clock: Any,
) -> None:
    store = FlakyStore()
    async with journalled(store, workflows=[WF], runners=2) as (_, runs, _journal):
        run = await runs.start(WF, run_id="h")
        async for record in run.events():
            if record.name == "approval:requested":
                break
        store.fail = -1
        run.decide("ok", "approve", by="ops")  # its record cannot be written
        outcome = await run.wait()
        assert outcome.code == "persistence_unavailable"
        with pytest.raises(ActorError, match=r"^\[persistence_unavailable\] "):
            await runs.resume("h")  # the store is still down
        store.fail = 0
        again = await runs.resume("h")
        assert (await again.wait()).status == "completed"
    assert_well_formed(again)
    assert "run:failed" not in names(again)  # the halt was never journalled
    assert of(again, "approval:decided")[0].by == "ops"  # written once the store came back
    assert [record_of(e) for e in store.entries("h")] == list(again.history)


async def test_a_run_resumed_past_its_wall_clock_times_out_at_once(autojump_clock: Any) -> None:
    kept = await _paused("slow", limits=BudgetLimits(seconds=30.0))
    async with journalled(kept, workflows=[WF]) as (_, runs, _journal):
        (run,) = runs.resumed
        before = trio.current_time()
        outcome = await run.wait()
        waited = trio.current_time() - before
    assert outcome.code == "run_timeout"
    assert 29.0 <= waited <= 30.0  # the run time it had used before the crash counts
    records = list(run.history)
    assert all(a.at <= b.at for a, b in itertools.pairwise(records))
