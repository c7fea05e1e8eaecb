"""Cancellation wins: every way a run can be cancelled ends it `run:cancelled` with the
reason, nothing after it, nothing reported as a failure; and the internal catch-all."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors import CancelledError, fail
from actors.testing import capture_events
from supervisors import Backoff, SupervisorSpec, open_tree
from supervisors.runs import Approval, Edge, NodeContext, NodeRetry, Workflow, open_runs
from supervisors.runs import engine as engine_module
from tests.runs_helpers import assert_well_formed, names, of, running, step, writer

pytestmark = pytest.mark.trio

FAILURE_CODES = {"tool_failed", "internal", "timeout", "execution_failed", "call_timeout"}


def assert_cancelled(run: Any, reason: str) -> None:
    assert_well_formed(run)
    terminal = run.history[-1]
    assert terminal.name == "run:cancelled"
    assert terminal.reason == reason
    for record in run.history:
        assert getattr(record, "code", None) not in FAILURE_CODES, record
    assert run.status == "cancelled"


def sleeper(seconds: float = 1000) -> Any:
    ended: list[str] = []

    async def fn(ctx: NodeContext) -> None:
        try:
            await trio.sleep(seconds)
        finally:
            ended.append(ctx.node_id)

    fn.ended = ended  # type: ignore[attr-defined]
    return fn


async def test_run_cancel_cancels_the_node_in_flight(autojump_clock: Any) -> None:
    fn = sleeper()
    wf = Workflow(
        name="w",
        nodes=[step("a", fn), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(5)
        run.cancel("user pressed stop")
        run.cancel("second reason loses")
        outcome = await run.wait()
    assert (outcome.status, outcome.reason, outcome.code) == (
        "cancelled",
        "user pressed stop",
        "cancelled",
    )
    assert fn.ended == ["a"]
    assert_cancelled(run, "user pressed stop")
    cancelled = run.history[-1]
    assert (cancelled.in_flight, cancelled.at, cancelled.duration) == (("a",), 5.0, 5.0)
    assert "b" not in outcome.state


async def test_a_cancel_during_a_retry_backoff_retries_nothing(autojump_clock: Any) -> None:
    calls: list[float] = []

    async def flaky(ctx: NodeContext) -> Any:
        calls.append(trio.current_time())
        return fail("unavailable", "x", retryable=True)

    wf = Workflow(
        name="w",
        nodes=[
            step("a", flaky, retry=NodeRetry(max_retries=5, backoff=Backoff(initial=10, jitter=0)))
        ],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(3)
        run.cancel("stop")
        await run.wait()
        await trio.sleep(100)
    assert calls == [0.0]
    assert names(run) == ["run:started", "node:started", "node:retrying", "run:cancelled"]
    assert_cancelled(run, "stop")


async def test_a_cancel_while_waiting_for_an_approval(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[Approval(id="ok")])
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(1)
        run.cancel("nobody came")
        await run.wait()
        assert run.pending == ()
    assert_cancelled(run, "nobody came")


async def test_a_cancel_before_the_run_starts_is_kept(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    async with running() as (_, runs):
        run = await runs.start(wf)
        run.cancel("changed my mind")
        outcome = await run.wait()
    assert outcome.status == "cancelled" and "a" not in outcome.state


async def test_a_cancel_after_the_end_changes_nothing(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    async with running() as (_, runs):
        run = await runs.start(wf)
        await run.wait()
        run.cancel("too late")
    assert run.status == "completed"
    assert names(run)[-1] == "run:completed"


async def test_a_node_that_raises_while_cancelled_is_still_cancelled(autojump_clock: Any) -> None:
    async def stubborn(ctx: NodeContext) -> None:
        try:
            await trio.sleep(1000)
        finally:
            raise ValueError("cleanup blew up")

    wf = Workflow(name="w", nodes=[step("a", stubborn)])
    with capture_events("error.suppressed") as suppressed:
        async with running() as (_, runs):
            run = await runs.start(wf)
            await trio.sleep(1)
            run.cancel("stop now")
            await run.wait()
    assert_cancelled(run, "stop now")
    assert len(suppressed) == 1
    assert suppressed[0].suppressed.code == "internal"
    assert suppressed[0].actor == "/runs-test/runs/" + run.run_id + "/runner.0"
    assert suppressed[0].reason.startswith("caller of /runs-test/runs/")


async def test_leaving_the_runs_block_cancels_the_live_runs(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", sleeper())])
    async with open_tree(SupervisorSpec()) as tree:
        async with open_runs(tree) as runs:
            run = await runs.start(wf)
            await trio.sleep(1)
        assert run.done
        assert tree.root.which_children() == []
    assert_cancelled(run, "runs closed")


async def test_a_cancel_of_the_scope_around_the_runs_is_the_runs_cancel(
    autojump_clock: Any,
) -> None:
    wf = Workflow(name="w", nodes=[step("a", sleeper()), step("b", sleeper())], start=["a", "b"])
    async with open_tree(SupervisorSpec()) as tree:
        with trio.CancelScope() as scope:
            async with open_runs(tree, runners=2) as runs:
                run = await runs.start(wf)
                await trio.sleep(2)
                scope.cancel(reason="deploy")
                await trio.sleep_forever()
        assert run.done
    assert_cancelled(run, "deploy")
    assert set(run.history[-1].in_flight) == {"a", "b"}


async def test_a_cancel_of_the_scope_around_the_tree(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", sleeper())])
    with trio.CancelScope() as scope:
        async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
            run = await runs.start(wf)
            await trio.sleep(2)
            scope.cancel(reason="sigterm")
            await trio.sleep_forever()
    assert run.done
    assert_cancelled(run, "sigterm")


async def test_an_abort_of_the_tree_cancels_the_runs_with_its_reason(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", sleeper())])
    with pytest.raises(CancelledError, match="operator abort"):  # the tree's own ending
        async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
            run = await runs.start(wf)
            await trio.sleep(2)
            tree.abort("operator abort")
            await trio.sleep_forever()
    assert_cancelled(run, "operator abort")


async def test_the_caller_of_runs_run_cancels_its_run(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", sleeper())])
    async with running() as (_, runs):
        with trio.move_on_after(3):
            await runs.run(wf, run_id="mine")
        assert runs.live == {}
    # The run ended cancelled before the caller's Cancelled went on.


async def test_a_waiter_that_gives_up_does_not_cancel_the_run(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", sleeper(10))])
    async with running() as (_, runs):
        run = await runs.start(wf)
        with trio.move_on_after(1):
            await run.wait()
        outcome = await run.wait()
    assert outcome.status == "completed"


async def test_one_run_failing_never_touches_another(autojump_clock: Any) -> None:
    async def broken(ctx: NodeContext) -> None:
        raise RuntimeError("boom")

    slow = Workflow(name="slow", nodes=[step("a", sleeper(10))])
    bad = Workflow(name="bad", nodes=[step("a", broken)])
    async with running() as (_, runs):
        healthy = await runs.start(slow)
        failing = [await runs.start(bad) for _ in range(5)]
        for run in failing:
            assert (await run.wait()).code == "internal"
        assert (await healthy.wait()).status == "completed"


async def test_an_engine_fault_ends_the_run_with_one_internal_failure(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_follow(self: Any, node_id: str, targets: Any) -> None:
        raise KeyError("engine bug")

    monkeypatch.setattr(engine_module.Engine, "_follow", broken_follow)
    wf = Workflow(
        name="w",
        nodes=[step("a", writer("a"), "a"), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b")],
    )
    with capture_events("run.error") as details:
        async with running() as (tree, runs):
            run = await runs.start(wf)
            outcome = await run.wait()
            assert tree.root.child("runs").which_children() == []
    assert outcome.code == "internal"
    failed = of(run, "run:failed")
    assert len(failed) == 1
    assert failed[0].message == "An internal error occurred; quote the correlation id to support."
    assert [d.error.correlation_id for d in details] == [failed[0].correlation_id]
    assert details[0].error.message == "run engine fault: KeyError"
    assert_well_formed(run)


async def test_an_engine_fault_in_a_branch_task_is_internal_too(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine_module.Engine._outcome

    def fragile(self: Any, node: Any, outcome: Any) -> Any:
        if node.id == "c":
            raise AttributeError("engine bug in a branch")
        return real(self, node, outcome)

    monkeypatch.setattr(engine_module.Engine, "_outcome", fragile)
    wf = Workflow(
        name="w", nodes=[step("b", sleeper(1)), step("c", writer("c"), "c")], start=["b", "c"]
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "internal"
    assert len(of(run, "run:failed")) == 1


class Boom(BaseException):
    """Not an Exception: it crashes the node runner itself."""


async def test_a_crashed_runner_fails_its_run_internal_and_nothing_else(
    autojump_clock: Any,
) -> None:
    async def crash(ctx: NodeContext) -> None:
        raise Boom("runner down")

    bad = Workflow(name="bad", nodes=[step("a", crash, retry=NodeRetry(max_retries=3))])
    slow = Workflow(name="slow", nodes=[step("a", sleeper(5))])
    async with running() as (tree, runs):
        healthy = await runs.start(slow)
        crashed = [await runs.start(bad) for _ in range(6)]
        for run in crashed:
            outcome = await run.wait()
            assert outcome.code == "internal"
            assert outcome.error is not None
            assert outcome.error.message == "unclassified Boom: runner down"
            assert names(run) == ["run:started", "node:started", "node:failed", "run:failed"]
        assert (await healthy.wait()).status == "completed"
        assert [c.id for c in tree.root.which_children()] == ["runs"]
        again = await runs.start(Workflow(name="ok", nodes=[step("a", writer("a"), "a")]))
        assert (await again.wait()).status == "completed"


@pytest.mark.parametrize("checkpoints", [0, 1, 2, 3, 5, 8, 13, 40])
async def test_a_caller_cancelled_while_start_runs_leaves_no_run_behind(
    autojump_clock: Any, checkpoints: int
) -> None:
    """Wherever the cancel lands in ``start``, the caller either has its run, or gets
    ``Cancelled`` and the run it never got is cancelled with the cancel's reason."""
    wf = Workflow(name="w", nodes=[step("a", sleeper(5))])
    started: list[Any] = []
    with capture_events("run:cancelled") as cancelled:
        async with running(runners=3) as (tree, runs):
            async with trio.open_nursery() as nursery:
                with trio.CancelScope() as scope:

                    async def canceller() -> None:
                        for _ in range(checkpoints):
                            await trio.lowlevel.checkpoint()
                        scope.cancel(reason="caller gave up")

                    nursery.start_soon(canceller)
                    started.append(await runs.start(wf, run_id="r"))
            await trio.sleep(10)
            runs_supervisor = tree.root.child("runs")
            assert runs_supervisor.which_children() == []
            assert runs.live == {}
    if started:  # the cancel came after start returned: the run was not touched
        assert started[0].status == "completed"
        assert cancelled == []
    else:
        assert [(e.run_id, e.reason) for e in cancelled] == [("r", "caller gave up")]


@pytest.mark.parametrize(
    ("first", "reason"), [("abort", "operator abort"), ("run.cancel", "first")]
)
async def test_an_abort_and_a_run_cancel_in_the_same_instant_keep_the_first_reason(
    autojump_clock: Any, first: str, reason: str
) -> None:
    wf = Workflow(name="w", nodes=[step("a", sleeper())])
    with pytest.raises(CancelledError, match="operator abort"):  # the tree's own ending
        async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
            run = await runs.start(wf)
            await trio.sleep(2)
            cancels = [lambda: tree.abort("operator abort"), lambda: run.cancel("first")]
            for cancel in cancels if first == "abort" else reversed(cancels):
                cancel()
            await trio.sleep_forever()
    assert_cancelled(run, reason)


async def test_an_abort_then_an_interrupt_in_the_same_instant_ends_the_run_for_good(
    autojump_clock: Any,
) -> None:
    # The abort came first: its reason, and for good — not the interrupt's resumable end.
    from actors.journal import MemoryStore, record_of
    from tests.journal_helpers import journalled

    store = MemoryStore()
    wf = Workflow(name="w", nodes=[step("a", sleeper())])
    with pytest.raises(CancelledError, match="operator abort"):
        async with journalled(store, workflows=[wf]) as (tree, runs, _journal):
            run = await runs.start(wf, run_id="r")
            await trio.sleep(2)
            tree.abort("operator abort")
            run.interrupt("sigterm")
            await trio.sleep_forever()
    outcome = await run.wait()
    assert (outcome.status, outcome.reason) == ("cancelled", "operator abort")
    last = record_of(store.entries("r")[-1])
    assert (last.name, last.reason, last.resumable) == ("run:cancelled", "operator abort", False)
    assert store.unfinished() == []
