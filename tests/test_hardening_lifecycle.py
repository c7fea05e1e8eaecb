"""Nothing hangs, nothing is half-done (issue 9, items 7-11): every caller is answered,
a stop or a start once cancelled leaves no zombie, cleanup always runs."""

from __future__ import annotations

import math
from contextlib import AsyncExitStack, nullcontext
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from supervisors import Backoff, ChildSpec, ChildState, open_tree
from tests.sup_helpers import tree_spec

JOURNAL: list[tuple[Any, ...]] = []


@pytest.fixture(autouse=True)
def _clear_journal() -> None:
    JOURNAL.clear()


class OneAtATime(Actor):
    """Defers every call to work that sleeps ``message`` seconds; one deferred at once."""

    max_deferred = 1

    async def handle(self, message: Any) -> Any:
        return self.defer(self._work, message)

    async def _work(self, seconds: float) -> float:
        await trio.sleep(seconds)
        return seconds

    async def on_stop(self, reason: str) -> None:
        JOURNAL.append(("stop", reason, trio.current_time()))


Outcome = tuple[Any, ...]


async def _call(ref: Any, message: Any, out: list[Outcome], **options: Any) -> None:
    try:
        out.append(("ok", await ref.call(message, **options)))
    except ActorError as err:
        out.append((err.code, err.delivered, trio.current_time()))


@pytest.mark.parametrize("how", ["stop", "abort"])
async def test_a_call_waiting_for_a_deferred_slot_is_answered(
    autojump_clock: MockClock, how: str
) -> None:
    """A is deferred (10 s), B waits for the only slot; a stop lets A and then B finish,
    an abort cancels both: either way B's caller is answered."""
    spec = tree_spec(ChildSpec(id="one", actor=OneAtATime, shutdown=100))
    out: list[Outcome] = []
    with pytest.raises(ActorError) if how == "abort" else nullcontext():
        async with open_tree(spec) as tree, trio.open_nursery() as nursery:
            nursery.start_soon(partial(_call, tree.ref("one"), 10, out, timeout=None))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(partial(_call, tree.ref("one"), 3, out, timeout=None))
            await trio.sleep(1)
            if how == "stop":
                await tree.ref("one").stop()
            else:
                tree.abort("abort at 1 s")
    if how == "stop":
        assert out == [("ok", 10), ("ok", 3)]
        assert JOURNAL == [("stop", "normal", 13.0)]
    else:
        assert sorted(out) == [(Code.CANCELLED, True, 1.0)] * 2
        assert JOURNAL == [("stop", "cancelled: abort at 1 s", 1.0)]


class Stubborn(Actor):
    """Its handler ignores stop requests: sleeps 100 s."""

    async def handle(self, message: Any) -> Any:
        await trio.sleep(100)

    async def on_stop(self, reason: str) -> None:
        JOURNAL.append(("stop", reason, trio.current_time()))


async def test_a_cancelled_terminate_still_completes(autojump_clock: MockClock) -> None:
    spec = tree_spec(ChildSpec(id="s", actor=Stubborn, shutdown=5))
    out: list[Outcome] = []
    async with open_tree(spec) as tree:
        ref = tree.ref("s")
        await ref.cast("busy")
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(1):
            await ref.stop()
        assert trio.current_time() == 1.0
        await trio.sleep(10)
        [info] = tree.root.which_children()
        assert info.state is ChildState.STOPPED
        assert str(ref.state) == "stopped"
        await _call(ref, "x", out, timeout=None)
    assert out == [(Code.ACTOR_STOPPED, False, 11.0)]
    assert JOURNAL == [("stop", "shutdown:s", 5.0)]


async def test_a_cancelled_runtime_stop_still_completes(autojump_clock: MockClock) -> None:
    out: list[Outcome] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Stubborn, name="s")
        await ref.cast("busy")
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(1):
            await ref.stop(timeout=5)
        await trio.sleep(10)
        assert str(ref.state) == "stopped"
        assert runtime.whereis("s") is None
        await _call(ref, "x", out, timeout=None)
    assert out == [(Code.ACTOR_STOPPED, False, 11.0)]
    assert JOURNAL == [("stop", "shutdown:s", 5.0)]


class SlowStart(Actor):
    async def on_start(self) -> None:
        JOURNAL.append(("starting", trio.current_time()))
        await trio.sleep(5)
        JOURNAL.append(("started", trio.current_time()))

    async def handle(self, message: Any) -> Any:
        return message

    async def on_stop(self, reason: str) -> None:
        JOURNAL.append(("stop", reason))


async def test_a_cancelled_start_child_does_not_start(autojump_clock: MockClock) -> None:
    async with open_tree(tree_spec()) as tree:
        with trio.move_on_after(1):
            await tree.root.start_child(ChildSpec(id="late", actor=SlowStart))
        await trio.sleep(10)
        assert tree.root.which_children() == []
        assert tree.root.count_children()["active"] == 0
        # The id is free again, and a start that is not cancelled works.
        ref = await tree.root.start_child(ChildSpec(id="late", actor=SlowStart))
        assert ref is not None
        assert await ref.call("hi") == "hi"
    assert JOURNAL == [
        ("starting", 0.0),
        ("starting", 11.0),
        ("started", 16.0),
        ("stop", "shutdown"),
    ]


class Crashy(Actor):
    def __init__(self, name: str) -> None:
        self.name = name

    async def on_start(self) -> None:
        JOURNAL.append(("start", self.name, trio.current_time()))

    async def handle(self, message: Any) -> Any:
        raise ActorError.from_code(Code.TOOL_FAILED, f"{self.name} crashed")


async def test_terminate_during_backoff_is_not_undone(autojump_clock: MockClock) -> None:
    spec = tree_spec(
        ChildSpec(id="a", actor=Crashy, args=("a",)),
        backoff=Backoff(kind="fixed", initial=5.0, max=5.0),
    )
    async with open_tree(spec) as tree:
        with pytest.raises(ActorError, match="a crashed"):
            await tree.ref("a").call("x")
        await trio.sleep(1)
        await tree.root.terminate_child("a")
        await trio.sleep(10)
        assert [c.state for c in tree.root.which_children()] == [ChildState.STOPPED]
        await tree.root.restart_child("a")
    assert JOURNAL == [("start", "a", 0.0), ("start", "a", 11.0)]


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
async def test_terminated_sibling_stays_stopped_in_a_group_restart(
    autojump_clock: MockClock, strategy: str
) -> None:
    spec = tree_spec(*(ChildSpec(id=n, actor=Crashy, args=(n,)) for n in "abc"), strategy=strategy)
    async with open_tree(spec) as tree:
        await tree.root.terminate_child("c")
        await trio.sleep(1)
        with pytest.raises(ActorError, match="b crashed"):
            await tree.ref("b").call("x")
        await trio.sleep(1)
        states = [(c.id, c.state) for c in tree.root.which_children()]
    expected_a = 0.0 if strategy == "rest_for_one" else None
    starts = [(e[1], e[2]) for e in JOURNAL]
    assert ("c", 1.0) not in starts
    assert starts.count(("b", 1.0)) == 1
    assert (("a", 1.0) in starts) is (expected_a is None)
    assert states == [
        ("a", ChildState.RUNNING),
        ("b", ChildState.RUNNING),
        ("c", ChildState.STOPPED),
    ]


CLEANUPS: list[tuple[str, str]] = []


class Holder(Actor):
    """Holds a resource from on_start to on_stop; its handler sleeps."""

    async def on_start(self) -> None:
        CLEANUPS.append((self.ref.name, "open"))

    async def handle(self, message: Any) -> Any:
        await trio.sleep(100)

    async def on_stop(self, reason: str) -> None:
        CLEANUPS.append((self.ref.name, reason))


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("abort", "cancelled: abort now"),
        ("brutal", "shutdown:h"),
        ("stop-timeout", "shutdown:h"),
        ("enclosing", "cancelled: outer"),
    ],
)
async def test_on_stop_runs_on_every_exit_path(
    autojump_clock: MockClock, how: str, reason: str
) -> None:
    CLEANUPS.clear()
    shutdown: Any = "brutal" if how == "brutal" else 2.0
    spec = tree_spec(ChildSpec(id="h", actor=Holder, shutdown=shutdown))
    with trio.CancelScope() as outer:
        try:
            async with open_tree(spec) as tree:
                await tree.ref("h").cast("busy")
                await trio.testing.wait_all_tasks_blocked()
                if how == "abort":
                    tree.abort("abort now")
                elif how == "enclosing":
                    outer.cancel(reason="outer")
                elif how == "stop-timeout":
                    await tree.ref("h").stop()
                await trio.sleep(1)
        except ActorError as err:
            assert err.code is Code.CANCELLED
    assert [("root/h", "open"), ("root/h", reason)] == CLEANUPS


async def test_on_stop_runs_after_a_runtime_shutdown_kill(autojump_clock: MockClock) -> None:
    CLEANUPS.clear()
    async with open_runtime(shutdown_timeout=1) as runtime:
        ref = await runtime.spawn(Holder, name="h")
        await ref.cast("busy")
        await trio.testing.wait_all_tasks_blocked()
    assert CLEANUPS == [("h", "open"), ("h", "shutdown:h")]
    assert trio.current_time() == 1.0


async def test_on_stop_is_bounded_by_the_cleanup_budget_when_killed(
    autojump_clock: MockClock,
) -> None:
    class SlowCleanup(Holder):
        async def on_stop(self, reason: str) -> None:
            await trio.sleep(math.inf)

    spec = tree_spec(ChildSpec(id="h", actor=SlowCleanup, shutdown="brutal"))
    async with open_tree(spec) as tree:
        await tree.ref("h").cast("busy")
        await trio.testing.wait_all_tasks_blocked()
    assert trio.current_time() == 5.0  # DEFAULT_CLEANUP_BUDGET


@pytest.mark.parametrize("deferred", [False, True], ids=["handler", "deferred"])
async def test_a_timed_out_caller_with_propagate_cancel_cancels_the_work(
    autojump_clock: MockClock, deferred: bool
) -> None:
    cancelled_at: list[float] = []

    class Slow(Actor):
        max_deferred = 1 if deferred else 0

        async def handle(self, message: Any) -> Any:
            if message == "quick":
                return "quick"
            return self.defer(self._work) if deferred else await self._work()

        async def _work(self) -> str:
            try:
                await trio.sleep(100)
            except trio.Cancelled:
                cancelled_at.append(trio.current_time())
                raise
            return "done"

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Slow, name="slow")
        with pytest.raises(ActorError, match="within the call timeout") as caught:
            await ref.call("work", timeout=2, propagate_cancel=True)
        assert (caught.value.code, caught.value.delivered) == (Code.CALL_TIMEOUT, True)
        assert await ref.call("quick") == "quick"  # the actor goes on
        with pytest.raises(ActorError, match="within the call timeout"):
            await ref.call("work", timeout=1)  # without propagate_cancel: left running
        await trio.sleep(1)
    # The first work is cancelled when its caller times out; the second ran on until the
    # runtime's shutdown (at 4 s) killed it after its 5 s timeout.
    assert cancelled_at == [2.0, 9.0]


class CancelAtSpawn(trio.abc.Instrument):
    """Cancels ``scope`` the moment a child's incarnation task is spawned, before it runs."""

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if "incarnation" in task.name:
            self.scope.cancel()


@pytest.mark.parametrize("kind", ["worker", "supervisor"])
async def test_start_child_cancelled_before_its_task_runs_starts_nothing(
    autojump_clock: MockClock, kind: str
) -> None:
    """Whichever runs first — the starter seeing its cancel, or the child's task — the
    child never starts (trio's batch order is random: ten trials)."""
    spec = (
        ChildSpec(id="late", actor=SlowStart)
        if kind == "worker"
        else ChildSpec(id="late", supervisor=tree_spec(ChildSpec(id="w", actor=SlowStart)))
    )
    for _ in range(10):
        JOURNAL.clear()
        async with open_tree(tree_spec()) as tree:
            with trio.CancelScope() as scope:
                instrument = CancelAtSpawn(scope)
                trio.lowlevel.add_instrument(instrument)
                try:
                    await tree.root.start_child(spec)
                finally:
                    trio.lowlevel.remove_instrument(instrument)
            assert scope.cancelled_caught
            await trio.sleep(10)
            assert tree.root.which_children() == []
            assert len(tree.root.runtime) == 0
        # Its on_start may have begun (as under nursery.start, the task may run before
        # the starter sees its cancel); it was cancelled there: never started or stopped.
        assert JOURNAL in ([], [("starting", trio.current_time() - 10)])


async def test_a_ref_stays_valid_across_terminate_and_restart_child(
    autojump_clock: MockClock,
) -> None:
    """The ref belongs to the slot: terminating closes it, restarting opens it again."""

    class Echo(Actor):
        async def handle(self, message: Any) -> Any:
            return message

    async with open_tree(tree_spec(ChildSpec(id="x", actor=Echo))) as tree:
        ref = tree.ref("x")
        await tree.root.terminate_child("x")
        with pytest.raises(ActorError, match="is stopped") as caught:
            await ref.call("while terminated")
        assert caught.value.code is Code.ACTOR_STOPPED
        assert tree.root.runtime.whereis("root/x") is None
        restarted = await tree.root.restart_child("x")
        assert restarted is ref
        assert await ref.call("again") == "again"
        assert tree.root.runtime.whereis("root/x") is ref


class SelfStopper(Actor):
    """Stops itself for good from the hook named by ``where``."""

    where = "on_start"

    async def on_start(self) -> None:
        JOURNAL.append(("start", self.ref.name))
        if self.where == "on_start":
            await self.ref.stop("from on_start")
            await trio.sleep(0.5)  # it goes on after asking; the stop comes after it

    async def handle(self, message: Any) -> Any:
        if message == "stop":
            await self.ref.stop("from handle")
            return "stopping"
        if message == "crash":
            raise ActorError.from_code(Code.NETWORK, "down")
        return message

    async def on_restart(self, error: ActorError) -> None:
        if self.where == "on_restart":
            await self.ref.stop("from on_restart")

    async def on_stop(self, reason: str) -> None:
        JOURNAL.append(("stop", reason, trio.current_time()))


@pytest.mark.parametrize("where", ["on_start", "handle", "on_restart"])
@pytest.mark.parametrize("supervised", [True, False], ids=["tree", "runtime"])
async def test_an_actor_stopping_itself_stops_for_good_at_once(
    autojump_clock: MockClock, where: str, supervised: bool
) -> None:
    """From on_start, a handler or a cleanup hook: no wait for itself, nothing queued
    behind it served, never restarted (a permanent child or max_restarts alike)."""
    actor = type("Stopper", (SelfStopper,), {"where": where})
    out: list[Outcome] = []
    async with AsyncExitStack() as stack:
        if supervised:
            tree = await stack.enter_async_context(
                open_tree(tree_spec(ChildSpec(id="s", actor=actor)))
            )
            ref, runtime = tree.ref("s"), tree.root.runtime
        else:
            runtime = await stack.enter_async_context(open_runtime())
            ref = await runtime.spawn(actor, name="s", max_restarts=3)
        async with trio.open_nursery() as nursery:
            if where == "handle":
                nursery.start_soon(_call, ref, "stop", out)
            elif where == "on_restart":
                nursery.start_soon(_call, ref, "crash", out)
            await trio.testing.wait_all_tasks_blocked()
            for i in range(3):
                nursery.start_soon(_call, ref, f"m{i}", out)
        await trio.sleep(1)
        assert str(ref.state) == "stopped"
        assert len(runtime) == 0
        if supervised:
            assert [(c.state, c.restarts) for c in tree.root.which_children()] == [("stopped", 0)]
    served = [o for o in out if o[0] == "ok"]
    assert served == ([("ok", "stopping")] if where == "handle" else [])
    assert sorted(o for o in out if o[0] != "ok") == (
        [(Code.ACTOR_STOPPED, False, 0.5 if where == "on_start" else 0.0)] * 3
        + ([(Code.NETWORK, True, 0.0)] if where == "on_restart" else [])
    )
    starts = [e for e in JOURNAL if e[0] == "start"]
    assert len(starts) == 1
    expected_stop = {"on_start": "from on_start", "handle": "from handle"}.get(where)
    stops = [e[1] for e in JOURNAL if e[0] == "stop"]
    assert stops == ([expected_stop] if expected_stop else [])


@pytest.mark.parametrize("how", ["abort", "brutal"])
async def test_a_nested_supervisor_restarted_after_a_kill_serves_again(
    autojump_clock: MockClock, how: str
) -> None:
    """Its previous run's exit reports are not handled by the new run."""

    class Echo(Actor):
        async def on_start(self) -> None:
            JOURNAL.append(("start", trio.current_time()))

        async def handle(self, message: Any) -> Any:
            return message

    sub = tree_spec(ChildSpec(id="x", actor=Echo))
    shutdown: Any = "brutal" if how == "brutal" else 5.0
    async with open_tree(tree_spec(ChildSpec(id="sub", supervisor=sub, shutdown=shutdown))) as tree:
        x = tree.ref("sub", "x")
        if how == "abort":
            tree.root.child("sub").abort("boom")
            await trio.sleep(0.1)
        else:
            await tree.root.terminate_child("sub")
        with pytest.raises(ActorError, match="is stopped"):
            await x.call("while down")
        await tree.root.restart_child("sub")
        await trio.sleep(0.1)
        assert await x.call("hi") == "hi"
        assert [c.state for c in tree.root.child("sub").which_children()] == ["running"]
        assert len(tree.root.runtime) == 1
    assert len(JOURNAL) == 2


async def test_restart_child_of_a_child_gone_while_waiting_is_child_not_found(
    autojump_clock: MockClock,
) -> None:
    """A temporary child's terminate drops its spec: a restart_child waiting for the
    lock meanwhile finds nothing to restart, and no orphan slot is left."""

    class Slow(Actor):
        async def handle(self, message: Any) -> Any:
            await trio.sleep(2)
            return message

    spec = tree_spec(ChildSpec(id="w", actor=Slow, shutdown=1, restart="temporary"))
    async with open_tree(spec) as tree:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_call, tree.ref("w"), "slow", [])
            await trio.sleep(0.1)
            nursery.start_soon(tree.root.terminate_child, "w")
            await trio.sleep(0.1)
            with pytest.raises(ActorError, match="no child 'w'") as caught:
                await tree.root.restart_child("w")
            assert caught.value.code is Code.CHILD_NOT_FOUND
        assert tree.root.which_children() == []
        assert len(tree.root.runtime) == 0


async def test_a_terminated_nested_supervisors_workers_answer_actor_stopped(
    autojump_clock: MockClock,
) -> None:
    class Echo(Actor):
        async def handle(self, message: Any) -> Any:
            return message

    sub = tree_spec(ChildSpec(id="w", actor=Echo))
    async with open_tree(tree_spec(ChildSpec(id="sub", supervisor=sub))) as tree:
        await tree.root.terminate_child("sub")
        with pytest.raises(ActorError, match="is stopped") as caught:
            await tree.ref("sub", "w").call("x")
        assert (caught.value.code, caught.value.delivered) == (Code.ACTOR_STOPPED, False)


async def test_a_cancelled_restart_child_leaves_the_child_stopped(
    autojump_clock: MockClock,
) -> None:
    """Cancelled during the restarted instance's on_start: it does not come up, the
    child stays stopped with its spec kept, and a later restart_child works."""
    async with open_tree(tree_spec(ChildSpec(id="late", actor=SlowStart))) as tree:
        await tree.root.terminate_child("late")  # started at 0, stopped at 5 (on_start)
        with trio.move_on_after(1) as scope:
            await tree.root.restart_child("late")
        assert scope.cancelled_caught
        await trio.sleep(10)
        assert [c.state for c in tree.root.which_children()] == ["stopped"]
        assert len(tree.root.runtime) == 0
        ref = await tree.root.restart_child("late")
        assert ref is not None and await ref.call("x") == "x"
    assert [e[0] for e in JOURNAL] == [
        "starting",
        "started",
        "stop",
        "starting",
        "starting",
        "started",
        "stop",
    ]


async def test_delete_child_waits_for_a_terminate_under_way(autojump_clock: MockClock) -> None:
    """Like start/restart/terminate, delete_child takes the supervisor's lock: it forgets
    the child once the terminate has finished, never half-way."""
    spec = tree_spec(ChildSpec(id="s", actor=Stubborn, shutdown=2))
    async with open_tree(spec) as tree:
        await tree.ref("s").cast("busy")
        await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tree.root.terminate_child, "s")
            await trio.testing.wait_all_tasks_blocked()
            await tree.root.delete_child("s")
            assert trio.current_time() == 2.0
        assert tree.root.which_children() == []
        assert len(tree.root.runtime) == 0
