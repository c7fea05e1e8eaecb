"""One incarnation of an actor slot: a fresh instance started, served, and ended.

An :class:`Incarnation` lives for one :meth:`actors.cell.ActorCell.run_incarnation`:

1. In its own cancel scope (what a kill cancels — a kill requested earlier cancels it at
   once, and the instance is never built), it takes an instance from the slot (built by
   the factory), runs ``on_start`` and reports the start (``task_status.started``). A
   raising factory or ``on_start`` is a *start failure*: the typed error is raised (a
   foreign exception classified, ``actor.start_failed`` logged).
2. It serves the mailbox one message at a time until a stop is requested (``NORMAL``
   exit, after the in-flight message) or a handler raises and the supervision does not
   resume (``CRASHED``). Deferred replies run in a nursery of their own
   (:mod:`actors.deferred`). After ``_YIELD_EVERY`` (64) messages served back to back
   it yields once, so a busy actor never starves its neighbours.
3. However it ends, the calls still in flight are answered first (``cancelled`` under a
   cancel, else ``outcome_unknown``), then the cleanup hook runs (:mod:`actors.cleanup`).
   A handler that returns while a cancel other than a kill covers the task (it ran
   shielded, or swallowed ``trio.Cancelled``) does not answer its caller: the call is
   still in flight, and answered ``cancelled``.

Cancellation wins (see :mod:`actors.cell`): a failure that escapes a handler, ``on_start``
or deferred work while a cancel is in effect is logged as ``error.suppressed`` and
reported as ``cancelled`` with that reason; the supervision is not asked. A kill ends
the incarnation with a ``CANCELLED`` exit (``actor_stopped`` raised if it had not started
yet); a cancel from an enclosing scope propagates as ``trio.Cancelled`` once it was noted
(``note_cancel``) and ``on_stop("cancelled: <reason>")`` ran.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

import trio
from outcome import Error

from actors.actor import Actor, ActorRef, CellState, Deferred, overrides
from actors.cleanup import clean_up_after, run_cleanup_hook
from actors.deferred import DeferredWork
from actors.errors import ActorError, Code, current_cancel_reason, normalize
from actors.events import ActorStarted, ActorStartFailed, ErrorSuppressed
from actors.exits import AfterCrash, Exit, ExitKind, must_propagate
from actors.mailbox import Envelope, Mailbox, State
from actors.observe import emit, enabled
from actors.replies import answer, answer_unfinished, cancelled_after_running, ran

_YIELD_EVERY: Final = 64  # messages served back to back before a fairness checkpoint
_DEBUG: Final = logging.DEBUG


class IncarnationSlot(Protocol):
    """What an incarnation needs of its slot (:class:`~actors.cell.ActorCell`)."""

    @property
    def path(self) -> str: ...

    @property
    def ref(self) -> ActorRef: ...

    @property
    def mailbox(self) -> Mailbox: ...

    @property
    def cleanup_budget(self) -> float: ...

    @property
    def restarts(self) -> int: ...

    #: Written by the incarnation: ``starting`` / ``restarting`` until ``on_start``
    #: returned, then ``running``.
    state: CellState

    @property
    def exit_requested(self) -> bool:
        """A stop was requested: end after the in-flight message (read between messages)."""

    @property
    def stop_reason(self) -> str | None:
        """The reason of the first stop requested (the ``NORMAL`` exit's reason)."""

    @property
    def kill_reason(self) -> str | None:
        """The reason of a kill requested before the incarnation's scope was open."""

    def take_instance(self) -> Actor:
        """The instance to start: one built ahead if any, else a fresh one (raising the
        typed start failure if the factory does)."""

    def cancel_reason(self) -> str | None:
        """The reason of a cancel in effect for the slot's subtree, else ``None``."""

    def note_cancel(self, reason: str) -> str:
        """Note a cancel from a scope around the subtree; the reason in effect."""

    def after_crash(self, error: ActorError) -> AfterCrash:
        """What the supervision decides after a handler raised ``error``."""


def start_failed(exc: BaseException, path: str) -> ActorError:
    """``exc`` (from a factory or ``on_start``) as the typed start failure, logged."""
    err = normalize(exc)
    if err.actor is None:
        err.actor = path
    emit(ActorStartFailed(actor=path, error=err))
    return err


class Incarnation:
    """One instance's life in a slot; run it once with :meth:`run`, in the slot's task."""

    __slots__ = ("_deferred", "_scope", "_slot", "_suppressed", "_task", "current", "path")

    def __init__(self, slot: IncarnationSlot) -> None:
        self._slot = slot
        self.path = slot.path
        self._task = trio.lowlevel.current_task()  # kept until the cleanup hook has run
        self._scope: trio.CancelScope | None = None  # open while starting and serving
        #: The message being handled (or waiting for a deferred slot), if any.
        self.current: Envelope | None = None
        # The failure a cancel superseded: the cause of the ``cancelled`` in-flight callers get.
        self._suppressed: BaseException | None = None
        # Deferred calls (actors with max_deferred > 0), while serving.
        self._deferred: DeferredWork | None = None

    def runs(self, task: trio.lowlevel.Task) -> bool:
        """Whether ``task`` is this incarnation's own (``on_start``, handlers, cleanup
        hooks) or one of its deferred work's."""
        if task is self._task:
            return True
        deferred = self._deferred
        return deferred is not None and deferred.runs(task)

    def kill(self, reason: str) -> None:
        """Cancel the start or the serving now (a no-op once the cleanup hook runs)."""
        if self._scope is not None:
            self._scope.cancel(reason=reason)

    def cancel_reason(self) -> str | None:
        return self._slot.cancel_reason()

    async def run(self, task_status: trio.TaskStatus[ActorRef]) -> Exit:
        """Start, serve, answer the in-flight callers, clean up (the module docstring)."""
        slot = self._slot
        instance: Actor | None = None
        budget, path = slot.cleanup_budget, self.path
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                if slot.kill_reason is not None:
                    scope.cancel(reason=slot.kill_reason)
                # Decided before a cancel but run after it: cancelled means not started.
                await trio.lowlevel.checkpoint_if_cancelled()
                instance = await self._start()
                task_status.started(slot.ref)
                if instance.max_deferred:
                    exit_ = await self._serve_with_deferred(instance)
                else:
                    exit_ = await self._serve(instance)
                self._scope = None
                self._end(None)  # work a crash cancelled: outcome_unknown
                await clean_up_after(instance, exit_, budget=budget, path=path)
                return exit_
        except BaseException as exc:
            self._scope = None
            reason = await self._cancelled_by(exc)
            self._end(reason)
            if reason is not None and instance is not None:
                cancelled = f"cancelled: {reason}"
                await run_cleanup_hook(instance, "on_stop", cancelled, budget=budget, path=path)
            raise
        # Only our own scope was cancelled: a kill (stop timeout, brutal shutdown).
        self._scope = None
        reason = slot.kill_reason or slot.stop_reason or "killed"
        self._end(None)
        if instance is None:
            raise ActorError.from_code(
                Code.ACTOR_STOPPED,
                f"{path} was stopped while starting",
                actor=path,
                delivered=False,
            )
        await run_cleanup_hook(instance, "on_stop", reason, budget=budget, path=path)
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
        return self._slot.note_cancel(trio_reason)

    async def _start(self) -> Actor:
        slot = self._slot
        slot.state = CellState.STARTING if slot.restarts == 0 else CellState.RESTARTING
        instance = slot.take_instance()
        if overrides(instance, "on_start"):
            try:
                await instance.on_start()
            except BaseException as exc:
                if must_propagate(exc):
                    raise
                await self.cancellation_wins(exc)
                error = start_failed(exc, self.path)
                if error is exc:  # already typed: raised as it is (never its own cause)
                    raise
                raise error from exc
        slot.state = CellState.RUNNING
        if enabled(_DEBUG):
            emit(ActorStarted(actor=self.path, restarts=slot.restarts))
        return instance

    async def cancellation_wins(self, exc: BaseException) -> None:
        """If a cancel covers this task now, ``exc`` is superseded: log it as suppressed
        and raise ``trio.Cancelled`` in its place (``exc`` stays its ``__context__`` and
        becomes the cause of the ``cancelled`` the in-flight callers get)."""
        try:
            await trio.lowlevel.checkpoint_if_cancelled()  # no schedule point if not
        except trio.Cancelled:
            self._suppressed = exc
            emit(ErrorSuppressed(actor=self.path, reason="cancelled", suppressed=normalize(exc)))
            raise

    # --- serving the mailbox -----------------------------------------------------------

    async def _serve_with_deferred(self, instance: Actor) -> Exit:
        """Serve with a nursery for deferred work; a stop waits for it, a crash cancels it."""
        async with trio.open_nursery() as nursery:
            self._deferred = DeferredWork(self, nursery, instance.max_deferred)
            exit_ = await self._serve(instance)
            if exit_.kind is not ExitKind.NORMAL:
                nursery.cancel_scope.cancel(reason=f"{self.path} {exit_.reason}")
        return exit_

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
        slot = self._slot
        mailbox = slot.mailbox
        handle = instance.handle
        path = self.path
        served = 0
        envelope = self.current  # a message handed over from the previous segment
        while True:
            if envelope is None:
                if slot.exit_requested:
                    return Exit(ExitKind.NORMAL, slot.stop_reason or "normal")
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
                    # The caller left (withdraw / time_out mark a running envelope
                    # ABANDONED as they cancel its scope, the only cancels of a segment,
                    # which has no deadline): drop the result, serve on afresh. Read
                    # here rather than ``segment.cancel_called``, a property that
                    # reads the clock on every call.
                    if envelope.state is State.ABANDONED:
                        return None
                else:
                    result = await handle(envelope.message)
            except trio.Cancelled:
                raise
            except BaseException as exc:
                envelope.scope = None
                if must_propagate(exc):
                    raise
                if segment is not None and segment.cancel_called:
                    # The caller asked for the cancel and has already left: its cancel wins.
                    suppressed = normalize(exc)
                    emit(
                        ErrorSuppressed(
                            actor=path, reason="caller cancelled", suppressed=suppressed
                        )
                    )
                    return None
                await self.cancellation_wins(exc)
                self.current = None
                exit_ = self._handler_failed(envelope, exc)
                if exit_ is None:
                    envelope = None
                    continue
                return exit_
            if type(result) is Deferred:
                # Still ``current`` while it waits for a free slot: a cancel answers it.
                deferred = self._deferred
                assert deferred is not None  # Actor.defer refuses without max_deferred
                await deferred.start(envelope, result)
                self.current = None
            else:
                try:
                    await trio.lowlevel.checkpoint_if_cancelled()  # no schedule point if not
                except trio.Cancelled:
                    self._returned_while_cancelled(envelope, result)
                    raise
                self.current = None
                answer(envelope, result, path)
            envelope = None
            served += 1
            if served >= _YIELD_EVERY:
                served = 0
                await trio.lowlevel.checkpoint()

    def _returned_while_cancelled(self, envelope: Envelope, result: object) -> None:
        """The handler returned although a cancel covers this task (it ran shielded, or
        swallowed ``trio.Cancelled``). A kill of ours lets the finished message keep its
        value; any other cancel — the subtree's (an abort) or a scope around the tree —
        wins: the message stays in flight and its caller gets ``cancelled`` with that
        cancel's reason as the incarnation unwinds (:meth:`_end`)."""
        scope = self._scope
        if scope is not None and scope.cancel_called:
            self.current = None
            answer(envelope, result, self.path)

    def _handler_failed(self, envelope: Envelope, exc: BaseException) -> Exit | None:
        """Classify what the handler raised; ``None`` to go on serving, else the exit.

        The caller of that message gets the error with ``delivered=True`` (it ran); an
        error that describes a *nested* call (``delivered=False``) is wrapped so that the
        nested call's verdict never leaks to this caller.
        """
        path = self.path
        err = ran(normalize(exc), path)
        cancel_reason = self._slot.cancel_reason()
        if cancel_reason is not None:
            # Cancellation wins: ``cancelled`` with the original exception as its cause
            # (``err``, its classification, goes to the ``error.suppressed`` event).
            cancelled = cancelled_after_running(cancel_reason, path, exc)
            if envelope.is_call:
                envelope.resolve(Error(cancelled))
            emit(ErrorSuppressed(actor=path, reason=cancel_reason, suppressed=err))
            return Exit(ExitKind.CANCELLED, cancel_reason, error=cancelled)
        if envelope.is_call:
            envelope.resolve(Error(err))
        # The supervision reports the crash, with the error, in its decision event.
        after = self._slot.after_crash(err)
        if after is AfterCrash.RESUME:
            return None
        return Exit(ExitKind.CRASHED, f"crashed:{err.code}", error=err, after=after)

    def _end(self, cancel: str | None) -> None:
        """However the incarnation ends, its in-flight callers get an answer: ``cancelled``
        with ``cancel`` (or the subtree's cancel reason), else ``outcome_unknown``."""
        envelope = self.current
        self.current = None
        deferred, self._deferred = self._deferred, None
        unanswered = [] if deferred is None else deferred.unanswered()
        if envelope is not None and envelope.state is State.RUNNING and envelope.is_call:
            unanswered.append(envelope)
        for pending in unanswered:
            reason = cancel or self._slot.cancel_reason()
            answer_unfinished(pending, self.path, reason, self._suppressed)
