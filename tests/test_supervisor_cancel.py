"""Cancellation always wins: aborts, shutdowns and their races."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import Actor, ActorError, Code
from actors.lowlevel import cell_of
from actors.observe import cause_chain
from actors.testing import capture_events
from supervisors import ChildSpec, open_tree
from tests.sup_helpers import SleepyTool, SpyPolicy, tree_spec

Tool = SleepyTool


async def test_failure_while_aborting_is_cancelled(autojump_clock: MockClock) -> None:
    spy = SpyPolicy()
    spec = tree_spec(ChildSpec(id="tool", actor=Tool), policy=spy)
    errors: list[ActorError] = []
    with (
        capture_events("error.suppressed", "supervisor.decision") as events,
        pytest.raises(ActorError) as tree_error,
    ):
        async with open_tree(spec) as tree:

            async def call() -> None:
                try:
                    await tree.ref("tool").call("misbehave", timeout=None)
                except ActorError as err:
                    errors.append(err)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await trio.sleep(1)
                tree.abort("run cancelled by user")
    assert tree_error.value.code is Code.CANCELLED
    assert [(e.code, e.message) for e in errors] == [(Code.CANCELLED, "run cancelled by user")]
    cause = errors[0].__cause__
    assert isinstance(cause, ValueError)
    assert spy.asked == []
    assert tree.root.which_children()[0].restarts == 0
    assert [e.name for e in events] == ["error.suppressed"]
    assert cause_chain(events[0].suppressed) == ["ValueError", "Cancelled"]


async def test_abort_with_three_calls_in_flight(autojump_clock: MockClock) -> None:
    spec = tree_spec(*(ChildSpec(id=f"t{i}", actor=Tool) for i in range(3)))
    outcomes: list[tuple[Code, str, bool | None]] = []
    with pytest.raises(ActorError):
        async with open_tree(spec) as tree:

            async def call(i: int) -> None:
                try:
                    await tree.ref(f"t{i}").call("work", timeout=None)
                except ActorError as err:
                    outcomes.append((err.code, err.message, err.delivered))

            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(call, i)
                await trio.sleep(1)
                tree.abort("budget gone")
    assert outcomes == [(Code.CANCELLED, "budget gone", True)] * 3
    assert [c.restarts for c in tree.root.which_children()] == [0, 0, 0]


@pytest.mark.parametrize(
    "abort_first", [True, False], ids=["abort-then-timeout", "timeout-then-abort"]
)
async def test_abort_racing_a_call_timeout_is_cancelled(
    autojump_clock: MockClock, abort_first: bool
) -> None:
    """The timer and the abort act in the same instant, before the caller resumes.

    The cell's ``expire`` (the timer's callback) is wrapped so the abort happens right
    before or right after the timeout fires, in one synchronous step: a true race.
    """
    spec = tree_spec(ChildSpec(id="tool", actor=Tool))
    outcome: list[ActorError] = []
    with pytest.raises(ActorError):
        async with open_tree(spec) as tree:
            cell = cell_of(tree.ref("tool"))
            expire = cell.expire

            def racing_expire(envelope: Any) -> None:
                if abort_first:
                    tree.abort("race")
                expire(envelope)
                if not abort_first:
                    tree.abort("race")

            cell.expire = racing_expire  # type: ignore[method-assign]

            async def call() -> None:
                try:
                    await tree.ref("tool").call("work", timeout=5)
                except ActorError as err:
                    outcome.append(err)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
    assert trio.current_time() == 5.0
    assert [(e.code, e.message) for e in outcome] == [(Code.CANCELLED, "race")]


async def test_child_ignoring_stop_is_cancelled_at_its_shutdown_timeout(
    autojump_clock: MockClock,
) -> None:
    cancelled_at: list[float] = []

    class Stubborn(Actor):
        async def handle(self, message: Any) -> Any:
            try:
                await trio.sleep(10)
            except trio.Cancelled:
                cancelled_at.append(trio.current_time())
                raise

    spec = tree_spec(ChildSpec(id="s", actor=Stubborn, shutdown=5))
    async with open_tree(spec) as tree:
        await tree.ref("s").cast("busy for 10 s")
        await trio.testing.wait_all_tasks_blocked()
    assert cancelled_at == [5.0]
    assert trio.current_time() == 5.0


async def test_brutal_shutdown_cancels_at_once(autojump_clock: MockClock) -> None:
    class Slow(Actor):
        async def handle(self, message: Any) -> Any:
            await trio.sleep(10)

    spec = tree_spec(ChildSpec(id="s", actor=Slow, shutdown="brutal"))
    async with open_tree(spec) as tree:
        await tree.ref("s").cast("busy")
        await trio.testing.wait_all_tasks_blocked()
    assert trio.current_time() == 0.0


async def test_own_deadline_is_a_timeout_not_a_cancel(autojump_clock: MockClock) -> None:
    started: list[float] = []

    class TimedTool(Actor):
        async def on_start(self) -> None:
            started.append(trio.current_time())

        async def handle(self, message: Any) -> Any:
            with trio.move_on_after(2) as scope:
                await trio.sleep(10)
            if scope.cancelled_caught:
                raise ActorError.from_code(Code.TOOL_TIMEOUT, "tool ran past 2 s")
            return message

    spec = tree_spec(ChildSpec(id="t", actor=TimedTool))
    async with open_tree(spec) as tree:
        with pytest.raises(ActorError) as caught:
            await tree.ref("t").call("x", timeout=5)
        assert caught.value.code is Code.TOOL_TIMEOUT
        await trio.sleep(1)
    assert started == [0.0, 2.0]  # policy ran: tool_timeout -> restart


async def test_queued_calls_at_abort_are_cancelled_not_delivered(autojump_clock: MockClock) -> None:
    spec = tree_spec(ChildSpec(id="tool", actor=Tool))
    outcomes: list[tuple[Code, bool | None]] = []
    tree_errors: list[ActorError] = []

    async def run_tree(*, task_status: trio.TaskStatus[Any]) -> None:
        try:
            async with open_tree(spec) as tree:
                task_status.started(tree)
                await trio.sleep_forever()
        except ActorError as err:
            tree_errors.append(err)

    async def call(tree: Any) -> None:
        try:
            await tree.ref("tool").call("work", timeout=None)
        except ActorError as err:
            outcomes.append((err.code, err.delivered))

    async with trio.open_nursery() as nursery:
        tree = await nursery.start(run_tree)
        for _ in range(3):
            nursery.start_soon(call, tree)  # outside the tree's block: answered, not cancelled
        await trio.sleep(1)
        tree.abort("stop everything")
    assert [e.code for e in tree_errors] == [Code.CANCELLED]
    assert sorted(outcomes, key=str) == [
        (Code.CANCELLED, False),
        (Code.CANCELLED, False),
        (Code.CANCELLED, True),
    ]
