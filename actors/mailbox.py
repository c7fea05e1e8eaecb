"""Bounded mailboxes and the envelopes that travel through them.

A :class:`Mailbox` belongs to an actor's *slot* (its :class:`~actors.cell.ActorCell`),
not to the task running it, so queued messages survive a restart.

Semantics:

* FIFO. At most ``capacity`` live envelopes are queued; the rest wait in a FIFO line for
  room (backpressure, the default) — a call waits there while its caller is parked for the
  reply anyway, a ``cast`` sender is parked until its message is admitted.
* ``overflow="drop_oldest"``: a full mailbox evicts its oldest envelope instead; an evicted
  cast becomes a dead letter, an evicted call fails with ``not_delivered``.
* An envelope abandoned by its caller (timeout, cancellation) is marked and skipped when
  it reaches the head — it is never executed — and frees its room at once.
* Only one task receives: the actor. When the mailbox is empty it parks with
  ``wait_task_rescheduled`` and the next :meth:`Mailbox.put` reschedules it directly.

This module is the hot path: plain classes with ``__slots__``, no logging, no attrs.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Literal

import trio
from outcome import Error, Value

from actors.codes import Code
from actors.error_types import ActorError

Overflow = Literal["backpressure", "drop_oldest"]
DEFAULT_CAPACITY: Final = 1000


class State(enum.IntEnum):
    """Where an envelope is in its life."""

    WAITING_ROOM = 0  # in the overflow line, not yet in the mailbox
    QUEUED = 1  # in the mailbox, not yet taken
    RUNNING = 2  # the handler is running it
    DONE = 3  # replied (or, for a cast, handled)
    ABANDONED = 4  # its caller gave up or it was flushed; never executed if not yet running


class Envelope:
    """One message and, for a call, the parked caller waiting for its reply."""

    __slots__ = (
        "caller",
        "deadline",
        "is_call",
        "message",
        "owner",
        "propagate_cancel",
        "scope",
        "sender_parked",
        "state",
    )

    def __init__(
        self,
        message: Any,
        is_call: bool,
        caller: trio.lowlevel.Task | None,
        propagate_cancel: bool = False,
        owner: Any = None,
    ) -> None:
        self.message = message
        self.owner = owner  # the actor cell, for the timer and abort callbacks
        self.is_call = is_call
        self.caller = caller
        self.propagate_cancel = propagate_cancel
        self.state = State.QUEUED
        self.deadline = float("inf")
        self.scope: trio.CancelScope | None = None
        self.sender_parked = False  # a cast sender parked in the overflow line

    def resolve(self, result: Value[Any] | Error) -> bool:
        """Hand ``result`` to the parked caller if it still waits; ``False`` if it gave up."""
        if self.state is State.ABANDONED or self.state is State.DONE:
            return False
        self.state = State.DONE
        if self.caller is not None:
            trio.lowlevel.reschedule(self.caller, result)
        return True


class Mailbox:
    """A bounded FIFO of :class:`Envelope`\\ s with one receiving task."""

    __slots__ = ("_live", "_queue", "_receiver", "_waiting", "capacity", "overflow")

    def __init__(self, capacity: int = DEFAULT_CAPACITY, overflow: Overflow = "backpressure"):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                f"mailbox capacity must be an integer >= 1, got {capacity!r:.60}",
            )
        if overflow not in ("backpressure", "drop_oldest"):
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                "mailbox overflow must be one of 'backpressure', 'drop_oldest', "
                f"got {overflow!r:.60}",
            )
        self.capacity = capacity
        self.overflow: Overflow = overflow
        self._queue: deque[Envelope] = deque()
        self._waiting: deque[Envelope] = deque()
        self._live = 0  # QUEUED envelopes in _queue
        self._receiver: trio.lowlevel.Task | None = None

    def __len__(self) -> int:
        """Live queued envelopes (abandoned ones are not counted)."""
        return self._live

    def full(self) -> bool:
        return self._live >= self.capacity

    def put(self, envelope: Envelope) -> Envelope | None:
        """Queue ``envelope`` now, or line it up for room.

        Returns the envelope evicted by ``drop_oldest`` (for the caller to dead-letter or
        fail), else ``None``. With backpressure a full mailbox leaves ``envelope`` in
        ``WAITING_ROOM``; the caller must park until :meth:`_admit` moves it in.
        """
        if self._live < self.capacity:
            self._enqueue(envelope)
            return None
        if self.overflow == "drop_oldest":
            evicted = self._pop_live()
            self._enqueue(envelope)
            return evicted
        envelope.state = State.WAITING_ROOM
        self._waiting.append(envelope)
        return None

    def _enqueue(self, envelope: Envelope) -> None:
        envelope.state = State.QUEUED
        self._queue.append(envelope)
        self._live += 1
        receiver = self._receiver
        if receiver is not None:
            self._receiver = None
            trio.lowlevel.reschedule(receiver)

    def _pop_live(self) -> Envelope | None:
        queue = self._queue
        while queue:
            envelope = queue.popleft()
            if envelope.state is State.QUEUED:
                self._live -= 1
                return envelope
        return None

    def take(self) -> Envelope | None:
        """The next live envelope, marked ``RUNNING``; ``None`` when empty. Never blocks."""
        envelope = self._pop_live()
        if envelope is None:
            return None
        envelope.state = State.RUNNING
        if self._waiting:
            self._admit()
        return envelope

    def abandon(self, envelope: Envelope) -> None:
        """Mark a queued or waiting envelope as never to be executed, freeing its room."""
        state = envelope.state
        envelope.state = State.ABANDONED
        if state is State.QUEUED:
            self._live -= 1
            if self._waiting:
                self._admit()

    def _admit(self) -> None:
        """Move waiting envelopes in while there is room; wake parked cast senders."""
        waiting = self._waiting
        while waiting and self._live < self.capacity:
            envelope = waiting.popleft()
            if envelope.state is not State.WAITING_ROOM:
                continue
            self._enqueue(envelope)
            if envelope.sender_parked:
                envelope.sender_parked = False
                sender = envelope.caller
                envelope.caller = None
                if sender is not None:
                    trio.lowlevel.reschedule(sender)

    async def wait(self) -> None:
        """Park the receiving task until something is queued (or :meth:`wake`)."""
        if self._live:
            await trio.lowlevel.checkpoint()
            return
        self._receiver = trio.lowlevel.current_task()

        def abort(_: Callable[[], object]) -> trio.lowlevel.Abort:
            self._receiver = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def wake(self) -> None:
        """Wake the parked receiver without a message (used to deliver a stop request)."""
        receiver = self._receiver
        if receiver is not None:
            self._receiver = None
            trio.lowlevel.reschedule(receiver)

    def drain(self) -> list[Envelope]:
        """Empty the mailbox: every live envelope, queued then waiting, in order.

        The returned envelopes are marked ``ABANDONED``; the caller must resolve each
        (fail its call, dead-letter its cast, wake its parked sender). Unlike trio's
        ``MemoryReceiveChannel.close()``, nothing buffered is discarded.
        """
        drained: list[Envelope] = []
        for line in (self._queue, self._waiting):
            while line:
                envelope = line.popleft()
                if envelope.state is State.QUEUED or envelope.state is State.WAITING_ROOM:
                    envelope.state = State.ABANDONED
                    drained.append(envelope)
        self._live = 0
        return drained
