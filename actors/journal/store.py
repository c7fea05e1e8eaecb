"""The journal's storage: a small protocol, so a backend is one class.

A store is used by one writer at a time (the journal's writer task, through worker
threads, one call at a time): its methods are plain blocking calls. :meth:`~JournalStore.write`
makes one :class:`Batch` durable in one transaction, or raises and changes nothing;
entries are keyed ``(run_id, seq)`` and a key already stored is kept as it is (a retry
of the same batch stores each entry once). Readers (the CLI, recovery) may use another
instance on the same file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from actors.journal.records import Entry, header_checksum


@attrs.frozen(slots=True)
class RunHeader:
    """What a run needs besides its records to be resumed, stored with ``run:started``:
    the workflow's name and a description of its graph (JSON, with a ``digest``), the
    run's budget caps (JSON) and when it started (wall clock)."""

    run_id: str
    workflow: str
    definition: str
    limits: str
    started: float

    @property
    def checksum(self) -> str:
        """What the row stores to prove its header intact (:func:`header_checksum`)."""
        return header_checksum(
            self.run_id, self.workflow, self.definition, self.limits, self.started
        )


@attrs.frozen(slots=True)
class RunEnding:
    """A terminal record's summary, stored with it."""

    run_id: str
    status: str
    code: str | None
    ended: float
    duration: float
    tokens: int
    cost: float


@attrs.frozen(slots=True)
class Checkpoint:
    """The run's progress after the record ``seq`` (JSON): recovery starts from it."""

    run_id: str
    seq: int
    progress: str
    checksum: str


@attrs.frozen(slots=True)
class Batch:
    """What one transaction makes durable."""

    entries: Sequence[Entry] = ()
    headers: Sequence[RunHeader] = ()
    endings: Sequence[RunEnding] = ()
    checkpoints: Sequence[Checkpoint] = ()
    #: For a store with leases: run id -> (holder, fencing token) the writer holds.
    fences: Mapping[str, tuple[str, int]] = attrs.field(factory=dict)

    def without(self, runs: frozenset[str]) -> Batch:
        """This batch without anything of ``runs``."""
        return Batch(
            entries=[e for e in self.entries if e.run_id not in runs],
            headers=[h for h in self.headers if h.run_id not in runs],
            endings=[e for e in self.endings if e.run_id not in runs],
            checkpoints=[c for c in self.checkpoints if c.run_id not in runs],
            fences={r: f for r, f in self.fences.items() if r not in runs},
        )


@attrs.frozen(slots=True)
class RunRow:
    """One run as ``runs list`` shows it (``status`` ``running`` until it ends)."""

    run_id: str
    workflow: str
    status: str
    code: str | None
    started: float
    ended: float | None
    duration: float | None
    tokens: int
    cost: float
    definition: str
    limits: str
    events: int
    #: The header's checksum as stored (``None``: none stored — a damaged row, or a
    #: journal written before the column existed and not opened for writing since).
    checksum: str | None = None


@attrs.frozen(slots=True)
class RunTail:
    """What tells whether a run has ended, for every run a store knows of — by its
    row or by its records (see :func:`actors.journal.integrity.unfinished_of`)."""

    run_id: str
    #: The row's status; ``None`` when the run has records but no row.
    status: str | None
    #: The name of its last record; ``None`` when it has none.
    last: str | None
    #: That record in full when it is a ``run:cancelled`` (whether it is resumable
    #: decides whether the run ended); else ``None``.
    cancel: Entry | None = None


class JournalStore(Protocol):
    """A journal backend (see the module docstring). A store may set a class attribute
    ``inline = True`` when its calls never block: the journal then calls it in the
    task instead of a worker thread; and ``leases = True`` when several daemons may write
    to it, runs being owned through leases (:class:`LeaseStore`)."""

    def write(self, batch: Batch) -> frozenset[str] | None:
        """Make ``batch`` durable (one transaction), or raise and store nothing of it.
        A store with leases returns the runs it fenced (written for none of them)."""
        ...

    def entries(self, run_id: str, after: int = -1) -> list[Entry]:
        """The run's entries with ``seq > after``, in ``seq`` order."""
        ...

    def checkpoint(self, run_id: str) -> Checkpoint | None:
        """The run's latest checkpoint."""
        ...

    def stored(self, run_id: str) -> tuple[RunRow | None, list[Entry], Checkpoint | None]:
        """The run's row, entries and checkpoint, read as of one instant (one read
        transaction: a daemon writing meanwhile cannot make them disagree)."""
        ...

    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        ...

    def run(self, run_id: str) -> RunRow | None:
        """One run, or ``None``."""
        ...

    def unfinished(self) -> list[str]:
        """The runs recovery must look at, oldest first: those whose row says
        ``running`` and those whose records do not end them for good whatever their row
        says (:func:`actors.journal.integrity.unfinished_of` over :meth:`tails`)."""
        ...

    def tails(self) -> list[RunTail]:
        """Every run the store knows of — with a row, records, or both — oldest first
        (a run without a row last)."""
        ...

    def prune(self, ended_before: float) -> int:
        """Delete the runs that ended (wall clock) before ``ended_before``, with their
        entries and checkpoints; returns how many runs."""
        ...

    def close(self) -> None:
        """Release the connection (idempotent)."""
        ...


class LeaseStore(JournalStore, Protocol):
    """A store several daemons write to: a run is owned through a lease with a fencing
    token, on the store's clock (see :mod:`actors.journal.postgres`)."""

    def take_lease(self, run_id: str, holder: str, ttl: float) -> int | None:
        """Lease ``run_id`` to ``holder`` for ``ttl`` seconds: the new fencing token, or
        ``None`` while another holder's lease runs."""
        ...

    def renew_leases(self, holder: str, tokens: dict[str, int], ttl: float) -> set[str]:
        """Extend the leases ``holder`` still has with these tokens; the runs renewed."""
        ...

    def orphans(self, *, thorough: bool = False) -> list[str]:
        """Unfinished runs with no lease or an expired one: those whose row says
        ``running``; ``thorough``, those :meth:`unfinished` lists (reads every run's last
        record: done when a journal opens, not on every look for runs to take over)."""
        ...

    def give_back_lease(self, run_id: str, holder: str, token: int) -> bool:
        """End ``holder``'s lease on ``run_id`` now, if it still carries ``token``
        (another daemon may take the run over at once); whether it did."""
        ...
