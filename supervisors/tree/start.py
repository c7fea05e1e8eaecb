"""A lighter ``nursery.start`` for the restart path.

``nursery.start`` opens a temporary nursery and re-parents the task once it calls
``started()``; a restart does that for every incarnation. :func:`start_soon_and_wait`
spawns the task straight into its final nursery and parks the starter once: ``started()``
reschedules it, and a failure before ``started()`` is handed to it as the exception —
unwrapped, as ``nursery.start`` would. The task itself must not raise that failure into
the nursery (:class:`Starter` catches it for the wrappers here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio
from outcome import Error, Value

from actors import ActorError


class Starter:
    """The ``task_status`` handed to the started task; resolves the parked starter once."""

    __slots__ = ("_done", "_task")

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None
        self._done = False

    def started(self, value: object = None) -> None:
        self._resolve(Value(value))

    def failed(self, error: ActorError) -> None:
        self._resolve(Error(error))

    def _resolve(self, result: Value[object] | Error) -> None:
        if self._done:
            return
        self._done = True
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task, result)

    async def wait(self) -> None:
        if self._done:
            await trio.lowlevel.checkpoint()
            return
        self._task = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._task = None
            self._done = True  # a late started()/failed() goes nowhere
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


async def start_soon_and_wait(
    nursery: trio.Nursery, fn: Callable[..., Awaitable[object]], *args: Any
) -> None:
    """Run ``fn(*args, starter)`` in ``nursery``; return once it called ``started()``.

    Raises the :class:`ActorError` it reported with ``starter.failed`` instead.
    """
    starter = Starter()
    nursery.start_soon(fn, *(*args, starter))
    await starter.wait()
