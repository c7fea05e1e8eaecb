"""The run journal: every record of every run's event stream on disk, before anyone
sees it; what recovery replays (docs/journal.md).

* :class:`JournalWriter` and :func:`writing` — the writer (group commit, one attempt
  per batch), asking a :class:`JournalSupervision` what to do after a failed write
  (:class:`WriteFailed`, :class:`AfterWriteFailed`) and about leases; the journal
  with the house's policy, and the way to open one, are
  :class:`supervisors.runs.Journal` and :func:`supervisors.runs.open_journal`;
* :class:`SqliteStore` — the default backend; :class:`MemoryStore` — in memory;
  :class:`PostgresStore` — PostgreSQL, shared by a fleet of daemons (extra
  ``postgres``; runs owned through leases, :class:`LeaseHolder`, :class:`LeaseStore`;
  its session's bounds :class:`PostgresTimeouts`);
  :class:`JournalStore` — the protocol a backend implements (:class:`Batch`,
  :class:`RunHeader`, :class:`RunEnding`, :class:`Checkpoint`, :class:`RunRow`);
* :class:`Entry`, :func:`entry_of`, :func:`record_of` — one stored record;
  :func:`dumps` (JSON as the journal writes it), :func:`checksum`, :func:`corrupt`
  (the ``event_log_corrupt`` error), :data:`TERMINAL` (the terminal record names),
  :func:`ends_run` (a record that ends its run for good: not a resumable cancel),
  :data:`STATUS_OF` (the row's status a terminal record gives), :func:`header_checksum`,
  :func:`checkpoint_checksum`;
* :func:`sound` (whether a run's stored data can be trusted: the one check recovery and
  ``runs verify`` use), :func:`damaged` (every damaged run of a store),
  :func:`unfinished_of` and :func:`ends_for_good` (which runs recovery looks at, read
  from the rows and the records both; :class:`RunTail`).

Recovery itself (replaying a run into a running engine) is
:meth:`supervisors.runs.Runs.resume`.

The names that moved to ``supervisors.runs`` (:data:`_MOVED`) still work from here,
with a ``DeprecationWarning`` naming their new place.
"""

import importlib
import warnings
from typing import Any

from actors.journal.integrity import (
    damage_of,
    damaged,
    ends_for_good,
    readable_id,
    sound,
    unfinished_of,
)
from actors.journal.leases import LeaseHolder, lease_lost
from actors.journal.memory import MemoryStore
from actors.journal.postgres import PostgresStore
from actors.journal.postgres_session import PostgresTimeouts
from actors.journal.records import (
    STATUS_OF,
    TERMINAL,
    Entry,
    checkpoint_checksum,
    checksum,
    corrupt,
    corrupt_seq,
    dumps,
    ends_run,
    entry_of,
    header_checksum,
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
    RunTail,
)
from actors.journal.supervision import (
    AfterWriteFailed,
    JournalOwner,
    JournalSupervision,
    Queued,
    Read,
    WriteFailed,
)
from actors.journal.writer import DEFAULT_PATH, JournalWriter, writing

__all__ = [
    "DEFAULT_PATH",
    "STATUS_OF",
    "TERMINAL",
    "AfterWriteFailed",
    "Batch",
    "Checkpoint",
    "Entry",
    "JournalOwner",
    "JournalStore",
    "JournalSupervision",
    "JournalWriter",
    "LeaseHolder",
    "LeaseStore",
    "MemoryStore",
    "PostgresStore",
    "PostgresTimeouts",
    "Queued",
    "Read",
    "RunEnding",
    "RunHeader",
    "RunRow",
    "RunTail",
    "SqliteStore",
    "WriteFailed",
    "checkpoint_checksum",
    "checksum",
    "corrupt",
    "corrupt_seq",
    "damage_of",
    "damaged",
    "dumps",
    "ends_for_good",
    "ends_run",
    "entry_of",
    "header_checksum",
    "lease_lost",
    "readable_id",
    "record_of",
    "sound",
    "unfinished_of",
    "writing",
]

#: The names that moved out of ``actors.journal`` -> the module that has them now. The
#: retry schedule, the halting and the leases' renewal and fencing are decisions, and
#: decisions live in ``supervisors`` (docs/architecture.md). The only place ``actors``
#: names ``supervisors`` (tests/layering.py, R4).
_MOVED = {
    "DELAYS": "supervisors.runs",
    "LEASE_TTL": "supervisors.runs",
    "THRESHOLD": "supervisors.runs",
    "Journal": "supervisors.runs",
    "Leases": "supervisors.runs",
    "open_journal": "supervisors.runs",
}


def __getattr__(name: str) -> Any:
    """A moved name, from its new module, with a ``DeprecationWarning``."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = _MOVED[name]
    warnings.warn(
        f"actors.journal.{name} is deprecated: use {new}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(_MOVED[name]), name)
