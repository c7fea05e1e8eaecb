"""Pins of the run engine (``supervisors/runs/engine.py``) that its mutants showed
unpinned: the exact texts of the errors it makes (``run_timeout``, ``turn_limit``, an
engine fault), the totals of every terminal record, the reason of a run cancelled by a
node's own ``cancelled`` error, and the ``run:resumed`` record of a resumed run — exact
values at exact virtual times, under the autojump clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors import ActorError, Code, fail
from actors.events import RunErrorDetail
from actors.journal import MemoryStore
from actors.testing import capture_events
from actors.tools import Grants, ToolGroup, tool
from supervisors import Backoff, BudgetLimits
from supervisors.runs import Agent, Approval, Edge, NodeContext, NodeRetry, Workflow
from supervisors.runs import engine as engine_module
from tests.journal_helpers import FlakyStore, crashed, journalled
from tests.runs_helpers import assert_well_formed, names, of, running, step, world, writer

pytestmark = pytest.mark.trio


async def test_run_timeout_says_the_wall_clock_it_was_over(autojump_clock: Any) -> None:
    async def slow(ctx: NodeContext) -> None:
        await trio.sleep(100)

    wf = Workflow(name="w", nodes=[step("a", slow)])
    with capture_events("run.error") as details:
        async with running() as (_, runs):
            run = await runs.start(wf, limits=BudgetLimits(seconds=2.5))
            outcome = await run.wait()
    assert outcome.status == "failed" and outcome.code == "run_timeout"
    assert outcome.error is not None
    assert outcome.error.message == "run over its 2.5 s wall clock"
    assert outcome.error.run_id == run.run_id
    assert outcome.error.node_id is None
    failed = of(run, "run:failed")[0]
    assert (failed.at, failed.duration, failed.tokens, failed.cost, failed.node_id) == (
        2.5,
        2.5,
        0,
        0.0,
        None,
    )
    assert [d.error.message for d in details if isinstance(d, RunErrorDetail)] == [
        "run over its 2.5 s wall clock"
    ]
    assert names(run) == ["run:started", "node:started", "run:failed"]
    assert_well_formed(run)


async def test_turn_limit_says_the_max_steps_and_the_node(autojump_clock: Any) -> None:
    async def tick(ctx: NodeContext) -> dict[str, Any]:
        await trio.sleep(1)
        return {"n": ctx.state.get("n", 0) + 1}

    wf = Workflow(
        name="loop",
        nodes=[step("inc", tick, "n")],
        edges=[Edge(source="inc", target="inc")],
        max_steps=3,
    )
    async with running() as (_, runs):
        run = await runs.start(wf, run_id="loop-1")
        outcome = await run.wait()
    assert outcome.code == "turn_limit"
    assert outcome.error is not None
    assert outcome.error.message == "run over its 3 node executions"
    assert (outcome.error.run_id, outcome.error.node_id) == ("loop-1", "inc")
    assert dict(outcome.state) == {"n": 3}
    failed = of(run, "run:failed")[0]
    assert (failed.node_id, failed.at, failed.duration) == ("inc", 3.0, 3.0)
    assert [r.execution for r in of(run, "node:started")] == [1, 2, 3]
    assert_well_formed(run)


async def test_the_terminal_records_carry_duration_tokens_and_cost(autojump_clock: Any) -> None:
    async def late(ctx: NodeContext) -> dict[str, Any]:
        await trio.sleep(4)
        return {"a": 1}

    wf = Workflow(name="w", nodes=[step("a", late, "a")])
    async with running() as (_, runs):
        await trio.sleep(3)  # the run starts at 3: its duration is counted from there
        run = await runs.start(wf)
        outcome = await run.wait()
        assert outcome.status == "completed"
        done = of(run, "run:completed")[0]
        assert (done.at, done.duration, done.tokens, done.cost) == (7.0, 4.0, 0, 0.0)
        assert type(done.tokens) is int
        cancelled = await runs.start(wf)
        await trio.sleep(2)
        cancelled.cancel("enough")
        assert (await cancelled.wait()).reason == "enough"
    record = of(cancelled, "run:cancelled")[0]
    assert (record.duration, record.tokens, record.cost, record.reason) == (
        2.0,
        0,
        0.0,
        "enough",
    )
    assert record.in_flight == ("a",)
    assert record.resumable is False


@pytest.mark.parametrize("how", ["returns", "raises"])
async def test_a_node_that_ends_cancelled_cancels_the_run_with_its_id(
    autojump_clock: Any, how: str
) -> None:
    async def gives_up(ctx: NodeContext) -> Any:
        await trio.sleep(1)
        if how == "raises":
            raise ActorError.from_code(Code.CANCELLED, "its own words")
        return fail("cancelled", "its own words")

    wf = Workflow(
        name="w",
        nodes=[step("a", writer("a"), "a"), step("b", gives_up), step("c", writer("c"), "c")],
        edges=[Edge(source="a", target="b"), Edge(source="b", target="c")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "cancelled"
    assert outcome.reason == "node 'b' was cancelled"
    cancelled = of(run, "run:cancelled")[0]
    assert cancelled.reason == "node 'b' was cancelled"
    assert cancelled.in_flight == ("b",)
    assert (cancelled.at, cancelled.duration) == (1.0, 1.0)
    assert names(run) == [
        "run:started",
        "node:started",
        "node:completed",
        "node:started",
        "run:cancelled",
    ]
    assert_well_formed(run)


async def test_a_resumed_run_says_what_was_in_flight_ready_and_pending(
    autojump_clock: Any,
) -> None:
    gate = trio.Event()
    calls: list[tuple[str, float]] = []

    async def gated(ctx: NodeContext) -> dict[str, Any]:
        calls.append((ctx.node_id, trio.current_time()))
        await gate.wait()
        return {ctx.node_id: 1}

    async def quick(ctx: NodeContext) -> dict[str, Any]:
        calls.append((ctx.node_id, trio.current_time()))
        return {ctx.node_id: 1}

    wf = Workflow(
        name="fan",
        nodes=[
            step("a", quick, "a"),
            step("b", gated, "b"),
            step("x", quick, "x"),
            step("c", quick, "c", join=True),
            Approval(id="ok"),
        ],
        edges=[
            Edge(source="a", target="b"),
            Edge(source="a", target="x"),
            Edge(source="b", target="c"),
            Edge(source="x", target="c"),
        ],
        start=["a", "ok"],
    )
    store = MemoryStore()
    async with journalled(store, runners=2) as (_, runs, _journal):
        run = await runs.start(wf, run_id="r")
        # Until what the crash keeps is durable: x done (half of c's join), b running.
        while not (
            [r.node_id for r in of(run, "node:completed")] == ["a", "x"]
            and "b" in [r.node_id for r in of(run, "node:started")]
            and run.pending == ("ok",)
        ):
            await trio.sleep(1)
        kept = crashed(store)
        run.cancel("test over")
    gate.set()
    calls.clear()
    await trio.sleep(5)
    back = trio.current_time()
    async with journalled(kept, workflows=[wf], runners=2) as (_, runs, _journal):
        (again,) = runs.resumed
        await trio.sleep(1)
        assert again.pending == ("ok",)
        assert calls == [("b", back), ("c", back)]  # the join goes while ok still waits
        again.decide("ok", "approve", by="ops")
        outcome = await again.wait()
    assert outcome.status == "completed"
    resumed = of(again, "run:resumed")[0]
    assert (resumed.in_flight, resumed.ready, resumed.pending) == (("ok", "b"), (), ("ok",))
    assert type(resumed.wall_time) is float
    assert dict(outcome.state) == {"a": 1, "b": 1, "x": 1, "c": 1}
    assert [(r.node_id, r.execution) for r in of(again, "node:completed")][-3:] == [
        ("b", 1),
        ("c", 1),
        ("ok", 1),
    ]
    assert_well_formed(again)


async def test_a_retry_backoff_goes_on_across_a_resume_in_run_time(autojump_clock: Any) -> None:
    calls: list[tuple[int, float]] = []

    async def flaky(ctx: NodeContext) -> Any:
        calls.append((ctx.attempt, trio.current_time()))
        if ctx.attempt == 1:
            return fail("unavailable", "x", retryable=True)
        return {"a": ctx.attempt}

    retry = NodeRetry(max_retries=3, backoff=Backoff(initial=10, jitter=0))
    wf = Workflow(name="w", nodes=[step("a", flaky, "a", retry=retry)])
    store = MemoryStore()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(wf, run_id="r")
        await trio.sleep(3)  # in the backoff: the retry is due at 10
        kept = crashed(store)
        run.cancel("test over")
    assert calls == [(1, 0.0)]
    await trio.sleep(100)  # the daemon comes back at trio time 103
    async with journalled(kept, workflows=[wf]) as (_, runs, _journal):
        (again,) = runs.resumed
        outcome = await again.wait()
    assert outcome.status == "completed" and dict(outcome.state) == {"a": 2}
    assert calls[1][0] == 2
    assert calls[1][1] == 113.0  # run time stood still while it was down: 10 s after 103
    started = of(again, "node:started")
    assert [(r.execution, r.attempt) for r in started] == [(1, 1), (1, 2)]
    assert of(again, "node:completed")[0].execution == 1
    assert_well_formed(again)


async def test_an_interrupt_leaves_a_journalled_run_resumable_and_no_other(
    autojump_clock: Any,
) -> None:
    async def slow(ctx: NodeContext) -> None:
        await trio.sleep(100)

    wf = Workflow(name="w", nodes=[step("a", slow)])
    async with journalled() as (_, runs, _journal):
        interrupted = await runs.start(wf, run_id="i")
        cancelled = await runs.start(wf, run_id="c")
        await trio.sleep(1)
        interrupted.interrupt("shutdown")
        cancelled.cancel("by hand")
        await interrupted.wait()
        await cancelled.wait()
    async with running() as (_, runs):
        plain = await runs.start(wf, run_id="p")
        await trio.sleep(1)
        plain.interrupt("shutdown")
        await plain.wait()
    ends = [of(run, "run:cancelled")[0] for run in (interrupted, cancelled, plain)]
    assert [(r.reason, r.resumable, r.in_flight) for r in ends] == [
        ("shutdown", True, ("a",)),
        ("by hand", False, ("a",)),
        ("shutdown", False, ("a",)),
    ]


class Bust(BaseException):
    """Not an Exception: an engine fault that is no error (a bug of the runtime)."""


@pytest.mark.parametrize("fault", [KeyError("engine bug"), Bust("engine bug")])
async def test_an_engine_fault_names_its_run_and_its_cause_when_an_exception(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch, fault: BaseException
) -> None:
    def broken_follow(self: Any, node_id: str, targets: Any) -> None:
        raise fault

    monkeypatch.setattr(engine_module.Engine, "_follow", broken_follow)
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    async with running() as (_, runs):
        run = await runs.start(wf, run_id="fault-1")
        outcome = await run.wait()
    assert outcome.code == "internal"
    assert outcome.error is not None
    assert outcome.error.message == f"run engine fault: {type(fault).__name__}"
    assert (outcome.error.run_id, outcome.error.node_id) == ("fault-1", None)
    cause = outcome.error.__cause__
    if isinstance(fault, Exception):  # the group the fault came in, the fault its leaf
        assert isinstance(cause, ExceptionGroup)
        assert cause.exceptions == (fault,)
    else:
        assert outcome.error.__cause__ is None
    assert_well_formed(run)


async def test_a_join_goes_as_soon_as_its_sources_are_done_while_others_run(
    autojump_clock: Any,
) -> None:
    joined: list[float] = []

    async def sleeps(ctx: NodeContext) -> None:
        await trio.sleep({"a": 1, "b": 2, "c": 10}[ctx.node_id])

    async def join(ctx: NodeContext) -> None:
        joined.append(trio.current_time())

    wf = Workflow(
        name="w",
        nodes=[step("a", sleeps), step("b", sleeps), step("c", sleeps), step("j", join, join=True)],
        edges=[Edge(source="a", target="j"), Edge(source="b", target="j")],
        start=["a", "b", "c"],
    )
    async with running(runners=3) as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert joined == [2.0]  # after b, while c still runs — not when nothing else runs
    assert [r.node_id for r in of(run, "node:completed")] == ["a", "b", "j", "c"]


async def test_run_started_carries_the_wall_time_of_the_run(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    async with running() as (_, runs):
        run = await runs.start(wf)
        await run.wait()
    started = of(run, "run:started")[0]
    assert type(started.wall_time) is float
    assert started.wall_time == run.wall_time


async def test_updates_a_journal_cannot_carry_fail_the_node(autojump_clock: Any) -> None:
    async def odd(ctx: NodeContext) -> dict[str, Any]:
        return {"tags": {"a", "b"}}

    async with journalled() as (_, runs, _journal):
        run = await runs.start(Workflow(name="w", nodes=[step("a", odd, "tags")]))
        outcome = await run.wait()
    assert outcome.code == "output_validation"
    assert outcome.error is not None and outcome.error.node_id == "a"
    assert outcome.error.message == (
        "node 'a': its updates are not JSON data, which a run with a journal needs "
        "(set is not JSON data)"
    )
    assert names(run) == ["run:started", "node:started", "node:failed", "run:failed"]


async def test_a_node_whose_start_is_not_durable_does_no_work(autojump_clock: Any) -> None:
    calls: list[str] = []

    async def work(ctx: NodeContext) -> dict[str, Any]:
        calls.append(ctx.node_id)
        return {ctx.node_id: 1}

    class BreaksAfterA(FlakyStore):
        def write(self, batch: Any) -> None:
            super().write(batch)
            if any(e.name == "node:completed" for e in batch.entries):
                self.fail = -1  # from now on: b's node:started is never durable

    wf = Workflow(
        name="w",
        nodes=[step("a", work, "a"), step("b", work, "b")],
        edges=[Edge(source="a", target="b")],
    )
    async with journalled(BreaksAfterA()) as (_, runs, _journal):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "persistence_unavailable"
    assert calls == ["a"]


@tool
async def shout(query: str) -> dict[str, Any]:
    """Say it louder."""
    return {"found": query.upper()}


async def test_tool_called_names_the_node_that_called_it(autojump_clock: Any) -> None:
    group = ToolGroup("g", [shout])
    agent = Agent(
        id="agent", model="m1", messages=[("user", "call: {topic}")], grants=Grants.allow("shout")
    )
    async with world(None, group) as w:
        run = await w.runs.start(Workflow(name="w", nodes=[agent]), {"topic": "x"}, run_id="r1")
        outcome = await run.wait()
    assert outcome.status == "completed", outcome
    called = of(run, "tool:called")
    assert [(c.node_id, c.tool, c.index, c.key, c.code) for c in called] == [
        ("agent", "shout", 0, "r1:agent:1:0", "ok")
    ]
