"""Call deadlines without a cancel scope per call.

A per-call ``trio.move_on_after`` costs about a third of a raw channel round trip, so a
runtime keeps *one* task that watches every pending call's deadline in a heap. A call
pushes ``(deadline, seq, envelope)``; when a deadline passes and the envelope is still
pending, the timer hands it to the ``expire`` callback (which fails the caller with
``call_timeout``). Completed envelopes are deleted lazily; the heap is compacted when it
holds more than twice the pending count plus a slack, so memory stays O(pending).

The timer sleeps until the earliest deadline in its heap and is woken early only when a
new deadline is earlier than the one it sleeps towards (never, with a uniform timeout).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import trio

from actors.mailbox import Envelope, State

_SLACK = 64
_PENDING = (State.WAITING_ROOM, State.QUEUED, State.RUNNING)


class DeadlineTimer:
    """Fails calls whose deadline passed; run :meth:`run` as a task of the runtime."""

    __slots__ = ("_compact_at", "_expire", "_heap", "_idle", "_seq", "_sleep")

    def __init__(self, expire: Callable[[Envelope], None]) -> None:
        self._expire = expire
        self._heap: list[tuple[float, int, Envelope]] = []
        self._seq = 0
        self._idle: trio.lowlevel.Task | None = None
        self._sleep: trio.CancelScope | None = None
        self._compact_at = 2 * _SLACK

    def add(self, envelope: Envelope, deadline: float) -> None:
        """Watch ``envelope`` until ``deadline`` (trio time)."""
        envelope.deadline = deadline
        if len(self._heap) >= self._compact_at:
            self._compact()
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, envelope))
        idle = self._idle
        if idle is not None:
            self._idle = None
            trio.lowlevel.reschedule(idle)
        elif self._sleep is not None and deadline < self._sleep.deadline:
            self._sleep.deadline = deadline

    def _compact(self) -> None:
        """Drop finished entries; the next compaction waits until the heap doubles."""
        live = [entry for entry in self._heap if entry[2].state in _PENDING]
        heapq.heapify(live)
        self._heap = live
        self._compact_at = max(2 * len(live), 2 * _SLACK)

    async def run(self) -> None:
        """Watch deadlines forever (until cancelled with the runtime)."""
        while True:
            heap = self._heap
            if not heap:
                self._idle = trio.lowlevel.current_task()

                def abort(_: object) -> trio.lowlevel.Abort:
                    self._idle = None
                    return trio.lowlevel.Abort.SUCCEEDED

                await trio.lowlevel.wait_task_rescheduled(abort)
                continue
            with trio.CancelScope(deadline=heap[0][0]) as self._sleep:
                await trio.sleep_forever()
            self._sleep = None
            # One more scheduling point before expiring: a cancel of the runtime made in
            # the same instant (by a task woken with this one) wins over the timeouts.
            await trio.lowlevel.checkpoint()
            self._expire_due(trio.current_time())

    def _expire_due(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, envelope = heapq.heappop(heap)
            if envelope.state in _PENDING and envelope.deadline <= now:
                self._expire(envelope)
