"""The actor slot: one mailbox and one ref, served by instance after instance.

An :class:`ActorCell` outlives its instances. Each *incarnation* (:meth:`ActorCell.
run_incarnation`) builds a fresh instance, runs ``on_start``, serves the mailbox and ends
with an :class:`Exit`. Whoever runs the incarnations — the runtime's minimal rule or a
supervisor — decides what follows, through the :class:`Supervision` protocol:

* ``decide(cell, error)`` is asked, synchronously, when a handler raised: ``RESUME``
  keeps the instance (only that caller failed), ``RESTART`` ends the incarnation after
  ``on_restart(error)``, ``STOP`` ends it after ``on_stop("crashed:<code>")``;
* ``cancel_reason()`` tells whether a cancel was requested for an enclosing subtree
  (abort, run cancel, parent shutdown). Then **cancellation wins**: a failure escaping
  the handler is reported as ``cancelled`` with that reason (the failure kept as cause and
  logged as ``error.suppressed``), ``decide`` is never asked, and callers caught in flight
  get ``cancelled``, never ``call_timeout`` or ``outcome_unknown``.

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
from actors.errors import ActorError, Code, Failure, normalize
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

    def decide(self, cell: ActorCell, error: ActorError) -> AfterCrash: ...

    def cancel_reason(self) -> str | None: ...

    async def stop_child(self, cell: ActorCell, reason: str, timeout: float | None) -> None:
        """Stop ``cell`` for good (``ActorRef.stop``) and return once it is closed."""


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
        self._scope: trio.CancelScope | None = None
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
        """The timer's callback: fail a pending call with ``call_timeout``."""
        started = envelope.state is State.RUNNING
        if started:
            envelope.state = State.ABANDONED
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

        ``task_status.started`` is called once ``on_start`` returned. If ``on_start``
        raises, this raises the typed error (a foreign exception classified) — through
        ``nursery.start`` that is exactly what the starter sees. ``trio.Cancelled`` from an
        enclosing scope propagates after in-flight callers were answered.
        """
        self._exit_requested = False
        self.stop_reason = None
        exit_: Exit | None = None
        try:
            with trio.CancelScope() as self._scope:
                instance = await self._start_instance()
                task_status.started(self.ref)
                if instance.max_deferred:
                    exit_ = await self._serve_with_deferred(instance)
                else:
                    exit_ = await self._serve(instance)
                await self._after_exit(instance, exit_)
        finally:
            self._end_incarnation(exit_)
        if exit_ is None:
            # Our own scope was cancelled (a kill): the incarnation ends as cancelled.
            reason = self.stop_reason or "killed"
            exit_ = Exit(ExitKind.CANCELLED, reason)
        return exit_

    async def _start_instance(self) -> Actor:
        self.state = CellState.STARTING if self.restarts == 0 else CellState.RESTARTING
        instance = self.factory()
        instance.ref = self.ref
        if overrides(instance, "on_start"):
            try:
                await instance.on_start()
            except Exception as exc:
                err = normalize(exc)
                if err.actor is None:
                    err.actor = self.path
                _log.warning(EventName.ACTOR_START_FAILED, actor=self.path, error=err)
                raise err from exc
        self.state = CellState.RUNNING
        if enabled(_DEBUG):
            _log.debug(EventName.ACTOR_STARTED, actor=self.path, restarts=self.restarts)
        return instance

    async def _serve(self, instance: Actor) -> Exit:
        """Handle messages until an exit is requested or the handler crashes."""
        mailbox = self.mailbox
        handle = instance.handle
        served = 0
        while True:
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
                    with trio.CancelScope() as envelope.scope:
                        result = await handle(envelope.message)
                    if envelope.scope.cancelled_caught:
                        self.current = None
                        continue
                else:
                    result = await handle(envelope.message)
            except trio.Cancelled:
                raise
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - classified below
                self.current = None
                exit_ = self._handler_failed(envelope, exc)
                if exit_ is None:
                    continue
                return exit_
            self.current = None
            if type(result) is Deferred:
                await self._start_deferred(envelope, result)
            else:
                self._answer(envelope, result)
            served += 1
            if served >= _YIELD_EVERY:
                served = 0
                await trio.lowlevel.checkpoint()

    def _handler_failed(self, envelope: Envelope, exc: BaseException) -> Exit | None:
        """Classify what the handler raised; ``None`` to go on serving, else the exit.

        Re-raises what must propagate: a group made only of cancellations, or one holding
        ``KeyboardInterrupt`` / ``SystemExit``.
        """
        if isinstance(exc, BaseExceptionGroup):
            exits, _ = exc.split((KeyboardInterrupt, SystemExit))
            if exits is not None or exc.split(trio.Cancelled)[1] is None:
                raise exc
        err = normalize(exc)
        if err.actor is None:
            err.actor = self.path
        scope = envelope.scope
        if scope is not None and scope.cancel_called:
            # The caller asked for the cancel and has already left: its cancel wins.
            _log.info(
                EventName.SUPPRESSED, actor=self.path, reason="caller cancelled", suppressed=err
            )
            return None
        cancel_reason = self.supervision.cancel_reason()
        if cancel_reason is not None:
            return self._cancelled_exit(envelope, exc, err, cancel_reason)
        if envelope.is_call:
            envelope.resolve(Error(err))
        # The supervision reports the crash, with the error, in its decision event.
        after = self.supervision.decide(self, err)
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
        if exit_.kind is ExitKind.NORMAL:
            await self._cleanup(instance, "on_stop", exit_.reason)
        elif exit_.kind is ExitKind.CRASHED and exit_.error is not None:
            if exit_.after is AfterCrash.RESTART:
                await self._cleanup(instance, "on_restart", exit_.error)
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
        self._deferred.add(envelope)
        nursery.start_soon(self._run_deferred, envelope, deferred, slots)

    async def _run_deferred(
        self, envelope: Envelope, deferred: Deferred, slots: trio.Semaphore
    ) -> None:
        try:
            with trio.CancelScope() as envelope.scope:
                result = await deferred.fn(*deferred.args)
                self._answer(envelope, result)
        except (Exception, BaseExceptionGroup) as exc:
            if isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None:
                raise
            err = normalize(exc)
            if err.actor is None:
                err.actor = self.path
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

    def _failed_value(self, envelope: Envelope, failure: Failure) -> None:
        err = failure.to_error()
        if err.actor is None:
            err.actor = self.path
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
            except Exception as exc:  # noqa: BLE001 - logged with its classification
                # The instance is going away regardless; the failure is logged, not lost.
                _log.error("actor.cleanup_failed", actor=self.path, hook=hook, error=normalize(exc))
        if scope.cancelled_caught:
            _log.warning("actor.cleanup_timeout", actor=self.path, hook=hook)

    def _end_incarnation(self, exit_: Exit | None) -> None:
        """However the incarnation ends, its in-flight callers get an answer."""
        self._scope = None
        envelope = self.current
        self.current = None
        unanswered = [e for e in self._deferred if e.state is State.RUNNING and e.is_call]
        self._deferred.clear()
        if envelope is not None and envelope.state is State.RUNNING and envelope.is_call:
            unanswered.append(envelope)
        for pending in unanswered:
            self._answer_unknown(pending)

    def _answer_unknown(self, envelope: Envelope) -> None:
        reason = self.supervision.cancel_reason()
        if reason is not None:
            err = ActorError.from_code(Code.CANCELLED, reason, actor=self.path, delivered=True)
        else:
            err = ActorError.from_code(
                Code.OUTCOME_UNKNOWN,
                f"{self.path} stopped while handling the request",
                actor=self.path,
                delivered=True,
            )
        envelope.resolve(Error(err))

    # --- stopping ----------------------------------------------------------------------

    def request_exit(self, reason: str) -> None:
        """End the current incarnation after its in-flight message (the mailbox stays open)."""
        self._exit_requested = True
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.state is CellState.RUNNING:
            self.state = CellState.STOPPING
        self.mailbox.wake()

    def kill(self, reason: str) -> None:
        """Cancel the current incarnation now; its in-flight caller learns outcome_unknown."""
        self.request_exit(reason)
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

    def reopen(self) -> None:
        """Accept messages again after :meth:`stop_accepting` (a restart decided on)."""
        if self.state is not CellState.STOPPED:
            self.accepting = True

    async def wait_stopped(self) -> None:
        if self.state is CellState.STOPPED:
            await trio.lowlevel.checkpoint()
            return
        if self._stopped is None:
            self._stopped = trio.Event()
        await self._stopped.wait()
