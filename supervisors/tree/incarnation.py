"""Incarnation tasks: running a child's incarnations and reporting how each ended.

Every start of a child (:meth:`Incarnations.start`; in order at the supervisor's start,
:meth:`Incarnations.start_all`; for the dynamic API, :meth:`Incarnations.start_dynamic`)
spawns one task in the supervisor's nursery
(:func:`~supervisors.tree.start.start_soon_and_wait`), with a :class:`Starter` to resolve:

* :meth:`Incarnations.run_actor` — a worker's incarnations. A crash decided ``restart``
  with no backoff under ``one_for_one`` restarts in place, in this task (the decision,
  its event and the intensity count were settled by ``Supervisor.after_crash``); a start
  that raises during such a restart is decided like any failure. Anything else ends the
  task.
* :meth:`Incarnations.run_supervisor` — one run of a nested supervisor; its failure is a
  crash (``cancelled`` if a cancel is under way), its return a normal exit.

The started signal, :class:`StartedSignal`, moves the child to ``RUNNING`` and resumes the
starter. When a started task ends, its exit goes to the loop through the
:class:`ExitQueue`; a task that ended before it started fails the starter instead (with
its start failure, else ``cancelled``) and leaves the child ``STOPPED`` — there is nothing
to report. A restart's group starts in order (:meth:`Incarnations.start_group`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence

import attrs
import trio

from actors import ActorError, Code, Runtime
from actors.events import ChildStarted
from actors.lowlevel import AfterCrash, Exit, ExitKind, Supervision, emit, enabled
from supervisors.tree.children import Child, Children, EndedBy, Status
from supervisors.tree.policy import Directive
from supervisors.tree.spec import Strategy
from supervisors.tree.start import Starter, start_soon_and_wait
from supervisors.tree.strategy import restarts_in_place


class StartedSignal:
    """The ``task_status`` of one incarnation: marks the child running, wakes the starter."""

    __slots__ = ("_child", "_starter", "done")

    def __init__(self, child: Child, starter: Starter) -> None:
        self._child = child
        self._starter = starter
        self.done = False

    def started(self, value: object = None) -> None:
        self.done = True
        self._child.started()
        self._starter.started()


class ExitQueue:
    """The exits of started incarnations, oldest first, and the loop's wake-up."""

    __slots__ = ("_queue", "_wakeup")

    def __init__(self) -> None:
        self._queue: deque[tuple[Child, Exit, EndedBy]] = deque()
        self._wakeup = trio.Event()

    def report(self, child: Child, exit_: Exit) -> None:
        """Queue an incarnation's exit with who ended it — captured now: by the time the
        exit is handled a restart may already have started a new incarnation."""
        ended_by = child.end_incarnation()
        child.done.set()
        self._queue.append((child, exit_, ended_by))
        self._wakeup.set()

    def wake(self) -> None:
        """Wake the loop without an exit: it has a shutdown or a failure to act on."""
        self._wakeup.set()

    def clear(self) -> None:
        self._queue.clear()

    async def next(self, done: Callable[[], bool]) -> tuple[Child, Exit, EndedBy] | None:
        """The oldest exit, waiting for one; ``None`` once ``done()`` with none queued."""
        while not self._queue:
            if done():
                return None
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        return self._queue.popleft()


@attrs.frozen
class Incarnations:
    """Starts and runs one supervisor's incarnation tasks; what they need of the
    supervisor comes as values and callables."""

    path: str  # the supervisor's
    strategy: Strategy
    runtime: Runtime
    supervision: Supervision  # what a worker's cell asks
    children: Children
    cancel_reason: Callable[[], str | None]
    settle: Callable[[Child, ActorError], Directive | None]  # None: a cancel is under way
    starting_refused: Callable[[], bool]
    prepare_nested: Callable[[Child], None]  # a nested supervisor, ready for a fresh run
    exits: ExitQueue  # where a started incarnation's exit goes

    async def start(self, nursery: trio.Nursery, child: Child) -> None:
        """Start one incarnation of ``child`` in ``nursery``: returns once it started
        (``on_start`` returned), or raises its start failure. While it is ``STARTING``, a
        shutdown kills it rather than wait for it."""
        if child.spec.supervisor is None:
            child.open_actor_slot(self.runtime, self.supervision, f"{self.path}/{child.id}")
            run = self.run_actor
        else:
            self.prepare_nested(child)
            run = self.run_supervisor
        child.begin_start()
        await start_soon_and_wait(nursery, run, child)
        child.started_at = trio.current_time()
        if enabled(logging.DEBUG):
            emit(ChildStarted(supervisor=self.path, child=child.id, restarts=child.restarts))

    async def start_all(self, nursery: trio.Nursery, children: Sequence[Child]) -> None:
        """Start ``children`` in order, each once the previous one started. If one fails,
        the started ones are stopped in reverse order and ``start_failed`` is raised
        (``node_id``: the child, the cause its error)."""
        started: list[Child] = []
        for child in children:
            try:
                await self.start(nursery, child)
            except ActorError as err:
                for done in reversed(started):
                    await done.stop(f"start_failed:{child.id}")
                raise ActorError.from_code(
                    Code.START_FAILED,
                    f"{self.path}: child {child.id!r} failed to start",
                    cause=err,
                    actor=self.path,
                    node_id=child.id,
                ) from err
            started.append(child)

    async def start_group(
        self, nursery: trio.Nursery, group: Sequence[Child]
    ) -> tuple[Child, ActorError] | None:
        """Start a restart's ``group`` in order. Before each member: nothing more starts
        once starting is refused (a shutdown, a failure or a cancel under way), and a
        member gone, live, or terminated meanwhile (``STOPPED``) is left as it is. Returns
        the member whose start raised, with the error; the rest of the group waits."""
        for member in group:
            if self.starting_refused():
                return None
            if member not in self.children or member.live or member.status is Status.STOPPED:
                continue
            member.restarts += 1
            try:
                await self.start(nursery, member)
            except ActorError as err:
                return member, err
        return None

    async def start_dynamic(self, nursery: trio.Nursery, child: Child, *, forget: bool) -> None:
        """:meth:`start` for ``start_child`` / ``restart_child``: a start that fails leaves
        the child stopped (``forget``: its spec dropped too); one that is cancelled is
        undone first — what began is killed (bounded by its cleanup budget): cancelled
        means not started."""
        try:
            await self.start(nursery, child)
        except ActorError as err:
            reason = f"start_failed:{err.code}"
            if forget:
                self.children.remove(child, reason)
            else:
                self.children.stopped_for_good(child, reason)
            raise
        except BaseException:
            with trio.CancelScope(shield=True):
                await child.undo_start()
                self.children.stopped_for_good(child, "start cancelled")
                if forget:
                    self.children.remove(child, "start cancelled")
            raise

    async def run_actor(self, child: Child, starter: Starter) -> None:
        """Incarnations of a worker; reports the exit that needs the supervisor."""
        cell = child.cell
        assert cell is not None
        status = StartedSignal(child, starter)
        exit_: Exit | None = None
        try:
            exit_ = await cell.run_incarnation(task_status=status)
            while self._restart_in_place(child, exit_):
                try:
                    exit_ = await cell.run_incarnation()
                except ActorError as err:
                    # A start that raises during a restart counts as a failure.
                    directive = self.settle(child, err)
                    if directive is None:  # cancelled meanwhile: the loop ends
                        exit_ = Exit(ExitKind.CANCELLED, self.cancel_reason() or "cancelled")
                    else:
                        restart = directive is Directive.RESTART
                        exit_ = Exit(
                            ExitKind.CRASHED,
                            f"start_failed:{err.code}",
                            error=err,
                            after=AfterCrash.RESTART if restart else AfterCrash.STOP,
                        )
                    continue
                child.started_at = trio.current_time()
        except ActorError as err:
            if status.done:  # pragma: no cover - run_incarnation raises only before started
                raise
            starter.failed(err)
            return
        finally:
            if status.done:
                if exit_ is None:
                    exit_ = Exit(ExitKind.CANCELLED, self.cancel_reason() or "cancelled")
                self.exits.report(child, exit_)
            else:
                self._never_started(child, starter)

    async def run_supervisor(self, child: Child, starter: Starter) -> None:
        """One run of a nested supervisor; reports how it ended."""
        sup = child.sup
        assert sup is not None
        exit_ = Exit(ExitKind.CANCELLED, "cancelled")
        status = StartedSignal(child, starter)
        try:
            await sup.run(task_status=status)
            exit_ = Exit(ExitKind.NORMAL, "shutdown")
        except ActorError as err:
            if not status.done:
                starter.failed(err)
                return
            if err.code is Code.CANCELLED or self.cancel_reason() is not None:
                exit_ = Exit(ExitKind.CANCELLED, err.message, error=err)
            else:
                exit_ = Exit(ExitKind.CRASHED, f"crashed:{err.code}", error=err)
        finally:
            if status.done:
                self.exits.report(child, exit_)
            else:
                self._never_started(child, starter)

    def _never_started(self, child: Child, starter: Starter) -> None:
        """An incarnation ended before it started (a start failure, or cancelled): the
        child is down until its starter decides; the starter gets ``cancelled`` (a no-op
        if it already has its answer); nothing to report."""
        child.move(Status.STOPPED)
        starter.failed(
            ActorError.from_code(
                Code.CANCELLED,
                self.cancel_reason() or "cancelled before it started",
                actor=f"{self.path}/{child.id}",
                delivered=False,
            )
        )
        child.done.set()

    def _restart_in_place(self, child: Child, exit_: Exit) -> bool:
        """Whether this crash restarts at once in the child's own task (see above): a
        ``restart`` decided with no delay, under ``one_for_one``, for a child still
        ``RUNNING`` (not being stopped, not stopping itself), while starts are allowed."""
        pending = child.pending
        if (
            exit_.kind is not ExitKind.CRASHED
            or pending is None
            or pending.directive is not Directive.RESTART
            or pending.delay > 0
            or child.status is not Status.RUNNING
            or not restarts_in_place(self.strategy, child.spec.restart)
            or self.starting_refused()
        ):
            return False
        child.pending = None
        child.restarts += 1
        assert child.cell is not None
        child.cell.restarts = child.restarts
        if enabled(logging.DEBUG):
            emit(ChildStarted(supervisor=self.path, child=child.id, restarts=child.restarts))
        return True
