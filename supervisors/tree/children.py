"""A supervisor's children: one record per child with ONE state field, and the table.

:class:`Child` is OTP's ``#child{}``: its spec, its slot (an :class:`ActorCell`, or a
nested supervisor, a :class:`Subtree`) and where it is in its life,
:class:`Status`. The public view is :class:`ChildState` (``which_children``), onto which
:class:`Status` maps. Data that goes with a state — the decision waiting for the loop,
the restart count, the backoff exponent — are fields next to it, not states.

Transitions (:data:`TRANSITIONS` lists them, and :meth:`Child.move` checks them):

* ``STOPPED`` / ``EXITED`` / ``RESTARTING`` / ``BACKING_OFF`` → ``STARTING``: a start
  begins (its incarnation task is spawned);
* ``STARTING`` → ``RUNNING``: ``on_start`` returned (the started signal);
* ``STARTING`` / ``RUNNING`` → ``TERMINATING``: the actor stops itself for good
  (``ref.stop()`` from its own task);
* ``STARTING`` or a live state (:data:`LIVE`) → ``STOPPING``: the supervisor asked it to
  stop (a sibling's restart, ``terminate_child``, a shutdown, a cancelled start); its
  exit is not a failure. A ``STOPPING`` child that stops itself stays ``STOPPING``: the
  stop under way wins (and a ``STOPPING`` or ``TERMINATING`` child whose ``on_start``
  returns stays so);
* ``RUNNING`` / ``STOPPING`` / ``TERMINATING`` → ``EXITED``: its incarnation ended and
  the exit is queued for the loop (:meth:`Child.end_incarnation` says by whom);
* ``STOPPED`` / ``EXITED`` / ``RESTARTING`` / ``BACKING_OFF`` → ``RESTARTING`` /
  ``BACKING_OFF``: a restart is decided for it (its group's);
* anything → ``STOPPED``: down for good, a start that failed, or the run's end.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Final, Protocol

import attrs
import trio

from actors import ActorError, ActorRef, Code, Runtime
from actors.events import ChildStopped
from actors.lowlevel import DEFAULT_CLEANUP_BUDGET, ActorCell, CellState, Supervision, emit, enabled
from supervisors.tree.backoff import Backoff
from supervisors.tree.policy import Directive
from supervisors.tree.spec import ChildSpec, Strategy
from supervisors.tree.strategy import rejoins, restart_plan


class ChildState(enum.StrEnum):
    """A child's state as :meth:`Supervisor.which_children` shows it."""

    RUNNING = "running"
    RESTARTING = "restarting"
    BACKING_OFF = "backing_off"
    STOPPED = "stopped"


@attrs.frozen
class ChildInfo:
    """One row of :meth:`Supervisor.which_children`."""

    id: str
    state: ChildState
    restarts: int
    kind: str  # "worker" or "supervisor"
    ref: ActorRef | None


class Subtree(Protocol):
    """What a child record needs of its nested supervisor (a ``Supervisor``)."""

    async def run(self, *, task_status: trio.TaskStatus[Any] = ...) -> None: ...

    def request_shutdown(self, reason: str) -> None: ...

    def kill(self, reason: str) -> None: ...

    def close(self, reason: str = ...) -> None: ...


class Status(enum.Enum):
    """Where a child is in its life (see the module docstring for the transitions)."""

    STOPPED = "stopped"  # never started, or down for good
    STARTING = "starting"  # its start is under way: on_start has not returned
    RUNNING = "running"  # an incarnation is serving
    STOPPING = "stopping"  # we asked it to stop: its exit is ours, not a failure
    TERMINATING = "terminating"  # it stops itself for good: its exit is never restarted
    EXITED = "exited"  # its incarnation ended; the exit waits for the loop
    RESTARTING = "restarting"  # a restart is decided; its start has not begun
    BACKING_OFF = "backing_off"  # a restart waits for its backoff delay


_TO_START = frozenset({Status.STARTING, Status.RESTARTING, Status.BACKING_OFF, Status.STOPPED})
TRANSITIONS: Final[Mapping[Status, frozenset[Status]]] = {
    Status.STOPPED: _TO_START,
    Status.STARTING: frozenset(
        {Status.RUNNING, Status.TERMINATING, Status.STOPPING, Status.STOPPED}
    ),
    Status.RUNNING: frozenset({Status.TERMINATING, Status.STOPPING, Status.EXITED, Status.STOPPED}),
    Status.STOPPING: frozenset({Status.STOPPING, Status.EXITED, Status.STOPPED}),
    Status.TERMINATING: frozenset({Status.STOPPING, Status.EXITED, Status.STOPPED}),
    Status.EXITED: _TO_START,
    Status.RESTARTING: _TO_START,
    Status.BACKING_OFF: _TO_START,
}

LIVE: Final = frozenset({Status.RUNNING, Status.STOPPING, Status.TERMINATING})
"""An incarnation has started and not ended: the child counts as active."""

_PUBLIC: Final[Mapping[Status, ChildState]] = {
    Status.STOPPED: ChildState.STOPPED,
    Status.RUNNING: ChildState.RUNNING,
    Status.STOPPING: ChildState.RUNNING,
    Status.TERMINATING: ChildState.RUNNING,
    Status.EXITED: ChildState.RUNNING,  # until the loop has handled the exit
    Status.RESTARTING: ChildState.RESTARTING,
    Status.BACKING_OFF: ChildState.BACKING_OFF,
    # STARTING: RUNNING for a first start, RESTARTING for a start after a restart.
}


class EndedBy(enum.Enum):
    """Who ended an incarnation, as its state said when it ended."""

    ITSELF = "itself"  # its own exit or crash: the loop decides (strategy.ON_EXIT)
    TERMINATION = "termination"  # it stopped itself for good: down, never restarted
    US = "us"  # a stop we asked for (a restart, terminate, shutdown): nothing to decide


_ENDED_BY: Final[Mapping[Status, EndedBy]] = {
    Status.RUNNING: EndedBy.ITSELF,
    Status.TERMINATING: EndedBy.TERMINATION,
}


@attrs.define
class PendingDecision:
    """A directive decided in the child's own task, for the loop to carry out.

    Never changed once built; not frozen only because one is built per decision, on
    the restart path, and a frozen attrs instance costs twice as much to build."""

    directive: Directive
    delay: float  # the backoff before a restart
    error: ActorError  # the failure behind it


class Child:
    """Runtime record of one child: its spec, slot (or nested supervisor) and status."""

    def __init__(self, spec: ChildSpec, *, dynamic: bool) -> None:
        self.spec = spec
        self.dynamic = dynamic
        self.status = Status.STOPPED
        self.restarts = 0
        self.consecutive = 0  # backoff exponent
        self.started_at = 0.0
        self.cell: ActorCell | None = None
        self.sup: Subtree | None = None
        self.done: trio.Event = trio.Event()  # set when the current incarnation ended
        self.pending: PendingDecision | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def ref(self) -> ActorRef | None:
        return self.cell.ref if self.cell is not None else None

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @property
    def state(self) -> ChildState:
        """The public state (``which_children``)."""
        if self.status is Status.STARTING:
            return ChildState.RESTARTING if self.restarts else ChildState.RUNNING
        return _PUBLIC[self.status]

    def info(self) -> ChildInfo:
        kind = "supervisor" if self.spec.supervisor is not None else "worker"
        return ChildInfo(
            id=self.id, state=self.state, restarts=self.restarts, kind=kind, ref=self.ref
        )

    # --- transitions ----------------------------------------------------------------------

    def move(self, to: Status) -> None:
        """Change the status along :data:`TRANSITIONS`. Any other move is a bug of the
        supervisor's: a typed ``internal`` error naming the move (never a bare
        ``AssertionError``, and checked under ``python -O`` too)."""
        if to not in TRANSITIONS[self.status]:
            raise ActorError.from_code(
                Code.INTERNAL,
                f"child {self.id!r} cannot move from {self.status.value} to {to.value}",
                node_id=self.id,
            )
        self.status = to

    def begin_start(self) -> None:
        """A start begins: a fresh ``done`` for the incarnation about to be spawned."""
        self.move(Status.STARTING)
        self.done = trio.Event()

    def started(self) -> None:
        """``on_start`` returned (a stop asked for meanwhile stays asked for)."""
        if self.status is Status.STARTING:
            self.move(Status.RUNNING)

    def terminating(self) -> None:
        """It stops itself for good — unless a stop of ours is already under way."""
        if self.status is Status.STARTING or self.status is Status.RUNNING:
            self.move(Status.TERMINATING)

    def end_incarnation(self) -> EndedBy:
        """Its incarnation ended: who ended it, as the status said; now ``EXITED``."""
        ended_by = _ENDED_BY.get(self.status, EndedBy.US)
        if self.status in LIVE:
            self.move(Status.EXITED)
        return ended_by

    # --- operations -----------------------------------------------------------------------

    def open_actor_slot(self, runtime: Runtime, supervision: Supervision, path: str) -> None:
        """Make the worker's slot ready for a fresh incarnation: created on the first start;
        a slot closed by ``terminate_child`` opens again, so refs taken before stay valid
        (the ref belongs to the slot). ``name_taken`` if its name was taken meanwhile."""
        if self.cell is not None and self.cell.state is CellState.STOPPED:
            self.cell.revive()
        elif self.cell is None:
            self.cell = runtime.new_cell(
                self.spec.factory(),
                supervision=supervision,
                name=path.lstrip("/"),
                path=path,
                capacity=self.spec.capacity,
                overflow=self.spec.overflow,
            )
        self.cell.restarts = self.restarts
        self.cell.reopen()

    def backoff_delay(self, backoff: Backoff, error: ActorError, now: float) -> float:
        """The delay before this restart; the exponent resets once the child has run
        ``reset_after`` seconds since its last start."""
        if now - self.started_at >= backoff.reset_after:
            self.consecutive = 0
        delay = backoff.delay(self.consecutive, retry_after=error.retry_after)
        self.consecutive += 1
        return delay

    def kill(self, reason: str) -> None:
        """Cancel its incarnation now (a nested supervisor: its whole subtree)."""
        if self.cell is not None:
            self.cell.kill(reason)
        elif self.sup is not None:
            self.sup.kill(reason)

    def close_slot(self, reason: str) -> None:
        """Close its slot (or its subtree's slots): queued calls are answered."""
        if self.cell is not None:
            self.cell.close(reason)
        if self.sup is not None:
            self.sup.close(reason)

    async def stop(self, reason: str) -> None:
        """Stop the live incarnation gracefully within ``shutdown`` seconds, then kill it
        with reason ``shutdown:<id>`` (``"brutal"``: at once). Returns once it ended; at
        once if nothing is live."""
        if not self.live:
            return
        self.move(Status.STOPPING)
        timeout = self.spec.shutdown
        if timeout == "brutal":
            self.kill(f"shutdown:{self.id}")
        elif self.cell is not None:
            self.cell.request_exit(reason)
        elif self.sup is not None:
            self.sup.request_shutdown(reason)
        if timeout != "brutal":
            with trio.move_on_after(timeout):
                await self.done.wait()
            if self.live:
                self.kill(f"shutdown:{self.id}")
        await self.done.wait()

    async def stop_for_good(self, reason: str = "shutdown") -> None:
        """:meth:`stop`, then ``STOPPED`` (its slot stays open: a shutdown's)."""
        await self.stop(reason)
        self.move(Status.STOPPED)

    async def undo_start(self) -> None:
        """A cancelled start: kill what began and wait for it, bounded by the cleanup
        budget (the caller closes the slot)."""
        if self.status is Status.STARTING or self.live:
            self.move(Status.STOPPING)
        if self.cell is not None:
            self.cell.stop_accepting()
            self.cell.kill("start cancelled")
            budget = self.cell.cleanup_budget
        else:
            budget = DEFAULT_CLEANUP_BUDGET
            if self.sup is not None:
                self.sup.kill("start cancelled")
        with trio.move_on_after(budget):
            await self.done.wait()


class Children:
    """One supervisor's children in start order, by id, and the lookups of its API."""

    def __init__(self, supervisor: str) -> None:
        self.path = supervisor
        self._order: list[Child] = []
        self._by_id: dict[str, Child] = {}

    def __iter__(self) -> Iterator[Child]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, child: object) -> bool:
        return child in self._order

    def add(self, spec: ChildSpec, *, dynamic: bool, limit: int | None = None) -> Child:
        """Add a child at the end; ``max_children`` past ``limit`` children, ``name_taken``
        if its id is taken."""
        if limit is not None and len(self._order) >= limit:
            raise self._error(Code.MAX_CHILDREN, f"{limit} children")
        if spec.id in self._by_id:
            raise self._error(Code.NAME_TAKEN, f"child id {spec.id!r} exists")
        child = Child(spec, dynamic=dynamic)
        self._order.append(child)
        self._by_id[spec.id] = child
        return child

    def remove(self, child: Child, reason: str = "removed") -> None:
        """Forget ``child``; its slot (or subtree) is closed, so nothing it held — a
        registered name, queued calls — outlives it."""
        if child in self._order:
            self._order.remove(child)
        self._by_id.pop(child.id, None)
        child.close_slot(reason)

    def stopped_for_good(self, child: Child, reason: str) -> None:
        """The child is down for good: close its slot (or its subtree's slots); a
        temporary child is forgotten."""
        child.move(Status.STOPPED)
        child.close_slot(reason)
        if enabled(logging.DEBUG):
            emit(ChildStopped(supervisor=self.path, child=child.id, reason=reason))
        if child.spec.restart == "temporary":
            self.remove(child)

    def restart_group(self, strategy: Strategy, child: Child) -> tuple[list[Child], list[Child]]:
        """For a restart of ``child`` (:func:`~supervisors.tree.strategy.restart_plan`): the
        siblings to stop, in reverse start order, and the group to start, in order."""
        if child not in self._order:
            return [], [child]  # gone meanwhile (a cancelled start_child): its start skips it
        members = list(self._order)
        plan = restart_plan(
            strategy,
            members.index(child),
            [rejoins(c.spec.restart, down=c.status is Status.STOPPED) for c in members],
        )
        return [members[i] for i in plan.stop], [members[i] for i in plan.start]

    def all_significant_down(self) -> bool:
        return all(c.status is Status.STOPPED for c in self._order if c.spec.significant)

    def kill_starting(self) -> None:
        """Kill every start under way (reason ``shutdown:<id>``): it is not started."""
        for child in self._order:
            if child.status is Status.STARTING:
                child.kill(f"shutdown:{child.id}")

    def close(self, reason: str) -> None:
        """Every child ``STOPPED``, every slot closed (see ``Supervisor.close``)."""
        for child in self._order:
            child.move(Status.STOPPED)
            child.close_slot(reason)

    async def shutdown(self) -> None:
        """Stop every child: the live dynamic ones first and concurrently, then the
        others in reverse start order (slots stay open; the caller shields this)."""
        dynamic = [c for c in self._order if c.dynamic and c.live]
        if dynamic:
            async with trio.open_nursery() as nursery:
                for child in dynamic:
                    nursery.start_soon(child.stop_for_good)
        for child in reversed([c for c in self._order if not c.dynamic]):
            await child.stop_for_good()

    def get(self, child_id: str) -> Child:
        child = self._by_id.get(child_id)
        if child is None:
            raise self._error(Code.CHILD_NOT_FOUND, f"no child {child_id!r}")
        return child

    def of_cell(self, cell: ActorCell) -> Child:
        for child in self._order:
            if child.cell is cell:
                return child
        raise LookupError(f"{cell.path} is not a child of {self.path}")

    def ref(self, child_id: str) -> ActorRef:
        ref = self.get(child_id).ref
        if ref is None:
            raise self._error(Code.CHILD_NOT_FOUND, f"{child_id!r} has no ref")
        return ref

    def supervisor(self, child_id: str) -> Subtree:
        sup = self.get(child_id).sup
        if sup is None:
            raise self._error(Code.CHILD_NOT_FOUND, f"{child_id!r} is not a supervisor")
        return sup

    def check_stopped(self, child: Child) -> None:
        """``child_running`` / ``child_restarting`` unless ``child`` is stopped (a start
        under way counts as what it shows: running for a first start, else restarting)."""
        if child.live or (child.status is Status.STARTING and child.state is ChildState.RUNNING):
            raise self._error(Code.CHILD_RUNNING, f"{child.id!r} is running")
        if child.state in (ChildState.RESTARTING, ChildState.BACKING_OFF):
            raise self._error(Code.CHILD_RESTARTING, f"{child.id!r} is restarting")

    def infos(self) -> list[ChildInfo]:
        return [child.info() for child in self._order]

    def counts(self) -> dict[str, int]:
        return {
            "specs": len(self._order),
            "active": sum(1 for c in self._order if c.live),
            "supervisors": sum(1 for c in self._order if c.spec.supervisor is not None),
            "workers": sum(1 for c in self._order if c.spec.supervisor is None),
        }

    def _error(self, code: Code, what: str) -> ActorError:
        return ActorError.from_code(code, f"{self.path}: {what}", actor=self.path)
