"""The journal: one writer task that owns the store, group commit, degradation.

Appenders hand entries to :meth:`Journal.submit` (no wait) or :meth:`Journal.append`
(waits until durable). The writer takes **everything queued** when it wakes and writes
it in one transaction (:meth:`~actors.journal.store.JournalStore.write`, in a worker
thread): concurrent runs' appends share one commit, and each is released — its owner's
:meth:`JournalOwner.durable` called, its ``append`` returned — only once that commit
returned. Entries are written in the order they were submitted.

The writer is the journal's only user of the store, a single owner with a queue: an
actor in the runtime's sense, but not an :class:`~actors.Actor` — a handler that takes
one message at a time cannot take a whole queue into one commit.

**Degradation.** A write that raises is retried with everything queued meanwhile after
``delays[k]`` seconds, ``k`` the consecutive failures so far (2, 4, 6, then 6 …); each
failure is a ``journal.append_failed`` warning. At ``threshold`` (3) consecutive
failures the owners of every entry still waiting are halted
(:meth:`JournalOwner.halted`, ``persistence_unavailable``; ``journal.unavailable``),
and so is every owner whose entry arrives while the failures last; the writer keeps
trying. Any success resets the count (``journal.recovered``). Nothing queued is
dropped: an entry is written, or the process ends with it unwritten — and then it was
never acknowledged.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar, cast

import attrs
import trio

from actors.errors import ActorError, Code
from actors.events import JournalAppendFailed, JournalRecovered, JournalUnavailable
from actors.journal.leases import Leases, lease_lost
from actors.journal.records import Entry
from actors.journal.sqlite import SqliteStore
from actors.journal.store import (
    Batch,
    Checkpoint,
    JournalStore,
    LeaseStore,
    RunEnding,
    RunHeader,
)
from actors.journal.thread import StoreThread
from actors.journal.waiters import Waiters
from actors.nursery import open_nursery_unwrapped
from actors.observe import emit

#: Seconds before the k-th retry of a failed write (the last one repeats).
DELAYS: Final = (2.0, 4.0, 6.0)
#: Consecutive failed writes that halt the runs waiting on them.
THRESHOLD: Final = 3
#: Seconds a run's lease lasts on a store with leases (renewed every third of it).
LEASE_TTL: Final = 30.0
#: The file a journal opened without a path uses (in the working directory).
DEFAULT_PATH: Final = "runs.journal"

T = TypeVar("T")


class JournalOwner(Protocol):
    """What submits entries (a run): told when they are durable, or that it must halt."""

    def durable(self, seq: int) -> None:
        """Every entry of this owner up to ``seq`` is durable."""
        ...

    def halted(self, error: ActorError) -> None:
        """The journal cannot write this owner's entries (``persistence_unavailable``)."""
        ...


@attrs.define(slots=True)
class _Item:
    entry: Entry | None
    owner: JournalOwner | None
    header: RunHeader | None = None
    ending: RunEnding | None = None
    checkpoint: Checkpoint | None = None


class Journal:
    """The run journal over one store (see the module docstring); made by
    :func:`open_journal`."""

    def __init__(
        self,
        store: JournalStore,
        *,
        delays: Sequence[float] = DELAYS,
        threshold: int = THRESHOLD,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        delays = tuple(delays)
        if not delays or not all(
            isinstance(d, int | float) and not isinstance(d, bool) and 0 <= d < float("inf")
            for d in delays
        ):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Journal: delays must be finite seconds >= 0, at least one"
            )
        if type(threshold) is not int or threshold < 1:
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Journal: threshold must be an int >= 1"
            )
        if isinstance(lease_ttl, bool) or not (
            isinstance(lease_ttl, int | float) and 0 < lease_ttl < float("inf")
        ):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Journal: lease_ttl must be finite seconds > 0"
            )
        self.store = store
        self._thread = StoreThread()  # the store's calls, unless it is inline
        #: The runs this journal leases, for a store several daemons write to.
        self.leases = (
            Leases(cast(LeaseStore, store), float(lease_ttl))
            if getattr(store, "leases", False)
            else None
        )
        #: A store whose calls never block (``inline = True``) is called in the task.
        self._inline = bool(getattr(store, "inline", False))
        self.delays = delays
        self.threshold = threshold
        #: Consecutive failed writes (0 when the last one succeeded).
        self.failures = 0
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
        called once it is durable. While the journal is failing past its threshold,
        ``owner.halted`` is called at once too (the entry stays queued)."""
        if self._closed:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal is closed")
        self._queue.append(_Item(entry, owner, header, ending, checkpoint))
        self._wake.set()
        if self.failures >= self.threshold:
            owner.halted(self._unavailable())

    async def append(self, entry: Entry) -> None:
        """Queue ``entry`` and wait until it is durable; ``persistence_unavailable``
        when the write that takes it fails with the journal past its threshold (the
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
            if fenced:
                assert self.leases is not None  # only a store with leases fences
                batch = self.leases.halt_fenced(batch, fenced)
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
        """Count and report a failed write, halt past the threshold, wait; ``True``
        when the journal is closing and gives up."""
        self.failures += 1
        delay = self.delays[min(self.failures, len(self.delays)) - 1]
        runs = tuple(dict.fromkeys(i.entry.run_id for i in batch if i.entry is not None))
        emit(
            JournalAppendFailed(
                failures=self.failures,
                retry_in=delay,
                entries=sum(i.entry is not None for i in batch),
                runs=runs,
                error=f"{type(exc).__name__}: {exc}"[:500],
            )
        )
        if self.failures >= self.threshold:
            error = self._unavailable()
            if self.failures == self.threshold:
                emit(JournalUnavailable(failures=self.failures, runs=runs))
            for item in batch:
                if item.owner is not None:
                    item.owner.halted(error)
            for waiters in waiting:
                waiters.release(False)  # they get the error; their entries stay queued
            if self._closing:
                return True
        await trio.sleep(delay)
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
async def open_journal(
    store: JournalStore | str | Path = DEFAULT_PATH,
    *,
    delays: Sequence[float] = DELAYS,
    threshold: int = THRESHOLD,
    close_timeout: float = 10.0,
    lease_ttl: float = LEASE_TTL,
) -> AsyncIterator[Journal]:
    """A :class:`Journal` over ``store`` (a store, or the path of a SQLite file: default
    ``runs.journal`` in the working directory) with its writer running.

    Leaving the block — normally, with an error or cancelled — writes what is queued
    first (the runs' last records get in), for at most ``close_timeout`` seconds and
    only while the store works (``threshold`` consecutive failures end it), then closes
    the store. The writer is shielded from a cancel around the block for that reason.
    ``lease_ttl``: on a store several daemons write to (PostgreSQL), how long a run's
    lease lasts without renewal — how soon another daemon may take over the runs of one
    that died.
    """
    if isinstance(close_timeout, bool) or not (
        isinstance(close_timeout, int | float) and close_timeout >= 0
    ):
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "open_journal: close_timeout must be seconds >= 0"
        )
    if isinstance(store, str | Path):
        store = await trio.to_thread.run_sync(SqliteStore, store)
    try:
        journal = Journal(store, delays=delays, threshold=threshold, lease_ttl=lease_ttl)
    except BaseException:
        store.close()
        raise
    try:
        writer = trio.CancelScope(shield=True)
        stopped = trio.Event()
        async with open_nursery_unwrapped() as nursery:
            nursery.start_soon(journal._run, writer, stopped)
            if journal.leases is not None:
                nursery.start_soon(journal.leases.renew_forever, journal.read)
            try:
                yield journal
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
        store.close()
