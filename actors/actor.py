"""Actors: a trio task with a bounded mailbox, addressed by an :class:`ActorRef`.

Lifecycle of one actor *slot* (:class:`ActorCell`)::

    starting ──on_start ok──▶ running ──stop()──▶ stopping ──▶ stopped
        │                       │  ▲
        │ on_start raised       │  │ fresh instance, on_start
        ▼                       ▼  │
     stopped (start raises)   crashed ──restart allowed──┘
                                │
                                └──not allowed──▶ on_stop(reason) ──▶ stopped

* ``on_start`` runs before the actor counts as started: :meth:`Runtime.spawn` returns only
  after it did (``nursery.start``). If it raises, spawn raises that typed error (a foreign
  exception is classified first) and nothing else.
* ``handle(message)`` serves calls and casts one at a time. Its return value is a call's
  reply. A returned :class:`~actors.errors.Failure` fails only that caller (errors as
  values; the actor goes on). A *raised* exception crashes the instance: the caller of that
  message gets the classified error at once, queued messages stay in the mailbox, and the
  slot's restart rule decides whether a fresh instance (constructed anew: state is plain
  attributes) carries on with the same mailbox and the same ref.
* ``on_restart(error)`` runs on the crashed instance before it is replaced; ``on_stop(reason)``
  runs on graceful stop, or after a crash that is not restarted. Both run shielded, within
  ``cleanup_budget`` seconds; an error in them is logged (``actor.cleanup_failed``), never
  raised into the runtime.
* On stop the in-flight message (if any) finishes, then: every queued call fails with
  ``actor_stopped`` (``delivered=False``) and every queued cast becomes a dead letter. If
  the stop has to cancel the handler (shutdown timeout), its caller gets
  ``outcome_unknown`` (``delivered=True``).

Call outcomes (all :class:`~actors.errors.ActorError`): the handler's own typed error as
raised; ``call_timeout`` (``delivered`` tells whether it had started — a call that timed
out while queued is removed and never executed, a late reply is dropped without disturbing
the actor); ``actor_stopped`` at once for a stopped actor; ``not_delivered`` when evicted
by a ``drop_oldest`` mailbox. If the *caller's* scope is cancelled the caller sees
``trio.Cancelled``; the handler is cancelled too only with ``propagate_cancel=True``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import trio
from outcome import Error, Value

from actors.errors import ActorError, Code, Failure, normalize
from actors.mailbox import Envelope, Mailbox, State
from actors.observe import EventName, enabled, get_logger

if TYPE_CHECKING:
    from actors.runtime import Runtime

DEFAULT_CALL_TIMEOUT: Final = 5.0
DEFAULT_CLEANUP_BUDGET: Final = 5.0
DEFAULT_SHUTDOWN_TIMEOUT: Final = 5.0
_YIELD_EVERY: Final = 64  # messages served back to back before a fairness checkpoint

_log = get_logger("actors.actor")
_DEBUG = logging.DEBUG


class Actor:
    """Base class for actors. Override :meth:`handle` and any lifecycle hook you need.

    ``self.ref`` is set before :meth:`on_start` runs. Keep state in plain attributes: a
    restart builds a fresh instance with the factory given to ``spawn``.
    """

    ref: ActorRef

    async def on_start(self) -> None:
        """Acquire resources. The actor counts as started only after this returns."""

    async def handle(self, message: Any) -> Any:
        """Serve one message; the return value is the reply to a call."""
        raise NotImplementedError(f"{type(self).__name__}.handle() is not implemented")

    async def on_stop(self, reason: str) -> None:
        """Release resources on a graceful stop (or a crash that is not restarted)."""

    async def on_restart(self, error: ActorError) -> None:
        """Release resources of this crashed instance before a fresh one replaces it."""


class CellState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    STOPPING = "stopping"
    STOPPED = "stopped"


def _overrides(instance: Actor, name: str) -> bool:
    return getattr(type(instance), name) is not getattr(Actor, name)


class ActorRef:
    """The address of an actor slot. Valid across restarts; cheap to copy and compare."""

    __slots__ = ("_cell",)

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell

    @property
    def name(self) -> str:
        return self._cell.name

    @property
    def path(self) -> str:
        return self._cell.path

    @property
    def state(self) -> CellState:
        return self._cell.state

    @property
    def restarts(self) -> int:
        return self._cell.restarts

    def __repr__(self) -> str:
        return f"<ActorRef {self._cell.path} {self._cell.state}>"

    async def call(
        self,
        message: Any,
        *,
        timeout: float | None = DEFAULT_CALL_TIMEOUT,
        propagate_cancel: bool = False,
    ) -> Any:
        """Send ``message`` and wait for the reply (see the module docstring for outcomes).

        ``timeout`` is in seconds (``None``: wait as long as the actor lives); it covers
        waiting for mailbox room, queueing and handling.
        """
        cell = self._cell
        if not cell.accepting:
            raise cell.stopped_error()
        envelope = Envelope(message, True, trio.lowlevel.current_task(), propagate_cancel, cell)
        evicted = cell.mailbox.put(envelope)
        if evicted is not None:
            cell.evicted(evicted)
        if timeout is not None:
            cell.runtime.timer.add(envelope, trio.current_time() + timeout)

        def abort(_: object) -> trio.lowlevel.Abort:
            cell.caller_gave_up(envelope)
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    async def cast(self, message: Any) -> None:
        """Send ``message`` without waiting for it to be handled.

        With a full backpressure mailbox this waits for room (FIFO). A cast to a stopped
        actor becomes a dead letter. A sender cancelled while waiting for room withdraws the
        message (it is never delivered, and the sender sees ``Cancelled``).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        cell = self._cell
        if not cell.accepting:
            cell.runtime.dead_letters.record(cell.path, message, "actor_stopped")
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        envelope = Envelope(message, False, None, False, cell)
        mailbox = cell.mailbox
        evicted = mailbox.put(envelope)
        if evicted is not None:
            cell.evicted(evicted)
        if envelope.state is not State.WAITING_ROOM:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        envelope.caller = trio.lowlevel.current_task()
        envelope.sender_parked = True

        def abort(_: object) -> trio.lowlevel.Abort:
            mailbox.abandon(envelope)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def try_cast(self, message: Any) -> None:
        """Queue ``message`` now or raise ``mailbox_full`` (a ``drop_oldest`` mailbox evicts)."""
        cell = self._cell
        if not cell.accepting:
            cell.runtime.dead_letters.record(cell.path, message, "actor_stopped")
            return
        mailbox = cell.mailbox
        if mailbox.full() and mailbox.overflow == "backpressure":
            raise ActorError.from_code(
                Code.MAILBOX_FULL,
                f"mailbox of {cell.path} is full ({mailbox.capacity})",
                actor=cell.path,
                delivered=False,
            )
        evicted = mailbox.put(Envelope(message, False, None, False, cell))
        if evicted is not None:
            cell.evicted(evicted)

    async def stop(
        self, reason: str = "normal", *, timeout: float | None = DEFAULT_SHUTDOWN_TIMEOUT
    ) -> None:
        """Stop gracefully and wait until stopped; cancel the actor after ``timeout`` s."""
        await self._cell.stop(reason, timeout=timeout)


class ActorCell:
    """One actor slot: its mailbox, ref and the task that runs instance after instance."""

    def __init__(
        self,
        runtime: Runtime,
        factory: Callable[[], Actor],
        *,
        name: str,
        path: str,
        mailbox: Mailbox,
        max_restarts: int = 0,
        cleanup_budget: float = DEFAULT_CLEANUP_BUDGET,
    ) -> None:
        self.runtime = runtime
        self.factory = factory
        self.name = name
        self.path = path
        self.mailbox = mailbox
        self.max_restarts = max_restarts
        self.cleanup_budget = cleanup_budget
        self.ref = ActorRef(self)
        self.state = CellState.STARTING
        self.accepting = True
        self.restarts = 0
        self.stop_reason: str | None = None
        self.current: Envelope | None = None
        self._scope: trio.CancelScope | None = None
        self._stopped: trio.Event | None = None

    # --- errors handed to callers -------------------------------------------------------

    def stopped_error(self) -> ActorError:
        return ActorError.from_code(
            Code.ACTOR_STOPPED, f"{self.path} is stopped", actor=self.path, delivered=False
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

    # --- the task ---------------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[ActorRef] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The slot's task: start, serve, restart on crash while allowed, stop. Never raises
        into the runtime, except the start failure ``spawn`` reports."""
        reason = "normal"
        try:
            with trio.CancelScope() as self._scope:
                reason = await self._lifecycle(task_status)
        finally:
            self._finish(reason)

    async def _lifecycle(self, task_status: trio.TaskStatus[ActorRef]) -> str:
        instance = await self._start_instance(first=True)
        task_status.started(self.ref)
        while True:
            crash = await self._serve(instance)
            if crash is None:
                reason = self.stop_reason or "normal"
                await self._cleanup(instance, "on_stop", reason)
                return reason
            if self.restarts >= self.max_restarts or not self.accepting:
                reason = f"crashed:{crash.code}"
                await self._cleanup(instance, "on_stop", reason)
                return reason
            await self._cleanup(instance, "on_restart", crash)
            replacement = await self._restart()
            if replacement is None:
                return "start_failed"
            instance = replacement

    async def _restart(self) -> Actor | None:
        """Fresh instances until one starts or the restart allowance is used up."""
        while self.restarts < self.max_restarts:
            self.restarts += 1
            self.state = CellState.RESTARTING
            if enabled(logging.INFO):
                _log.info(EventName.ACTOR_RESTARTING, actor=self.path, restarts=self.restarts)
            try:
                return await self._start_instance(first=False)
            except ActorError as err:
                # A start that raises during a restart counts as a failure (no endless loop).
                _log.warning(EventName.ACTOR_START_FAILED, actor=self.path, error=err)
        return None

    async def _start_instance(self, *, first: bool) -> Actor:
        instance = self.factory()
        instance.ref = self.ref
        if _overrides(instance, "on_start"):
            try:
                await instance.on_start()
            except Exception as exc:
                err = normalize(exc)
                err.actor = err.actor or self.path
                if first:
                    _log.warning(EventName.ACTOR_START_FAILED, actor=self.path, error=err)
                raise err from exc
        self.state = CellState.RUNNING
        if enabled(_DEBUG):
            _log.debug(EventName.ACTOR_STARTED, actor=self.path, restarts=self.restarts)
        return instance

    async def _serve(self, instance: Actor) -> ActorError | None:
        """Handle messages until a stop is requested (``None``) or the handler raises."""
        mailbox = self.mailbox
        handle = instance.handle
        served = 0
        while True:
            if not self.accepting:
                return None
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
                err = self._handler_failed(envelope, exc)
                if err is None:
                    continue
                if self._scope is not None and self._scope.cancel_called:
                    # The slot itself is being cancelled: that wins over the failure.
                    _log.info(EventName.SUPPRESSED, actor=self.path, suppressed=err)
                    await trio.lowlevel.checkpoint()  # raises Cancelled
                self._crashed(err)
                return err
            self.current = None
            if isinstance(result, Failure):
                self._failed_value(envelope, result)
            elif envelope.is_call:
                if not envelope.resolve(Value(result)) and enabled(_DEBUG):
                    _log.debug(EventName.CALL_LATE_REPLY, actor=self.path)
            else:
                envelope.state = State.DONE
            served += 1
            if served >= _YIELD_EVERY:
                served = 0
                await trio.lowlevel.checkpoint()

    def _handler_failed(self, envelope: Envelope, exc: BaseException) -> ActorError | None:
        """Classify what the handler raised: ``None`` to go on, else the crash error.

        Re-raises what must propagate: a group made only of cancellations, or one holding
        ``KeyboardInterrupt`` / ``SystemExit``.
        """
        if isinstance(exc, BaseExceptionGroup):
            exits, _ = exc.split((KeyboardInterrupt, SystemExit))
            only_cancelled = exc.split(trio.Cancelled)[1] is None
            if exits is not None or only_cancelled:
                raise exc
        scope = envelope.scope
        if scope is not None and scope.cancel_called:
            # Cancellation wins: the caller asked for the cancel and has already left.
            _log.info(
                EventName.SUPPRESSED,
                actor=self.path,
                reason="caller cancelled",
                suppressed=normalize(exc),
            )
            return None
        err = normalize(exc)
        if err.actor is None:
            err.actor = self.path
        if envelope.is_call:
            envelope.resolve(Error(err))
        return err

    def _failed_value(self, envelope: Envelope, failure: Failure) -> None:
        err = failure.to_error()
        if err.actor is None:
            err.actor = self.path
        if envelope.is_call:
            envelope.resolve(Error(err))
        else:
            envelope.state = State.DONE
            _log.warning("actor.cast_failed", actor=self.path, error=err)

    def _crashed(self, err: ActorError) -> None:
        _log.warning(EventName.ACTOR_CRASHED, actor=self.path, error=err, restarts=self.restarts)

    async def _cleanup(self, instance: Actor, hook: str, arg: Any) -> None:
        if not _overrides(instance, hook):
            return
        with trio.move_on_after(self.cleanup_budget, shield=True) as scope:
            try:
                await getattr(instance, hook)(arg)
            except Exception as exc:  # noqa: BLE001 - cleanup failure: logged, the stop goes on
                _log.error("actor.cleanup_failed", actor=self.path, hook=hook, error=normalize(exc))
        if scope.cancelled_caught:
            _log.warning("actor.cleanup_timeout", actor=self.path, hook=hook)

    def _finish(self, reason: str) -> None:
        """Runs however the task ends: nothing queued or in flight is left unanswered."""
        self.accepting = False
        self.state = CellState.STOPPED
        envelope = self.current
        if envelope is not None and envelope.state is State.RUNNING and envelope.is_call:
            envelope.resolve(
                Error(
                    ActorError.from_code(
                        Code.OUTCOME_UNKNOWN,
                        f"{self.path} stopped while handling the request",
                        actor=self.path,
                        delivered=True,
                    )
                )
            )
        self.current = None
        self._flush()
        self.runtime.cell_finished(self)
        if self._stopped is not None:
            self._stopped.set()
        if enabled(_DEBUG):
            _log.debug(EventName.ACTOR_STOPPED, actor=self.path, reason=reason)

    def _flush(self) -> None:
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

    # --- stopping ---------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """Ask for a graceful stop: finish the in-flight message, then stop. Idempotent."""
        if not self.accepting:
            return
        self.accepting = False
        self.stop_reason = reason
        if self.state is not CellState.STOPPED:
            self.state = CellState.STOPPING
        self.mailbox.wake()

    def kill(self, reason: str) -> None:
        """Cancel the slot's task now (``brutal``); its in-flight caller gets outcome_unknown."""
        self.request_stop(reason)
        if self._scope is not None:
            self._scope.cancel(reason=reason)

    async def wait_stopped(self) -> None:
        if self.state is CellState.STOPPED:
            await trio.lowlevel.checkpoint()
            return
        if self._stopped is None:
            self._stopped = trio.Event()
        await self._stopped.wait()

    async def stop(self, reason: str, *, timeout: float | None) -> None:
        self.request_stop(reason)
        if timeout is None:
            await self.wait_stopped()
            return
        with trio.move_on_after(timeout):
            await self.wait_stopped()
        if self.state is not CellState.STOPPED:
            self.kill(f"shutdown:{self.name}")
            await self.wait_stopped()
