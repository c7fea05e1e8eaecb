"""The SQLite journal store (the default): the standard library's ``sqlite3``, WAL mode,
``synchronous=FULL`` — a transaction that returned is on disk.

One connection, used by one thread at a time (the journal serialises its calls). The
file is created with its tables on first use. A store that creates (``create=True``,
the journal's) holds ``PATH.lock`` exclusively while it is open: a second writer on the
same file — another daemon, which would resume this one's live runs — is refused with
``config_invalid``. ``create=False`` opens an existing journal only (the CLI; no lock
unless ``exclusive=True``) and refuses a path that does not exist; with
``read_only=True`` as well it changes nothing on disk (SQLite's ``mode=ro``: not even the
journal mode of a file that is not a journal).

No ``sqlite3`` exception leaves the store: a damaged file (``SQLITE_CORRUPT``, a
garbled page) is ``event_log_corrupt`` naming the file; one that cannot be used now (locked,
an I/O error, a full disk) is ``persistence_unavailable``; at open, a file that is not a
SQLite database is ``config_invalid``. Text that is not UTF-8 (a garbled byte) is read
back as it is, with surrogate escapes, so the record's checksum — not a decoding error —
tells it is damaged.

Schema 2 adds the row's header checksum (``runs.checksum``); a journal of schema 1 gets
the column, and a checksum of each row as it is then, the first time a store opens it
for writing. A reader (``create=False``) of a schema-1 file sees every row without one.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from actors.errors import ActorError, Code
from actors.journal.integrity import unfinished_of
from actors.journal.records import Entry, header_checksum
from actors.journal.sql import tail_of, tails_query, write_statements
from actors.journal.store import Batch, Checkpoint, JournalStore, RunRow, RunTail

T = TypeVar("T")

SCHEMA_VERSION: Final = 2

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
    cost REAL NOT NULL DEFAULT 0,
    checksum TEXT
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
    " (SELECT COUNT(*) FROM events e WHERE e.run_id = runs.run_id), {checksum}"
)


class SqliteStore(JournalStore):
    """A :class:`~actors.journal.store.JournalStore` in one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        exclusive: bool | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only and not create
        if not create and not self.path.is_file():
            raise ActorError.from_code(
                Code.CONFIG_INVALID, f"no journal at {str(self.path)[:200]!r}"
            )
        self._lock: int | None = None
        self._db: sqlite3.Connection | None = None
        self._columns = _RUN_COLUMNS.format(checksum="checksum")
        where = repr(str(self.path)[:200])
        try:
            if create if exclusive is None else exclusive:
                self._lock = _lock(self.path)
            self._db = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro" if self.read_only else self.path,
                check_same_thread=False,
                isolation_level=None,
                timeout=5.0,
                uri=self.read_only,
            )
            self._db.text_factory = _text
            self._prepare(create)
        except (OSError, sqlite3.Error, UnicodeDecodeError) as exc:  # nothing opened is left open
            self.close()
            if (
                isinstance(exc, sqlite3.Error | UnicodeDecodeError)
                and not isinstance(exc, _NotAJournal)
                and _damaged(exc)
                and getattr(exc, "sqlite_errorname", "") != "SQLITE_NOTADB"
            ):
                raise _typed(self.path, exc) from exc
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
        if not self.read_only:  # a reader changes nothing, not even the journal mode
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
        if create:
            db.executescript(_SCHEMA)
            db.execute(
                "INSERT OR IGNORE INTO journal_meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
            )
            if not self._has_checksums():
                self._add_checksums()
        else:
            try:
                db.execute("SELECT run_id, seq, name, at, body, checksum FROM events LIMIT 1")
                db.execute("SELECT run_id, status FROM runs LIMIT 1")
            except sqlite3.OperationalError as exc:  # a SQLite file without our tables
                if "no such" not in str(exc):
                    raise
                raise _NotAJournal(str(exc)) from exc
            if not self._has_checksums():
                self._columns = _RUN_COLUMNS.format(checksum="NULL")

    def _has_checksums(self) -> bool:
        return any(row[1] == "checksum" for row in self.db.execute("PRAGMA table_info(runs)"))

    def _add_checksums(self) -> None:
        """Schema 1 -> 2: the header checksum column, filled from the rows as they are."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("ALTER TABLE runs ADD COLUMN checksum TEXT")
            rows = db.execute("SELECT run_id, workflow, definition, limits, started FROM runs")
            db.executemany(
                "UPDATE runs SET checksum = ? WHERE run_id = ?",
                [(header_checksum(*row), row[0]) for row in rows.fetchall()],
            )
            db.execute("UPDATE journal_meta SET value = ? WHERE key = 'schema'", ("2",))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @property
    def db(self) -> sqlite3.Connection:
        """The open SQLite connection; ``actor_stopped`` once the store is closed."""
        if self._db is None:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal store is closed")
        return self._db

    def write(self, batch: Batch) -> None:
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                for sql, rows in write_statements(batch, "?", ("runs", "events", "checkpoints")):
                    db.executemany(sql, rows)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except (sqlite3.Error, UnicodeError) as exc:
            raise _typed(self.path, exc) from exc

    def _read(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """``read(connection)``, its ``sqlite3`` errors typed (see the module docstring)."""
        db = self.db
        try:
            return read(db)
        except (sqlite3.Error, UnicodeError) as exc:
            raise _typed(self.path, exc) from exc

    def entries(self, run_id: str, after: int = -1) -> list[Entry]:
        sql = (
            "SELECT run_id, seq, name, at, body, checksum FROM events"
            " WHERE run_id = ? AND seq > ? ORDER BY seq"
        )
        return self._read(lambda db: [Entry(*row) for row in db.execute(sql, (run_id, after))])

    def checkpoint(self, run_id: str) -> Checkpoint | None:
        sql = "SELECT run_id, seq, progress, checksum FROM checkpoints WHERE run_id = ?"
        row = self._read(lambda db: db.execute(sql, (run_id,)).fetchone())
        return None if row is None else Checkpoint(*row)

    def stored(self, run_id: str) -> tuple[RunRow | None, list[Entry], Checkpoint | None]:
        def read(db: sqlite3.Connection) -> tuple[Any, list[Entry], Any]:
            db.execute("BEGIN")  # one snapshot of the file (WAL)
            try:
                row = db.execute(
                    f"SELECT {self._columns} FROM runs WHERE run_id = ?", (run_id,)
                ).fetchone()
                entries = [
                    Entry(*e)
                    for e in db.execute(
                        "SELECT run_id, seq, name, at, body, checksum FROM events"
                        " WHERE run_id = ? ORDER BY seq",
                        (run_id,),
                    )
                ]
                point = db.execute(
                    "SELECT run_id, seq, progress, checksum FROM checkpoints WHERE run_id = ?",
                    (run_id,),
                ).fetchone()
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
            return row, entries, point

        row, entries, point = self._read(read)
        return (
            None if row is None else _row(row),
            entries,
            None if point is None else Checkpoint(*point),
        )

    def runs(self) -> list[RunRow]:
        sql = f"SELECT {self._columns} FROM runs ORDER BY started, run_id"
        return self._read(lambda db: [_row(row) for row in db.execute(sql)])

    def run(self, run_id: str) -> RunRow | None:
        sql = f"SELECT {self._columns} FROM runs WHERE run_id = ?"
        row = self._read(lambda db: db.execute(sql, (run_id,)).fetchone())
        return None if row is None else _row(row)

    def tails(self) -> list[RunTail]:
        sql = tails_query("runs", "events")
        return self._read(lambda db: [tail_of(row) for row in db.execute(sql)])

    def unfinished(self) -> list[str]:
        return unfinished_of(self.tails())

    def prune(self, ended_before: float) -> int:
        return self._read(lambda db: self._prune(db, ended_before))

    def _prune(self, db: sqlite3.Connection, ended_before: float) -> int:
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


class _NotAJournal(sqlite3.DatabaseError):
    """A SQLite file without the journal's tables (``config_invalid``: not a journal)."""


def _text(data: bytes) -> str:
    """A TEXT value as it is stored, undecodable bytes kept as surrogate escapes (a
    checksum over it then fails, as it should)."""
    return data.decode("utf-8", "surrogateescape")


def _damaged(exc: BaseException) -> bool:
    """``exc`` says the file is damaged (rather than busy, unwritable or closed)."""
    if isinstance(exc, UnicodeError):  # a garbled schema (SQLite's message) or run id
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", "")
    return type(exc) is sqlite3.DatabaseError or name.startswith(
        ("SQLITE_CORRUPT", "SQLITE_NOTADB")
    )


def _typed(path: Path, exc: sqlite3.Error | UnicodeError) -> ActorError:
    """A ``sqlite3`` error as the store's typed error (see the module docstring)."""
    where = repr(str(path)[:200])
    if _damaged(exc):
        return ActorError.from_code(
            Code.EVENT_LOG_CORRUPT, f"journal {where} is damaged: {exc}"[:400], cause=exc
        )
    return ActorError.from_code(
        Code.PERSISTENCE_UNAVAILABLE,
        f"journal {where} cannot be used now ({type(exc).__name__}: {exc})"[:400],
        cause=exc,
    )
