"""The actor slot: one mailbox and one ref, served by instance after instance.

An :class:`ActorCell` outlives its instances. Each *incarnation* (:meth:`ActorCell.
run_incarnation`) builds a fresh instance, runs ``on_start``, serves the mailbox and ends
with an :class:`Exit`. Whoever runs the incarnations — the runtime's minimal rule or a
supervisor — decides what follows, through the :class:`Supervision` protocol:

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

Only ``trio.Cancelled``, ``KeyboardInterrupt`` and ``SystemExit`` (or a group holding
them) propagate out of an incarnation; any other ``BaseException`` a hook raises
(``GeneratorExit``, a custom subclass) is that actor's failure, classified like any
other. The cleanup hook (``on_stop``) runs, shielded and within ``cleanup_budget``, on
every way a started instance ends: stop, crash not restarted, kill, abort, an enclosing
cancel (``on_restart`` instead when it is restarted).

The mailbox stays open between incarnations (messages wait for the next instance) and is
closed only by :meth:`ActorCell.close`, which answers everything still queued.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import trio
from outcome import Error, Value

from actors.actor import Actor, ActorRef, CellState, Deferred, overrides
from actors.errors import ActorError, Code, Failure, current_cancel_reason, normalize
from actors.mailbox import Envelope, Mailbox, State
from actors.observe import EventName, enabled, get_logger

if TYPE_CHECKING:
    from actors.runtime import Runtime

DEFAULT_CLEANUP_BUDGET: Final = 5.0
_YIELD_EVERY: Final = 64  # messages served back to back before a fairness checkpoint
_DEBUG: Final = logging.DEBUG

_log = get_logger("actors.cell")


class AfterCrash(enum.Enum):
    """What happens to a crashed instance."""

    RESUME = "resume"
    RESTART = "restart"
    STOP = "stop"


class Supervision(Protocol):
    """What a cell asks of whoever supervises it (see the module docstring)."""

    def after_crash(self, cell: ActorCell, error: ActorError) -> AfterCrash:
        """What the cell does after a handler raised ``error`` (asked synchronously)."""

    def cancel_reason(self) -> str | None: ...

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


class ExitKind(enum.StrEnum):
    NORMAL = "normal"  # a stop was requested and the instance finished
    CRASHED = "crashed"  # the handler raised; ``error`` says what
    CANCELLED = "cancelled"  # an enclosing cancel (or a kill) ended it


@attrs.frozen
class Exit:
    """How one incarnation ended."""

    kind: ExitKind
    reason: str
    error: ActorError | None = None
    after: AfterCrash | None = None


class ActorCell:
    """One actor slot: mailbox, ref, registry name, and the incarnation being served."""

    def __init__(
        self,
        runtime: Runtime,
        factory: Callable[[], Actor],
        *,
        name: str,
        path: str,
        mailbox: Mailbox,
        supervision: Supervision,
        cleanup_budget: float = DEFAULT_CLEANUP_BUDGET,
    ) -> None:
        self.runtime = runtime
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
        self.current: Envelope | None = None
        self._exit_requested = False
        self._kill_reason: str | None = None
        self._task: trio.lowlevel.Task | None = None  # the incarnation's task, while serving
        self._scope: trio.CancelScope | None = None
        # The failure a cancel superseded: the cause of the ``cancelled`` in-flight callers get.
        self._suppressed: BaseException | None = None
        #: An instance built ahead of the first incarnation (``Runtime.spawn`` builds it in
        #: the spawner's task, so a raising constructor fails the spawn, not the runtime).
        self.prebuilt: Actor | None = None
        self._stopped: trio.Event | None = None
        # Deferred calls in flight (actors with max_deferred > 0), and where they run.
        self._deferred: set[Envelope] = set()
        self._deferred_nursery: trio.Nursery | None = None
        self._deferred_slots: trio.Semaphore | None = None

    # --- errors handed to callers ------------------------------------------------------

    def stopped_error(self, *, delivered: bool = False) -> ActorError:
        """``cancelled`` while an enclosing cancel is under way, else ``actor_stopped``."""
        reason = self.supervision.cancel_reason()
        if reason is not None:
            return ActorError.from_code(
                Code.CANCELLED, reason, actor=self.path, delivered=delivered
            )
        return ActorError.from_code(
            Code.ACTOR_STOPPED, f"{self.path} is stopped", actor=self.path, delivered=delivered
        )

    def evicted(self, envelope: Envelope) -> None:
        """Resolve an envelope a ``drop_oldest`` mailbox pushed out."""
        envelope.state = State.ABANDONED
        if envelope.is_call and envelope.caller is not None:
            err = ActorError.from_code(
                Code.NOT_DELIVERED,
                f"evicted from the full mailbox of {self.path}",
                actor=self.path,
                delivered=False,
            )
            trio.lowlevel.reschedule(envelope.caller, Error(err))
        else:
            self.runtime.dead_letters.record(self.path, envelope.message, "mailbox_overflow")

    def caller_gave_up(self, envelope: Envelope) -> None:
        """The caller was cancelled: never run a queued request; maybe cancel a running one."""
        state = envelope.state
        if state is State.QUEUED or state is State.WAITING_ROOM:
            self.mailbox.abandon(envelope)
        elif state is State.RUNNING:
            envelope.state = State.ABANDONED
            if envelope.propagate_cancel and envelope.scope is not None:
                envelope.scope.cancel(reason=f"caller of {self.path} was cancelled")

    def expire(self, envelope: Envelope) -> None:
        """The timer's callback: fail a pending call with ``call_timeout``.

        A caller that timed out has given up like a cancelled one: with
        ``propagate_cancel=True`` its running handler (or deferred work) is cancelled.
        """
        started = envelope.state is State.RUNNING
        if started:
            envelope.state = State.ABANDONED
            if envelope.propagate_cancel and envelope.scope is not None:
                envelope.scope.cancel(reason=f"caller of {self.path} timed out")
        else:
            self.mailbox.abandon(envelope)
        err = ActorError.from_code(
            Code.CALL_TIMEOUT,
            f"no reply from {self.path} within the call timeout",
            actor=self.path,
            delivered=started,
        )
        if envelope.caller is not None:
            trio.lowlevel.reschedule(envelope.caller, Error(err))

    # --- one incarnation ---------------------------------------------------------------

    async def run_incarnation(
        self, *, task_status: trio.TaskStatus[ActorRef] = trio.TASK_STATUS_IGNORED
    ) -> Exit:
        """Start a fresh instance and serve until it ends.

        ``task_status.started`` is called once ``on_start`` returned. If the factory or
        ``on_start`` raises, this raises the typed error (a foreign exception classified)
        — through ``nursery.start`` that is exactly what the starter sees; a kill before
        the start completed raises ``actor_stopped``. However the incarnation ends, its
        in-flight callers are answered first, then the instance's cleanup hook runs
        (shielded, within ``cleanup_budget``). ``trio.Cancelled`` from an enclosing scope
        propagates, after that scope's cancel was noted on the supervision.
        """
        self._suppressed = None
        self._task = trio.lowlevel.current_task()  # kept until the cleanup hook has run
        try:
            return await self._incarnation(task_status)
        finally:
            self._task = None

    async def _incarnation(self, task_status: trio.TaskStatus[ActorRef]) -> Exit:
        instance: Actor | None = None
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                if self._kill_reason is not None:
                    scope.cancel(reason=self._kill_reason)
                # Decided before a cancel but run after it: cancelled means not started.
                await trio.lowlevel.checkpoint_if_cancelled()
                instance = await self._start_instance()
                task_status.started(self.ref)
                if instance.max_deferred:
                    exit_ = await self._serve_with_deferred(instance)
                else:
                    exit_ = await self._serve(instance)
                self._scope = None
                self._end_incarnation(None)  # work a crash cancelled: outcome_unknown
                await self._after_exit(instance, exit_)
                return exit_
        except BaseException as exc:
            self._scope = None
            reason = await self._cancelled_by(exc)
            self._end_incarnation(reason)
            if reason is not None and instance is not None:
                await self._cleanup(instance, "on_stop", f"cancelled: {reason}")
            raise
        # Only our own scope was cancelled: a kill (stop timeout, brutal shutdown).
        self._scope = None
        reason = self._kill_reason or self.stop_reason or "killed"
        self._end_incarnation(None)
        if instance is None:
            raise ActorError.from_code(
                Code.ACTOR_STOPPED,
                f"{self.path} was stopped while starting",
                actor=self.path,
                delivered=False,
            )
        await self._cleanup(instance, "on_stop", reason)
        return Exit(ExitKind.CANCELLED, reason)

    async def _cancelled_by(self, exc: BaseException) -> str | None:
        """The cancel reason if ``exc``, escaping the incarnation, is a cancellation.

        Our own scope catches a kill, so a cancellation that escapes it comes from an
        enclosing scope: the subtree's (abort, shutdown), whose reason the supervision
        knows, or a trio scope around the whole tree, which is noted on the supervision
        now — the queued callers answered later get the same reason.
        """
        trio_reason = await current_cancel_reason(exc)
        if trio_reason is None:
            return None
        return self.supervision.note_cancel(trio_reason)

    def build(self) -> Actor:
        """A fresh instance from the factory, its ``ref`` set. A raising factory is a
        start failure like a raising ``on_start``: the typed error, cause kept."""
        try:
            instance: object = self.factory()  # a factory from untyped code may return anything
        except BaseException as exc:
            if _must_propagate(exc):
                raise
            raise self._start_failed(exc) from exc
        if not isinstance(instance, Actor):
            raise self._start_failed(
                ActorError.from_code(
                    Code.CONFIG_INVALID,
                    f"the factory of {self.path} returned {type(instance).__name__}, not an Actor",
                )
            )
        instance.ref = self.ref
        return instance

    def _start_failed(self, exc: BaseException) -> ActorError:
        err = normalize(exc)
        if err.actor is None:
            err.actor = self.path
        _log.warning(EventName.ACTOR_START_FAILED, actor=self.path, error=err)
        return err

    async def _start_instance(self) -> Actor:
        self.state = CellState.STARTING if self.restarts == 0 else CellState.RESTARTING
        instance, self.prebuilt = self.prebuilt, None
        if instance is None:
            instance = self.build()
        if overrides(instance, "on_start"):
            try:
                await instance.on_start()
            except BaseException as exc:
                if _must_propagate(exc):
                    raise
                await self._cancellation_wins(exc)
                raise self._start_failed(exc) from exc
        self.state = CellState.RUNNING
        if enabled(_DEBUG):
            _log.debug(EventName.ACTOR_STARTED, actor=self.path, restarts=self.restarts)
        return instance

    async def _cancellation_wins(self, exc: BaseException) -> None:
        """If a cancel covers this task now, ``exc`` is superseded: log it as suppressed
        and raise ``trio.Cancelled`` in its place (``exc`` stays its ``__context__`` and
        becomes the cause of the ``cancelled`` the in-flight callers get)."""
        try:
            await trio.lowlevel.checkpoint_if_cancelled()  # no schedule point if not
        except trio.Cancelled:
            self._suppressed = exc
            _log.info(
                EventName.SUPPRESSED,
                actor=self.path,
                reason="cancelled",
                suppressed=normalize(exc),
            )
            raise

    async def _serve(self, instance: Actor) -> Exit:
        """Handle messages until an exit is requested or the handler crashes.

        The handlers of ``propagate_cancel`` calls run in a cancel scope shared by
        consecutive messages, opened at the first such message (a trio ``CancelScope``
        costs about half an actor call, and a restart would pay for it every time): a
        caller that gives up while its handler runs cancels that scope, and serving goes
        on in a fresh one.
        """
        exit_ = await self._serve_in(instance, None)
        while exit_ is None:
            with trio.CancelScope() as segment:
                exit_ = await self._serve_in(instance, segment)
            if exit_ is None:
                # A caller that gave up cancelled the segment: its message is done.
                self.current = None
        return exit_

    async def _serve_in(self, instance: Actor, segment: trio.CancelScope | None) -> Exit | None:
        """:meth:`_serve` within one segment; ``None`` when it needs a (fresh) segment:
        a ``propagate_cancel`` message arrived without one (it is left in ``current``, to
        be served first), or a caller that gave up cancelled it."""
        mailbox = self.mailbox
        handle = instance.handle
        served = 0
        envelope = self.current  # a message handed over from the previous segment
        while True:
            if envelope is None:
                if self._exit_requested:
                    return Exit(ExitKind.NORMAL, self.stop_reason or "normal")
                envelope = mailbox.take()
                if envelope is None:
                    served = 0
                    await mailbox.wait()
                    continue
            self.current = envelope
            try:
                if envelope.propagate_cancel:
                    if segment is None:
                        return None  # served first in a segment (``current``)
                    envelope.scope = segment  # what caller_gave_up / expire cancel
                    result = await handle(envelope.message)
                    envelope.scope = None
                    if segment.cancel_called:
                        return None  # the caller left: drop the result, serve on afresh
                else:
                    result = await handle(envelope.message)
            except trio.Cancelled:
                raise
            except BaseException as exc:
                envelope.scope = None
                if _must_propagate(exc):
                    raise
                if segment is not None and segment.cancel_called:
                    # The caller asked for the cancel and has already left: its cancel wins.
                    _log.info(
                        EventName.SUPPRESSED,
                        actor=self.path,
                        reason="caller cancelled",
                        suppressed=normalize(exc),
                    )
                    return None
                await self._cancellation_wins(exc)
                self.current = None
                exit_ = self._handler_failed(envelope, exc)
                if exit_ is None:
                    envelope = None
                    continue
                return exit_
            if type(result) is Deferred:
                # Still ``current`` while it waits for a free slot: a cancel answers it.
                await self._start_deferred(envelope, result)
                self.current = None
            else:
                self.current = None
                self._answer(envelope, result)
            envelope = None
            served += 1
            if served >= _YIELD_EVERY:
                served = 0
                await trio.lowlevel.checkpoint()

    def _handler_failed(self, envelope: Envelope, exc: BaseException) -> Exit | None:
        """Classify what the handler raised; ``None`` to go on serving, else the exit.

        The caller of that message gets the error with ``delivered=True`` (it ran); an
        error that describes a *nested* call (``delivered=False``) is wrapped so that the
        nested call's verdict never leaks to this caller.
        """
        err = self._ran(normalize(exc))
        cancel_reason = self.supervision.cancel_reason()
        if cancel_reason is not None:
            return self._cancelled_exit(envelope, exc, err, cancel_reason)
        if envelope.is_call:
            envelope.resolve(Error(err))
        # The supervision reports the crash, with the error, in its decision event.
        after = self.supervision.after_crash(self, err)
        if after is AfterCrash.RESUME:
            return None
        return Exit(ExitKind.CRASHED, f"crashed:{err.code}", error=err, after=after)

    def _cancelled_exit(
        self, envelope: Envelope, exc: BaseException, err: ActorError, reason: str
    ) -> Exit:
        """Cancellation wins: report ``cancelled`` with the original exception as its cause
        (``err``, its classification, goes to the ``error.suppressed`` event); no policy."""
        cancelled = ActorError.from_code(
            Code.CANCELLED, reason, cause=exc, actor=self.path, delivered=True
        )
        if envelope.is_call:
            envelope.resolve(Error(cancelled))
        _log.info(EventName.SUPPRESSED, actor=self.path, reason=reason, suppressed=err)
        return Exit(ExitKind.CANCELLED, reason, error=cancelled)

    def _answer(self, envelope: Envelope, result: Any) -> None:
        """Resolve a handled message with what the handler (or deferred work) returned."""
        if isinstance(result, Failure):
            self._failed_value(envelope, result)
        elif envelope.is_call:
            if not envelope.resolve(Value(result)) and enabled(_DEBUG):
                _log.debug(EventName.CALL_LATE_REPLY, actor=self.path)
        else:
            envelope.state = State.DONE

    async def _after_exit(self, instance: Actor, exit_: Exit) -> None:
        """The instance's cleanup hook, once nothing of it runs any more."""
        if exit_.after is AfterCrash.RESTART and exit_.error is not None:
            await self._cleanup(instance, "on_restart", exit_.error)
        elif exit_.kind is ExitKind.CANCELLED:
            await self._cleanup(instance, "on_stop", f"cancelled: {exit_.reason}")
        else:
            await self._cleanup(instance, "on_stop", exit_.reason)

    # --- deferred replies --------------------------------------------------------------

    async def _serve_with_deferred(self, instance: Actor) -> Exit:
        """Serve with a nursery for deferred work; a stop waits for it, a crash cancels it."""
        self._deferred_slots = trio.Semaphore(instance.max_deferred)
        async with trio.open_nursery() as nursery:
            self._deferred_nursery = nursery
            exit_ = await self._serve(instance)
            if exit_.kind is not ExitKind.NORMAL:
                nursery.cancel_scope.cancel(reason=f"{self.path} {exit_.reason}")
        self._deferred_nursery = None
        return exit_

    async def _start_deferred(self, envelope: Envelope, deferred: Deferred) -> None:
        slots, nursery = self._deferred_slots, self._deferred_nursery
        assert slots is not None and nursery is not None
        try:
            slots.acquire_nowait()
        except trio.WouldBlock:
            await slots.acquire()  # max_deferred in flight: the mailbox waits
        if envelope.state is not State.RUNNING:
            slots.release()  # its caller gave up meanwhile: the work never starts
            return
        self._deferred.add(envelope)
        nursery.start_soon(self._run_deferred, envelope, deferred, slots)

    async def _run_deferred(
        self, envelope: Envelope, deferred: Deferred, slots: trio.Semaphore
    ) -> None:
        try:
            with trio.CancelScope() as envelope.scope:
                result = await deferred.fn(*deferred.args)
                self._answer(envelope, result)
        except trio.Cancelled:
            raise
        except BaseException as exc:
            if _must_propagate(exc):
                raise
            await self._cancellation_wins(exc)
            err = self._ran(normalize(exc))
            reason = self.supervision.cancel_reason()
            if reason is not None:
                err = ActorError.from_code(
                    Code.CANCELLED, reason, cause=exc, actor=self.path, delivered=True
                )
            envelope.resolve(Error(err))  # fails that caller only; the actor goes on
        finally:
            if envelope.state is not State.RUNNING:
                # Answered or abandoned. One still RUNNING was cancelled with the
                # incarnation: _end_incarnation answers it.
                self._deferred.discard(envelope)
            slots.release()

    def _ran(self, err: ActorError) -> ActorError:
        """``err`` as the caller of a message that ran sees it: ``delivered=True``, our path
        as ``actor`` if it has none. An error carrying ``delivered=False`` describes a
        nested call the handler made: it is wrapped (a copy, the original as its cause)."""
        if err.actor is None:
            err.actor = self.path
        if err.delivered is None:
            err.delivered = True
        elif err.delivered is False:
            nested = err
            err = attrs.evolve(nested, delivered=True)
            err.__cause__ = nested
        return err

    def _failed_value(self, envelope: Envelope, failure: Failure) -> None:
        err = self._ran(failure.to_error())
        if envelope.is_call:
            envelope.resolve(Error(err))
        else:
            envelope.state = State.DONE
            _log.warning("actor.cast_failed", actor=self.path, error=err)

    async def _cleanup(self, instance: Actor, hook: str, arg: Any) -> None:
        if not overrides(instance, hook):
            return
        with trio.move_on_after(self.cleanup_budget, shield=True) as scope:
            try:
                await getattr(instance, hook)(arg)
            except trio.Cancelled:
                raise
            except BaseException as exc:
                if _must_propagate(exc):
                    raise
                # The instance is going away regardless; the failure is logged, not lost.
                _log.error("actor.cleanup_failed", actor=self.path, hook=hook, error=normalize(exc))
        if scope.cancelled_caught:
            _log.warning("actor.cleanup_timeout", actor=self.path, hook=hook)

    def _end_incarnation(self, cancel: str | None) -> None:
        """However the incarnation ends, its in-flight callers get an answer: ``cancelled``
        with ``cancel`` (or the subtree's cancel reason), else ``outcome_unknown``."""
        envelope = self.current
        self.current = None
        unanswered = [e for e in self._deferred if e.state is State.RUNNING and e.is_call]
        self._deferred.clear()
        if envelope is not None and envelope.state is State.RUNNING and envelope.is_call:
            unanswered.append(envelope)
        for pending in unanswered:
            self._answer_unknown(pending, cancel)

    def _answer_unknown(self, envelope: Envelope, cancel: str | None) -> None:
        reason = cancel or self.supervision.cancel_reason()
        if reason is not None:
            err = ActorError.from_code(
                Code.CANCELLED, reason, cause=self._suppressed, actor=self.path, delivered=True
            )
        else:
            err = ActorError.from_code(
                Code.OUTCOME_UNKNOWN,
                f"{self.path} stopped while handling the request",
                actor=self.path,
                delivered=True,
            )
        envelope.resolve(Error(err))

    # --- stopping ----------------------------------------------------------------------

    def serving_here(self) -> bool:
        """Whether the current task is this actor's own: its incarnation's (``on_start``,
        handlers, cleanup hooks) or one of its deferred work's."""
        task = trio.lowlevel.current_task()
        if task is self._task:
            return True
        nursery = self._deferred_nursery
        return nursery is not None and task.parent_nursery is nursery

    def request_exit(self, reason: str) -> None:
        """End the current incarnation after its in-flight message (the mailbox stays open)."""
        self._exit_requested = True
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
        if self._kill_reason is None:
            self._kill_reason = reason
        if self._scope is not None:
            self._scope.cancel(reason=reason)

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
        dead_letters = self.runtime.dead_letters
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
        self.runtime.cell_finished(self)
        if self._stopped is not None:
            self._stopped.set()
        if enabled(_DEBUG):
            _log.debug(EventName.ACTOR_STOPPED, actor=self.path, reason=reason)

    def revive(self) -> None:
        """Open a slot closed for good again (``restart_child`` after ``terminate_child``):
        the same ref and name, an empty mailbox. ``name_taken`` if the name was taken
        meanwhile; ``actor_stopped`` if the runtime is closing."""
        self.runtime.revive_cell(self)
        self.state = CellState.STARTING
        self.accepting = True
        self._stopped = None

    def reopen(self) -> None:
        """Prepare a fresh start: accept messages again after :meth:`stop_accepting` (a
        restart decided on) and forget the previous incarnation's stop or kill request."""
        if self.state is not CellState.STOPPED:
            self.accepting = True
        self._exit_requested = False
        self.stop_reason = None
        self._kill_reason = None

    async def wait_stopped(self) -> None:
        if self.state is CellState.STOPPED:
            await trio.lowlevel.checkpoint()
            return
        if self._stopped is None:
            self._stopped = trio.Event()
        await self._stopped.wait()


def _must_propagate(exc: BaseException) -> bool:
    """Whether ``exc`` passes through an actor untouched: ``trio.Cancelled``,
    ``KeyboardInterrupt``, ``SystemExit``, a group holding either of the latter, or a
    group made only of cancellations. Anything else is the actor's own failure."""
    if isinstance(exc, trio.Cancelled | KeyboardInterrupt | SystemExit):
        return True
    if isinstance(exc, BaseExceptionGroup):
        exits, _ = exc.split((KeyboardInterrupt, SystemExit))
        return exits is not None or exc.split(trio.Cancelled)[1] is None
    return False
