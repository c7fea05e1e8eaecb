"""The run journal: every record of every run's event stream on disk, before anyone
sees it; what recovery replays (docs/journal.md).

* :func:`open_journal` / :class:`Journal` — the writer (group commit, degradation);
* :class:`SqliteStore` — the default backend; :class:`MemoryStore` — in memory;
  :class:`PostgresStore` — PostgreSQL, shared by a fleet of daemons (extra
  ``postgres``; runs owned through leases, :class:`Leases`, :class:`LeaseStore`);
  :class:`JournalStore` — the protocol a backend implements (:class:`Batch`,
  :class:`RunHeader`, :class:`RunEnding`, :class:`Checkpoint`, :class:`RunRow`);
* :class:`Entry`, :func:`entry_of`, :func:`record_of` — one stored record;
  :func:`dumps` (JSON as the journal writes it), :func:`checksum`, :func:`corrupt`
  (the ``event_log_corrupt`` error), :data:`TERMINAL` (the terminal record names),
  :func:`ends_run` (a record that ends its run for good: not a resumable cancel).

Recovery itself (replaying a run into a running engine) is
:meth:`supervisors.runs.Runs.resume`.
"""

from actors.journal.leases import Leases
from actors.journal.memory import MemoryStore
from actors.journal.postgres import PostgresStore
from actors.journal.records import (
    TERMINAL,
    Entry,
    checksum,
    corrupt,
    dumps,
    ends_run,
    entry_of,
    record_of,
)
from actors.journal.sqlite import SqliteStore
from actors.journal.store import (
    Batch,
    Checkpoint,
    JournalStore,
    LeaseStore,
    RunEnding,
    RunHeader,
    RunRow,
)
from actors.journal.writer import (
    DEFAULT_PATH,
    DELAYS,
    LEASE_TTL,
    THRESHOLD,
    Journal,
    JournalOwner,
    open_journal,
)

__all__ = [
    "DEFAULT_PATH",
    "DELAYS",
    "LEASE_TTL",
    "TERMINAL",
    "THRESHOLD",
    "Batch",
    "Checkpoint",
    "Entry",
    "Journal",
    "JournalOwner",
    "JournalStore",
    "LeaseStore",
    "Leases",
    "MemoryStore",
    "PostgresStore",
    "RunEnding",
    "RunHeader",
    "RunRow",
    "SqliteStore",
    "checksum",
    "corrupt",
    "dumps",
    "ends_run",
    "entry_of",
    "open_journal",
    "record_of",
]
