"""Whose cancel is it? A tree's own scopes ending vs a scope around the tree (issue 26).

Each test runs a seeded schedule under ``MockClock(autojump_threshold=0)`` (the
``autojump_clock`` fixture): ``random.Random(seed)`` picks the delays and the instants,
and every call is bounded with ``trio.fail_after`` so that a hang fails the test instead
of stalling it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code
from supervisors import Backoff, ChildSpec, Directive, Policy, SupervisorSpec, open_tree

SEEDS = range(12)
HANG = 500.0  # virtual seconds: a call still unanswered by then hangs


class Slow(Actor):
    """A worker whose restarts take ``start`` seconds in ``on_start``; ``"crash"`` fails
    it with ``network`` (restarted), ``"boom"`` with ``auth`` (the root's policy aborts)."""

    def __init__(self, start: float) -> None:
        self.start = start

    async def on_start(self) -> None:
        if self.ref.restarts:
            await trio.sleep(self.start)

    async def handle(self, message: Any) -> Any:
        if message == "crash":
            raise ActorError.from_code(Code.NETWORK, "down")
        if message == "boom":
            raise ActorError.from_code(Code.AUTH, "key revoked")
        return message


async def bounded(ref: Any, message: Any) -> Any:
    """``ref.call(message)``, failing the test if it is not answered within ``HANG``."""
    with trio.fail_after(HANG):
        return await ref.call(message, timeout=None)


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_nested_supervisor_ending_during_a_delayed_restart_never_cancels_the_tree(
    autojump_clock: MockClock, seed: int
) -> None:
    """``sub`` restarts ``w`` after a backoff; while the restart's ``on_start`` runs, the
    root terminates ``sub`` (its run ends: the start is killed and the run's nursery is
    cancelled in the same instant). That is ``sub``'s own scope ending, not a cancel
    around the tree: ``sub`` comes back, ``w`` answers, and a later policy ``abort`` still
    applies, its caller getting its own ``auth`` error and the tree failing with it."""
    rng = random.Random(seed)
    backoff = rng.choice([0.5, 1.0, 2.0])
    start = rng.choice([0.5, 1.0, 3.0])
    into_start = rng.choice([0.0, 0.0, start / 4, start / 2])  # 0: the very instant it began
    sub = SupervisorSpec(
        children=[ChildSpec(id="w", actor=Slow, args=(start,))],
        backoff=Backoff(kind="fixed", initial=backoff, max=backoff),
    )
    spec = SupervisorSpec(
        children=[
            ChildSpec(id="sub", supervisor=sub),
            ChildSpec(id="bomb", actor=Slow, args=(0.0,)),
        ],
        policy=Policy(by_code={Code.AUTH: Directive.ABORT}),
    )
    answers: list[tuple[str, Any]] = []
    with pytest.raises(ActorError) as tree_error:
        async with open_tree(spec) as tree:
            with pytest.raises(ActorError):
                await bounded(tree.ref("sub", "w"), "crash")
            await trio.sleep(backoff + into_start)  # the restart's on_start is under way
            await tree.root.terminate_child("sub")
            await trio.sleep(rng.choice([0.0, 0.5]))
            await tree.root.restart_child("sub")
            answers.append(("w", await bounded(tree.ref("sub", "w"), "ping")))
            try:
                await bounded(tree.ref("bomb"), "boom")
            except ActorError as err:
                answers.append(("bomb", (err.code, err.message)))
            await trio.sleep(HANG)  # the abort ends the block long before this
    outcome = (tree_error.value.code, tree_error.value.message)
    assert (answers, outcome) == (
        [("w", "ping"), ("bomb", (Code.AUTH, "key revoked"))],
        (Code.AUTH, "key revoked"),
    )


class Tool(Actor):
    """Handles ``("work", s)`` for ``s`` seconds; ``on_stop`` takes ``cleanup`` seconds.

    ``how`` says what the handler does when cancelled: ``"obeys"`` (re-raises),
    ``"shielded"`` (the work runs in a shielded scope and returns its value), or
    ``"swallows"`` (catches ``trio.Cancelled`` and returns a value anyway)."""

    max_deferred = 2

    def __init__(self, cleanup: float = 0.0, how: str = "obeys") -> None:
        self.cleanup = cleanup
        self.how = how

    async def on_stop(self, reason: str) -> None:
        await trio.sleep(self.cleanup)

    async def handle(self, message: Any) -> Any:
        kind, seconds = message
        if kind == "defer":
            return self.defer(self._work, seconds)
        return await self._work(seconds)

    async def _work(self, seconds: float) -> Any:
        if self.how == "shielded":
            with trio.CancelScope(shield=True):
                await trio.sleep(seconds)
            return "finished anyway"
        if self.how == "swallows":
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                return "ignored the cancel"
        await trio.sleep(seconds)
        return "done"


async def call_into(ref: Any, message: Any, timeout: float | None, into: list[Any]) -> None:
    """Call and record ``(code, message, delivered, when)`` or ``("value", v, when)``."""
    try:
        value = await bounded_with(ref, message, timeout)
    except ActorError as err:
        into.append((err.code, err.message, err.delivered, trio.current_time()))
    else:
        into.append(("value", value, trio.current_time()))


async def bounded_with(ref: Any, message: Any, timeout: float | None) -> Any:
    with trio.fail_after(HANG):
        return await ref.call(message, timeout=timeout)


async def run_tree(
    spec: SupervisorSpec, errors: list[ActorError], *, task_status: trio.TaskStatus[Any]
) -> None:
    """Run a tree until it ends; its error is recorded. Callers run outside its block, so
    leaving the block never cancels them: what they get is what the tree answered."""
    try:
        async with open_tree(spec) as tree:
            task_status.started(tree)
            await trio.sleep_forever()
    except ActorError as err:
        errors.append(err)


@pytest.mark.parametrize("seed", range(20))
async def test_a_call_timing_out_as_an_aborted_tree_closes_its_slots_is_cancelled(
    autojump_clock: MockClock, seed: int
) -> None:
    """A call queued behind an in-flight one when the tree is aborted is answered when
    the tree closes its slots (after ``on_stop``); its deadline is placed exactly at that
    instant, or a hair around it (never before the abort). Whichever comes first it is
    ``cancelled`` with the abort's reason, ``delivered=False`` — never ``call_timeout``."""
    rng = random.Random(seed)
    abort_at = rng.choice([1.0, 2.5])
    cleanup = rng.choice([0.0, 0.5, 2.0])
    closes_at = abort_at + cleanup
    hairs = [0.0, 0.0, 0.0, 1e-9] + ([-1e-9] if cleanup else [])
    deadline = closes_at + rng.choice(hairs)
    spec = SupervisorSpec(children=[ChildSpec(id="tool", actor=Tool, args=(cleanup,))])
    answers: list[Any] = []
    errors: list[ActorError] = []
    async with trio.open_nursery() as outside:
        tree = await outside.start(run_tree, spec, errors)
        outside.start_soon(call_into, tree.ref("tool"), ("work", 100.0), None, answers)
        await trio.sleep(0.5)
        queued = deadline - trio.current_time()
        outside.start_soon(call_into, tree.ref("tool"), ("work", 0.0), queued, answers)
        await trio.sleep(abort_at - 0.5)
        tree.abort("user aborted")
    assert [(e.code, e.message) for e in errors] == [(Code.CANCELLED, "user aborted")]
    assert sorted(answers, key=lambda a: (a[3], not a[2])) == [
        (Code.CANCELLED, "user aborted", True, abort_at),
        (Code.CANCELLED, "user aborted", False, pytest.approx(min(deadline, closes_at))),
    ]


@pytest.mark.parametrize("how", ["shielded", "swallows"])
@pytest.mark.parametrize("kind", ["work", "defer"])
async def test_in_flight_callers_of_an_aborted_tree_are_cancelled_even_if_the_handler_ignores_it(
    autojump_clock: MockClock, how: str, kind: str
) -> None:
    """Once the tree is aborted with a reason, a call in flight is answered ``cancelled``
    with that reason (``delivered=True``), even when its handler (or deferred work) runs
    shielded or swallows ``trio.Cancelled`` and returns a value."""
    spec = SupervisorSpec(children=[ChildSpec(id="tool", actor=Tool, kwargs={"how": how})])
    answers: list[Any] = []
    with pytest.raises(ActorError) as tree_error:
        async with open_tree(spec) as tree, trio.open_nursery() as callers:
            callers.start_soon(call_into, tree.ref("tool"), (kind, 3.0), None, answers)
            await trio.sleep(1)
            tree.abort("user aborted")
    assert (tree_error.value.code, tree_error.value.message) == (Code.CANCELLED, "user aborted")
    ends = 3.0 if how == "shielded" else 1.0  # a shielded handler holds the unwinding up
    assert answers == [(Code.CANCELLED, "user aborted", True, ends)]


@pytest.mark.parametrize("when", ["unwinding", "ended"])
async def test_a_call_arriving_at_an_aborted_tree_is_cancelled_at_once(
    autojump_clock: MockClock, when: str
) -> None:
    """The rule of docs/supervision.md (a call arriving at a cancelled tree): while an
    aborted tree unwinds (``on_stop`` takes 5 s here) and after it ended, a new call is
    ``cancelled`` with the abort's reason, ``delivered=False``, at once; a cast becomes a
    dead letter. A tree that ended by a plain shutdown answers ``actor_stopped``."""
    spec = SupervisorSpec(children=[ChildSpec(id="tool", actor=Tool, args=(5.0,))])
    answers: list[Any] = []
    with pytest.raises(ActorError):
        async with open_tree(spec) as tree:
            ref = tree.ref("tool")
            async with trio.open_nursery() as callers:
                callers.start_soon(call_into, ref, ("work", 100.0), None, answers)
                await trio.sleep(1)
                tree.abort("user aborted")
                if when == "unwinding":
                    with trio.CancelScope(shield=True):
                        await trio.sleep(1)  # the tree is unwinding: on_stop runs until 6
                        await call_into(ref, ("work", 0.0), 30.0, answers)
    if when == "ended":
        await call_into(ref, ("work", 0.0), 30.0, answers)
    late = 2.0 if when == "unwinding" else 6.0
    assert answers == [
        (Code.CANCELLED, "user aborted", True, 1.0),
        (Code.CANCELLED, "user aborted", False, late),
    ]
    async with open_tree(spec) as tree:
        ref = tree.ref("tool")
    stopped: list[Any] = []
    await call_into(ref, ("work", 0.0), 30.0, stopped)
    assert [(code, delivered) for code, _, delivered, _ in stopped] == [(Code.ACTOR_STOPPED, False)]
