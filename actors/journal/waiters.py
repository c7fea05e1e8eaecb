"""The tasks waiting on a batch of the journal's writer (:class:`Waiters`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import outcome
import trio


class Waiters:
    """The tasks waiting on the entries queued since the last batch was taken, woken
    together when their batch is written (``True``) or fails past the threshold
    (``False``). Parked with trio's low-level API rather than an ``Event``: a batch of 100
    appends is 100 tasks woken by one loop, with no parking lot to keep per task."""

    __slots__ = ("fenced", "outcome", "tasks")

    def __init__(self) -> None:
        self.tasks: list[trio.lowlevel.Task] = []
        self.outcome: bool | None = None
        #: The runs the store fenced off in the batch these waited on (nothing of theirs
        #: was written): set before the release.
        self.fenced: frozenset[str] = frozenset()

    async def wait(self) -> bool:
        """``True`` once written, ``False`` when the journal gave up on them for now."""
        if self.outcome is not None:
            await trio.lowlevel.checkpoint()
            return self.outcome
        task = trio.lowlevel.current_task()
        self.tasks.append(task)

        written: bool = await trio.lowlevel.wait_task_rescheduled(partial(self.abort, task))
        return written

    def abort(self, task: trio.lowlevel.Task, _: Any) -> trio.lowlevel.Abort:
        """A waiter cancelled: it stops waiting (its entry stays queued)."""
        self.tasks.remove(task)
        return trio.lowlevel.Abort.SUCCEEDED

    def release(self, written: bool) -> None:
        if self.outcome is None:
            self.outcome = written
            for task in self.tasks:
                trio.lowlevel.reschedule(task, outcome.Value(written))
            self.tasks.clear()
