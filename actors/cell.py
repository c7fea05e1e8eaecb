"""The actor slot: one mailbox and one ref, served by instance after instance.

An :class:`ActorCell` outlives its instances. Each *incarnation* (:meth:`ActorCell.
run_incarnation`, run by :mod:`actors.incarnation`) builds a fresh instance, runs
``on_start``, serves the mailbox and ends with an :class:`~actors.exits.Exit`. Whoever
runs the incarnations — the runtime's minimal rule or a supervisor — decides what
follows, through the :class:`Supervision` protocol:

* ``after_crash(cell, error)`` is asked, synchronously, when a handler raised: ``RESUME``
  keeps the instance (only that caller failed), ``RESTART`` ends the incarnation after
  ``on_restart(error)``, ``STOP`` ends it after ``on_stop("crashed:<code>")``;
* ``cancel_reason()`` tells whether a cancel was requested for an enclosing subtree
  (abort, run cancel, parent shutdown); ``note_cancel(reason)`` records one that came
  from a trio scope *around* the subtree (the incarnation sees it as ``trio.Cancelled``
  that its own scope did not ask for). Then **cancellation wins**: a failure escaping
  the handler (or ``on_start``, or deferred work) while a cancel is in effect is
  reported as ``cancelled`` with that reason (the failure kept as cause and logged as
  ``error.suppressed``), ``after_crash`` is never asked, and callers caught in flight get
  ``cancelled``, never ``call_timeout``, ``outcome_unknown`` or a failure code.

What may propagate out of an incarnation is :func:`~actors.exits.must_propagate`; the
cleanup hook that ends every started instance is :mod:`actors.cleanup`; deferred replies
are :mod:`actors.deferred`; what callers are answered, and when, is :mod:`actors.replies`.

The mailbox stays open between incarnations (messages wait for the next instance) and is
closed only by :meth:`ActorCell.close`, which answers everything still queued.

A cell is the :class:`~actors.actor.ActorAddress` behind its :class:`~actors.actor.ActorRef`
and needs of the runtime that holds it only a :class:`CellHost`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final, Protocol

import trio
from outcome import Error

from actors.actor import Actor, ActorRef, CellState
from actors.cleanup import DEFAULT_CLEANUP_BUDGET
from actors.deadletters import DeadLetters
from actors.errors import ActorError, Code
from actors.events import ActorStopped
from actors.exits import AfterCrash, Exit, must_propagate
from actors.incarnation import Incarnation, start_failed
from actors.mailbox import Envelope, Mailbox
from actors.observe import emit, enabled
from actors.replies import evict, stopped_error, time_out, withdraw
from actors.timer import DeadlineTimer

_DEBUG: Final = logging.DEBUG


class Supervision(Protocol):
    """What a cell asks of whoever supervises it (see the module docstring)."""

    def after_crash(self, cell: ActorCell, error: ActorError) -> AfterCrash:
        """What the cell does after a handler raised ``error`` (asked synchronously)."""

    def cancel_reason(self) -> str | None:
        """The reason of a cancel of this subtree (kill, abort) or of a scope around
        it, once one came; ``None`` before."""
        ...

    def note_cancel(self, reason: str) -> str:
        """A ``trio.Cancelled`` that its own scope did not ask for reached an incarnation:
        returns the cancel reason in effect — the subtree's own (kill, abort) if there is
        one, else ``reason``, recorded as the cancel of a scope around the tree (from
        then on ``cancel_reason`` answers it)."""

    async def stop_child(self, cell: ActorCell, reason: str, timeout: float | None) -> None:
        """Stop ``cell`` for good (``ActorRef.stop``) and return once it is closed."""

    def terminating(self, cell: ActorCell) -> None:
        """``cell`` stops itself for good (``ActorRef.stop`` from its own task, which
        cannot wait for itself): its coming exit is a termination, never restarted."""


class CellHost(Protocol):
    """What a cell needs of the runtime that holds it (:class:`~actors.runtime.Runtime`)."""

    @property
    def dead_letters(self) -> DeadLetters:
        """Where casts that cannot be delivered go (a stopped slot, an eviction)."""

    @property
    def timer(self) -> DeadlineTimer:
        """The call timer the slot's refs watch deadlines with; its callback must call
        :meth:`ActorCell.expire` of the envelope's ``owner``."""

    def revive_cell(self, cell: ActorCell) -> None:
        """Register a closed ``cell`` again (:meth:`ActorCell.revive`): ``name_taken`` if
        its name was taken meanwhile, ``actor_stopped`` if the host is closing."""

    def cell_finished(self, cell: ActorCell) -> None:
        """``cell`` was closed for good: forget it and free its name."""


class ActorCell:
    """One actor slot: mailbox, ref, registry name, and the incarnation being served."""

    def __init__(
        self,
        host: CellHost,
        factory: Callable[[], Actor],
        *,
        name: str,
        path: str,
        mailbox: Mailbox,
        supervision: Supervision,
        cleanup_budget: float = DEFAULT_CLEANUP_BUDGET,
    ) -> None:
        self.host = host
        self.timer = host.timer  # read by the ref on every call with a timeout
        self.factory = factory
        self.name = name
        self.path = path
        self.mailbox = mailbox
        self.supervision = supervision
        self.cleanup_budget = cleanup_budget
        self.ref = ActorRef(self)
        self.state = CellState.STARTING
        self.accepting = True
        self.restarts = 0
        self.stop_reason: str | None = None
        #: A stop was requested (:meth:`request_exit`): the incarnation ends after its
        #: in-flight message. ``kill_reason``: a kill was (:meth:`kill`). :meth:`reopen`
        #: forgets both.
        self.exit_requested = False
        self.kill_reason: str | None = None
        #: An instance built ahead of the first incarnation (``Runtime.spawn`` builds it in
        #: the spawner's task, so a raising constructor fails the spawn, not the runtime).
        self.prebuilt: Actor | None = None
        self._stopped: trio.Event | None = None
        self._incarnation: Incarnation | None = None  # the one being run, if any

    # --- what the ref and the timer ask (ActorAddress) ---------------------------------

    def cancel_reason(self) -> str | None:
        """The reason of a cancel in effect for this slot's subtree, else ``None``."""
        return self.supervision.cancel_reason()

    def stopped_error(self, *, delivered: bool = False) -> ActorError:
        """``cancelled`` while an enclosing cancel is under way, else ``actor_stopped``."""
        return stopped_error(self.path, self.supervision.cancel_reason(), delivered=delivered)

    def evicted(self, envelope: Envelope) -> None:
        """Resolve an envelope a ``drop_oldest`` mailbox pushed out."""
        evict(envelope, self.path, self.host.dead_letters)

    def caller_gave_up(self, envelope: Envelope) -> None:
        """The caller was cancelled: never run a queued request; maybe cancel a running one."""
        withdraw(envelope, self.mailbox, self.path)

    def expire(self, envelope: Envelope) -> None:
        """The timer's callback: fail a pending call with ``call_timeout`` — ``cancelled``
        while a cancel is in effect for the subtree (a running ``propagate_cancel`` one is
        cancelled, as for a caller that gave up)."""
        time_out(envelope, self.mailbox, self.path, self.supervision.cancel_reason())

    def dead_letter(self, message: Any, reason: str) -> None:
        """Record ``message``, sent to this slot, as undeliverable."""
        self.host.dead_letters.record(self.path, message, reason)

    async def stop(self, reason: str, timeout: float | None) -> None:
        """Stop this slot for good (:meth:`ActorRef.stop`, ``timeout`` already checked).

        From the actor's own task (``on_start``, a handler, deferred work, a cleanup
        hook) waiting would wait for ourselves: the slot is marked now — no new message
        is taken, queued ones get ``actor_stopped`` — and the incarnation ends after the
        current message, as a termination. From any other task the supervision stops it.
        """
        if self.serving_here():
            self.stop_accepting()
            self.request_exit(reason)
            self.supervision.terminating(self)
            await trio.lowlevel.checkpoint()
            return
        await self.supervision.stop_child(self, reason, timeout)

    # --- incarnations ------------------------------------------------------------------

    async def run_incarnation(
        self, *, task_status: trio.TaskStatus[ActorRef] = trio.TASK_STATUS_IGNORED
    ) -> Exit:
        """Start a fresh instance and serve until it ends (:mod:`actors.incarnation`).

        ``task_status.started`` is called once ``on_start`` returned. If the factory or
        ``on_start`` raises, this raises the typed error (a foreign exception classified)
        — through ``nursery.start`` that is exactly what the starter sees; a kill before
        the start completed raises ``actor_stopped``. However the incarnation ends, its
        in-flight callers are answered first, then the instance's cleanup hook runs
        (shielded, within ``cleanup_budget``). ``trio.Cancelled`` from an enclosing scope
        propagates, after that scope's cancel was noted on the supervision.
        """
        incarnation = self._incarnation = Incarnation(self)
        try:
            return await incarnation.run(task_status)
        finally:
            self._incarnation = None

    def build(self) -> Actor:
        """A fresh instance from the factory, its ``ref`` set. A raising factory is a
        start failure like a raising ``on_start``: the typed error, cause kept."""
        try:
            instance: object = self.factory()  # a factory from untyped code may return anything
        except BaseException as exc:
            if must_propagate(exc):
                raise
            error = start_failed(exc, self.path)
            if error is exc:  # already typed: raised as it is (never its own cause)
                raise
            raise error from exc
        if not isinstance(instance, Actor):
            error = ActorError.from_code(
                Code.CONFIG_INVALID,
                f"the factory of {self.path} returned {type(instance).__name__}, not an Actor",
            )
            raise start_failed(error, self.path)
        instance.ref = self.ref
        return instance

    def take_instance(self) -> Actor:
        """The instance an incarnation starts: :attr:`prebuilt` if set (then cleared),
        else a fresh one (:meth:`build`)."""
        instance, self.prebuilt = self.prebuilt, None
        return instance if instance is not None else self.build()

    def note_cancel(self, reason: str) -> str:
        """A cancel from a scope around the subtree reached an incarnation (see
        :meth:`Supervision.note_cancel`): the reason in effect."""
        return self.supervision.note_cancel(reason)

    def after_crash(self, error: ActorError) -> AfterCrash:
        """What the supervision decides after a handler raised ``error``."""
        return self.supervision.after_crash(self, error)

    # --- stopping ----------------------------------------------------------------------

    def serving_here(self) -> bool:
        """Whether the current task is this actor's own: its incarnation's (``on_start``,
        handlers, cleanup hooks) or one of its deferred work's."""
        incarnation = self._incarnation
        return incarnation is not None and incarnation.runs(trio.lowlevel.current_task())

    def request_exit(self, reason: str) -> None:
        """End the current incarnation after its in-flight message (the mailbox stays open)."""
        self.exit_requested = True
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.state is CellState.RUNNING:
            self.state = CellState.STOPPING
        self.mailbox.wake()

    def kill(self, reason: str) -> None:
        """Cancel the current incarnation now; its in-flight caller learns outcome_unknown.

        A kill before the incarnation's task runs stops it before the instance is built.
        """
        self.request_exit(reason)
        if self.kill_reason is None:
            self.kill_reason = reason
        if self._incarnation is not None:
            self._incarnation.kill(reason)

    def stop_accepting(self) -> None:
        """Refuse new messages at once (calls fail immediately, casts dead-letter)."""
        self.accepting = False

    def close(self, reason: str) -> None:
        """The slot is done for good: answer everything queued, free the name.

        Queued calls fail with ``actor_stopped`` (``cancelled`` during an enclosing
        cancel), ``delivered=False``; queued casts become dead letters; parked cast senders
        are released. Idempotent.
        """
        if self.state is CellState.STOPPED:
            return
        self.accepting = False
        self.state = CellState.STOPPED
        dead_letters = self.host.dead_letters
        for envelope in self.mailbox.drain():
            caller = envelope.caller
            if envelope.is_call:
                if caller is not None:
                    trio.lowlevel.reschedule(caller, Error(self.stopped_error()))
                continue
            if envelope.sender_parked and caller is not None:
                envelope.sender_parked = False
                trio.lowlevel.reschedule(caller)
            dead_letters.record(self.path, envelope.message, "actor_stopped")
        self.host.cell_finished(self)
        if self._stopped is not None:
            self._stopped.set()
        if enabled(_DEBUG):
            emit(ActorStopped(actor=self.path, reason=reason))

    def revive(self) -> None:
        """Open a slot closed for good again (``restart_child`` after ``terminate_child``):
        the same ref and name, an empty mailbox. ``name_taken`` if the name was taken
        meanwhile; ``actor_stopped`` if the runtime is closing."""
        self.host.revive_cell(self)
        self.state = CellState.STARTING
        self.accepting = True
        self._stopped = None

    def reopen(self) -> None:
        """Prepare a fresh start: accept messages again after :meth:`stop_accepting` (a
        restart decided on) and forget the previous incarnation's stop or kill request."""
        if self.state is not CellState.STOPPED:
            self.accepting = True
        self.exit_requested = False
        self.stop_reason = None
        self.kill_reason = None

    async def wait_stopped(self) -> None:
        """Return once the slot is stopped for good (at once if it already is)."""
        if self.state is CellState.STOPPED:
            await trio.lowlevel.checkpoint()
            return
        if self._stopped is None:
            self._stopped = trio.Event()
        await self._stopped.wait()
