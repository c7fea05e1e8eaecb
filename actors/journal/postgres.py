"""The PostgreSQL journal store (extra ``postgres``): psycopg 3, its synchronous API.

The journal calls a store's methods in a worker thread, one at a time, so the store is a
plain blocking object: psycopg's async API is asyncio-only, and a thread per call is
what the SQLite store does too. One connection, autocommit off: each
:meth:`~actors.journal.store.JournalStore.write` is one transaction, committed before
it returns (PostgreSQL's ``synchronous_commit`` decides what "durable" means: on by
default, on disk). The same tables as the SQLite store, created on first use; entries
keyed ``(run_id, seq)`` with ``ON CONFLICT DO NOTHING``.

Still to come (the fleet): ownership of a run by a lease on the database clock, and a
fencing token checked on every append, so that another replica can take over a run.
"""

from __future__ import annotations

from typing import Any, Final

from actors.errors import ActorError, Code
from actors.journal.records import Entry
from actors.journal.sql import write_statements
from actors.journal.store import Batch, Checkpoint, RunRow

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS journal_runs (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        definition TEXT NOT NULL,
        limits TEXT NOT NULL,
        started DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL DEFAULT 'running',
        code TEXT,
        ended DOUBLE PRECISION,
        duration DOUBLE PRECISION,
        tokens BIGINT NOT NULL DEFAULT 0,
        cost DOUBLE PRECISION NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS journal_runs_by_end ON journal_runs (ended)",
    """CREATE TABLE IF NOT EXISTS journal_events (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        name TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        body TEXT NOT NULL,
        checksum TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS journal_checkpoints (
        run_id TEXT PRIMARY KEY,
        seq BIGINT NOT NULL,
        progress TEXT NOT NULL,
        checksum TEXT NOT NULL
    )""",
)

#: The advisory lock key a writing store holds (an arbitrary constant: "rajo").
_WRITER_LOCK: Final = 0x72616A6F

_RUN_COLUMNS: Final = (
    "run_id, workflow, status, code, started, ended, duration, tokens, cost, definition,"
    " limits, (SELECT COUNT(*) FROM journal_events e WHERE e.run_id = journal_runs.run_id)"
)


class PostgresStore:
    """A :class:`~actors.journal.store.JournalStore` in a PostgreSQL database (see the
    module docstring). ``dsn``: a libpq connection string or URL (its password never
    appears in an error of this store). A store that writes (``exclusive``, the default)
    holds a session advisory lock: a second writer on the same database is refused
    with ``config_invalid``; readers pass ``exclusive=False``."""

    def __init__(self, dsn: str, *, exclusive: bool = True) -> None:
        import psycopg

        try:
            self._db: Any = psycopg.connect(dsn, autocommit=False)
        except psycopg.Error as exc:
            raise ActorError.from_code(
                Code.PERSISTENCE_UNAVAILABLE,
                f"cannot connect to the journal database ({type(exc).__name__})",
                cause=exc,
            ) from exc
        try:
            with self._db.transaction():
                for statement in _SCHEMA:
                    self._db.execute(statement)
        except BaseException:
            self.close()  # the connection is not left open
            raise
        if exclusive:
            # One writing daemon per database, as the SQLite store's lock file: a session
            # advisory lock, released with the connection (the server sees a dead
            # process's connection go). Leases per run replace it for fleets.
            with self._db.transaction():
                row = self._db.execute(
                    "SELECT pg_try_advisory_lock(%s)", (_WRITER_LOCK,)
                ).fetchone()
            if not (row and row[0]):
                self.close()
                raise ActorError.from_code(
                    Code.CONFIG_INVALID, "the journal database is in use by another writer"
                )

    @property
    def db(self) -> Any:
        if self._db is None:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal store is closed")
        return self._db

    def write(self, batch: Batch) -> None:
        db = self.db
        tables = ("journal_runs", "journal_events", "journal_checkpoints")
        with db.transaction(), db.cursor() as cursor:
            for sql, rows in write_statements(batch, "%s", tables):
                cursor.executemany(sql, rows)

    def _rows(self, query: str, *params: Any) -> list[Any]:
        db = self.db
        with db.transaction():
            return list(db.execute(query, params).fetchall())

    def entries(self, run_id: str, after: int = -1) -> list[Entry]:
        rows = self._rows(
            "SELECT run_id, seq, name, at, body, checksum FROM journal_events"
            " WHERE run_id = %s AND seq > %s ORDER BY seq",
            run_id,
            after,
        )
        return [Entry(*row) for row in rows]

    def checkpoint(self, run_id: str) -> Checkpoint | None:
        rows = self._rows(
            "SELECT run_id, seq, progress, checksum FROM journal_checkpoints WHERE run_id = %s",
            run_id,
        )
        return Checkpoint(*rows[0]) if rows else None

    def runs(self) -> list[RunRow]:
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM journal_runs ORDER BY started, run_id")
        return [RunRow(*row) for row in rows]

    def run(self, run_id: str) -> RunRow | None:
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM journal_runs WHERE run_id = %s", run_id)
        return RunRow(*rows[0]) if rows else None

    def unfinished(self) -> list[str]:
        rows = self._rows(
            "SELECT run_id FROM journal_runs WHERE status = 'running' ORDER BY started, run_id"
        )
        return [row[0] for row in rows]

    def prune(self, ended_before: float) -> int:
        db = self.db
        with db.transaction():
            gone = [
                row[0]
                for row in db.execute(
                    "SELECT run_id FROM journal_runs WHERE status <> 'running' AND ended < %s",
                    (ended_before,),
                ).fetchall()
            ]
            for table in ("journal_events", "journal_checkpoints", "journal_runs"):
                db.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)", (gone,))
        return len(gone)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
