"""Dynamic calls racing a nested supervisor's start: they wait for the start, then act on
what they see — never a child run twice or unseen, never an internal error, no hang."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
from trio.testing import MockClock

from actors import Actor, ActorError, Code
from actors.lowlevel import run_to_completion
from supervisors import ChildSpec, Supervisor, SupervisorSpec, open_tree
from tests.sup_helpers import NO_BACKOFF, tree_spec, worker


class SlowStart(Actor):
    """``on_start`` takes ``delay`` seconds; ``("crash", code[, after])`` raises that code
    (after ``after`` seconds)."""

    def __init__(self, name: str, journal: list[tuple[Any, ...]], delay: float) -> None:
        self.name, self.journal, self.delay = name, journal, delay

    async def on_start(self) -> None:
        await trio.sleep(self.delay)
        self.journal.append(("start", self.name, trio.current_time()))

    async def on_stop(self, reason: str) -> None:
        self.journal.append(("stop", self.name, reason))

    async def handle(self, message: Any) -> Any:
        if len(message) > 2:
            await trio.sleep(message[2])
        raise ActorError.from_code(message[1], f"{self.name} told to crash")


def _states(sup: Supervisor) -> list[tuple[str, str]]:
    return [(c.id, str(c.state)) for c in sup.which_children()]


def _nested(journal: list[tuple[Any, ...]]) -> SupervisorSpec:
    """sub = [x (1 s on_start), y]; sub gives up at its first crash, the root restarts it."""
    inner = SupervisorSpec(
        children=[
            ChildSpec(id="x", actor=SlowStart, args=("x", journal, 1.0)),
            worker("y", journal),
        ],
        backoff=NO_BACKOFF,
        max_restarts=0,
    )
    return tree_spec(ChildSpec(id="sub", supervisor=inner))


async def _in_subs_restart(tree: Any, journal: list[tuple[Any, ...]]) -> Supervisor:
    """Crash x and return while sub's new run is inside x's on_start (y not started)."""
    sub: Supervisor = tree.root.child("sub")
    with pytest.raises(ActorError):
        await sub.ref("x").call(("crash", Code.UNAVAILABLE))
    await trio.sleep(0.5)
    assert tree.root.which_children()[0].state == "restarting"
    return sub


@pytest.mark.parametrize("call", ["restart_child", "delete_child"])
async def test_a_call_needing_a_stopped_child_waits_for_the_start_then_answers_running(
    call: str, autojump_clock: MockClock
) -> None:
    journal: list[tuple[Any, ...]] = []
    with trio.fail_after(60):
        async with open_tree(_nested(journal)) as tree:
            sub = await _in_subs_restart(tree, journal)
            with pytest.raises(ActorError, match=r"'y' is running$") as info:
                await getattr(sub, call)("y")
            assert info.value.code is Code.CHILD_RUNNING
            assert trio.current_time() == 2.0  # it waited for sub's start (x: 1 s)
            assert _states(sub) == [("x", "running"), ("y", "running")]
            assert await sub.ref("y").call("hi") == ("y", "hi", 1)
    # y started by sub's first run and by its restart: once each, never twice at a time.
    assert [e[:2] for e in journal if e[1] == "y"] == [
        ("start", "y"),
        ("stop", "y"),
        ("start", "y"),
        ("stop", "y"),
    ]


async def test_terminate_during_a_nested_start_stops_the_started_child_for_good(
    autojump_clock: MockClock,
) -> None:
    journal: list[tuple[Any, ...]] = []
    with trio.fail_after(60):
        async with open_tree(_nested(journal)) as tree:
            sub = await _in_subs_restart(tree, journal)
            await sub.terminate_child("x")
            assert trio.current_time() == 2.0
            assert _states(sub) == [("x", "stopped"), ("y", "running")]
            with pytest.raises(ActorError) as stopped:
                await sub.ref("x").call(("crash", Code.UNAVAILABLE))
            assert stopped.value.code is Code.ACTOR_STOPPED
            await sub.restart_child("x")  # one instance again, not a second one
            assert _states(sub) == [("x", "running"), ("y", "running")]
    x_events = [e[:2] + e[2:3] for e in journal if e[1] == "x"]
    assert x_events == [
        ("start", "x", 1.0),
        ("stop", "x", "crashed:unavailable"),
        ("start", "x", 2.0),
        ("stop", "x", "terminated"),
        ("start", "x", 3.0),
        ("stop", "x", "shutdown"),
    ]


async def test_a_child_deleted_between_runs_stays_deleted(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    with trio.fail_after(60):
        async with open_tree(_nested(journal)) as tree:
            sub: Supervisor = tree.root.child("sub")
            await sub.terminate_child("y")
            await sub.delete_child("y")
            with pytest.raises(ActorError):
                await sub.ref("x").call(("crash", Code.UNAVAILABLE))
            await trio.sleep(5)
            assert _states(sub) == [("x", "running")]
    assert [e for e in journal if e[1] == "y"] == [("start", "y", 1.0), ("stop", "y", "terminated")]


async def test_work_for_a_closed_nursery_runs_in_the_caller_shielded() -> None:
    """run_to_completion on a nursery closed to new tasks (its owner's run ending): the
    work still completes, in the caller's task, even if the caller is cancelled."""
    async with trio.open_nursery() as closed:
        pass
    done: list[str] = []

    async def work(name: str) -> None:
        await trio.lowlevel.checkpoint()
        done.append(name)

    with trio.CancelScope() as scope:
        scope.cancel()
        await run_to_completion(closed, work, "stop")
    assert done == ["stop"]


class _Hooky(SlowStart):
    async def on_restart(self, error: ActorError) -> None:
        self.journal.append(("on_restart", self.name, str(error.code)))


async def test_a_temporary_childs_crash_is_never_counted_nor_restarted(
    autojump_clock: MockClock,
) -> None:
    """max_restarts=1: three temporary children crash (the default directive for
    ``unavailable`` is restart); none is restarted, none counts, each gets on_stop."""
    journal: list[tuple[Any, ...]] = []
    with trio.fail_after(60):
        async with open_tree(tree_spec(worker("a", journal), max_restarts=1)) as tree:
            for i in range(3):
                spec = ChildSpec(
                    id=f"t{i}", actor=_Hooky, args=(f"t{i}", journal, 0.0), restart="temporary"
                )
                ref = await tree.root.start_child(spec)
                assert ref is not None
                with pytest.raises(ActorError, match="told to crash"):
                    await ref.call(("crash", Code.UNAVAILABLE))
                await trio.sleep(1)
            assert _states(tree.root) == [("a", "running")]
    assert [e for e in journal if e[0] in {"on_restart", "stop"}] == [
        ("stop", "t0", "crashed:unavailable"),
        ("stop", "t1", "crashed:unavailable"),
        ("stop", "t2", "crashed:unavailable"),
        ("stop", "a", "shutdown"),
    ]


def _slow(name: str, journal: list[tuple[Any, ...]], **options: Any) -> ChildSpec:
    return ChildSpec(id=name, actor=SlowStart, args=(name, journal, 0.0), **options)


async def _crash(sup: Supervisor, child: str, after: float) -> None:
    with pytest.raises(ActorError, match="told to crash"):
        await sup.ref(child).call(("crash", Code.UNAVAILABLE, after))


@pytest.mark.parametrize("strategy", ["one_for_one", "one_for_all"])
async def test_a_crash_while_terminate_stops_the_child_is_not_counted_nor_restarted(
    strategy: str, autojump_clock: MockClock
) -> None:
    """terminate_child waits for an in-flight call that then crashes: the crash is part of
    the stop we asked for — on_stop, no restart, nothing in the intensity window (with
    max_restarts=0 a counted crash would fail the supervisor)."""
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(_slow("a", journal), _slow("b", journal), strategy=strategy, max_restarts=0)
    with trio.fail_after(60), pytest.raises(ActorError) as tree_error:
        async with open_tree(spec) as tree:
            sup: Supervisor = tree.root
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_crash, sup, "a", 1.0)
                await trio.sleep(0.5)
                await sup.terminate_child("a")
                assert trio.current_time() == 1.0
            await trio.sleep(5)
            assert _states(sup) == [("a", "stopped"), ("b", "running")]
            await sup.restart_child("a")
            await _crash(sup, "a", 0.0)  # the first crash that counts: max_restarts=0
            await trio.sleep_forever()
    assert tree_error.value.code is Code.RESTART_INTENSITY_EXCEEDED
    assert "1 failures within" in tree_error.value.message  # the first was not counted
    assert journal[2] == ("stop", "a", "crashed:unavailable")
    assert trio.current_time() == 6.0


async def test_a_pending_restart_does_not_bring_back_a_child_terminated_meanwhile(
    autojump_clock: MockClock,
) -> None:
    """a crashes while the supervisor is busy (a slow start_child holds the lock);
    terminate_child, queued first, wins: the restart decided at the crash never runs."""
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(_slow("a", journal), _slow("b", journal), strategy="one_for_all")
    with trio.fail_after(60):
        async with open_tree(spec) as tree:
            sup: Supervisor = tree.root
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_crash, sup, "a", 1.0)
                nursery.start_soon(
                    sup.start_child,
                    ChildSpec(id="slow", actor=SlowStart, args=("slow", journal, 5.0)),
                )
                await trio.sleep(0.5)
                await sup.terminate_child("a")
            await trio.sleep(5)
            assert _states(sup) == [("a", "stopped"), ("b", "running"), ("slow", "running")]
            with pytest.raises(ActorError) as stopped:
                await sup.ref("a").call(("crash", Code.UNAVAILABLE))
            assert stopped.value.code is Code.ACTOR_STOPPED
    assert [e[:2] for e in journal if e[1] == "a"] == [("start", "a")]


async def test_two_crashes_in_one_instant_restart_a_one_for_all_group_once(
    autojump_clock: MockClock,
) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(
        _slow("a", journal), _slow("b", journal), _slow("c", journal), strategy="one_for_all"
    )
    with trio.fail_after(60):
        async with open_tree(spec) as tree:
            sup: Supervisor = tree.root
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_crash, sup, "a", 1.0)
                nursery.start_soon(_crash, sup, "b", 1.0)
            await trio.sleep(5)
            assert [(c.id, c.restarts) for c in sup.which_children()] == [
                ("a", 1),
                ("b", 1),
                ("c", 1),
            ]
    assert [e[:2] for e in journal if e[0] == "start"] == [
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ] * 2
