"""A run's progress as its records tell it: the reducers recovery replays.

:class:`Progress` folds a run's records, in ``seq`` order, into what the engine needs to
go on: the state, the nodes ready to run, the joins waiting, how many times each node
has run, the steps, the attempts in flight, the approval decisions not yet used, and
whether the run ended. A run with a journal keeps one, fed by every record it
publishes; its snapshot after a ``node:completed`` is the run's checkpoint. Recovery
restores the last checkpoint and applies the later records through the same
:meth:`Progress.apply`; the scheduling steps (:func:`follow`, :func:`take`) are the
engine's own.

A record the reducers cannot place — not the next ``seq``, anything before
``run:started`` or after a terminal record, a node finishing that was not in flight, a
node starting that was neither ready nor a join due — is ``event_log_corrupt`` naming
the run and the record's ``seq``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, MutableSequence
from typing import Any

from actors import ActorError
from actors.events import RunEvent
from actors.journal import corrupt as _corrupt
from actors.journal import ends_run


def follow(
    joins: Mapping[str, frozenset[str]],
    ready: MutableSequence[str],
    fired: dict[str, set[str]],
    finished: dict[str, set[str]],
    node_id: str,
    targets: Iterable[str],
) -> None:
    """``node_id`` is done and its edges led to ``targets``: plain targets are ready; a
    join is ready once every source of it is done and at least one edge led into it."""
    for target in targets:
        if target in joins:
            fired.setdefault(target, set()).add(node_id)
        else:
            ready.append(target)
    if joins:
        for join, sources in joins.items():
            if node_id in sources:
                done = finished.setdefault(join, set())
                done.add(node_id)
                if done >= sources:
                    release(ready, fired, finished, join)


def release(
    ready: MutableSequence[str],
    fired: dict[str, set[str]],
    finished: dict[str, set[str]],
    join: str,
) -> None:
    """Let ``join`` run if an edge led into it (its bookkeeping starts over)."""
    edges = fired.pop(join, None)
    finished.pop(join, None)
    if edges:
        ready.append(join)


def take(
    ready: MutableSequence[str],
    fired: dict[str, set[str]],
    finished: dict[str, set[str]],
    node: str,
) -> bool:
    """``node`` starts: it leaves the ready nodes, or — a join the engine let go ahead
    because nothing else could run — its bookkeeping. ``False`` when it was neither."""
    try:
        ready.remove(node)
    except ValueError:
        if node not in fired:
            return False
        fired.pop(node)
        finished.pop(node, None)
    return True


class Progress:
    """A run's progress (see the module docstring)."""

    def __init__(self, run_id: str, start: tuple[str, ...], joins: Mapping[str, frozenset[str]]):
        self.run_id = run_id
        self.start = start
        self.joins = joins
        #: The ``seq`` the next record must have.
        self.seq = 0
        self.state: dict[str, Any] = {}
        self.ready: deque[str] = deque()
        self.fired: dict[str, set[str]] = {}
        self.finished: dict[str, set[str]] = {}
        self.executions: dict[str, int] = {}
        self.steps = 0
        #: ``[node_id, execution, next attempt, not before]`` of each execution under way
        #: (not before: the run time its retry's backoff ends, 0.0 when none).
        self.in_flight: list[list[Any]] = []
        #: Approval decisions made and not yet used by their node: node id -> [decision,
        #: by, reason] oldest first.
        self.decisions: dict[str, list[list[str]]] = {}
        self.terminal: str | None = None
        self.started_at = 0.0
        self.last_at = 0.0
        #: ``[tokens, cost, turns]`` the budget had used at the last checkpoint.
        self.budget: list[float] = [0, 0.0, 0]

    # -- the reducers ---------------------------------------------------------------

    def apply(self, record: RunEvent) -> None:
        """Fold ``record`` in (``event_log_corrupt`` when it does not fit)."""
        if record.seq != self.seq:
            raise self._reject(record, f"expected seq {self.seq}")
        if self.terminal is not None:
            raise self._reject(record, f"a record after {self.terminal}")
        name = record.name
        if (self.seq == 0) != (name == "run:started"):
            raise self._reject(record, "run:started is not the first record")
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, record)
        elif ends_run(record):
            self.terminal = name
        self.seq += 1
        self.last_at = record.at

    def _started(self, record: Any) -> None:
        self.state = dict(record.inputs)
        self.ready.extend(self.start)
        self.started_at = record.at

    def _node_started(self, record: Any) -> None:
        entry = self._entry(record.node_id, record.execution)
        if entry is None:
            if record.attempt != 1:
                raise self._reject(record, f"node {record.node_id!r} was not in flight")
            if not take(self.ready, self.fired, self.finished, record.node_id):
                raise self._reject(record, f"node {record.node_id!r} was not ready")
            self.steps += 1
            self.executions[record.node_id] = max(
                record.execution, self.executions.get(record.node_id, 0)
            )
            self.in_flight.append([record.node_id, record.execution, record.attempt, 0.0])
        else:
            entry[2], entry[3] = record.attempt, 0.0

    def _retrying(self, record: Any) -> None:
        entry = self._in_flight(record)
        entry[2], entry[3] = record.attempt + 1, record.at + record.delay

    def _completed(self, record: Any) -> None:
        self.in_flight.remove(self._in_flight(record))
        self.state.update(record.updates)
        self._used_decision(record.node_id)
        follow(self.joins, self.ready, self.fired, self.finished, record.node_id, record.next)

    def _failed(self, record: Any) -> None:
        self.in_flight.remove(self._in_flight(record))
        self._used_decision(record.node_id)
        if record.handled:
            follow(self.joins, self.ready, self.fired, self.finished, record.node_id, record.next)

    def _skipped(self, record: Any) -> None:
        if not take(self.ready, self.fired, self.finished, record.node_id):
            raise self._reject(record, f"node {record.node_id!r} was not ready")
        self.steps += 1
        self.executions[record.node_id] = self.executions.get(record.node_id, 0) + 1
        follow(self.joins, self.ready, self.fired, self.finished, record.node_id, record.next)

    def _decided(self, record: Any) -> None:
        if record.node_id is not None:
            self.decisions.setdefault(record.node_id, []).append(
                [record.decision, record.by, record.reason]
            )

    def _used_decision(self, node_id: str) -> None:
        waiting = self.decisions.get(node_id)
        if waiting:
            waiting.pop(0)
            if not waiting:
                del self.decisions[node_id]

    def _entry(self, node_id: str, execution: int) -> list[Any] | None:
        for entry in self.in_flight:
            if entry[0] == node_id and entry[1] == execution:
                return entry
        return None

    def _in_flight(self, record: Any) -> list[Any]:
        entry = self._entry(record.node_id, record.execution)
        if entry is None:
            raise self._reject(record, f"node {record.node_id!r} was not in flight")
        return entry

    def _reject(self, record: RunEvent, what: str) -> ActorError:
        return _corrupt(self.run_id, record.seq, f"{record.name}: {what}")

    # -- checkpoints ----------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The progress as JSON data (a checkpoint's content)."""
        return {
            "seq": self.seq,
            "state": self.state,
            "ready": list(self.ready),
            "fired": {k: sorted(v) for k, v in self.fired.items()},
            "finished": {k: sorted(v) for k, v in self.finished.items()},
            "executions": self.executions,
            "steps": self.steps,
            "in_flight": self.in_flight,
            "decisions": self.decisions,
            "terminal": self.terminal,
            "started_at": self.started_at,
            "last_at": self.last_at,
            "budget": self.budget,
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Take a snapshot's content back (``KeyError``/``TypeError``/``ValueError``
        when it is not one)."""
        self.seq = int(data["seq"])
        self.state = dict(data["state"])
        self.ready = deque(str(node) for node in data["ready"])
        self.fired = {str(k): set(v) for k, v in data["fired"].items()}
        self.finished = {str(k): set(v) for k, v in data["finished"].items()}
        self.executions = {str(k): int(v) for k, v in data["executions"].items()}
        self.steps = int(data["steps"])
        self.in_flight = [
            [str(item[0]), int(item[1]), int(item[2]), float(item[3]) if len(item) > 3 else 0.0]
            for item in data["in_flight"]
        ]
        self.decisions = {str(k): [list(d) for d in v] for k, v in data["decisions"].items()}
        self.terminal = data["terminal"]
        self.started_at = float(data["started_at"])
        self.last_at = float(data["last_at"])
        tokens, cost, turns = data["budget"]
        self.budget = [int(tokens), float(cost), int(turns)]


_HANDLERS: dict[str, Any] = {
    "run:started": Progress._started,
    "node:started": Progress._node_started,
    "node:retrying": Progress._retrying,
    "node:completed": Progress._completed,
    "node:failed": Progress._failed,
    "node:skipped": Progress._skipped,
    "approval:decided": Progress._decided,
}
