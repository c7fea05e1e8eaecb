"""The SQLite journal store (the default): the standard library's ``sqlite3``, WAL mode,
``synchronous=FULL`` — a transaction that returned is on disk.

One connection, used by one thread at a time (the journal serialises its calls). The
file is created with its tables on first use. A store that creates (``create=True``,
the journal's) holds ``PATH.lock`` exclusively while it is open: a second writer on the
same file — another daemon, which would resume this one's live runs — is refused with
``config_invalid``. ``create=False`` opens an existing journal only (the CLI; no lock
unless ``exclusive=True``) and refuses a path that does not exist.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path
from typing import Any, Final

from actors.errors import ActorError, Code
from actors.journal.records import Entry
from actors.journal.sql import write_statements
from actors.journal.store import Batch, Checkpoint, JournalStore, RunRow

SCHEMA_VERSION: Final = 1

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    definition TEXT NOT NULL,
    limits TEXT NOT NULL,
    started REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    code TEXT,
    ended REAL,
    duration REAL,
    tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_by_end ON runs (ended);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    at REAL NOT NULL,
    body TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    progress TEXT NOT NULL,
    checksum TEXT NOT NULL
);
"""

_RUN_COLUMNS: Final = (
    "run_id, workflow, status, code, started, ended, duration, tokens, cost, definition, limits,"
    " (SELECT COUNT(*) FROM events e WHERE e.run_id = runs.run_id)"
)


class SqliteStore(JournalStore):
    """A :class:`~actors.journal.store.JournalStore` in one SQLite file."""

    def __init__(
        self, path: str | Path, *, create: bool = True, exclusive: bool | None = None
    ) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise ActorError.from_code(
                Code.CONFIG_INVALID, f"no journal at {str(self.path)[:200]!r}"
            )
        self._lock: int | None = None
        self._db: sqlite3.Connection | None = None
        where = repr(str(self.path)[:200])
        try:
            if create if exclusive is None else exclusive:
                self._lock = _lock(self.path)
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=5.0
            )
            self._prepare(create)
        except (OSError, sqlite3.Error) as exc:  # nothing opened is left open
            self.close()
            what = (
                "is not a journal"
                if isinstance(exc, sqlite3.DatabaseError)
                and not isinstance(exc, sqlite3.OperationalError)  # a folder, a locked file
                else f"cannot be opened ({type(exc).__name__})"
            )
            raise ActorError.from_code(Code.CONFIG_INVALID, f"{where} {what}", cause=exc) from exc
        except BaseException:
            self.close()
            raise

    def _prepare(self, create: bool) -> None:
        db = self.db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        if create:
            db.executescript(_SCHEMA)
            db.execute(
                "INSERT OR IGNORE INTO journal_meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
            )
        else:
            db.execute("SELECT run_id, seq, name, at, body, checksum FROM events LIMIT 1")
            db.execute("SELECT run_id, status FROM runs LIMIT 1")

    @property
    def db(self) -> sqlite3.Connection:
        """The open SQLite connection; ``actor_stopped`` once the store is closed."""
        if self._db is None:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal store is closed")
        return self._db

    def write(self, batch: Batch) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            for sql, rows in write_statements(batch, "?", ("runs", "events", "checkpoints")):
                db.executemany(sql, rows)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def entries(self, run_id: str, after: int = -1) -> list[Entry]:
        rows = self.db.execute(
            "SELECT run_id, seq, name, at, body, checksum FROM events"
            " WHERE run_id = ? AND seq > ? ORDER BY seq",
            (run_id, after),
        )
        return [Entry(*row) for row in rows]

    def checkpoint(self, run_id: str) -> Checkpoint | None:
        row = self.db.execute(
            "SELECT run_id, seq, progress, checksum FROM checkpoints WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row is None else Checkpoint(*row)

    def runs(self) -> list[RunRow]:
        rows = self.db.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY started, run_id")
        return [_row(row) for row in rows]

    def run(self, run_id: str) -> RunRow | None:
        row = self.db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row is None else _row(row)

    def unfinished(self) -> list[str]:
        rows = self.db.execute(
            "SELECT run_id FROM runs WHERE status = 'running' ORDER BY started, run_id"
        )
        return [row[0] for row in rows]

    def prune(self, ended_before: float) -> int:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            gone = [
                row[0]
                for row in db.execute(
                    "SELECT run_id FROM runs WHERE status != 'running' AND ended < ?",
                    (ended_before,),
                )
            ]
            for table in ("events", "checkpoints", "runs"):
                db.executemany(f"DELETE FROM {table} WHERE run_id = ?", [(r,) for r in gone])
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return len(gone)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock is not None:
            os.close(self._lock)  # releases the lock
            self._lock = None


def _lock(path: Path) -> int:
    """Hold ``PATH.lock`` exclusively for this store's life: one writing daemon per
    journal (a second would resume the first one's live runs). The operating system
    releases it when the process dies, however it dies."""
    descriptor = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(descriptor)
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"journal {str(path)[:200]!r} is in use by another writer",
            cause=exc,
        ) from exc
    return descriptor


def _row(row: Any) -> RunRow:
    return RunRow(*row)
