"""The journal's storage: a small protocol, so a backend is one class.

A store is used by one writer at a time (the journal's writer task, through worker
threads, one call at a time): its methods are plain blocking calls. :meth:`~JournalStore.write`
makes one :class:`Batch` durable in one transaction, or raises and changes nothing;
entries are keyed ``(run_id, seq)`` and a key already stored is kept as it is (a retry
of the same batch stores each entry once). Readers (the CLI, recovery) may use another
instance on the same file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from actors.journal.records import Entry


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


class JournalStore(Protocol):
    """A journal backend (see the module docstring). A store may set a class attribute
    ``inline = True`` when its calls never block: the journal then calls it in the
    task instead of a worker thread."""

    def write(self, batch: Batch) -> None:
        """Make ``batch`` durable (one transaction), or raise and store nothing of it."""
        ...

    def entries(self, run_id: str, after: int = -1) -> list[Entry]:
        """The run's entries with ``seq > after``, in ``seq`` order."""
        ...

    def checkpoint(self, run_id: str) -> Checkpoint | None:
        """The run's latest checkpoint."""
        ...

    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        ...

    def run(self, run_id: str) -> RunRow | None:
        """One run, or ``None``."""
        ...

    def unfinished(self) -> list[str]:
        """The runs with a ``run:started`` and no terminal record, oldest first."""
        ...

    def prune(self, ended_before: float) -> int:
        """Delete the runs that ended (wall clock) before ``ended_before``, with their
        entries and checkpoints; returns how many runs."""
        ...

    def close(self) -> None:
        """Release the connection (idempotent)."""
        ...
