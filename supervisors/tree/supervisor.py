"""Supervisor trees: OTP semantics, directives by error class, cancellation always wins.

``docs/supervision.md`` is the specification. The parts, along OTP's ``supervisor.erl``
seams, are the other modules of :mod:`supervisors.tree`: ``intensity`` (the restart
window), ``strategy`` (the tables), ``children`` (one-field states), ``incarnation``
(incarnation tasks, the exit queue), ``decision`` (the policy on a failure) and
``cancel`` (the subtree's cancel: whether a scope *around* the tree was cancelled is
decided there alone). :class:`Supervisor` keeps the public API and the loop: it handles
one exit at a time, looks up what it means, and carries it out.
"""

from __future__ import annotations

import trio

from actors import ActorError, ActorRef, Code, Runtime
from actors.events import SupervisorEscalated
from actors.lowlevel import (
    ActorCell,
    AfterCrash,
    Exit,
    current_cancel_reason,
    emit,
    run_to_completion,
)
from supervisors.tree.cancel import CancelState
from supervisors.tree.children import Child, ChildInfo, Children, ChildState, EndedBy, Status
from supervisors.tree.decision import Decider
from supervisors.tree.incarnation import ExitQueue, Incarnations
from supervisors.tree.intensity import EMPTY_WINDOW
from supervisors.tree.policy import Directive
from supervisors.tree.restarts import Restarts
from supervisors.tree.spec import ChildSpec, SupervisorSpec
from supervisors.tree.strategy import ON_DIRECTIVE, ON_EXIT, Outcome, shuts_down

__all__ = ["ChildInfo", "ChildState", "Supervisor"]


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
        self.children = Children(path)
        self._cancel: CancelState = CancelState(None if parent is None else parent._cancel)
        self._decider = Decider(path, spec, self._cancel, self.root)
        self._exits = ExitQueue()
        self._incarnations = Incarnations(
            path=path,
            strategy=spec.strategy,
            runtime=runtime,
            supervision=self,
            children=self.children,
            cancel_reason=self._cancel.in_effect,
            settle=self._decider.settle,
            starting_refused=self._starting_refused,
            prepare_nested=self._prepare_nested,
            exits=self._exits,
        )
        self._lock = trio.Lock()
        self._restarts = Restarts(
            children=self.children,
            strategy=spec.strategy,
            incarnations=self._incarnations,
            settle=self._decider.settle,
            lock=self._lock,
            nursery=lambda: self._nursery,
            carry_out=self._run_pending,
        )
        self._nursery: trio.Nursery | None = None  # while it runs
        self._failure: ActorError | None = None  # it gives up with this error
        self._shutdown_requested = False
        self._closing = False  # the run is ending: no child may start
        self._kill_pending: str | None = None  # killed before its run began
        for child_spec in spec.children:
            self.children.add(child_spec, dynamic=False)

    # --- Supervision protocol (asked by actor cells) ------------------------------------

    def cancel_reason(self) -> str | None:
        """The reason of a cancel under way for this subtree or an enclosing one, hard
        (kill, abort, a scope around the tree) first (:meth:`CancelState.in_effect`)."""
        return self._cancel.in_effect()

    def note_cancel(self, reason: str) -> str:
        """A ``trio.Cancelled`` its own scopes did not ask for reached a task of this
        supervisor's run: the reason in effect. Whether a scope *around* the tree was
        cancelled, or one of the tree's own ended, is decided by :meth:`CancelState.note`
        alone; a tree cancelled from around refuses new calls from then on."""
        root = self.root()
        was_cancelled = root._cancel.hard
        reason = self._cancel.note(reason)
        if root._cancel.hard and not was_cancelled:
            root._refuse_calls()
        return reason

    def terminating(self, cell: ActorCell) -> None:
        """The actor stops itself for good (``ref.stop()`` from its own task): its coming
        exit is a termination — not restarted, whatever its restart type."""
        self.children.of_cell(cell).terminating()

    def after_crash(self, cell: ActorCell, error: ActorError) -> AfterCrash:
        """The :class:`~actors.lowlevel.Supervision` answer for a child that crashed with
        ``error``: resume, restart or stop, by this supervisor's policy."""
        return self._decider.after_crash(self.children.of_cell(cell), error)

    async def stop_child(self, cell: ActorCell, reason: str, timeout: float | None) -> None:
        """Stop the child behind ``cell`` for good (its ``ActorRef.stop``): terminated
        here, with ``reason``."""
        await self.terminate_child(self.children.of_cell(cell).id, reason=reason)

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
            stopped = f"{self.path} was stopped while starting"
            raise ActorError.from_code(
                Code.ACTOR_STOPPED, stopped, actor=self.path, delivered=False
            )
        self._cancel.clear()
        self._failure, self._shutdown_requested, self._closing = None, False, False
        self._decider.window = EMPTY_WINDOW
        self._exits.clear()  # a previous run's exits are not this run's business
        try:
            async with trio.open_nursery() as nursery:
                self._nursery, self._cancel.scope = nursery, nursery.cancel_scope
                try:
                    await self._run_children(nursery, task_status)
                except BaseException as exc:
                    # Noted now, while the children still run, not after they ended.
                    reason = await current_cancel_reason(exc)
                    if reason is not None:
                        self.note_cancel(reason)  # ours (a kill) or a scope around the tree
                    raise
                finally:
                    self._closing = True  # the nursery takes no new child from here on
                # The end of our run: a task still in the nursery (a start the shutdown
                # killed) is cancelled by our own scope, never taken for a cancel around us.
                self._cancel.cancel_run(f"{self.path} finished")
        finally:
            self._nursery, self._cancel.scope = None, None
            for child in self.children:
                if not child.live:
                    child.move(Status.STOPPED)
        if self._failure is not None:
            raise self._failure

    async def _run_children(
        self, nursery: trio.Nursery, task_status: trio.TaskStatus[Supervisor]
    ) -> None:
        try:
            # Under the lock, like every other change to the children: a dynamic call
            # (delete, terminate, restart) landing while a (nested) supervisor starts its
            # children waits for the start, then acts on what it sees; the list is read
            # once the lock is held, so a child deleted before the start stays deleted.
            async with self._lock:
                await self._incarnations.start_all(nursery, list(self.children))
        except ActorError as err:
            # Raised after the nursery closes, so the starter sees it unwrapped.
            self._failure = err
        else:
            task_status.started(self)
            await self._supervise()
            await self._shutdown_children()

    def _prepare_nested(self, child: Child) -> None:
        """The nested supervisor of ``child``, made on its first start; a fresh start
        forgets an earlier kill."""
        assert child.spec.supervisor is not None
        sup = child.sup
        if not isinstance(sup, Supervisor):
            spec, path = child.spec.supervisor, f"{self.path}/{child.id}"
            sup = child.sup = Supervisor(spec, self.runtime, path=path, parent=self)
        sup._kill_pending = None

    async def _supervise(self) -> None:
        """Handle exits one at a time until shutdown or failure."""
        while (report := await self._exits.next(self._ending)) is not None:
            child, exit_, ended_by = report
            if ended_by is EndedBy.US:
                continue  # a restart, terminate or shutdown we asked for
            try:  # the lock, without a scheduling point when it is free (the restart path)
                self._lock.acquire_nowait()
            except trio.WouldBlock:
                await self._lock.acquire()
            try:
                await self._handle_exit(child, exit_, ended_by)
            finally:
                self._lock.release()
            if self._ending():
                return

    def _ending(self) -> bool:
        return self._shutdown_requested or self._failure is not None

    async def _handle_exit(self, child: Child, exit_: Exit, ended_by: EndedBy) -> None:
        """An exit of the child's own (:data:`ON_EXIT`); a termination stays down.

        An exit is stale when the child is no longer ``EXITED`` by the time the loop gets
        to it: terminated, deleted or restarted (a group restart for a sibling's crash in
        the same instant) while the exit waited for the lock. Nothing is decided on it.
        """
        if self.cancel_reason() is not None:
            return  # a cancel is under way: no policy runs, nothing restarts
        if child.status is not Status.EXITED or child not in self.children:
            if child.status is Status.STOPPED:
                child.pending = None  # terminated: its decision dies with it
            return
        outcome = ON_EXIT[child.spec.restart, exit_.kind]
        if ended_by is EndedBy.TERMINATION:  # it stopped itself for good: never restarted
            child.pending, outcome = None, Outcome.STOPPED
        if outcome is Outcome.RESTART:
            exited = ActorError.from_code(
                Code.ACTOR_STOPPED, f"{child.id} exited: {exit_.reason}", actor=self.path
            )
            self._decider.settle(child, exited, Directive.RESTART)
        elif outcome is not Outcome.DECIDE:
            self._down(child, exit_.reason, outcome)
            return
        elif child.pending is None:  # a nested supervisor failed: decide here
            assert exit_.error is not None
            self._decider.settle(child, exit_.error)
        await self._run_pending(child)

    async def _run_pending(self, child: Child) -> None:
        """Carry out the decision pending for ``child`` (:data:`ON_DIRECTIVE`)."""
        decision, child.pending = child.pending, None
        if decision is None:
            return  # nothing was decided (a cancel is under way)
        error = decision.error
        outcome = ON_DIRECTIVE[decision.directive, child.spec.restart]
        if outcome is Outcome.RESTART:
            await self._restarts.restart(child, decision.delay)
        elif outcome is Outcome.ESCALATE:
            emit(SupervisorEscalated(supervisor=self.path, child=child.id, error=error))
            # Not closed: if our parent restarts us, this child's address and queue stay.
            child.move(Status.STOPPED)
            self._failure = error  # we give up: shut every child down, then fail
            self._exits.wake()
        elif outcome is Outcome.ABORTED:
            child.move(Status.STOPPED)  # the tree was aborted when this was decided
        else:
            self._down(child, f"crashed:{error.code}", outcome)

    def _down(self, child: Child, reason: str, outcome: Outcome) -> None:
        """``child`` stays down for good; its own exit (``EXITED``) may end us."""
        self.children.stopped_for_good(child, reason)
        if outcome is Outcome.EXITED and shuts_down(
            self.spec.auto_shutdown,
            significant=child.spec.significant,
            all_significant_down=self.children.all_significant_down(),
        ):
            self._shutdown_requested = True
            self._exits.wake()

    # --- stopping -------------------------------------------------------------------------

    async def _shutdown_children(self) -> None:
        """Reverse start order; dynamic children first and concurrently. Shielded."""
        failure = self._failure
        failed = None if failure is None else f"{self.path} failed: {failure.code}"
        self._cancel.request(failed or f"shutdown:{self.path}")
        with trio.CancelScope(shield=True):
            await self.children.shutdown()

    def close(self, reason: str = "shutdown") -> None:
        """Close every slot of this subtree: queued calls are answered, names freed.

        Slots outlive a supervisor's *run*, so a supervisor restarted by its parent keeps
        its children's refs and queued messages; they are closed only when the subtree is
        stopped for good (or the tree ends). Everything queued is answered (``cancelled``
        if a cancel is under way). A subtree stopped for good forgets its cancel: a call
        to it is ``actor_stopped`` from now on. A *tree* that was cancelled (aborted, or
        a scope around it) stays so: every later caller gets ``cancelled`` with the reason.
        """
        self.children.close(reason)
        if self.parent is not None or not self._cancel.hard:
            self._cancel.clear()

    def _refuse_calls(self) -> None:
        """The whole tree is cancelled: every slot refuses new messages at once (a call is
        ``cancelled`` with the reason, ``delivered=False``; a cast is a dead letter)."""
        for child in self.children:
            if child.cell is not None:
                child.cell.stop_accepting()
            if isinstance(child.sup, Supervisor):
                child.sup._refuse_calls()

    def request_shutdown(self, reason: str) -> None:
        """Shut down gracefully (a cancel for the subtree: failures become ``cancelled``).

        A (re)start under way would hold the shutdown up for as long as its on_start
        takes: it is killed, so it is not started (and nobody after it is)."""
        self._cancel.request(reason)
        self._shutdown_requested = True
        self._exits.wake()
        self.children.kill_starting()

    def kill(self, reason: str) -> None:
        """Cancel the whole subtree now (a kill before its run began stops the run
        before any child starts). The root's kill (an abort) cancels the tree for good:
        its slots refuse new calls from now on."""
        self._cancel.request(reason, hard=True)
        if self.parent is None:
            self._refuse_calls()
        if not self._cancel.cancel_run(reason):
            self._kill_pending = reason

    def root(self) -> Supervisor:
        """The supervisor at the top of this one's tree."""
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

    async def start_child(self, spec: ChildSpec) -> ActorRef | None:
        """Add and start a dynamic child; returns its ref (``None`` for a supervisor)."""
        async with self._lock:
            nursery = self._nursery_to_start()
            child = self.children.add(spec, dynamic=True, limit=self.spec.max_children)
            await self._incarnations.start_dynamic(nursery, child, forget=True)
            return child.ref

    def _nursery_to_start(self) -> trio.Nursery:
        """Our nursery, if a child may start now: ``cancelled`` during a cancel,
        ``actor_stopped`` when the supervisor is not running or is shutting down."""
        hard = self._cancel.hard_in_effect()
        if hard is not None:
            raise ActorError.from_code(Code.CANCELLED, hard, actor=self.path, delivered=False)
        nursery = self._nursery
        if nursery is None or self._starting_refused():
            refused = f"{self.path} is shutting down or not running: no child can start"
            raise ActorError.from_code(
                Code.ACTOR_STOPPED, refused, actor=self.path, delivered=False
            )
        return nursery

    def _starting_refused(self) -> bool:
        """Whether nothing may start now: the supervisor is not running or its run is
        ending, or a shutdown, a failure or a cancel is under way."""
        if self._nursery is None or self._closing or self._shutdown_requested:
            return True
        return self._failure is not None or self._cancel.in_effect() is not None

    async def terminate_child(self, child_id: str, *, reason: str = "terminated") -> None:
        """Stop a child for good; its spec is kept (dropped for a temporary child).

        Once begun, the stop completes even if the caller is cancelled (the caller
        leaves at once; the stop goes on in the supervisor's nursery).
        """
        child = self.children.get(child_id)
        if child.cell is not None:
            child.cell.stop_accepting()  # from now on calls fail at once
        nursery = self._nursery
        if nursery is None:
            await self._terminate(child, reason)
        else:
            await run_to_completion(nursery, self._terminate, child, reason)

    async def _terminate(self, child: Child, reason: str) -> None:
        async with self._lock:
            await child.stop(reason)
            self.children.stopped_for_good(child, reason)

    async def restart_child(self, child_id: str) -> ActorRef | None:
        """Start a terminated child again (``child_running`` if it runs)."""
        async with self._lock:
            # Looked up under the lock: a child gone meanwhile (a temporary child's
            # terminate, a delete_child) is child_not_found, never an orphan restart.
            child = self.children.get(child_id)
            nursery = self._nursery_to_start()
            self.children.check_stopped(child)
            await self._incarnations.start_dynamic(nursery, child, forget=False)
            return child.ref

    async def delete_child(self, child_id: str) -> None:
        """Forget a terminated child's spec (``child_running`` / ``child_restarting`` else).

        Waits for a start, restart or terminate under way, like them."""
        async with self._lock:
            child = self.children.get(child_id)
            self.children.check_stopped(child)
            self.children.remove(child)

    def which_children(self) -> list[ChildInfo]:
        """Every child in start order: id, state, restarts, kind, ref."""
        return self.children.infos()

    def count_children(self) -> dict[str, int]:
        """``specs``, ``active`` (running), ``supervisors`` and ``workers``, as in OTP."""
        return self.children.counts()

    def ref(self, child_id: str) -> ActorRef:
        """The ref of worker ``child_id`` (valid across restarts)."""
        return self.children.ref(child_id)

    def child(self, child_id: str) -> Supervisor:
        """The nested supervisor ``child_id``."""
        sup = self.children.supervisor(child_id)
        assert isinstance(sup, Supervisor)  # the only kind _prepare_nested makes
        return sup
