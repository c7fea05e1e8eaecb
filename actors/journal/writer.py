"""The journal's writer: one task that owns the store, group commit — the mechanism.

Appenders hand entries to :meth:`JournalWriter.submit` (no wait) or
:meth:`JournalWriter.append` (waits until durable). The writer takes **everything
queued** when it wakes and writes it in one transaction
(:meth:`~actors.journal.store.JournalStore.write`, in the store thread): concurrent runs'
appends share one commit, and each is released — its owner's :meth:`JournalOwner.durable
<actors.journal.supervision.JournalOwner.durable>` called, its ``append`` returned —
only once that commit returned. Entries are written in the order they were submitted.

The writer is the journal's only user of the store, a single owner with a queue: an
actor in the runtime's sense, but not an :class:`~actors.Actor` — a handler that takes
one message at a time cannot take a whole queue into one commit.

**One attempt, then ask.** A write that raises is counted (consecutive failures) and
handed to the journal's supervision
(:meth:`~actors.journal.supervision.JournalSupervision.after_write_failed`), which says
how long to wait before writing it again — with everything queued meanwhile — and
whether to halt its owners (``persistence_unavailable``; then every owner whose entry
arrives while the failures last too). Any success resets the count
(``journal.recovered``). Nothing queued is dropped: an entry is written, or the process
ends with it unwritten — and then it was never acknowledged. The schedule and the
threshold are :class:`supervisors.runs.Journal`'s (docs/journal.md).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final, TypeVar

import attrs
import trio

from actors.errors import ActorError, Code
from actors.events import JournalRecovered
from actors.journal.leases import LeaseHolder, lease_lost
from actors.journal.records import Entry
from actors.journal.store import Batch, Checkpoint, JournalStore, RunEnding, RunHeader
from actors.journal.supervision import (
    JournalOwner,
    JournalSupervision,
    WriteFailed,
)
from actors.journal.thread import StoreThread
from actors.journal.waiters import Waiters
from actors.nursery import open_nursery_unwrapped
from actors.observe import emit

#: The file a journal opened without a path uses (in the working directory).
DEFAULT_PATH: Final = "runs.journal"

T = TypeVar("T")


@attrs.define  # slots, as attrs.define makes them
class _Item:
    entry: Entry | None
    owner: JournalOwner | None
    header: RunHeader | None = None
    ending: RunEnding | None = None
    checkpoint: Checkpoint | None = None


class JournalWriter:
    """The journal's writer over one store (see the module docstring), asking
    ``supervision`` what to do after a failed write and about ``leases`` (on a store with
    leases). Its block is :func:`writing`; :func:`supervisors.runs.open_journal` makes
    one with the house's policy (a :class:`supervisors.runs.Journal`)."""

    def __init__(
        self,
        store: JournalStore,
        supervision: JournalSupervision,
        leases: LeaseHolder | None = None,
    ) -> None:
        self.store = store
        self._thread = StoreThread()  # the store's calls, unless it is inline
        #: What decides after a failed write, and about the leases.
        self.supervision = supervision
        #: The runs this journal leases, for a store several daemons write to.
        self.leases = leases
        #: A store whose calls never block (``inline = True``) is called in the task.
        self._inline = bool(getattr(store, "inline", False))
        #: Consecutive failed writes (0 when the last one succeeded).
        self.failures = 0
        #: The supervision halted the owners after the last failed write: those who
        #: submit are halted at once until a write works.
        self._halting = False
        self._queue: list[_Item] = []
        self._waiters = Waiters()
        self._wake = trio.Event()
        self._lock = trio.Lock()
        self._closing = False
        self._closed = False
        self._claims: set[str] = set()
        #: The batch being written and its waiters (what the writer abandons if it dies).
        self._current: tuple[list[_Item], list[Waiters]] = ([], [])

    def claim(self, run_id: str) -> bool:
        """Take ``run_id`` for one engine in this process (``False``: another has it).
        Every ``open_runs`` on this journal claims a run before it runs it, so two blocks
        never run one run at once."""
        if run_id in self._claims:
            return False
        self._claims.add(run_id)
        return True

    async def acquire(self, run_id: str) -> None:
        """Take ``run_id`` for one engine: :meth:`claim` it in this process and, on a
        store with leases, lease it on the store. ``name_taken`` when another engine of
        this process, or another daemon, has it."""
        if not self.claim(run_id):
            raise ActorError.from_code(
                Code.NAME_TAKEN, f"run {run_id!r} is running on this journal", run_id=run_id
            )
        leases = self.leases
        if leases is None:
            return
        try:
            taken = await leases.take(self.read, run_id)
        except BaseException:
            self.release(run_id)
            raise
        if not taken:
            self.release(run_id)
            raise ActorError.from_code(
                Code.NAME_TAKEN, f"run {run_id!r} is leased by another daemon", run_id=run_id
            )

    def release(self, run_id: str) -> None:
        """Give ``run_id`` back (its run ended, or never started)."""
        self._claims.discard(run_id)
        if self.leases is not None:
            self.leases.drop(run_id)

    async def give_back(self, run_id: str) -> None:
        """Give ``run_id`` back, and on a store with leases end its lease now: a
        shutdown interrupted the run, and another daemon may resume it at once."""
        self._claims.discard(run_id)
        if self.leases is not None:
            await self.leases.give_back(self.read, run_id)

    @property
    def closed(self) -> bool:
        """The journal's block was left: nothing more can be submitted."""
        return self._closed

    # -- appending ------------------------------------------------------------------

    def submit(
        self,
        entry: Entry,
        owner: JournalOwner,
        *,
        header: RunHeader | None = None,
        ending: RunEnding | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """Queue ``entry`` (with what is stored alongside it); ``owner.durable`` is
        called once it is durable. While the journal's supervision halts the owners of
        failed writes, ``owner.halted`` is called at once too (the entry stays queued)."""
        if self._closed:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal is closed")
        self._queue.append(_Item(entry, owner, header, ending, checkpoint))
        self._wake.set()
        if self._halting:
            owner.halted(self._unavailable())

    async def append(self, entry: Entry) -> None:
        """Queue ``entry`` and wait until it is durable; ``persistence_unavailable``
        when the write that takes it fails and the supervision halts its owners (the
        entry stays queued); ``lease_lost`` when its run is leased here and another
        daemon took it over (the entry is not written)."""
        # The hot path (one append per record of every run): _wait inlined.
        if self._closed:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal is closed")
        self._queue.append(_Item(entry, None))
        self._wake.set()
        # The journal's current waiters are only released once replaced, or once the
        # journal is closed (checked above): they are waited on here without a check.
        waiters = self._waiters
        task = trio.lowlevel.current_task()
        waiters.tasks.append(task)
        if not await trio.lowlevel.wait_task_rescheduled(partial(waiters.abort, task)):
            raise self._unavailable()
        if waiters.fenced and entry.run_id in waiters.fenced:
            raise lease_lost()

    async def flush(self) -> None:
        """Wait until everything submitted so far is durable
        (``persistence_unavailable`` as for :meth:`append`)."""
        await self._wait(None)

    async def _wait(self, item: _Item | None) -> None:
        if self._closed:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal is closed")
        if item is None:  # a flush
            if not self._queue and not self._current[1]:  # nothing queued or being written
                await trio.lowlevel.checkpoint()
                return  # nothing queued, nothing being written
            item = _Item(None, None)  # a marker: released with the batch after it
        self._queue.append(item)
        self._wake.set()
        if not await self._waiters.wait():
            raise self._unavailable()

    def _unavailable(self) -> ActorError:
        return ActorError.from_code(
            Code.PERSISTENCE_UNAVAILABLE,
            f"the journal failed {self.failures} consecutive writes",
        )

    # -- reading --------------------------------------------------------------------

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the store in a worker thread, never during a write (e.g.
        ``await journal.read(journal.store.entries, run_id)``)."""
        if self._inline:
            await trio.lowlevel.checkpoint()
            return fn(*args)
        async with self._lock:
            return await self._thread.run(fn, *args)

    async def prune(self, older_than: float) -> int:
        """Delete the runs that ended more than ``older_than`` seconds ago (wall clock),
        with their records and checkpoints; returns how many. Runs still running are
        never pruned. ``input_validation`` for a negative, NaN or infinite age."""
        if (
            isinstance(older_than, bool)
            or not isinstance(older_than, int | float)
            or not 0 <= older_than < float("inf")
        ):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Journal.prune: older_than must be finite seconds >= 0"
            )
        return await self.read(self.store.prune, time.time() - older_than)

    # -- the writer -----------------------------------------------------------------

    async def _run(self, scope: trio.CancelScope, done: trio.Event) -> None:
        try:
            with scope:
                await self._loop()
        finally:
            # However the writer ends — drained, given up while closing, cancelled at the
            # close timeout, or killed by a store raising a BaseException — nobody may go
            # on waiting for it: what is left is never acknowledged.
            self._abandon()
            done.set()

    def _abandon(self) -> None:
        self._closed = True
        batch, waiting = self._current
        left = [*batch, *self._queue]
        self._queue = []
        self._current = ([], [])
        if left or waiting:
            error = ActorError.from_code(
                Code.PERSISTENCE_UNAVAILABLE, "the journal stopped before writing this"
            )
            for item in left:
                if item.owner is not None:
                    item.owner.halted(error)
        for waiters in (*waiting, self._waiters):
            waiters.release(False)

    async def _loop(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            batch, self._queue = self._queue, []
            waiting = [self._waiters]
            self._waiters = Waiters()
            self._current = (batch, waiting)
            while True:
                try:
                    fenced = await self._write(batch)
                except Exception as exc:  # noqa: BLE001 - classified: retried
                    if await self._failed(batch, waiting, exc):
                        return  # closing with the store down: never acknowledged
                    batch.extend(self._queue)  # retried together, in order
                    self._queue = []
                    waiting.append(self._waiters)
                    self._waiters = Waiters()
                    continue
                break
            self._current = ([], [])
            if self.failures:
                emit(JournalRecovered(failures=self.failures))
                self.failures = 0
                self._halting = False
            if fenced:
                batch = self.supervision.halt_fenced(batch, fenced)
                for waiters in waiting:
                    waiters.fenced = fenced
            self._release(batch, waiting)

    async def _write(self, batch: list[_Item]) -> frozenset[str]:
        """Write ``batch``; the runs the store fenced off (none without leases)."""
        leases = self.leases
        # The fences are taken here, in the trio thread: only it changes the leases.
        fences = (
            {}
            if leases is None
            else leases.fences({i.entry.run_id for i in batch if i.entry is not None})
        )
        if self._inline:
            fenced = self._store_batch(batch, fences)
            await trio.lowlevel.checkpoint()
            return fenced
        async with self._lock:
            with trio.CancelScope(shield=True):  # a write in a thread is not abandoned
                # The batch is built in the worker thread too: the trio thread is what
                # the appenders wake up in, and it has nothing else to do meanwhile.
                fenced = await self._thread.run(self._store_batch, batch, fences)
        return fenced

    def _store_batch(
        self, batch: list[_Item], fences: dict[str, tuple[str, int]]
    ) -> frozenset[str]:
        """One transaction of ``batch``'s content (none for flush markers alone)."""
        content = Batch(
            entries=[i.entry for i in batch if i.entry is not None],
            headers=[i.header for i in batch if i.header is not None],
            endings=[i.ending for i in batch if i.ending is not None],
            checkpoints=[i.checkpoint for i in batch if i.checkpoint is not None],
            fences=fences,
        )
        if content.entries or content.headers or content.endings or content.checkpoints:
            return self.store.write(content) or frozenset()
        return frozenset()

    async def _failed(self, batch: list[_Item], waiting: list[Waiters], exc: Exception) -> bool:
        """Count a failed write, ask the supervision, halt if it says so, wait; ``True``
        when the writer gives up (closing)."""
        self.failures += 1
        then = self.supervision.after_write_failed(
            WriteFailed(
                failures=self.failures,
                entries=sum(i.entry is not None for i in batch),
                runs=tuple(dict.fromkeys(i.entry.run_id for i in batch if i.entry is not None)),
                error=f"{type(exc).__name__}: {exc}"[:500],
                exception=exc,
                closing=self._closing,
            )
        )
        self._halting = then.halt
        if then.halt:
            error = self._unavailable()
            for item in batch:
                if item.owner is not None:
                    item.owner.halted(error)
            for waiters in waiting:
                waiters.release(False)  # they get the error; their entries stay queued
        if then.give_up and self._closing:
            return True
        await trio.sleep(then.retry_in)
        return False

    def _release(self, batch: list[_Item], waiting: list[Waiters]) -> None:
        last: dict[int, tuple[JournalOwner, int]] = {}
        for item in batch:
            if item.owner is not None and item.entry is not None:
                last[id(item.owner)] = (item.owner, item.entry.seq)
        for owner, seq in last.values():
            owner.durable(seq)
        for waiters in waiting:
            waiters.release(True)


@asynccontextmanager
async def writing(journal: JournalWriter, close_timeout: float) -> AsyncIterator[None]:
    """``journal``'s writer running for the block, and its supervision's
    :meth:`~actors.journal.supervision.JournalSupervision.keep_leases` alongside it.

    Leaving the block — normally, with an error or cancelled — writes what is queued
    first, for at most ``close_timeout`` seconds (seconds >= 0, not checked here) and
    until the supervision gives up, then closes the store. The writer is shielded from a
    cancel around the block for that reason. The store is closed whatever happens."""
    try:
        writer = trio.CancelScope(shield=True)
        stopped = trio.Event()
        async with open_nursery_unwrapped() as nursery:
            nursery.start_soon(journal._run, writer, stopped)
            nursery.start_soon(journal.supervision.keep_leases, journal.read)
            try:
                yield
            finally:
                journal._closing = True
                journal._wake.set()
                with trio.CancelScope(shield=True), trio.move_on_after(close_timeout):
                    await stopped.wait()
                writer.cancel(reason="journal closed")
                nursery.cancel_scope.cancel(reason="journal closed")
                journal._closed = True
    finally:
        journal._thread.close()
        journal.store.close()
