"""A child's one state field (``supervisors.tree.children.Status``), pinned: the public state
each maps onto, which count as live, who ended an incarnation, and the transitions."""

from __future__ import annotations

import pytest

from actors import Actor, ActorError, Code
from supervisors import ChildSpec, ChildState
from supervisors.tree.children import LIVE, TRANSITIONS, Child, Children, EndedBy, Status


class _Idle(Actor):
    pass


def _child(status: Status, *, restarts: int = 0) -> Child:
    child = Child(ChildSpec(id="c", actor=_Idle), dynamic=False)
    child.status, child.restarts = status, restarts
    return child


def test_the_public_states_are_unchanged() -> None:
    assert [(s.name, s.value) for s in ChildState] == [
        ("RUNNING", "running"),
        ("RESTARTING", "restarting"),
        ("BACKING_OFF", "backing_off"),
        ("STOPPED", "stopped"),
    ]


@pytest.mark.parametrize(
    ("status", "restarts", "public", "live"),
    [
        (Status.STOPPED, 0, ChildState.STOPPED, False),
        (Status.STARTING, 0, ChildState.RUNNING, False),
        (Status.STARTING, 2, ChildState.RESTARTING, False),
        (Status.RUNNING, 0, ChildState.RUNNING, True),
        (Status.STOPPING, 0, ChildState.RUNNING, True),
        (Status.TERMINATING, 0, ChildState.RUNNING, True),
        (Status.EXITED, 0, ChildState.RUNNING, False),
        (Status.RESTARTING, 1, ChildState.RESTARTING, False),
        (Status.BACKING_OFF, 1, ChildState.BACKING_OFF, False),
    ],
)
def test_each_status_maps_onto_a_public_state(
    status: Status, restarts: int, public: ChildState, live: bool
) -> None:
    child = _child(status, restarts=restarts)
    assert child.state is public
    assert child.live is live
    assert child.info().state is public


def test_live_states() -> None:
    assert frozenset({Status.RUNNING, Status.STOPPING, Status.TERMINATING}) == LIVE


@pytest.mark.parametrize(
    ("status", "ended_by", "after"),
    [
        (Status.RUNNING, EndedBy.ITSELF, Status.EXITED),
        (Status.TERMINATING, EndedBy.TERMINATION, Status.EXITED),
        (Status.STOPPING, EndedBy.US, Status.EXITED),
        # Stopped for good already (a cancelled start past its cleanup budget): stays so.
        (Status.STOPPED, EndedBy.US, Status.STOPPED),
    ],
)
def test_end_incarnation(status: Status, ended_by: EndedBy, after: Status) -> None:
    child = _child(status)
    assert child.end_incarnation() is ended_by
    assert child.status is after


def test_a_stop_under_way_wins_over_stopping_itself_and_over_started() -> None:
    child = _child(Status.STOPPING)
    child.terminating()
    child.started()
    assert child.status is Status.STOPPING
    starting = _child(Status.STARTING)
    starting.terminating()
    starting.started()
    assert starting.status is Status.TERMINATING


def test_the_transitions_table() -> None:
    to_start = {Status.STARTING, Status.RESTARTING, Status.BACKING_OFF, Status.STOPPED}
    assert {s: set(t) for s, t in TRANSITIONS.items()} == {
        Status.STOPPED: to_start,
        Status.STARTING: {Status.RUNNING, Status.TERMINATING, Status.STOPPING, Status.STOPPED},
        Status.RUNNING: {Status.TERMINATING, Status.STOPPING, Status.EXITED, Status.STOPPED},
        Status.STOPPING: {Status.STOPPING, Status.EXITED, Status.STOPPED},
        Status.TERMINATING: {Status.STOPPING, Status.EXITED, Status.STOPPED},
        Status.EXITED: to_start,
        Status.RESTARTING: to_start,
        Status.BACKING_OFF: to_start,
    }


def test_a_transition_outside_the_table_is_refused() -> None:
    child = _child(Status.STOPPED)
    with pytest.raises(
        ActorError, match=r"^\[internal\] child 'c' cannot move from stopped to running$"
    ) as info:
        child.move(Status.RUNNING)
    assert (info.value.code, info.value.node_id) == (Code.INTERNAL, "c")
    assert child.status is Status.STOPPED


def _table(*specs: tuple[str, str]) -> Children:
    children = Children("/sup")
    for child_id, restart in specs:
        children.add(ChildSpec(id=child_id, actor=_Idle, restart=restart), dynamic=False)
    return children


def test_restart_group_applies_the_plan_to_the_children() -> None:
    children = _table(
        ("a", "permanent"), ("b", "permanent"), ("c", "temporary"), ("d", "transient")
    )
    a, b, c, d = children
    d.status = Status.STOPPED  # stopped for good: stays so
    for child in (a, b, c):
        child.status = Status.RUNNING
    stop, start = children.restart_group("rest_for_one", b)
    assert ([x.id for x in stop], [x.id for x in start]) == (["d", "c"], ["b"])
    stop, start = children.restart_group("one_for_all", b)
    assert ([x.id for x in stop], [x.id for x in start]) == (["d", "c", "a"], ["a", "b"])
    gone = Child(ChildSpec(id="gone", actor=_Idle), dynamic=True)
    assert children.restart_group("one_for_all", gone) == ([], [gone])


@pytest.mark.parametrize(
    ("status", "restarts", "code"),
    [
        (Status.RUNNING, 0, Code.CHILD_RUNNING),
        (Status.STOPPING, 0, Code.CHILD_RUNNING),
        (Status.STARTING, 0, Code.CHILD_RUNNING),
        (Status.STARTING, 1, Code.CHILD_RESTARTING),
        (Status.RESTARTING, 1, Code.CHILD_RESTARTING),
        (Status.BACKING_OFF, 1, Code.CHILD_RESTARTING),
        (Status.STOPPED, 3, None),
    ],
)
def test_check_stopped(status: Status, restarts: int, code: Code | None) -> None:
    children = _table(("a", "permanent"))
    (child,) = children
    child.status, child.restarts = status, restarts
    if code is None:
        children.check_stopped(child)
        return
    with pytest.raises(ActorError, match=r"/sup: 'a' is (running|restarting)") as caught:
        children.check_stopped(child)
    assert caught.value.code is code
    shown = "running" if code is Code.CHILD_RUNNING else "restarting"
    assert caught.value.message == f"/sup: 'a' is {shown}"
