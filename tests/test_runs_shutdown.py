"""Runs.shutdown: intake stops, a grace for the live runs, then a resumable cancel that a
restarted daemon resumes — on the in-memory store under MockClock."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio

from actors.journal import MemoryStore, ends_run, record_of
from supervisors.runs import NodeContext, ShutdownSummary, Step, Workflow
from tests.journal_helpers import journalled


class Slow:
    """A one-step workflow whose step takes ``seconds`` of virtual time."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def workflow(self) -> Workflow:
        async def work(ctx: NodeContext) -> dict[str, Any]:
            self.calls.append((ctx.key, trio.current_time()))
            await trio.sleep(ctx.state["seconds"])
            return {"done": True}

        return Workflow(name="slow", nodes=[Step(id="work", fn=work, writes=["done"])])


def records(store: MemoryStore, run_id: str) -> list[Any]:
    return [record_of(entry) for entry in store.entries(run_id)]


async def test_runs_get_the_grace_then_are_interrupted_resumably_and_resumed_after(
    autojump_clock: Any,
) -> None:
    store, slow = MemoryStore(), Slow()
    workflow = slow.workflow()
    async with journalled(store, workflows=[workflow]) as (_, runs, _journal):
        quick = await runs.start(workflow, {"seconds": 2}, run_id="quick")
        long = await runs.start(workflow, {"seconds": 100}, run_id="long")
        summary = await runs.shutdown("sigterm", grace=5)
        assert trio.current_time() == 5.0  # the whole grace: "long" was still running
        with pytest.raises(Exception, match=r"^\[actor_stopped\] the runs are closed"):
            await runs.start(workflow, {"seconds": 1})
    assert summary == ShutdownSummary(
        reason="sigterm",
        grace=5.0,
        finished={"completed": 1},
        interrupted=("long",),
        took=5.0,
        resumable=("long",),
    )
    assert summary.line() == (
        "shutdown (sigterm): 1 run ended in the grace (1 completed),"
        " 1 interrupted and resumable, 5.00 s"
    )
    assert (await quick.wait()).status == "completed"
    outcome = await long.wait()
    assert (outcome.status, outcome.reason, outcome.code) == ("interrupted", "sigterm", "cancelled")
    last = records(store, "long")[-1]
    assert (last.name, last.reason, last.in_flight, last.resumable) == (
        "run:cancelled",
        "sigterm",
        ("work",),
        True,
    )
    assert not ends_run(last)
    row = store.run("long")
    assert row is not None and row.status == "running"  # unfinished: resumable
    assert store.unfinished() == ["long"]

    # A restarted daemon resumes it: the node in flight runs again, with the same key.
    async with journalled(store, workflows=[workflow]) as (_, runs, _journal):
        (resumed,) = runs.resumed
        assert (await resumed.wait()).status == "completed"
    assert [r.name for r in records(store, "long")] == [
        "run:started",
        "node:started",
        "run:cancelled",
        "run:resumed",
        "node:started",
        "node:completed",
        "run:completed",
    ]
    assert [key for key, _ in slow.calls] == ["quick:work:1", "long:work:1", "long:work:1"]
    assert store.unfinished() == []


async def test_runs_that_end_within_the_grace_leave_early_and_nothing_is_interrupted(
    autojump_clock: Any,
) -> None:
    slow = Slow()
    workflow = slow.workflow()
    async with journalled(workflows=[workflow]) as (_, runs, _journal):
        await runs.start(workflow, {"seconds": 1})
        await runs.start(workflow, {"seconds": 3})
        summary = await runs.shutdown("sigint", grace=10)
        assert trio.current_time() == 3.0
    assert (summary.finished, summary.interrupted, summary.took) == ({"completed": 2}, (), 3.0)


async def test_no_runs_and_a_zero_grace(autojump_clock: Any) -> None:
    slow = Slow()
    async with journalled() as (_, runs, _journal):
        summary = await runs.shutdown("sigterm", grace=0)
    assert summary.line() == (
        "shutdown (sigterm): 0 runs ended in the grace, 0 interrupted and resumable, 0.00 s"
    )
    async with journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 50}, run_id="r")
        summary = await runs.shutdown("sigterm", grace=0)
    assert (summary.interrupted, summary.took) == (("r",), 0.0)


async def test_a_second_call_shortens_the_grace_and_both_get_the_summary(
    autojump_clock: Any,
) -> None:
    slow = Slow()
    got: list[tuple[float, ShutdownSummary]] = []
    async with journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")

        async def shut(reason: str, grace: float, after: float) -> None:
            await trio.sleep(after)
            summary = await runs.shutdown(reason, grace)
            got.append((trio.current_time(), summary))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(shut, "sigterm", 30.0, 0.0)
            nursery.start_soon(shut, "again", 0.0, 4.0)
    assert [at for at, _ in got] == [4.0, 4.0]
    assert got[0][1] is got[1][1]
    # The grace the runs got: shortened to 4 s by the second call.
    assert (got[0][1].reason, got[0][1].interrupted, got[0][1].grace) == ("sigterm", ("r",), 4.0)


async def test_a_longer_second_grace_does_not_extend_the_first(autojump_clock: Any) -> None:
    slow = Slow()
    async with journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runs.shutdown, "sigterm", 2.0)
            await trio.sleep(1)
            await runs.shutdown("later", 50.0)
        assert trio.current_time() == 2.0


async def test_a_cancelled_shutdown_still_interrupts_every_run_resumably(
    autojump_clock: Any,
) -> None:
    store, slow = MemoryStore(), Slow()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        with trio.move_on_after(3):
            await runs.shutdown("sigterm", grace=math.inf)
        assert trio.current_time() == 3.0
        assert run.done  # interrupted, and ended, before the cancel went on
        outcome = await run.wait()
    assert (outcome.status, outcome.reason, outcome.code) == ("interrupted", "sigterm", "cancelled")
    last = records(store, "r")[-1]
    assert (last.name, last.resumable) == ("run:cancelled", True)
    assert store.unfinished() == ["r"]


async def test_a_cancel_that_is_not_a_shutdown_still_ends_the_run_for_good(
    autojump_clock: Any,
) -> None:
    store, slow = MemoryStore(), Slow()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        await trio.sleep(1)
        run.cancel("user")
        await run.wait()
    last = records(store, "r")[-1]
    assert (last.name, last.reason, last.resumable) == ("run:cancelled", "user", False)
    assert ends_run(last) and store.unfinished() == []


async def test_without_a_journal_the_interrupted_run_is_just_cancelled(
    autojump_clock: Any,
) -> None:
    from supervisors import SupervisorSpec, open_tree
    from supervisors.runs import open_runs

    slow = Slow()
    async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
        run = await runs.start(slow.workflow(), {"seconds": 100})
        summary = await runs.shutdown("sigterm", grace=1)
    assert (summary.interrupted, summary.resumable) == ((run.run_id,), ())
    assert summary.line() == (
        "shutdown (sigterm): 0 runs ended in the grace, 1 interrupted (0 resumable), 1.00 s"
    )
    assert run.history[-1].name == "run:cancelled"
    assert run.history[-1].resumable is False
    assert (await run.wait()).status == "cancelled"  # for good: nothing keeps it


@pytest.mark.parametrize(
    ("reason", "grace", "message"),
    [
        ("", 1.0, "reason must be a non-empty string"),
        (None, 1.0, "reason must be a non-empty string"),
        ("x", -1.0, r"grace must be seconds >= 0 \(inf: no limit\)"),
        ("x", math.nan, r"grace must be seconds >= 0"),
        ("x", True, r"grace must be seconds >= 0"),
        ("x", "5", r"grace must be seconds >= 0"),
    ],
)
async def test_bad_arguments_are_refused_and_shut_nothing(
    autojump_clock: Any, reason: Any, grace: Any, message: str
) -> None:
    slow = Slow()
    async with journalled() as (_, runs, _journal):
        with pytest.raises(Exception, match=rf"^\[input_validation\] Runs.shutdown: {message}"):
            await runs.shutdown(reason, grace)
        run = await runs.start(slow.workflow(), {"seconds": 1})
        assert (await run.wait()).status == "completed"


async def test_a_run_waiting_for_an_approval_is_interrupted_and_waits_again_after(
    autojump_clock: Any,
) -> None:
    from supervisors.runs import Approval, Edge

    store = MemoryStore()

    async def after(ctx: NodeContext) -> dict[str, Any]:
        return {"done": True}

    workflow = Workflow(
        name="approve",
        nodes=[Approval(id="ok", prompt="go?"), Step(id="after", fn=after, writes=["done"])],
        edges=[Edge(source="ok", target="after")],
    )
    async with journalled(store, workflows=[workflow]) as (_, runs, _journal):
        run = await runs.start(workflow, run_id="r")
        await trio.sleep(1)
        assert run.pending == ("ok",)
        summary = await runs.shutdown("sigterm", grace=2)
    assert (summary.interrupted, summary.took) == (("r",), 2.0)
    async with journalled(store, workflows=[workflow]) as (_, runs, _journal):
        (resumed,) = runs.resumed
        await trio.sleep(1)
        assert resumed.pending == ("ok",)  # the approval is asked again
        resumed.decide("ok", "approve", by="alice")
        assert (await resumed.wait()).status == "completed"
    names = [r.name for r in records(store, "r")]
    assert names.count("approval:requested") == 2 and names[-1] == "run:completed"


async def test_the_summary_line_counts_each_status_of_the_runs_that_ended(
    autojump_clock: Any,
) -> None:
    async def boom(ctx: NodeContext) -> dict[str, Any]:
        await trio.sleep(0.5)  # fails in the grace, not before the shutdown
        raise ValueError("broken")

    slow = Slow()
    broken = Workflow(name="broken", nodes=[Step(id="boom", fn=boom, writes=["x"])])
    async with journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 1})
        await runs.start(slow.workflow(), {"seconds": 2})
        await runs.start(broken)
        await runs.start(slow.workflow(), {"seconds": 50}, run_id="long")
        summary = await runs.shutdown("sigterm", grace=4)
    assert summary.finished == {"completed": 2, "failed": 1}
    assert summary.line() == (
        "shutdown (sigterm): 3 runs ended in the grace (2 completed, 1 failed),"
        " 1 interrupted and resumable, 4.00 s"
    )


async def test_a_run_cancelled_for_good_just_before_is_not_counted_resumable(
    autojump_clock: Any,
) -> None:
    store, slow = MemoryStore(), Slow()
    async with journalled(store) as (_, runs, _journal):
        first = await runs.start(slow.workflow(), {"seconds": 50}, run_id="user")
        await runs.start(slow.workflow(), {"seconds": 50}, run_id="kept")
        await trio.sleep(1)
        first.cancel("user")  # the first reason wins: this one ends for good
        summary = await runs.shutdown("sigterm", grace=0)
    assert (summary.interrupted, summary.resumable) == (("user", "kept"), ("kept",))
    assert summary.line().endswith(", 2 interrupted (1 resumable), 0.00 s")
    assert store.unfinished() == ["kept"]


async def test_a_grace_too_large_for_a_float_is_no_limit(autojump_clock: Any) -> None:
    slow = Slow()
    async with journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 7})
        summary = await runs.shutdown("sigterm", grace=10**400)
    assert (summary.grace, summary.took, summary.finished) == (math.inf, 7.0, {"completed": 1})


async def test_a_shorter_second_grace_is_the_grace_the_summary_reports(
    autojump_clock: Any,
) -> None:
    slow = Slow()
    async with journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        await trio.sleep(1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runs.shutdown, "first", 10.0)
            await trio.sleep(1)
            summary = await runs.shutdown("second", 1.0)
        assert trio.current_time() == 3.0
    assert (summary.reason, summary.grace, summary.took) == ("first", 2.0, 2.0)
