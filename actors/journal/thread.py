"""The journal's store thread: one dedicated thread that runs the store's blocking calls,
one at a time, for the trio task that asked.

Why not ``trio.to_thread.run_sync``: a call through it costs about 150 µs here (a
worker is found or started, and woken, per call) against about 85 µs for a thread that
waits on a queue; the journal makes one such call per batch, and at 100 appends a batch
that difference is a few percent of the append rate (``make bench``'s
``journal_append``). The store is used by one thread at a time anyway.

A call cannot be cancelled while the thread runs it (as with ``to_thread.run_sync``
without ``abandon_on_cancel``): a write in progress is never abandoned half-way.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import outcome
import trio

T = TypeVar("T")

_Call = tuple[Callable[..., Any], tuple[Any, ...], trio.lowlevel.TrioToken, trio.lowlevel.Task]


class StoreThread:
    """Started on the first call; :meth:`close` ends it once the calls queued are done.
    A call after :meth:`close` runs in a trio worker thread instead."""

    def __init__(self, name: str = "journal-store") -> None:
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the store thread; its result or its exception, here."""
        if self._closed:
            return await trio.to_thread.run_sync(fn, *args)
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        task = trio.lowlevel.current_task()
        self._calls.put((fn, args, trio.lowlevel.current_trio_token(), task))

        def abort(_: Any) -> trio.lowlevel.Abort:
            return trio.lowlevel.Abort.FAILED  # the call runs to its end (module docstring)

        result: T = await trio.lowlevel.wait_task_rescheduled(abort)
        return result

    def close(self) -> None:
        """Let the thread end after the calls already queued (idempotent)."""
        self._closed = True
        if self._thread is not None:
            self._calls.put(None)
            self._thread = None  # pragma: no mutate: equivalent, unread once closed

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, args, token, task = call
            result = outcome.capture(fn, *args)
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)
            except trio.RunFinishedError:
                return  # the trio run that asked has ended: nobody is left to answer
