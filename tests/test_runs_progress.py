"""The reducers recovery replays: what each record does to a run's progress, and every
record they reject (``event_log_corrupt`` with the record's ``seq``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors import ActorError
from actors.events import (
    ApprovalDecided,
    ApprovalRequested,
    NodeCompleted,
    NodeFailed,
    NodeRetrying,
    NodeSkipped,
    NodeStarted,
    RunCompleted,
    RunResumed,
    RunStarted,
    ToolCalled,
)
from supervisors.runs.progress import Progress

JOINS = {"j": frozenset({"a", "b"})}


class Stream:
    """Builds a run's records with consecutive seqs."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, cls: type[Any], **fields: Any) -> Any:
        record = cls(run_id="r", seq=self.seq, at=float(self.seq), **fields)
        self.seq += 1
        return record

    def started(self, node: str, execution: int = 1, attempt: int = 1) -> Any:
        return self(NodeStarted, node_id=node, execution=execution, attempt=attempt, kind="step")

    def completed(
        self, node: str, nxt: tuple[str, ...] = (), execution: int = 1, **updates: Any
    ) -> Any:
        return self(
            NodeCompleted,
            node_id=node,
            execution=execution,
            attempt=1,
            updates=updates,
            next=nxt,
            duration=0.0,
        )


def progress(*start: str) -> Progress:
    return Progress("r", start or ("s",), JOINS)


def fold(p: Progress, *records: Any) -> Progress:
    for record in records:
        p.apply(record)
    return p


def test_a_fan_out_a_join_and_the_state() -> None:
    s = Stream()
    p = fold(
        progress("s"),
        s(RunStarted, workflow="w", inputs={"q": 1}, wall_time=0.0),
        s.started("s"),
        s.completed("s", ("a", "b"), x=1),
    )
    assert (p.state, list(p.ready), p.steps, p.executions) == (
        {"q": 1, "x": 1},
        ["a", "b"],
        1,
        {"s": 1},
    )
    fold(p, s.started("a"), s.completed("a", ("j",)))
    assert (p.fired, p.finished, list(p.ready)) == ({"j": {"a"}}, {"j": {"a"}}, ["b"])
    fold(p, s.started("b"), s.completed("b", ("j",), y=2))
    assert (p.fired, p.finished, list(p.ready)) == ({}, {}, ["j"])  # all sources done
    fold(p, s.started("j"))
    assert p.in_flight == [["j", 1, 1, 0.0]] and p.steps == 4
    fold(
        p,
        s(
            NodeRetrying,
            node_id="j",
            execution=1,
            attempt=1,
            code="timeout",
            message="m",
            correlation_id="c",
            delay=1.0,
        ),
    )
    assert p.in_flight == [["j", 1, 2, 9.0]]  # the attempt a resume runs, not before 9.0
    fold(p, s.started("j", attempt=2), s.completed("j"))
    assert p.in_flight == [] and p.state == {"q": 1, "x": 1, "y": 2}
    fold(p, s(RunCompleted, state={}, duration=1.0, tokens=0, cost=0.0))
    assert (p.terminal, p.seq, p.last_at, p.started_at) == ("run:completed", 12, 11.0, 0.0)


def test_a_join_released_with_a_source_that_never_ran() -> None:
    s = Stream()
    p = fold(
        progress("s"),
        s(RunStarted, workflow="w", inputs={}, wall_time=0.0),
        s.started("s"),
        s.completed("s", ("a",)),
        s.started("a"),
        s.completed("a", ("j",)),
        s.started("j"),  # the engine let it go: b could no longer run
    )
    assert (p.fired, p.finished, p.in_flight) == ({}, {}, [["j", 1, 1, 0.0]])


def test_skips_failures_decisions_and_other_records() -> None:
    s = Stream()
    p = fold(
        progress("s", "t"),
        s(RunStarted, workflow="w", inputs={}, wall_time=0.0),
        s(NodeSkipped, node_id="s", code="circuit_open", message="m", next=("fb",)),
        s.started("t"),
        s(ToolCalled, node_id="t", tool="x", index=0, key="k", code="ok"),
        s(
            NodeFailed,
            node_id="t",
            execution=1,
            attempt=1,
            code="tool_failed",
            message="m",
            correlation_id="c",
            handled=True,
            next=("h",),
        ),
    )
    assert (list(p.ready), p.steps, p.executions) == (["fb", "h"], 2, {"s": 1, "t": 1})
    fold(
        p,
        s.started("fb"),
        s(ApprovalRequested, node_id="fb", prompt="ok?"),
        s(ApprovalDecided, node_id="fb", decision="approve", by="ops", reason="fine"),
        s(ApprovalDecided, node_id=None, decision="approve", by="ops", reason="budget"),
    )
    assert p.decisions == {"fb": [["approve", "ops", "fine"]]}
    fold(p, s.completed("fb"))
    assert p.decisions == {}  # used by its node
    fold(p, s.started("h"))
    fold(
        p,
        s(
            NodeFailed,
            node_id="h",
            execution=1,
            attempt=1,
            code="timeout",
            message="m",
            correlation_id="c",
            handled=False,
            next=("never",),
        ),
    )
    assert list(p.ready) == [] and p.in_flight == []  # unhandled: its next is not followed
    fold(p, s(RunResumed, in_flight=(), ready=(), pending=(), wall_time=0.0))
    assert p.seq == s.seq


def test_two_executions_of_one_node_in_flight() -> None:
    s = Stream()
    p = fold(
        progress("s"),
        s(RunStarted, workflow="w", inputs={}, wall_time=0.0),
        s.started("s"),
        s.completed("s", ("x", "x")),
        s.started("x", execution=2),
        s.started("x", execution=1),
    )
    assert p.in_flight == [["x", 2, 1, 0.0], ["x", 1, 1, 0.0]]
    assert p.executions == {"s": 1, "x": 2} and list(p.ready) == []
    fold(p, s.completed("x", execution=1))
    assert p.in_flight == [["x", 2, 1, 0.0]]


def _base(s: Stream) -> list[Any]:
    return [s(RunStarted, workflow="w", inputs={}, wall_time=0.0), s.started("s")]


@pytest.mark.parametrize(
    ("make", "seq", "what"),
    [
        (lambda s: [s.started("s")], 0, "node:started: run:started is not the first record"),
        (
            lambda s: [*_base(s), s(RunStarted, workflow="w", inputs={}, wall_time=0.0)],
            2,
            "run:started: run:started is not the first record",
        ),
        (lambda s: [*_base(s), s.started("nope")], 2, "node:started: node 'nope' was not ready"),
        (
            lambda s: [*_base(s), s.completed("other")],
            2,
            "node:completed: node 'other' was not in flight",
        ),
        (
            lambda s: [*_base(s), s.completed("s", execution=2)],
            2,
            "node:completed: node 's' was not in flight",
        ),
        (
            lambda s: [*_base(s), s.started("q", attempt=2)],
            2,
            "node:started: node 'q' was not in flight",
        ),
        (
            lambda s: [
                *_base(s),
                s(
                    NodeRetrying,
                    node_id="q",
                    execution=1,
                    attempt=1,
                    code="t",
                    message="m",
                    correlation_id="c",
                    delay=1.0,
                ),
            ],
            2,
            "node:retrying: node 'q' was not in flight",
        ),
        (
            lambda s: [
                *_base(s),
                s(
                    NodeFailed,
                    node_id="q",
                    execution=1,
                    attempt=1,
                    code="t",
                    message="m",
                    correlation_id="c",
                    handled=False,
                    next=(),
                ),
            ],
            2,
            "node:failed: node 'q' was not in flight",
        ),
        (
            lambda s: [
                *_base(s),
                s(NodeSkipped, node_id="q", code="circuit_open", message="m", next=()),
            ],
            2,
            "node:skipped: node 'q' was not ready",
        ),
        (
            lambda s: [
                *_base(s),
                s(RunCompleted, state={}, duration=1.0, tokens=0, cost=0.0),
                s.completed("s"),
            ],
            3,
            "node:completed: a record after run:completed",
        ),
    ],
)
def test_a_record_the_reducers_cannot_place_is_corrupt(make: Any, seq: int, what: str) -> None:
    p = progress("s")
    records = make(Stream())
    with pytest.raises(ActorError, match=r"^\[event_log_corrupt\] ") as info:
        fold(p, *records)
    assert info.value.message == f"run 'r': journal corrupt at seq {seq}: {what}"


def test_a_record_out_of_order_is_corrupt() -> None:
    s = Stream()
    first = s(RunStarted, workflow="w", inputs={}, wall_time=0.0)
    s.seq = 2
    with pytest.raises(ActorError, match=r"at seq 2: node:started: expected seq 1$"):
        fold(progress("s"), first, s.started("s"))


def test_a_snapshot_restores_exactly() -> None:
    s = Stream()
    p = fold(
        progress("s"),
        s(RunStarted, workflow="w", inputs={"q": [1, 2]}, wall_time=0.0),
        s.started("s"),
        s.completed("s", ("a", "b")),
        s.started("a"),
        s.completed("a", ("j",)),
        s.started("b"),
        s(ApprovalDecided, node_id="z", decision="deny", by="o", reason="r"),
    )
    p.budget = [12, 0.5, 3]
    snapshot = json.loads(json.dumps(p.snapshot()))
    assert snapshot == {
        "seq": 7,
        "state": {"q": [1, 2]},
        "ready": [],
        "fired": {"j": ["a"]},
        "finished": {"j": ["a"]},
        "executions": {"s": 1, "a": 1, "b": 1},
        "steps": 3,
        "in_flight": [["b", 1, 1, 0.0]],
        "decisions": {"z": [["deny", "o", "r"]]},
        "terminal": None,
        "started_at": 0.0,
        "last_at": 6.0,
        "budget": [12, 0.5, 3],
    }
    q = progress("s")
    q.restore(snapshot)
    assert q.snapshot() == p.snapshot()
    assert (type(q.budget[0]), type(q.budget[1]), type(q.budget[2])) == (int, float, int)
    assert isinstance(q.fired["j"], set) and isinstance(q.finished["j"], set)
    fold(q, s.completed("b", ("j",)))
    assert list(q.ready) == ["j"]


def test_a_new_progress_is_empty() -> None:
    p = progress("s")
    assert p.snapshot() == {
        "seq": 0,
        "state": {},
        "ready": [],
        "fired": {},
        "finished": {},
        "executions": {},
        "steps": 0,
        "in_flight": [],
        "decisions": {},
        "terminal": None,
        "started_at": 0.0,
        "last_at": 0.0,
        "budget": [0, 0.0, 0],
    }
