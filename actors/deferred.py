"""Calls an incarnation answers later (:meth:`actors.actor.Actor.defer`).

A handler that returns a :class:`~actors.actor.Deferred` frees the mailbox: ``fn(*args)``
runs as a task of the incarnation's deferred nursery while the actor takes its next
message, and its return value answers the call (:func:`~actors.replies.answer`).

* At most ``max_deferred`` run at once: the next one waits for a free slot, and the
  mailbox waits with it (that message stays the slot's ``current``, so a cancel answers
  it). A caller that gave up meanwhile is never started.
* Each runs in its own cancel scope (``envelope.scope``): a caller with
  ``propagate_cancel=True`` that gives up, or whose call times out, cancels it.
* A raised error (or a returned ``Failure``) fails that caller only; the actor goes on.
  While a cancel is in effect the caller gets ``cancelled`` instead, the error its cause
  (cancellation wins, as in a handler).
* A stop lets the work finish; a crash or a kill cancels the nursery, and the calls still
  running are answered by the slot (:meth:`DeferredWork.unanswered`) — also one whose
  work returned a value while cancelled (it ran shielded, or swallowed the cancel).
"""

from __future__ import annotations

from typing import Protocol

import trio
from outcome import Error

from actors.actor import Deferred
from actors.errors import normalize
from actors.exits import must_propagate
from actors.mailbox import Envelope, State
from actors.replies import answer, cancelled_after_running, ran


class DeferredOwner(Protocol):
    """What deferred work needs of the slot it answers for (an ``ActorCell``)."""

    @property
    def path(self) -> str: ...

    def cancel_reason(self) -> str | None:
        """The reason of a cancel in effect for the slot, else ``None``."""

    async def cancellation_wins(self, exc: BaseException) -> None:
        """Raise ``trio.Cancelled`` in place of ``exc`` if a cancel covers this task."""


class DeferredWork:
    """The deferred calls of one incarnation, run in ``nursery``, ``limit`` at most."""

    __slots__ = ("_in_flight", "_nursery", "_owner", "_slots")

    def __init__(self, owner: DeferredOwner, nursery: trio.Nursery, limit: int) -> None:
        self._owner = owner
        self._nursery = nursery
        self._slots = trio.Semaphore(limit)
        self._in_flight: set[Envelope] = set()

    def runs(self, task: trio.lowlevel.Task) -> bool:
        """Whether ``task`` is one of this incarnation's deferred work."""
        return task.parent_nursery is self._nursery

    async def start(self, envelope: Envelope, deferred: Deferred) -> None:
        """Start ``deferred`` for ``envelope`` once a slot is free (the caller waits)."""
        slots = self._slots
        try:
            slots.acquire_nowait()
        except trio.WouldBlock:
            await slots.acquire()  # max_deferred in flight: the mailbox waits
        if envelope.state is not State.RUNNING:
            slots.release()  # its caller gave up meanwhile: the work never starts
            return
        self._in_flight.add(envelope)
        self._nursery.start_soon(self._run, envelope, deferred)

    async def _run(self, envelope: Envelope, deferred: Deferred) -> None:
        owner = self._owner
        try:
            with trio.CancelScope() as envelope.scope:
                result = await deferred.fn(*deferred.args)
                # Returned although cancelled (shielded, or it swallowed the Cancelled):
                # unanswered, the call is left to the slot (``unanswered``), as if it had
                # obeyed. A caller that gave up is not answered at all.
                await trio.lowlevel.checkpoint_if_cancelled()  # no schedule point if not
                answer(envelope, result, owner.path)
        except trio.Cancelled:
            raise
        except BaseException as exc:
            if must_propagate(exc):
                raise
            await owner.cancellation_wins(exc)
            err = ran(normalize(exc), owner.path)
            reason = owner.cancel_reason()
            if reason is not None:
                err = cancelled_after_running(reason, owner.path, exc)
            envelope.resolve(Error(err))  # fails that caller only; the actor goes on
        finally:
            if envelope.state is not State.RUNNING:
                # Answered or abandoned. One still RUNNING was cancelled with the
                # incarnation: the slot answers it (``unanswered``).
                self._in_flight.discard(envelope)
            self._slots.release()

    def unanswered(self) -> list[Envelope]:
        """The calls still running, which the incarnation's end must answer; from then
        on none is tracked."""
        unanswered = [e for e in self._in_flight if e.state is State.RUNNING and e.is_call]
        self._in_flight.clear()
        return unanswered
