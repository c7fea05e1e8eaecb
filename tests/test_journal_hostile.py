"""Probes of the journal as a hostile user would write them: resumes raced, cancelled,
after a halt in the same process, past the run's wall clock."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from actors import ActorError
from actors.journal import MemoryStore, record_of
from actors.providers import OpenAIProvider, ProviderConfig
from actors.testing.chaos import chaos_server
from actors.tools import NONE, Grants, ToolContext, ToolGroup, tool
from supervisors import (
    BudgetLimits,
    ChildSpec,
    ProviderPool,
    SupervisorSpec,
    Target,
    Tools,
    open_tree,
    tool_hosts,
)
from supervisors.runs import (
    Agent,
    Approval,
    Edge,
    NodeContext,
    Runs,
    Step,
    Workflow,
    open_journal,
    open_runs,
)
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


async def test_two_executions_of_one_node_in_flight_resume_with_their_own_keys(
    autojump_clock: Any,
) -> None:
    seen: list[str] = []
    gate = trio.Event()

    async def quick(ctx: NodeContext) -> None:
        return None

    async def held(ctx: NodeContext) -> dict[str, Any]:
        seen.append(ctx.key)
        await gate.wait()
        return {f"x{ctx.execution}": ctx.key}

    wf = Workflow(
        name="twice",
        nodes=[
            Step(id="a", fn=quick),
            Step(id="b", fn=quick),
            Step(id="x", fn=held, writes=["x1", "x2"]),
        ],
        edges=[Edge(source="a", target="x"), Edge(source="b", target="x")],
        start=["a", "b"],
    )
    store = MemoryStore()
    async with journalled(store, runners=4) as (_, runs, _journal):
        run = await runs.start(wf, run_id="t")
        await trio.sleep(1)
        assert sorted(seen) == ["t:x:1", "t:x:2"]
        kept = crashed(store)
        run.cancel("test over")
    seen.clear()
    gate.set()
    async with journalled(kept, workflows=[wf], runners=4) as (_, runs, _journal):
        (again,) = runs.resumed
        outcome = await again.wait()
    assert outcome.status == "completed"
    assert sorted(seen) == ["t:x:1", "t:x:2"]  # each execution again, with its own key
    assert outcome.state == {"x1": "t:x:1", "x2": "t:x:2"}
    resumed = of(again, "run:resumed")[0]
    assert sorted(resumed.in_flight) == ["x", "x"]
    assert_well_formed(again)


TOOL_GATE: list[trio.Event] = []
LOOKED_UP: list[str] = []


@tool
async def slow_lookup(query: str, context: ToolContext) -> dict[str, Any]:
    """Look something up, once per key."""
    LOOKED_UP.append(context.key)
    if TOOL_GATE:
        await TOOL_GATE[0].wait()
    return {"found": query.upper()}


@asynccontextmanager
async def _agent_world(store: MemoryStore, wf: Workflow) -> AsyncIterator[Runs]:
    group = ToolGroup("g", [slow_lookup])
    async with chaos_server() as server:
        config = ProviderConfig(name="A", base_url=server.url, api_key="sk-test-journal-0000")
        children = [ChildSpec(id="A", actor=OpenAIProvider, args=(config,)), *tool_hosts(group)]
        async with open_tree(SupervisorSpec(children=children)) as tree:
            pool = ProviderPool([Target(ref=tree.ref("A"), provider="A", model="m1")])
            tools = await Tools.from_tree(tree, group, grants=NONE)
            async with (
                open_journal(store) as journal,
                open_runs(tree, pools=pool, tools=tools, journal=journal, workflows=[wf]) as runs,
            ):
                yield runs


async def test_an_agent_in_flight_at_a_crash_calls_its_tool_again_with_the_same_key(
    autojump_clock: Any,
) -> None:
    wf = Workflow(
        name="agentic",
        nodes=[
            Agent(
                id="agent",
                model="m1",
                messages=[("user", "call: {topic}")],
                grants=Grants.allow("slow_lookup"),
            )
        ],
    )
    LOOKED_UP.clear()
    TOOL_GATE[:] = [trio.Event()]
    store = MemoryStore()
    async with _agent_world(store, wf) as runs:
        run = await runs.start(wf, {"topic": "weather"}, run_id="ag")
        await trio.sleep(1)
        assert LOOKED_UP == ["ag:agent:1:0"]  # the tool is running
        kept = crashed(store)
        run.cancel("test over")
    TOOL_GATE.clear()
    async with _agent_world(kept, wf) as runs:
        (again,) = runs.resumed
        outcome = await again.wait()
    assert outcome.status == "completed", outcome
    assert LOOKED_UP == ["ag:agent:1:0", "ag:agent:1:0"]  # the same key: done once by the tool
    assert [(c.key, c.code) for c in of(again, "tool:called")] == [("ag:agent:1:0", "ok")]
    assert of(again, "run:resumed")[0].in_flight == ("agent",)


class Boom(BaseException):
    """Not an Exception: what a store's write may raise in the worst case."""


class Exploding(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.explode = False

    def write(self, batch: Any) -> None:
        if self.explode:
            raise Boom("the store blew up")
        super().write(batch)


async def test_a_store_raising_a_base_exception_halts_the_runs_and_hangs_nothing(
    autojump_clock: Any,
) -> None:
    store = Exploding()

    async def last(ctx: NodeContext) -> dict[str, Any]:
        store.explode = True
        return {"a": 1}

    wf = Workflow(name="w", nodes=[Step(id="a", fn=last, writes=["a"])])
    started: list[Any] = []
    with pytest.raises(BaseException) as info, trio.fail_after(60):  # nothing hangs
        async with journalled(store) as (_, runs, _journal):
            started.append(await runs.start(wf, run_id="b"))
            await trio.sleep_forever()  # the journal's failure ends the blocks, loudly
    found = info.value
    while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
        found = found.exceptions[0]
    assert isinstance(found, Boom)
    (run,) = started
    assert run.done and run.outcome().code == "persistence_unavailable"
    assert names(run) == ["run:started", "node:started", "run:failed"]


async def test_a_run_whose_end_was_not_durable_at_a_halt_has_failed(autojump_clock: Any) -> None:
    store = FlakyStore()

    async def last(ctx: NodeContext) -> dict[str, Any]:
        store.fail = -1  # its completion and the run's end are never written
        return {"a": 1}

    wf = Workflow(name="w", nodes=[Step(id="a", fn=last, writes=["a"])])
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(wf, run_id="e")
        outcome = await run.wait()
        kept = crashed(store)
    assert outcome.status == "failed" and outcome.code == "persistence_unavailable"
    assert names(run) == ["run:started", "node:started", "run:failed"]
    assert of(run, "run:failed")[0].at == 6.0
    assert [record_of(e).name for e in kept.entries("e")] == ["run:started", "node:started"]
    assert kept.run("e").status == "running"  # type: ignore[union-attr]


async def test_two_runs_blocks_on_one_journal_resume_a_run_once(autojump_clock: Any) -> None:
    from actors.testing import capture_events

    kept = await _paused()
    with capture_events("run.not_resumed") as refused:
        async with (
            open_journal(kept) as journal,
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree, journal=journal, workflows=[WF]) as first,
            open_runs(tree, journal=journal, workflows=[WF], name="runs-2") as second,
        ):
            assert [r.run_id for r in first.resumed] == ["r"]
            assert second.resumed == ()
            with pytest.raises(ActorError, match=r"^\[name_taken\] run 'r' is running on this"):
                await second.resume("r")
            (run,) = first.resumed
            run.cancel("done")
    assert [(r.run_id, r.code) for r in refused] == [("r", "name_taken")]


async def test_a_retry_backoff_goes_on_across_a_restart(autojump_clock: Any) -> None:
    from actors import fail

    starts: list[int] = []

    async def limited(ctx: NodeContext) -> Any:
        starts.append(ctx.attempt)
        if ctx.attempt == 1:
            return fail("rate_limited", "slow down", retryable=True, retry_after=30.0)
        return {"ok": ctx.attempt}

    wf = Workflow(name="limited", nodes=[Step(id="call", fn=limited, writes=["ok"])])
    store = MemoryStore()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(wf, run_id="rl")
        await trio.sleep(5)  # in the 30 s the provider asked for
        kept = crashed(store)
        run.cancel("test over")
    async with journalled(kept, workflows=[wf]) as (_, runs, _journal):
        (again,) = runs.resumed
        resumed_at = trio.current_time()
        outcome = await again.wait()
        waited = trio.current_time() - resumed_at
    assert outcome.status == "completed" and outcome.state == {"ok": 2}
    assert starts == [1, 2]
    retrying = of(again, "node:retrying")[0]
    second = next(r for r in of(again, "node:started") if r.attempt == 2)
    assert retrying.delay == 30.0
    assert second.at - retrying.at == pytest.approx(30.0)  # in run time, across the restart
    # Run time resumes from the last record (the retry's, at 0): the 5 s waited before
    # the crash left no record, so the whole backoff is waited again — late, never early.
    assert waited == pytest.approx(30.0)


async def test_an_older_checkpoint_without_retry_times_still_restores() -> None:
    from supervisors.runs.progress import Progress

    p = Progress("r", ("s",), {})
    p.restore(
        {
            "seq": 2,
            "state": {},
            "ready": [],
            "fired": {},
            "finished": {},
            "executions": {"s": 1},
            "steps": 1,
            "in_flight": [["s", 1, 1]],
            "decisions": {},
            "terminal": None,
            "started_at": 0.0,
            "last_at": 1.0,
            "budget": [0, 0.0, 0],
        }
    )
    assert p.in_flight == [["s", 1, 1, 0.0]]


@pytest.mark.parametrize("checkpoints", [0, 1, 2, 3, 5, 8, 13, 40])
async def test_a_caller_cancelled_while_a_journalled_start_runs_leaves_nothing_behind(
    autojump_clock: Any, checkpoints: int
) -> None:
    got: list[Any] = []
    async with journalled(workflows=[WF]) as (tree, runs, journal):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def canceller() -> None:
                    for _ in range(checkpoints):
                        await trio.lowlevel.checkpoint()
                    scope.cancel()

                nursery.start_soon(canceller)
                got.append(await runs.start(WF, run_id="c"))
        await trio.sleep(1)
        if got:
            assert not got[0].done  # it is the caller's: paused on its approval
            got[0].cancel("done")
            await got[0].wait()
        assert runs.live == {}
        assert tree.root.child("runs").which_children() == []
        assert journal.claim("c")  # no claim was left behind
        journal.release("c")
