"""Supervisor trees: OTP semantics, directives by error class, cancellation always wins.

``docs/supervision.md`` is the specification; this docstring is its summary.

* Children start in order, each synchronously (``nursery.start``: an actor counts as
  started once its ``on_start`` returned). If child k fails to start, children 1..k-1 are
  stopped in reverse order and the supervisor fails with ``start_failed`` (child id and
  cause).
* A crash is decided in the child's own task, synchronously, by :meth:`Supervisor.after_crash`:
  the policy (child's, then supervisor's, then defaults) gives a directive. ``resume``
  keeps the instance. ``restart`` counts one failure in the supervisor's sliding window
  (the new failure first; a failure at t counts while now - t <= period) and restarts per
  strategy after the backoff delay (raised to the error's ``retry_after``); exceeding
  ``max_restarts`` shuts the children down and fails the supervisor with
  ``restart_intensity_exceeded`` carrying the failures in the window, oldest first.
  ``stop`` ends that child for good; ``escalate`` shuts the supervisor down and fails it
  with the child's error; ``abort`` cancels the whole tree at the instant of the decision.
* A normal exit restarts only a permanent child (counted like a crash); transient and
  temporary children stay down; a temporary child's spec is dropped whenever it exits.
* one_for_all / rest_for_one stop the affected siblings in reverse start order, then start
  them (and the failed child) in order; one failure counts once.
* Shutdown goes in reverse start order (dynamic children concurrently, first): a graceful
  stop, ``shutdown`` seconds, then cancel with reason ``shutdown:<id>``.
* **Cancellation wins**: once an abort or a shutdown is under way for a subtree — or a
  trio scope around the tree was cancelled (:meth:`Supervisor.note_cancel`) — anything
  that escapes an actor inside it is ``cancelled`` (reason kept, the failure as cause,
  logged as ``error.suppressed``); no policy runs (:meth:`Supervisor._decide` checks
  first) and nothing restarts or starts.
"""

from __future__ import annotations

import enum
import logging
from collections import deque

import attrs
import trio

from actors import ActorError, ActorRef, CellState, Code, Runtime
from actors.lowlevel import (
    DEFAULT_CLEANUP_BUDGET,
    ActorCell,
    AfterCrash,
    EventName,
    Exit,
    ExitKind,
    current_cancel_reason,
    enabled,
    get_logger,
    run_to_completion,
)
from supervisors._start import Starter, start_soon_and_wait
from supervisors.policy import Directive, directive_for
from supervisors.spec import ChildSpec, SupervisorSpec

_log = get_logger("supervisors")


class ChildState(enum.StrEnum):
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


@attrs.frozen
class Failure:
    """One failure counted in the intensity window."""

    at: float
    child: str
    error: ActorError


class Child:
    """Runtime record of one child: its spec, slot (or nested supervisor) and state."""

    def __init__(self, spec: ChildSpec, *, dynamic: bool) -> None:
        self.spec = spec
        self.dynamic = dynamic
        self.state = ChildState.STOPPED
        self.restarts = 0
        self.consecutive = 0  # backoff exponent
        self.started_at = 0.0
        self.cell: ActorCell | None = None
        self.sup: Supervisor | None = None
        self.done: trio.Event = trio.Event()
        self.stopping = False  # we asked it to stop; its exit is not a failure
        self.terminating = False  # it stopped itself for good (ref.stop() from inside)
        self.running = False  # an incarnation task is alive
        self.pending: Directive | None = None  # decided in the child's task, run in ours
        self.delay = 0.0  # backoff before the pending restart
        self.error: ActorError | None = None  # the failure behind the pending directive

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def ref(self) -> ActorRef | None:
        return self.cell.ref if self.cell is not None else None


class Supervisor:
    """A running supervisor. Start a tree with :func:`open_tree`."""

    def __init__(
        self,
        spec: SupervisorSpec,
        runtime: Runtime,
        *,
        path: str,
        parent: Supervisor | None = None,
    ) -> None:
        self.spec = spec
        self.runtime = runtime
        self.path = path
        self.parent = parent
        self.children: list[Child] = []
        self._by_id: dict[str, Child] = {}
        self._window: deque[Failure] = deque()
        self._exits: deque[tuple[Child, Exit, bool]] = deque()
        self._wakeup = trio.Event()
        self._cancel_reason: str | None = None
        # A hard cancel (a kill, an abort, a scope around the tree) trio-cancels tasks; a
        # graceful shutdown only stops children. A scope around the tree overrides the
        # reason of a graceful shutdown under way, never a hard cancel's.
        self._cancel_hard = False
        self._failure: ActorError | None = None
        self._nursery: trio.Nursery | None = None
        self._lock = trio.Lock()
        self._shutdown_requested = False
        self._starting: Child | None = None  # the child whose start is under way
        self._kill_pending: str | None = None  # killed before its run began
        self._closing = False  # the run is ending: no child may start
        for child_spec in spec.children:
            self._add(child_spec, dynamic=False)

    # --- Supervision protocol (asked by actor cells) ------------------------------------

    def cancel_reason(self) -> str | None:
        """The reason of a cancel under way for this subtree or any enclosing one: the
        nearest hard cancel's (kill, abort, a scope around the tree), else the nearest
        graceful shutdown's."""
        graceful: str | None = None
        node: Supervisor | None = self
        while node is not None:
            if node._cancel_reason is not None:
                if node._cancel_hard:
                    return node._cancel_reason
                if graceful is None:
                    graceful = node._cancel_reason
            node = node.parent
        return graceful

    def _hard_cancel_reason(self) -> str | None:
        node: Supervisor | None = self
        while node is not None:
            if node._cancel_hard:
                return node._cancel_reason
            node = node.parent
        return None

    def note_cancel(self, reason: str) -> str:
        """A ``trio.Cancelled`` reached a task of this subtree: returns the reason in
        effect. If no hard cancel (kill, abort) covers the subtree, that Cancelled came
        from a scope *around the tree*: the whole tree is cancelled with ``reason`` —
        replacing the reason of a graceful shutdown under way."""
        hard = self._hard_cancel_reason()
        if hard is not None:
            return hard
        root = self.root()
        root._cancel_reason, root._cancel_hard = reason, True
        return reason

    def terminating(self, cell: ActorCell) -> None:
        """The actor stops itself for good (``ref.stop()`` from its own task): its coming
        exit is a termination — not restarted, whatever its restart type."""
        self._child_of(cell).terminating = True

    def after_crash(self, cell: ActorCell, error: ActorError) -> AfterCrash:
        child = self._child_of(cell)
        if child.terminating:
            self._decide(child, error, Directive.STOP)  # stopping itself: no restart
            return AfterCrash.STOP
        if error.code is Code.CANCELLED:
            # Not our subtree's cancel (that is checked first): a cancellation from
            # elsewhere (a nested call into a cancelled tree) crossed in as an error. That
            # request is cancelled; the actor is fine and goes on.
            directive: Directive | None = self._decide(child, error, Directive.RESUME)
        else:
            directive = self._decide(child, error)
        if directive is None:
            return AfterCrash.STOP  # a cancel is under way: nothing restarts
        if directive is Directive.RESUME:
            return AfterCrash.RESUME
        return _after(directive)

    async def stop_child(self, cell: ActorCell, reason: str, timeout: float | None) -> None:
        await self.terminate_child(self._child_of(cell).id, reason=reason)

    def _child_of(self, cell: ActorCell) -> Child:
        for child in self.children:
            if child.cell is cell:
                return child
        raise LookupError(f"{cell.path} is not a child of {self.path}")

    # --- decisions ------------------------------------------------------------------------

    def _decide(
        self, child: Child, error: ActorError, directive: Directive | None = None
    ) -> Directive | None:
        """Decide on a failure (never on a cancellation) and record it as pending.

        The one place the policy is consulted. If a cancel is under way for the subtree
        (abort, shutdown, a scope around the tree) nothing is decided: the failure is
        logged as suppressed and ``None`` returned. ``directive`` forces the answer (a
        permanent child's normal exit restarts without consulting the policy); otherwise
        the policy decides. A restart counts in the intensity window and gets its backoff
        delay; past the limit it becomes an escalation with
        ``restart_intensity_exceeded``. An ``abort`` takes effect here, at the instant of
        the decision: the tree is cancelled before the failed child's cleanup runs.
        """
        cancel = self.cancel_reason()
        if cancel is not None:
            _log.info(
                EventName.SUPPRESSED,
                supervisor=self.path,
                child=child.id,
                reason=cancel,
                suppressed=error,
            )
            return None
        if directive is None:
            directive = directive_for(error, child.spec.policy, self.spec.policy) or Directive.STOP
        delay = 0.0
        if directive is Directive.RESTART:
            if not self._restart_allowed(child, error):
                directive = Directive.ESCALATE
                error = self._intensity_error()
            else:
                delay = self._backoff(child, error)
        if directive is not Directive.RESUME:
            child.pending, child.delay, child.error = directive, delay, error
        _log.info(
            "supervisor.decision",
            supervisor=self.path,
            child=child.id,
            code=str(error.code),
            error_class=str(error.error_class),
            directive=str(directive),
            restarts=len(self._window),
            delay=delay,
            at=trio.current_time(),
            message=error.message,
            correlation_id=error.correlation_id,
        )
        if directive is Directive.ABORT:
            self.root().abort(f"abort:{error.code} from {self.path}/{child.id}", error=error)
        return directive

    def _restart_allowed(self, child: Child, error: ActorError) -> bool:
        """Count the failure first, then check the window (inclusive at ``period``)."""
        now = trio.current_time()
        self._window.append(Failure(at=now, child=child.id, error=error))
        period = self.spec.period
        while self._window and now - self._window[0].at > period:
            self._window.popleft()
        return len(self._window) <= self.spec.max_restarts

    def _intensity_error(self) -> ActorError:
        failures = tuple(f.error for f in self._window)
        return ActorError.from_code(
            Code.RESTART_INTENSITY_EXCEEDED,
            f"{self.path}: {len(failures)} failures within {self.spec.period} s "
            f"(max_restarts {self.spec.max_restarts})",
            actor=self.path,
            errors=failures,
        )

    def _backoff(self, child: Child, error: ActorError) -> float:
        now = trio.current_time()
        if now - child.started_at >= self.spec.backoff.reset_after:
            child.consecutive = 0
        delay = self.spec.backoff.delay(child.consecutive, retry_after=error.retry_after)
        child.consecutive += 1
        return delay

    # --- running --------------------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start the children in order, supervise them, and return on shutdown.

        Raises ``start_failed`` if a child cannot start, ``restart_intensity_exceeded`` or
        an escalated error when the supervisor gives up (its children already shut down),
        and ``cancelled`` when the tree was aborted.
        """
        if self._kill_pending is not None:
            raise ActorError.from_code(
                Code.ACTOR_STOPPED,
                f"{self.path} was stopped while starting",
                actor=self.path,
                delivered=False,
            )
        self._cancel_reason = None
        self._cancel_hard = False
        self._failure = None
        self._shutdown_requested = False
        self._window.clear()
        self._exits.clear()  # a previous run's exits are not this run's business
        self._closing = False
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    await self._run_children(task_status)
                except BaseException as exc:
                    # Noted now, while the children still run, not after they ended.
                    reason = await current_cancel_reason(exc)
                    if reason is not None:
                        self.note_cancel(reason)  # a scope around the tree was cancelled
                    raise
                finally:
                    self._closing = True  # the nursery takes no new child from here on
                nursery.cancel_scope.cancel(reason=f"{self.path} finished")
        finally:
            self._nursery = None
            for child in self.children:
                if child.state is not ChildState.STOPPED and not child.running:
                    child.state = ChildState.STOPPED
        if self._failure is not None:
            raise self._failure

    async def _run_children(self, task_status: trio.TaskStatus[Supervisor]) -> None:
        try:
            await self._start_all()
        except ActorError as err:
            # Raised after the nursery closes, so the starter sees it unwrapped.
            self._failure = err
        else:
            task_status.started(self)
            await self._supervise()
            await self._shutdown_children()

    async def _start_all(self) -> None:
        started: list[Child] = []
        for child in list(self.children):
            try:
                await self._start(child)
            except ActorError as err:
                for done in reversed(started):
                    await self._stop(done, reason=f"start_failed:{child.id}")
                raise ActorError.from_code(
                    Code.START_FAILED,
                    f"{self.path}: child {child.id!r} failed to start",
                    cause=err,
                    actor=self.path,
                    node_id=child.id,
                ) from err
            started.append(child)

    async def _start(self, child: Child) -> None:
        """Start one incarnation of ``child`` in our nursery (raises its start failure)."""
        assert self._nursery is not None
        child.state = ChildState.RESTARTING if child.restarts else ChildState.RUNNING
        child.stopping = False
        child.terminating = False
        child.done = trio.Event()
        if child.spec.supervisor is not None:
            if child.sup is None:
                child.sup = Supervisor(
                    child.spec.supervisor,
                    self.runtime,
                    path=f"{self.path}/{child.id}",
                    parent=self,
                )
            child.sup._kill_pending = None  # a fresh start forgets an earlier kill
            incarnation = self._supervisor_incarnation
        else:
            if child.cell is not None and child.cell.state is CellState.STOPPED:
                # Terminated, now restarted: the same slot opens again, so refs taken
                # before stay valid (the ref belongs to the slot).
                child.cell.revive()
            elif child.cell is None:
                child.cell = self.runtime.new_cell(
                    child.spec.factory(),
                    supervision=self,
                    name=f"{self.path}/{child.id}".lstrip("/"),
                    path=f"{self.path}/{child.id}",
                    capacity=child.spec.capacity,
                    overflow=child.spec.overflow,
                )
            child.cell.restarts = child.restarts
            child.cell.reopen()
            incarnation = self._actor_incarnation
        self._starting = child  # a shutdown meanwhile kills it rather than wait for it
        try:
            await start_soon_and_wait(self._nursery, incarnation, child)
        finally:
            self._starting = None
        child.state = ChildState.RUNNING
        child.started_at = trio.current_time()
        if enabled(logging.DEBUG):
            _log.debug(
                "child.started", supervisor=self.path, child=child.id, restarts=child.restarts
            )

    async def _actor_incarnation(self, child: Child, starter: Starter) -> None:
        """Incarnations of a worker; reports the exit that needs the supervisor.

        A crash decided ``restart`` with no backoff under ``one_for_one`` restarts in
        place, in this task (the decision, its event and the intensity count were
        settled by :meth:`after_crash`); anything else is reported to the supervisor loop.
        """
        cell = child.cell
        assert cell is not None
        status = _ChildStarted(child, starter)
        exit_: Exit | None = None
        try:
            exit_ = await cell.run_incarnation(task_status=status)
            while self._restart_in_place(child, exit_):
                try:
                    exit_ = await cell.run_incarnation()
                except ActorError as err:
                    # A start that raises during a restart counts as a failure.
                    directive = self._decide(child, err)
                    if directive is None:  # cancelled meanwhile: the loop ends
                        exit_ = Exit(ExitKind.CANCELLED, self.cancel_reason() or "cancelled")
                    else:
                        exit_ = Exit(
                            ExitKind.CRASHED,
                            f"start_failed:{err.code}",
                            error=err,
                            after=_after(directive),
                        )
                    continue
                child.started_at = trio.current_time()
        except ActorError as err:
            if status.done:  # pragma: no cover - run_incarnation raises only before started
                raise
            starter.failed(err)
            return
        finally:
            child.running = False
            if status.done:
                if exit_ is None:
                    exit_ = Exit(ExitKind.CANCELLED, self.cancel_reason() or "cancelled")
                self._report(child, exit_)
            else:
                self._never_started(child, starter)

    async def _supervisor_incarnation(self, child: Child, starter: Starter) -> None:
        """One run of a nested supervisor; reports how it ended."""
        sup = child.sup
        assert sup is not None
        exit_ = Exit(ExitKind.CANCELLED, "cancelled")
        status = _ChildStarted(child, starter)
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
            child.running = False
            if status.done:
                self._report(child, exit_)
            else:
                self._never_started(child, starter)

    def _never_started(self, child: Child, starter: Starter) -> None:
        """An incarnation ended before it started (cancelled): the starter gets
        ``cancelled`` (a no-op if it already has its answer); nothing to report."""
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
        """Whether this crash restarts at once in the child's own task (see above)."""
        if (
            exit_.kind is not ExitKind.CRASHED
            or child.pending is not Directive.RESTART
            or child.delay > 0
            or self.spec.strategy != "one_for_one"
            or child.spec.restart == "temporary"
            or child.stopping
            or child.terminating
            or self._shutdown_requested
            or self._failure is not None
            or self.cancel_reason() is not None
        ):
            return False
        child.pending = child.error = None
        child.restarts += 1
        assert child.cell is not None
        child.cell.restarts = child.restarts
        if enabled(logging.DEBUG):
            _log.debug(
                "child.started", supervisor=self.path, child=child.id, restarts=child.restarts
            )
        return True

    def _report(self, child: Child, exit_: Exit) -> None:
        """Queue an incarnation's exit, noting whether we had asked it to stop.

        The flag is captured now: by the time the exit is handled a restart may already
        have started a new incarnation (and cleared ``stopping``).
        """
        child.done.set()
        self._exits.append((child, exit_, child.stopping))
        self._wakeup.set()

    async def _supervise(self) -> None:
        """Handle exits one at a time until shutdown or failure."""
        while True:
            while not self._exits:
                if self._shutdown_requested or self._failure is not None:
                    return
                self._wakeup = trio.Event()
                await self._wakeup.wait()
            child, exit_, stopped_by_us = self._exits.popleft()
            if stopped_by_us:
                continue  # a restart, terminate or shutdown we asked for
            await self._acquire()
            try:
                await self._handle_exit(child, exit_)
            finally:
                self._lock.release()
            if self._failure is not None or self._shutdown_requested:
                return

    async def _acquire(self) -> None:
        """Take the lock; without a scheduling point when it is free (the restart path)."""
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()

    async def _handle_exit(self, child: Child, exit_: Exit) -> None:
        if self.cancel_reason() is not None:
            return  # a cancel is under way: no policy runs, nothing restarts
        if child.terminating:  # it stopped itself for good: never restarted
            child.pending = child.error = None
            self._child_stopped(child, exit_.reason)
            return
        if exit_.kind is ExitKind.CANCELLED:
            self._child_stopped(child, exit_.reason)
            return
        if exit_.kind is ExitKind.NORMAL:
            if child.spec.restart != "permanent":
                self._child_stopped(child, exit_.reason)
                await self._auto_shutdown(child)
                return
            exited = ActorError.from_code(
                Code.ACTOR_STOPPED, f"{child.id} exited: {exit_.reason}", actor=self.path
            )
            self._decide(child, exited, Directive.RESTART)
        elif child.pending is None:  # a nested supervisor failed: decide here
            assert exit_.error is not None
            self._decide(child, exit_.error)
        await self._run_pending(child)

    async def _run_pending(self, child: Child) -> None:
        directive, error = child.pending, child.error
        child.pending, child.error = None, None
        if directive is None or error is None:
            return  # nothing was decided (a cancel is under way)
        await self._execute(child, directive, error, child.delay)

    async def _execute(
        self, child: Child, directive: Directive, error: ActorError, delay: float
    ) -> None:
        if directive is Directive.RESTART:
            if child.spec.restart == "temporary":
                self._child_stopped(child, f"crashed:{error.code}")
                return
            await self._restart(child, delay)
        elif directive is Directive.STOP:
            self._child_stopped(child, f"crashed:{error.code}")
            await self._auto_shutdown(child)
        elif directive is Directive.ESCALATE:
            _log.warning("supervisor.escalated", supervisor=self.path, child=child.id, error=error)
            # Not closed: if our parent restarts us, this child's address and queue stay.
            child.state = ChildState.STOPPED
            await self._fail(error)
        elif directive is Directive.ABORT:
            child.state = ChildState.STOPPED  # the tree was aborted when this was decided

    async def _restart(self, child: Child, delay: float) -> None:
        """Restart per strategy: stop affected siblings now, start them after ``delay``."""
        strategy = self.spec.strategy
        if strategy == "one_for_one":
            group = [child]
        else:
            index = self.children.index(child)
            others = self.children if strategy == "one_for_all" else self.children[index:]
            # A sibling stopped for good (terminated, or a transient one that exited
            # normally) stays stopped; a temporary one is never restarted.
            group = [
                c
                for c in others
                if c is child
                or (c.spec.restart != "temporary" and c.state is not ChildState.STOPPED)
            ]
            for sibling in reversed(others):
                if sibling is not child and sibling.running:
                    await self._stop(sibling, reason=f"restart:{child.id}")
                    if sibling.spec.restart == "temporary":
                        self._child_stopped(sibling, f"restart:{child.id}")
        for member in group:
            member.state = ChildState.BACKING_OFF if delay > 0 else ChildState.RESTARTING
        if delay > 0:
            assert self._nursery is not None
            self._nursery.start_soon(self._restart_later, group, delay)
        else:
            await self._start_group(group)  # at once, in our own task (we hold the lock)

    async def _restart_later(self, group: list[Child], delay: float) -> None:
        """Sleep the backoff (cancellable), then start the group under the lock."""
        await trio.sleep(delay)
        async with self._lock:
            await self._start_group(group)

    async def _start_group(self, group: list[Child]) -> None:
        """Start ``group`` in order; a start that raises counts as a failure of its own.

        Before each member: nothing more starts once a shutdown, a failure or a cancel is
        under way, and a member terminated meanwhile (``STOPPED``) stays stopped.
        """
        for member in group:
            if self._starting_refused():
                return
            if member not in self.children or member.running:
                continue
            if member.state is ChildState.STOPPED:
                continue
            member.restarts += 1
            try:
                await self._start(member)
            except ActorError as err:
                self._decide(member, err)
                # In a task of its own: with no backoff, repeated start failures would
                # otherwise recurse (bounded only by the intensity).
                assert self._nursery is not None
                self._nursery.start_soon(self._run_pending_locked, member)
                return

    async def _run_pending_locked(self, child: Child) -> None:
        async with self._lock:
            if child.pending is not None:
                await self._run_pending(child)

    async def _auto_shutdown(self, child: Child) -> None:
        if not child.spec.significant or self.spec.auto_shutdown == "never":
            return
        significant = [c for c in self.children if c.spec.significant]
        if self.spec.auto_shutdown == "any_significant" or all(
            c.state is ChildState.STOPPED for c in significant
        ):
            self._shutdown_requested = True
            self._wakeup.set()

    def _child_stopped(self, child: Child, reason: str) -> None:
        """The child is down for good: close its slot (or its subtree's slots)."""
        child.state = ChildState.STOPPED
        if child.cell is not None:
            child.cell.close(reason)
        if child.sup is not None:
            child.sup.close(reason)
        if enabled(logging.DEBUG):
            _log.debug("child.stopped", supervisor=self.path, child=child.id, reason=reason)
        if child.spec.restart == "temporary":
            self._remove(child)

    async def _fail(self, error: ActorError) -> None:
        """Give up: shut every child down (a cancel for the subtree), then fail with ``error``."""
        self._failure = error
        self._wakeup.set()

    # --- stopping -------------------------------------------------------------------------

    async def _stop(self, child: Child, *, reason: str) -> None:
        """Stop one incarnation gracefully within ``shutdown`` seconds, then cancel it."""
        if not child.running:
            return
        child.stopping = True
        timeout = child.spec.shutdown
        if child.cell is not None:
            if timeout == "brutal":
                child.cell.kill(f"shutdown:{child.id}")
            else:
                child.cell.request_exit(reason)
        elif child.sup is not None:
            if timeout == "brutal":
                child.sup.kill(f"shutdown:{child.id}")
            else:
                child.sup.request_shutdown(reason)
        if timeout != "brutal":
            with trio.move_on_after(timeout):
                await child.done.wait()
            if child.running:
                self._kill(child, f"shutdown:{child.id}")
        await child.done.wait()

    def _kill(self, child: Child, reason: str) -> None:
        if child.cell is not None:
            child.cell.kill(reason)
        elif child.sup is not None:
            child.sup.kill(reason)

    async def _shutdown_children(self) -> None:
        """Reverse start order; dynamic children first and concurrently. Shielded."""
        if self._cancel_reason is None:
            self._cancel_reason = self._failure_reason() or f"shutdown:{self.path}"
        with trio.CancelScope(shield=True):
            dynamic = [c for c in self.children if c.dynamic and c.running]
            if dynamic:
                async with trio.open_nursery() as nursery:
                    for child in dynamic:
                        nursery.start_soon(self._stop_for_good, child, "shutdown")
            for child in reversed([c for c in self.children if not c.dynamic]):
                await self._stop_for_good(child, "shutdown")

    def _failure_reason(self) -> str | None:
        if self._failure is None:
            return None
        return f"{self.path} failed: {self._failure.code}"

    async def _stop_for_good(self, child: Child, reason: str) -> None:
        await self._stop(child, reason=reason)
        child.state = ChildState.STOPPED

    def close(self, reason: str = "shutdown") -> None:
        """Close every slot of this subtree: queued calls are answered, names freed.

        Slots outlive a supervisor's *run*, so a supervisor restarted by its parent keeps
        its children's refs and queued messages; they are closed only when the subtree is
        stopped for good (or the tree ends).
        """
        for child in self.children:
            child.state = ChildState.STOPPED
            if child.cell is not None:
                child.cell.close(reason)
            if child.sup is not None:
                child.sup.close(reason)
        # Everything queued was answered (``cancelled`` if a cancel was under way): from
        # now on a call to a closed slot is plainly ``actor_stopped``.
        self._cancel_reason, self._cancel_hard = None, False

    def request_shutdown(self, reason: str) -> None:
        """Shut down gracefully (a cancel for the subtree: failures become ``cancelled``)."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
        self._shutdown_requested = True
        self._wakeup.set()
        starting = self._starting
        if starting is not None:
            # A (re)start under way would hold the shutdown up for as long as its
            # on_start takes: cancelled, it is not started (and nobody after it is).
            self._kill(starting, f"shutdown:{starting.id}")

    def kill(self, reason: str) -> None:
        """Cancel the whole subtree now (a kill before its run began stops the run
        before any child starts)."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
        self._cancel_hard = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel(reason=reason)
        else:
            self._kill_pending = reason

    def root(self) -> Supervisor:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def abort(self, reason: str, *, error: ActorError | None = None) -> None:
        """Stop the whole (sub)tree now, with ``reason``: cancellation wins everywhere.

        The supervisor then fails with ``error`` if given, else with ``cancelled``.
        """
        self._failure = error or ActorError.from_code(Code.CANCELLED, reason, actor=self.path)
        self.kill(reason)

    # --- dynamic children and introspection -------------------------------------------

    def _add(self, spec: ChildSpec, *, dynamic: bool) -> Child:
        if spec.id in self._by_id:
            raise ActorError.from_code(
                Code.NAME_TAKEN, f"{self.path}: child id {spec.id!r} exists", actor=self.path
            )
        child = Child(spec, dynamic=dynamic)
        self.children.append(child)
        self._by_id[spec.id] = child
        return child

    def _remove(self, child: Child, reason: str = "removed") -> None:
        """Forget ``child``; its slot (or subtree) is closed, so nothing it held — a
        registered name, queued calls — outlives it."""
        if child in self.children:
            self.children.remove(child)
        self._by_id.pop(child.id, None)
        if child.cell is not None:
            child.cell.close(reason)
        if child.sup is not None:
            child.sup.close(reason)

    def _get(self, child_id: str) -> Child:
        child = self._by_id.get(child_id)
        if child is None:
            raise ActorError.from_code(
                Code.CHILD_NOT_FOUND, f"{self.path}: no child {child_id!r}", actor=self.path
            )
        return child

    async def start_child(self, spec: ChildSpec) -> ActorRef | None:
        """Add and start a dynamic child; returns its ref (``None`` for a supervisor)."""
        async with self._lock:
            self._check_can_start()
            limit = self.spec.max_children
            if limit is not None and len(self.children) >= limit:
                raise ActorError.from_code(
                    Code.MAX_CHILDREN, f"{self.path}: {limit} children", actor=self.path
                )
            child = self._add(spec, dynamic=True)
            await self._start_dynamic(child, forget=True)
            return child.ref

    def _check_can_start(self) -> None:
        """``cancelled`` during a cancel, ``actor_stopped`` when the supervisor is not
        running or is shutting down: nothing may start then."""
        hard = self._hard_cancel_reason()
        if hard is not None:
            raise ActorError.from_code(Code.CANCELLED, hard, actor=self.path, delivered=False)
        if self._starting_refused():
            raise ActorError.from_code(
                Code.ACTOR_STOPPED,
                f"{self.path} is shutting down or not running: no child can start",
                actor=self.path,
                delivered=False,
            )

    def _starting_refused(self) -> bool:
        """Whether nothing may start now: the supervisor is not running or its run is
        ending, or a shutdown, a failure or a cancel is under way."""
        return (
            self._nursery is None
            or self._closing
            or self._shutdown_requested
            or self._failure is not None
            or self.cancel_reason() is not None
        )

    async def _start_dynamic(self, child: Child, *, forget: bool) -> None:
        """``_start`` for ``start_child`` / ``restart_child``: a start that fails leaves
        the child stopped (``forget``: its spec dropped too); one that is cancelled is
        undone first — cancelled means not started."""
        try:
            await self._start(child)
        except ActorError as err:
            if forget:
                self._remove(child, f"start_failed:{err.code}")
            else:
                self._child_stopped(child, f"start_failed:{err.code}")
            raise
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._undo_start(child, remove=forget)
            raise

    async def _undo_start(self, child: Child, *, remove: bool) -> None:
        """A cancelled ``start_child`` / ``restart_child``: stop what began (bounded by
        the child's cleanup budget) and close its slot; ``remove`` frees its id too."""
        child.stopping = True
        if child.cell is not None:
            child.cell.stop_accepting()
            child.cell.kill("start cancelled")
            budget = child.cell.cleanup_budget
        else:
            budget = DEFAULT_CLEANUP_BUDGET
            if child.sup is not None:
                child.sup.kill("start cancelled")
        with trio.move_on_after(budget):
            await child.done.wait()
        self._child_stopped(child, "start cancelled")
        if remove:
            self._remove(child, "start cancelled")

    async def terminate_child(self, child_id: str, *, reason: str = "terminated") -> None:
        """Stop a child for good; its spec is kept (dropped for a temporary child).

        Once begun, the stop completes even if the caller is cancelled (the caller
        leaves at once; the stop goes on in the supervisor's nursery).
        """
        child = self._get(child_id)
        if child.cell is not None:
            child.cell.stop_accepting()  # from now on calls fail at once
        nursery = self._nursery
        if nursery is None:
            await self._terminate(child, reason)
        else:
            await run_to_completion(nursery, self._terminate, child, reason)

    async def _terminate(self, child: Child, reason: str) -> None:
        async with self._lock:
            await self._stop(child, reason=reason)
            self._child_stopped(child, reason)

    async def restart_child(self, child_id: str) -> ActorRef | None:
        """Start a terminated child again (``child_running`` if it runs)."""
        async with self._lock:
            # Looked up under the lock: a child gone meanwhile (a temporary child's
            # terminate, a delete_child) is child_not_found, never an orphan restart.
            child = self._get(child_id)
            self._check_can_start()
            self._check_stopped(child)
            await self._start_dynamic(child, forget=False)
            return child.ref

    async def delete_child(self, child_id: str) -> None:
        """Forget a terminated child's spec (``child_running`` / ``child_restarting`` else).

        Waits for a start, restart or terminate under way, like them."""
        async with self._lock:
            child = self._get(child_id)
            self._check_stopped(child)
            self._remove(child)

    def _check_stopped(self, child: Child) -> None:
        """``child_running`` / ``child_restarting`` unless ``child`` is stopped."""
        if child.running:
            raise ActorError.from_code(
                Code.CHILD_RUNNING, f"{self.path}: {child.id!r} is running", actor=self.path
            )
        if child.state in (ChildState.RESTARTING, ChildState.BACKING_OFF):
            raise ActorError.from_code(
                Code.CHILD_RESTARTING, f"{self.path}: {child.id!r} is restarting", actor=self.path
            )

    def which_children(self) -> list[ChildInfo]:
        """Every child in start order: id, state, restarts, kind, ref."""
        return [
            ChildInfo(
                id=c.id,
                state=c.state,
                restarts=c.restarts,
                kind="supervisor" if c.spec.supervisor is not None else "worker",
                ref=c.ref,
            )
            for c in self.children
        ]

    def count_children(self) -> dict[str, int]:
        """``specs``, ``active`` (running), ``supervisors`` and ``workers``, as in OTP."""
        return {
            "specs": len(self.children),
            "active": sum(1 for c in self.children if c.running),
            "supervisors": sum(1 for c in self.children if c.spec.supervisor is not None),
            "workers": sum(1 for c in self.children if c.spec.supervisor is None),
        }

    def ref(self, child_id: str) -> ActorRef:
        """The ref of worker ``child_id`` (valid across restarts)."""
        ref = self._get(child_id).ref
        if ref is None:
            raise ActorError.from_code(
                Code.CHILD_NOT_FOUND, f"{self.path}: {child_id!r} has no ref", actor=self.path
            )
        return ref

    def child(self, child_id: str) -> Supervisor:
        """The nested supervisor ``child_id``."""
        sup = self._get(child_id).sup
        if sup is None:
            raise ActorError.from_code(
                Code.CHILD_NOT_FOUND,
                f"{self.path}: {child_id!r} is not a supervisor",
                actor=self.path,
            )
        return sup


def _after(directive: Directive) -> AfterCrash:
    return AfterCrash.RESTART if directive is Directive.RESTART else AfterCrash.STOP


class _ChildStarted:
    """The ``task_status`` of one incarnation: marks the child running, wakes the starter."""

    __slots__ = ("_child", "_starter", "done")

    def __init__(self, child: Child, starter: Starter) -> None:
        self._child = child
        self._starter = starter
        self.done = False

    def started(self, value: object = None) -> None:
        self.done = True
        self._child.running = True
        self._starter.started()
