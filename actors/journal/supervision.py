"""What the journal's writer asks of whoever supervises it (:class:`JournalSupervision`).

The writer (:class:`~actors.journal.writer.JournalWriter`) is the mechanism: it queues
entries, writes everything queued in one transaction, releases the waiters once that is
durable — and makes **one** attempt per batch. What happens after a write fails (wait
how long, halt whom, give up at close) and on a store with leases (when to renew them,
what becomes of the runs another daemon fenced off) are decisions: the writer asks its
supervision, as an :class:`~actors.Actor`'s cell asks its supervisor. The journal's
supervision is :class:`supervisors.runs.Journal`'s policy (``supervisors/runs/journal/``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import attrs

from actors.errors import ActorError
from actors.journal.records import Entry

#: How the journal runs a store call: ``await read(fn, *args)`` (worker thread, never
#: during a write): :meth:`~actors.journal.writer.JournalWriter.read`.
Read = Callable[..., Awaitable[Any]]


class JournalOwner(Protocol):
    """What submits entries (a run): told when they are durable, or that it must halt."""

    def durable(self, seq: int) -> None:
        """Every entry of this owner up to ``seq`` is durable."""
        ...

    def halted(self, error: ActorError) -> None:
        """The journal cannot write this owner's entries (``persistence_unavailable``)."""
        ...


class Queued(Protocol):
    """One queued item of a batch: its entry (``None`` for a flush marker) and the owner
    to tell (``None`` for an :meth:`~actors.journal.writer.JournalWriter.append`)."""

    @property
    def entry(self) -> Entry | None:
        """The entry to write; ``None`` for a flush marker."""
        ...

    @property
    def owner(self) -> JournalOwner | None:
        """Who submitted it; ``None`` for an ``append`` (its task waits instead)."""
        ...


Q = TypeVar("Q", bound=Queued)


@attrs.frozen(kw_only=True, slots=True)
class WriteFailed:
    """A write of the journal failed (the store raised; nothing of the batch is stored)."""

    #: Consecutive failed writes, this one included.
    failures: int
    #: Entries in the batch, and the runs they belong to (in the order first seen).
    entries: int
    runs: tuple[str, ...]
    #: The exception's type and text (at most 500 characters), and the exception.
    error: str
    exception: Exception = attrs.field(eq=False, repr=False)
    #: The journal's block is being left: the writer is writing what is left.
    closing: bool


@attrs.frozen(kw_only=True, slots=True)
class AfterWriteFailed:
    """What the writer does after a failed write: its supervision's answer."""

    #: Seconds before the batch (with everything queued meanwhile) is written again.
    retry_in: float
    #: Halt the owners of the batch with ``persistence_unavailable`` and wake its waiters
    #: with it (their entries stay queued); every owner submitting until a write works is
    #: halted at once too.
    halt: bool = False
    #: Stop writing (only heeded while closing): what is queued is never acknowledged.
    give_up: bool = False


class JournalSupervision(Protocol):
    """What a journal's writer asks of its supervision (see the module docstring)."""

    def after_write_failed(self, failed: WriteFailed) -> AfterWriteFailed:
        """What the writer does after ``failed`` (asked synchronously, before anything
        else happens); the supervision reports the failure (``journal.append_failed``)."""
        ...

    def halt_fenced(self, batch: list[Q], fenced: frozenset[str]) -> list[Q]:
        """The store refused ``fenced`` runs' part of ``batch`` (another daemon leased
        them): deal with their owners, and return the rest of the batch (what was
        written, whose owners are told it is durable)."""
        ...

    async def keep_leases(self, read: Read) -> None:
        """Run alongside the writer (cancelled once it stopped): on a store with leases,
        keep this journal's leases alive."""
        ...
