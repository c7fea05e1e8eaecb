"""A cancel of a trio scope *around* a tree, at random points (issue 9).

The program sends calls (plain, crashing, misbehaving on cancel, deferred, streamed),
casts into a small mailbox (senders block), sleeps, and at one random step cancels the
scope the tree runs in — while restarts, backoffs, ``on_start``/``on_stop``, deferred
replies, blocked casts and streams are under way. Invariants on every run:

* every caller is answered: its completed result, or ``cancelled`` with the scope's
  reason once the cancel has happened (a typed failure only if it was answered before);
* no ``supervisor.decision`` and no start after the cancel;
* every instance whose ``on_start`` returned gets exactly one cleanup hook;
* every cast is handled or dead-lettered, exactly once;
* no slot is left open, and nobody waits forever (the program ends in virtual time).
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors import Actor, ActorError, Code
from actors.testing import capture_events
from supervisors import Backoff, ChildSpec, SupervisorSpec, open_tree

CHILDREN = ("a", "b", "s")
REASON = "property cancel"


class World:
    """What the actors and the program record, in one sequence of events."""

    def __init__(self, start_delay: float, stop_delay: float) -> None:
        self.seq = itertools.count()
        self.start_delay = start_delay
        self.stop_delay = stop_delay
        self.started: dict[int, int] = {}  # instance -> seq when on_start returned
        self.entered: list[int] = []  # seq of every on_start entered
        self.cleanups: dict[int, int] = {}  # instance -> cleanup hooks run
        self.handled: list[int] = []
        self.instances = itertools.count()


class Prop(Actor):
    max_deferred = 2

    def __init__(self, world: World) -> None:
        self.world = world
        self.me = next(world.instances)

    async def on_start(self) -> None:
        self.world.entered.append(next(self.world.seq))
        await trio.sleep(self.world.start_delay)
        self.world.started[self.me] = next(self.world.seq)

    async def on_stop(self, reason: str) -> None:
        self.world.cleanups[self.me] = self.world.cleanups.get(self.me, 0) + 1
        await trio.sleep(self.world.stop_delay)

    async def on_restart(self, error: ActorError) -> None:
        self.world.cleanups[self.me] = self.world.cleanups.get(self.me, 0) + 1

    async def handle(self, message: Any) -> Any:
        kind, ident, arg = message
        self.world.handled.append(ident)
        if kind == "crash":
            raise ActorError.from_code(arg, "told to")
        if kind == "misbehave":
            try:
                await trio.sleep(arg)
            except trio.Cancelled:
                raise ValueError("broke while cancelled") from None
        elif kind == "defer":
            return self.defer(self._later, ident, arg)
        elif kind == "stream":
            return self.defer(self._stream, ident, arg)
        else:
            await trio.sleep(arg)
        return ident

    async def _later(self, ident: int, seconds: float) -> int:
        await trio.sleep(seconds)
        return ident

    async def _stream(self, ident: int, sink: trio.MemorySendChannel[int]) -> int:
        async with sink:
            for piece in range(3):
                await trio.sleep(0.3)
                await sink.send(piece)
        return ident


steps = st.lists(
    st.tuples(
        st.sampled_from(
            ["call", "call", "cast", "cast", "crash", "crash", "misbehave", "defer", "stream"] * 2
            + ["sleep"] * 4
        ),
        st.sampled_from(CHILDREN),
        st.sampled_from([0.0, 0.3, 1.0, 4.0]),
        st.sampled_from([Code.TOOL_FAILED, Code.RATE_LIMITED, Code.TOOL_DENIED]),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=steps,
    cancel_at=st.integers(min_value=0, max_value=20),
    cancel_delay=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    strategy=st.sampled_from(["one_for_one", "one_for_all", "rest_for_one"]),
    start_delay=st.sampled_from([0.0, 0.4]),
    stop_delay=st.sampled_from([0.0, 0.6]),
)
def test_enclosing_cancel_wins_at_any_point(
    program: list[tuple[str, str, float, Code]],
    cancel_at: int,
    cancel_delay: float,
    strategy: str,
    start_delay: float,
    stop_delay: float,
) -> None:
    world = World(start_delay, stop_delay)
    trio.run(
        _check,
        world,
        program,
        min(cancel_at, len(program)),
        cancel_delay,
        strategy,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )


async def _check(
    world: World,
    program: list[tuple[str, str, float, Code]],
    cancel_at: int,
    cancel_delay: float,
    strategy: str,
) -> None:
    spec = SupervisorSpec(
        children=[
            ChildSpec(id=n, actor=Prop, args=(world,), shutdown=1.0, capacity=2) for n in CHILDREN
        ],
        strategy=strategy,  # type: ignore[arg-type]
        max_restarts=50,
        period=5.0,
        backoff=Backoff(kind="fixed", initial=0.5, max=0.5),
    )
    letters: list[int] = []
    casts: list[int] = []
    answers: dict[int, tuple[Any, int, str]] = {}  # ident -> (value or error, seq, kind)
    cancelled_seq: list[int] = []
    runtime: list[Any] = []

    async def run_tree(scope: trio.CancelScope, *, task_status: trio.TaskStatus[Any]) -> None:
        with scope:
            async with open_tree(spec) as tree:
                runtime.append(tree.root.runtime)
                tree.root.runtime.dead_letters.add_hook(lambda d: letters.append(d.message[1]))
                task_status.started(tree)
                await trio.sleep_forever()

    async def call(tree: Any, child: str, message: tuple[str, int, Any]) -> None:
        try:
            value: Any = await tree.ref(child).call(message, timeout=3.0)
        except ActorError as err:
            value = err
        answers[message[1]] = (value, next(world.seq), message[0])

    async def stream(tree: Any, child: str, ident: int) -> None:
        send, receive = trio.open_memory_channel[int](0)
        pieces: list[int] = []

        async def consume() -> None:
            async with receive:
                async for piece in receive:
                    pieces.append(piece)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            try:
                value: Any = await tree.ref(child).call(
                    ("stream", ident, send), timeout=None, propagate_cancel=True
                )
            except ActorError as err:
                value = err
                send.close()
        answers[ident] = (value, next(world.seq), "stream")
        if not isinstance(value, ActorError):
            assert pieces == [0, 1, 2]

    async def cast(tree: Any, child: str, ident: int, amount: float) -> None:
        try:
            await tree.ref(child).cast(("work", ident, amount))
        except ActorError:
            casts.remove(ident)  # refused at once: never sent

    def cancel(scope: trio.CancelScope) -> None:
        cancelled_seq.append(next(world.seq))
        scope.cancel(reason=REASON)

    scope = trio.CancelScope()
    with capture_events("supervisor.decision") as decisions, trio.fail_after(500):
        async with trio.open_nursery() as outside:
            tree = await outside.start(run_tree, scope)
            for ident, (kind, child, amount, code) in enumerate(program):
                if ident == cancel_at:
                    await trio.sleep(cancel_delay)
                    cancel(scope)
                    decided_before = len(decisions)
                if kind == "sleep":
                    await trio.sleep(amount)
                elif kind == "cast":
                    casts.append(ident)
                    outside.start_soon(cast, tree, child, ident, amount)
                elif kind == "stream":
                    outside.start_soon(stream, tree, child, ident)
                else:
                    arg = code if kind == "crash" else amount
                    outside.start_soon(partial(call, tree, child, (kind, ident, arg)))
                await trio.testing.wait_all_tasks_blocked()
            if not cancelled_seq:
                await trio.sleep(cancel_delay)
                cancel(scope)
                decided_before = len(decisions)
        late_decisions = decisions[decided_before:]

    cut = cancelled_seq[0]
    event(f"cancel at step {'end' if cancel_at >= len(program) else 'mid'}")
    event(f"answers cancelled: {any(_cancelled(v) for v, _, _ in answers.values())}")
    event(f"dead letters: {bool(letters)}")
    # Every caller is answered, with a result or cancelled once the cancel happened.
    sent = {i for i, (kind, *_) in enumerate(program) if kind not in ("sleep", "cast")}
    assert set(answers) == sent
    for ident, (value, seq, kind) in answers.items():
        if isinstance(value, ActorError) and seq > cut:
            if value.code is Code.CANCELLED:
                assert (value.message, ident) == (REASON, ident)
            elif value.code is Code.ACTOR_STOPPED and ident >= cancel_at:
                # Sent after the cancel to an actor stopped for good before it (a caller
                # outside the tree cannot know yet that the tree is being cancelled).
                assert value.delivered is False, (ident, value)
            else:
                # Only a failure decided before the cancel may arrive after it.
                assert kind == "crash" and value.code is not Code.CANCELLED, (ident, value)
    # No policy ran and nothing started after the cancel.
    assert late_decisions == []
    assert [s for s in world.entered if s > cut] == []
    # Every started instance was cleaned up exactly once.
    for instance in world.started:
        assert world.cleanups.get(instance) == 1, instance
    assert all(count == 1 for count in world.cleanups.values())
    # Casts: handled or dead-lettered, exactly once.
    for ident in casts:
        assert (ident in world.handled) != (ident in letters), ident
    # Every slot closed.
    assert len(runtime[0]) == 0


def _cancelled(value: Any) -> bool:
    return isinstance(value, ActorError) and value.code is Code.CANCELLED
