"""Random interleavings of failures, cancels and timeouts on a small tree.

Invariants checked on every run:

* once the tree is aborted, every failed call resolved afterwards is ``cancelled``;
* restart decisions never exceed the intensity (max_restarts within any period);
* no caller waits forever (the whole program finishes within a virtual deadline);
* no message disappears: every call gets a reply or a typed error, every cast is handled
  or becomes a dead letter — exactly one of the two.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors import Actor, ActorError, Code
from actors.testing import capture_events
from supervisors import Backoff, ChildSpec, SupervisorSpec, open_tree

CHILDREN = ("a", "b", "c")
MAX_RESTARTS, PERIOD = 3, 5.0


class Prop(Actor):
    def __init__(self, name: str, handled: list[int]) -> None:
        self.name = name
        self.handled = handled

    async def handle(self, message: Any) -> Any:
        kind, ident, arg = message
        self.handled.append(ident)
        if kind == "crash":
            raise ActorError.from_code(arg, "told to")
        if kind == "misbehave":
            try:
                await trio.sleep(arg)
            except trio.Cancelled:
                raise ValueError("broke while cancelled") from None
        else:
            await trio.sleep(arg)
        return ident


steps = st.lists(
    st.tuples(
        # weighted: crashes often (to reach the intensity limit), aborts rarely
        st.sampled_from(
            [
                "call",
                "call",
                "cast",
                "cast",
                "crash",
                "crash",
                "crash",
                "misbehave",
                "sleep",
                "abort",
            ]
        ),
        st.sampled_from(CHILDREN),
        st.sampled_from([0.0, 0.5, 2.0, 7.0]),
        st.sampled_from([Code.TOOL_FAILED, Code.RATE_LIMITED, Code.TOOL_DENIED]),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=steps, strategy=st.sampled_from(["one_for_one", "one_for_all", "rest_for_one"]))
def test_invariants_hold_under_random_interleavings(
    program: list[tuple[str, str, float, Code]], strategy: str
) -> None:
    trio.run(_check, program, strategy, clock=trio.testing.MockClock(autojump_threshold=0))


async def _check(program: list[tuple[str, str, float, Code]], strategy: str) -> None:
    handled: list[int] = []
    letters: list[int] = []
    calls: dict[int, Any] = {}
    casts: list[int] = []
    decisions: list[tuple[float, str]] = []
    abort_at: list[float] = []
    resolved_at: dict[int, float] = {}
    spec = SupervisorSpec(
        children=[ChildSpec(id=n, actor=Prop, args=(n, handled), shutdown=1.0) for n in CHILDREN],
        strategy=strategy,  # type: ignore[arg-type]
        max_restarts=MAX_RESTARTS,
        period=PERIOD,
        backoff=Backoff(kind="fixed", initial=0.5, max=0.5),
    )

    async def run_tree(*, task_status: trio.TaskStatus[Any]) -> None:
        try:
            async with open_tree(spec) as tree:
                tree.root.runtime.dead_letters.add_hook(lambda d: letters.append(d.message[1]))
                task_status.started(tree)
                await trio.sleep_forever()
        except ActorError:
            pass  # the tree may give up or be aborted: that is part of the program

    async def call(tree: Any, child: str, message: tuple[str, int, Any], timeout: float) -> None:
        try:
            calls[message[1]] = await tree.ref(child).call(message, timeout=timeout)
        except ActorError as err:
            calls[message[1]] = err
        resolved_at[message[1]] = trio.current_time()

    with capture_events("supervisor.decision") as events, trio.fail_after(500):
        async with trio.open_nursery() as nursery:
            tree = await nursery.start(run_tree)
            for ident, (kind, child, amount, code) in enumerate(program):
                if kind == "sleep":
                    await trio.sleep(amount)
                elif kind == "abort":
                    if not abort_at:
                        abort_at.append(trio.current_time())
                    tree.abort("property abort")
                elif kind == "cast":
                    casts.append(ident)
                    try:
                        await tree.ref(child).cast(("work", ident, amount))
                    except ActorError:
                        casts.pop()  # refused at once (e.g. child removed): not sent
                else:
                    arg = code if kind == "crash" else amount
                    nursery.start_soon(call, tree, child, (kind, ident, arg), 3.0)
                    await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(30)
            tree.root.request_shutdown("end of program")
        decisions.extend((e.at, e.directive) for e in events)

    event(f"aborted={bool(abort_at)}")
    event(f"restarts={min(len([d for d in decisions if d[1] == 'restart']), 3)}+")
    event(f"escalated={any(d[1] == 'escalate' for d in decisions)}")
    event(f"dead_letters={'some' if letters else 'none'}")
    event(
        f"call_errors={'some' if any(isinstance(v, ActorError) for v in calls.values()) else 'none'}"
    )
    # no message disappears; each cast is handled or dead-lettered, never both
    assert all(isinstance(v, int | ActorError) for v in calls.values())
    for ident in casts:
        assert (ident in handled) != (ident in letters), ident
    # cancellation wins after an abort
    if abort_at:
        for ident, value in calls.items():
            if isinstance(value, ActorError) and resolved_at[ident] > abort_at[0]:
                assert value.code is Code.CANCELLED, (ident, value.code)
    # intensity is never exceeded
    restarts = [at for at, directive in decisions if directive == "restart"]
    for at in restarts:
        in_window = [t for t in restarts if at - PERIOD <= t <= at]
        assert len(in_window) <= MAX_RESTARTS
