"""Cancellation from any scope wins (issue 9, items 1-4): a cancel of a trio scope around a
tree, a policy abort and a shutdown during a restart are one and the same thing."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from actors.testing import capture_events
from supervisors import Backoff, ChildSpec, Policy, open_tree
from supervisors.tree.policy import Directive
from tests.sup_helpers import SleepyTool, SpyPolicy, tree_spec

STOPS: list[tuple[str, str]] = []


class Tool(SleepyTool):
    """A :class:`SleepyTool` that records its ``on_stop``."""

    async def on_stop(self, reason: str) -> None:
        STOPS.append((self.ref.name, reason))


@pytest.fixture(autouse=True)
def _clear_stops() -> None:
    STOPS.clear()


Outcome = tuple[Code, str, bool | None]


def assert_in_flight_and_queued_cancelled(outcomes: list[Outcome], reason: str) -> None:
    """One in-flight caller (``delivered=True``) and one queued (``False``), both
    ``cancelled`` with ``reason``."""
    assert sorted(outcomes, key=lambda o: str(o[2])) == [
        (Code.CANCELLED, reason, False),
        (Code.CANCELLED, reason, True),
    ]


async def _call(ref: Any, message: Any, outcomes: list[Outcome], timeout: float | None) -> None:
    try:
        await ref.call(message, timeout=timeout)
    except ActorError as err:
        outcomes.append((err.code, err.message, err.delivered))


@pytest.mark.parametrize("attempt", range(8))
@pytest.mark.parametrize(
    ("message", "timeout"),
    [("work", None), ("misbehave", None), ("work", 1.0)],
    ids=["plain", "raises-from-cancelled", "timeout-racing"],
)
async def test_cancel_of_a_scope_around_the_tree_is_cancelled(
    autojump_clock: MockClock, message: str, timeout: float | None, attempt: int
) -> None:
    spy = SpyPolicy()
    spec = tree_spec(ChildSpec(id="tool", actor=Tool), policy=spy)
    outcomes: list[Outcome] = []
    with capture_events("supervisor.decision", "actor.restarting") as decisions:
        async with trio.open_nursery() as outside:
            with trio.CancelScope() as scope:
                async with open_tree(spec) as tree:
                    outside.start_soon(_call, tree.ref("tool"), message, outcomes, timeout)
                    outside.start_soon(_call, tree.ref("tool"), "queued", outcomes, timeout)
                    await trio.sleep(1)
                    scope.cancel(reason="operator pressed ctrl-c")
                    await trio.sleep_forever()
    assert_in_flight_and_queued_cancelled(outcomes, "operator pressed ctrl-c")
    assert spy.asked == []
    assert decisions == []
    assert tree.root.which_children()[0].restarts == 0
    assert [name for name, _ in STOPS] == ["root/tool"]
    assert trio.current_time() == 1.0


async def test_cancel_of_a_scope_around_a_runtime_is_cancelled(autojump_clock: MockClock) -> None:
    outcomes: list[Outcome] = []
    async with trio.open_nursery() as outside:
        with trio.CancelScope() as scope:
            async with open_runtime() as runtime:
                ref = await runtime.spawn(Tool, name="tool")
                outside.start_soon(_call, ref, "work", outcomes, None)
                outside.start_soon(_call, ref, "queued", outcomes, None)
                await trio.sleep(1)
                scope.cancel(reason="daemon stopping")
                await trio.sleep_forever()
    assert_in_flight_and_queued_cancelled(outcomes, "daemon stopping")
    assert STOPS == [("tool", "cancelled: daemon stopping")]


async def test_deadline_of_a_scope_around_the_tree_is_cancelled(autojump_clock: MockClock) -> None:
    outcomes: list[Outcome] = []
    async with trio.open_nursery() as outside:
        with trio.move_on_after(2):
            async with open_tree(tree_spec(ChildSpec(id="tool", actor=Tool))) as tree:
                outside.start_soon(_call, tree.ref("tool"), "work", outcomes, None)
                await trio.sleep_forever()
    assert outcomes == [(Code.CANCELLED, "cancelled (deadline)", True)]
    assert trio.current_time() == 2.0


class SlowStop(Actor):
    """Fails every call with ``tool_failed``; its on_stop takes 3 s."""

    async def handle(self, message: Any) -> Any:
        if message == "wait":
            await trio.sleep(100)
        raise ActorError.from_code(Code.TOOL_FAILED, "tool broke")

    async def on_stop(self, reason: str) -> None:
        STOPS.append((self.ref.name, reason))
        await trio.sleep(3)


async def test_policy_abort_takes_effect_at_the_decision(autojump_clock: MockClock) -> None:
    """The aborting child's 3 s on_stop runs after the subtree was cancelled: a sibling
    failing at t=1 is cancelled, not tool_failed, and is not restarted."""
    abort = Policy(by_code={Code.TOOL_FAILED: Directive.ABORT})
    spec = tree_spec(
        ChildSpec(id="a", actor=SlowStop, policy=abort),
        ChildSpec(id="b", actor=SlowStop),
    )
    first: list[Outcome] = []
    later: list[Outcome] = []
    reason = "abort:tool_failed from /root/a"
    with capture_events("supervisor.decision") as decisions:
        async with trio.open_nursery() as outside:

            async def run_tree(*, task_status: trio.TaskStatus[Any]) -> None:
                with pytest.raises(ActorError, match="tool broke") as tree_error:
                    async with open_tree(spec) as tree:
                        task_status.started(tree)
                        await trio.sleep_forever()
                assert tree_error.value.code is Code.TOOL_FAILED

            tree = await outside.start(run_tree)
            outside.start_soon(_call, tree.ref("b"), "wait", later, None)
            await trio.testing.wait_all_tasks_blocked()
            await _call(tree.ref("a"), "boom", first, None)
            await trio.sleep(1)
            await _call(tree.ref("b"), "boom", later, None)
    assert first == [(Code.TOOL_FAILED, "tool broke", True)]
    assert_in_flight_and_queued_cancelled(later, reason)
    assert [(d.child, d.directive, d.at) for d in decisions] == [("a", "abort", 0.0)]
    assert [c.restarts for c in tree.root.which_children()] == [0, 0]
    assert sorted(STOPS) == [("root/a", "crashed:tool_failed"), ("root/b", f"cancelled: {reason}")]
    assert trio.current_time() == 3.0


class StartFailsWhenCancelled(Actor):
    """Crashes on ``"crash"``; its on_start sleeps 1 s and, if cancelled, raises."""

    starts = 0

    async def on_start(self) -> None:
        StartFailsWhenCancelled.starts += 1
        if StartFailsWhenCancelled.starts > 1:
            try:
                await trio.sleep(1)
            except trio.Cancelled as cancelled:
                raise ValueError("on_start broke while cancelled") from cancelled

    async def handle(self, message: Any) -> Any:
        raise ActorError.from_code(Code.TOOL_FAILED, "crash")


async def test_no_policy_after_an_abort_during_a_restart_in_place(
    autojump_clock: MockClock,
) -> None:
    StartFailsWhenCancelled.starts = 0
    spy = SpyPolicy()
    spec = tree_spec(ChildSpec(id="w", actor=StartFailsWhenCancelled), policy=spy)
    with (
        capture_events("supervisor.decision") as decisions,
        pytest.raises(ActorError, match="user abort") as tree_error,
    ):
        async with open_tree(spec) as tree:
            with pytest.raises(ActorError, match="crash"):
                await tree.ref("w").call("x")
            await trio.sleep(0.5)  # the restart in place is in its on_start
            tree.abort("user abort")
            await trio.sleep_forever()
    assert tree_error.value.code is Code.CANCELLED
    assert len(spy.asked) == 1  # the crash, before the abort; never the start failure
    assert [d.directive for d in decisions] == ["restart"]


class SlowStart(Actor):
    def __init__(self, name: str, journal: list[tuple[str, float]]) -> None:
        self.name = name
        self.journal = journal

    async def on_start(self) -> None:
        self.journal.append((self.name, trio.current_time()))
        await trio.sleep(1)

    async def handle(self, message: Any) -> Any:
        raise ActorError.from_code(Code.TOOL_FAILED, "crash")


async def test_leaving_the_tree_during_a_group_restart_starts_nobody_else(
    autojump_clock: MockClock,
) -> None:
    journal: list[tuple[str, float]] = []
    spec = tree_spec(
        *(ChildSpec(id=n, actor=SlowStart, args=(n, journal)) for n in "abc"),
        strategy="one_for_all",
    )
    async with open_tree(spec) as tree:
        assert trio.current_time() == 3.0
        with pytest.raises(ActorError, match="crash"):
            await tree.ref("c").call("x")
        await trio.sleep(0.5)  # a is restarting (its on_start takes 1 s)
    ended = trio.current_time()
    await trio.sleep(10)
    # a's restart was under way (its on_start takes 1 s): the shutdown cancels it at
    # once rather than waiting for it, and neither b nor c starts afterwards.
    assert journal == [("a", 0.0), ("b", 1.0), ("c", 2.0), ("a", 3.0)]
    assert ended == 3.5


async def test_backoff_restart_after_leaving_the_tree_never_starts(
    autojump_clock: MockClock,
) -> None:
    journal: list[tuple[str, float]] = []
    spec = tree_spec(
        ChildSpec(id="a", actor=SlowStart, args=("a", journal)),
        backoff=Backoff(kind="fixed", initial=5.0, max=5.0),
    )
    async with open_tree(spec) as tree:
        with pytest.raises(ActorError, match="crash"):
            await tree.ref("a").call("x")
    await trio.sleep(20)
    assert journal == [("a", 0.0)]


@pytest.mark.parametrize("kind", ["tree", "runtime"])
async def test_a_cancel_as_the_blocks_last_statement_keeps_its_reason(
    autojump_clock: MockClock, kind: str
) -> None:
    """No checkpoint between the cancel and the end of the block: the block ends
    normally, and the shutdown that follows must not claim the reason."""
    outcomes: list[Outcome] = []
    async with trio.open_nursery() as outside:
        with trio.CancelScope() as scope:
            if kind == "tree":
                async with open_tree(tree_spec(ChildSpec(id="tool", actor=Tool))) as tree:
                    ref = tree.ref("tool")
                    outside.start_soon(_call, ref, "work", outcomes, None)
                    await trio.sleep(1)
                    outside.start_soon(_call, ref, "queued", outcomes, None)
                    await trio.testing.wait_all_tasks_blocked()
                    scope.cancel(reason="boom")
            else:
                async with open_runtime() as runtime:
                    ref = await runtime.spawn(Tool, name="tool")
                    outside.start_soon(_call, ref, "work", outcomes, None)
                    await trio.sleep(1)
                    outside.start_soon(_call, ref, "queued", outcomes, None)
                    await trio.testing.wait_all_tasks_blocked()
                    scope.cancel(reason="boom")
    assert_in_flight_and_queued_cancelled(outcomes, "boom")
    assert [reason for _, reason in STOPS] == ["cancelled: boom"]


class Plain(Actor):
    async def handle(self, message: Any) -> Any:
        return message


@pytest.mark.parametrize("how", ["abort", "cancel", "after"])
@pytest.mark.parametrize("which", ["start_child", "restart_child"])
async def test_no_start_once_the_tree_is_cancelled_or_gone(
    autojump_clock: MockClock, how: str, which: str
) -> None:
    """Typed, at once: ``cancelled`` during an abort or a cancel, ``actor_stopped`` once
    the tree has ended; never an untyped error, never a start."""
    errors: list[tuple[Code, float]] = []

    async def start(root: Any) -> None:
        try:
            if which == "start_child":
                await root.start_child(ChildSpec(id="late", actor=Plain))
            else:
                await root.restart_child("x")
        except ActorError as err:
            errors.append((err.code, trio.current_time()))

    async with trio.open_nursery() as outside:
        with trio.CancelScope() as scope:
            try:
                async with open_tree(tree_spec(ChildSpec(id="x", actor=Plain))) as tree:
                    root = tree.root
                    await root.terminate_child("x")
                    await trio.sleep(1)
                    if how != "after":
                        outside.start_soon(start, root)
                        if how == "abort":
                            tree.abort("R")
                        else:
                            scope.cancel(reason="R")
                        await trio.lowlevel.checkpoint()
            except ActorError as err:
                assert err.code is Code.CANCELLED
        if how == "after":
            await start(root)
    expected = Code.ACTOR_STOPPED if how == "after" else Code.CANCELLED
    assert errors == [(expected, 1.0)]
    assert [c.id for c in root.which_children() if c.state != "stopped"] == []


class HangsOnRestart(Actor):
    async def on_start(self) -> None:
        if self.ref.name.endswith("b") and self.ref.restarts:
            await trio.sleep(1000)  # a hung restart

    async def handle(self, message: Any) -> Any:
        raise ActorError.from_code(Code.NETWORK, "down")


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
async def test_leaving_during_a_hung_group_restart_is_prompt(
    autojump_clock: MockClock, strategy: str
) -> None:
    spec = tree_spec(
        *(ChildSpec(id=n, actor=HangsOnRestart, shutdown=1) for n in "abc"), strategy=strategy
    )
    async with trio.open_nursery() as outside:
        async with open_tree(spec) as tree:
            await trio.sleep(1)
            outside.start_soon(_call, tree.ref("a"), "crash", [], None)
            await trio.sleep(0.5)
        assert trio.current_time() == 1.5
    assert [c.state for c in tree.root.which_children()] == ["stopped"] * 3


class Network(Actor):
    """``"crash"`` raises ``network``; ``"slow"`` sleeps 100 s; on_start sleeps 1 s when
    its name ends with ``slowstart``."""

    async def on_start(self) -> None:
        if self.ref.name.endswith("slowstart"):
            await trio.sleep(1)

    async def handle(self, message: Any) -> Any:
        if message == "crash":
            raise ActorError.from_code(Code.NETWORK, "down")
        if message == "slow":
            await trio.sleep(100)
        return message


@pytest.mark.parametrize("how", ["terminate", "start_child", "sub_abort"])
async def test_a_killed_nested_supervisor_never_cancels_the_rest_of_the_tree(
    autojump_clock: MockClock, how: str
) -> None:
    """Its own kill trio-cancels only its subtree: a sibling outside it still fails,
    is decided on and restarts, and new children still start."""
    sub = tree_spec(ChildSpec(id="w", actor=Network))
    spec = tree_spec(
        ChildSpec(id="a", actor=Network), ChildSpec(id="sub", supervisor=sub, shutdown=1)
    )
    with capture_events("supervisor.decision") as decisions:
        async with trio.open_nursery() as outside, open_tree(spec) as tree:
            if how == "terminate":
                outside.start_soon(_call, tree.ref("sub", "w"), "slow", [], None)
                await trio.testing.wait_all_tasks_blocked()
                await tree.root.terminate_child("sub")  # w is killed after 1 s
            elif how == "start_child":
                slow = tree_spec(ChildSpec(id="slowstart", actor=Network))
                with trio.move_on_after(0.5):
                    await tree.root.start_child(ChildSpec(id="d", supervisor=slow))
            else:
                tree.root.child("sub").abort("R")
            await trio.sleep(1)
            with pytest.raises(ActorError, match="down") as caught:
                await tree.ref("a").call("crash")
            assert caught.value.code is Code.NETWORK
            await trio.sleep(1)
            assert await tree.ref("a").call("hi") == "hi"
            assert (
                await (await tree.root.start_child(ChildSpec(id="e", actor=Network))).call("x")
                == "x"
            )
            restarts = {c.id: c.restarts for c in tree.root.which_children()}
    assert restarts["a"] == 1
    assert [(d.child, d.directive) for d in decisions if d.child == "a"] == [("a", "restart")]


@pytest.mark.parametrize("delay", [0.0, 1.0])
async def test_a_cancel_around_the_tree_during_its_graceful_shutdown_has_its_own_reason(
    autojump_clock: MockClock, delay: float
) -> None:
    """Leaving the block starts a graceful shutdown (the in-flight call may finish); a
    cancel of the scope around the tree meanwhile cancels for real, with its reason."""
    outcomes: list[Outcome] = []
    async with trio.open_nursery() as outside:
        with trio.CancelScope() as scope:

            async def cancel_later() -> None:
                await trio.sleep(1 + delay)
                scope.cancel(reason="late")

            outside.start_soon(cancel_later)
            async with open_tree(tree_spec(ChildSpec(id="tool", actor=Tool))) as tree:
                outside.start_soon(_call, tree.ref("tool"), "work", outcomes, None)
                await trio.sleep(1)
        left = trio.current_time()
    assert outcomes == [(Code.CANCELLED, "late", True)]
    assert STOPS == [("root/tool", "cancelled: late")]
    assert left == 1.0 + delay
