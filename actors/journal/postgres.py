"""The PostgreSQL journal store (extra ``postgres``): psycopg 3, its synchronous API.

The journal calls a store's methods in a worker thread, one at a time, so the store is a
plain blocking object: psycopg's async API is asyncio-only, and a thread per call is
what the SQLite store does too. One connection, in autocommit mode, opened with the
session bounds of :class:`~actors.journal.postgres_session.PostgresTimeouts` (lock,
idle-in-transaction and statement timeouts, TCP keepalives) and opened again on the
next call when the server or the network ended it. Each
:meth:`~actors.journal.store.JournalStore.write` is one statement in one transaction,
committed before it returns (PostgreSQL's ``synchronous_commit`` decides what
"durable" means: on by default, on disk). The same tables as the SQLite store, created
on first use; entries keyed ``(run_id, seq)`` with ``ON CONFLICT DO NOTHING``. A driver
error that means the database cannot be used now (a timeout, a lost connection) is
``persistence_unavailable``, the driver's error its cause
(:func:`~actors.journal.postgres_session.unavailable`).

**Leases and fencing** (a fleet of daemons on one database). A run is owned by one
journal at a time through a lease row: its holder, a fencing token and an expiry on the
*database* clock (``clock_timestamp()``; replicas' clocks do not matter). A lease is
taken when it is free, expired, or already the taker's; each take bumps the token.
Every write checks, in its own transaction, that each run it writes for is still leased
with the writer's token: a run whose lease was taken over is *fenced* — nothing of it is
written, and :meth:`PostgresStore.write` returns its id (the rest of the batch is
written). Each take-over bumps a one-row epoch under its row lock, and every write
share-locks that row, so a take-over and a write never interleave. So two replicas never
both append to one run, even when the first one wakes up from a long pause.

**Liveness** (issue 27): a write and a take are each one statement, one round trip
(:mod:`actors.journal.postgres_write`), so a replica paused anywhere in them holds no
lock; the session's timeouts bound everything else (a lock wait, a session paused inside
one of the store's transactions of several statements — :meth:`PostgresStore.prune`'s,
say — a vanished peer).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from actors.errors import ActorError, Code
from actors.journal.integrity import unfinished_of
from actors.journal.postgres_session import PostgresTimeouts, connect, unavailable
from actors.journal.postgres_write import TAKE, WRITE, write_params
from actors.journal.records import Entry, header_checksum
from actors.journal.sql import tail_of, tails_query
from actors.journal.store import Batch, Checkpoint, LeaseStore, RunRow, RunTail

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
        cost DOUBLE PRECISION NOT NULL DEFAULT 0,
        checksum TEXT
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
    """CREATE TABLE IF NOT EXISTS journal_leases (
        run_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        token BIGINT NOT NULL,
        expires TIMESTAMPTZ NOT NULL
    )""",
    # One row: bumped by every take-over of an existing lease (see PostgresStore.write).
    "CREATE TABLE IF NOT EXISTS journal_epoch (id INT PRIMARY KEY, epoch BIGINT NOT NULL)",
    "INSERT INTO journal_epoch VALUES (1, 0) ON CONFLICT (id) DO NOTHING",
)

_TABLES: Final = ("journal_runs", "journal_events", "journal_checkpoints")

#: Times a write is sent while take-overs commit under it (each makes it write nothing
#: and be sent again: see actors/journal/postgres_write.py) before it fails.
_ATTEMPTS: Final = 5

_RUN_COLUMNS: Final = (
    "run_id, workflow, status, code, started, ended, duration, tokens, cost, definition,"
    " limits, (SELECT COUNT(*) FROM journal_events e WHERE e.run_id = journal_runs.run_id),"
    " checksum"
)


class PostgresStore(LeaseStore):
    """A :class:`~actors.journal.store.JournalStore` in a PostgreSQL database (see the
    module docstring). ``dsn``: a libpq connection string or URL (its password never
    appears in an error of this store). ``timeouts``: the session's bounds
    (:class:`~actors.journal.postgres_session.PostgresTimeouts`; its defaults when not
    given; ``input_validation`` for anything else). Several daemons may write to one
    database: runs are kept apart by their leases."""

    #: Runs are owned through leases (the journal takes one before running a run).
    leases = True

    def __init__(self, dsn: str, *, timeouts: PostgresTimeouts | None = None) -> None:
        if timeouts is None:
            timeouts = PostgresTimeouts()
        elif not isinstance(timeouts, PostgresTimeouts):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION,
                "PostgresStore: timeouts must be a PostgresTimeouts, got"
                f" {type(timeouts).__name__}",
            )
        #: The session's bounds, on every connection the store opens.
        self.timeouts = timeouts
        self._dsn = dsn  # to reconnect (never shown: the store has no repr of its own)
        self._closed = False
        self._db: Any = None
        self._db = connect(dsn, timeouts)
        try:
            with self._guard(), self._db.transaction():
                for statement in _SCHEMA:
                    self._db.execute(statement)
                self._add_checksums()
        except BaseException:
            self.close()  # the connection is not left open
            raise

    def _add_checksums(self) -> None:
        """A journal created before the rows' header checksum: the column, filled from
        the rows as they are (once: a row without one afterwards is a damaged row)."""
        db = self._db
        found = db.execute(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'journal_runs' AND column_name = 'checksum'"
        ).fetchall()
        if found:
            return
        db.execute("ALTER TABLE journal_runs ADD COLUMN IF NOT EXISTS checksum TEXT")
        rows = db.execute(
            "SELECT run_id, workflow, definition, limits, started FROM journal_runs"
            " WHERE checksum IS NULL"
        ).fetchall()
        for row in rows:
            db.execute(
                "UPDATE journal_runs SET checksum = %s WHERE run_id = %s",
                (header_checksum(*row), row[0]),
            )

    @property
    def db(self) -> Any:
        """The open psycopg connection — opened again first when the server or the
        network ended the last one (``persistence_unavailable`` when it cannot be);
        ``actor_stopped`` once the store is closed."""
        if self._closed:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal store is closed")
        if self._db is None or self._db.closed:
            self._db = None
            self._db = connect(self._dsn, self.timeouts)
        return self._db

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A call on the database: a driver error that means it cannot be used now is
        ``persistence_unavailable`` (:func:`~actors.journal.postgres_session.unavailable`;
        a lost connection is opened again by the next call); any other is raised as it
        is."""
        try:
            yield
        except Exception as exc:
            error = unavailable(exc, self._db)
            if error is None:
                raise
            raise error from exc

    def write(self, batch: Batch) -> frozenset[str]:
        """Write ``batch`` in one transaction, except the runs it fences (see the module
        docstring): their ids are returned, and nothing of theirs is written.

        One statement, one round trip (actors/journal/postgres_write.py): the epoch
        share-locked, the fences checked against the lease rows and the rows written
        together, so a replica paused at any point of a write holds no lock. When a
        take-over committed while the write waited for the epoch's lock, the statement
        wrote nothing and is sent again (a new snapshot), at most 5 times in all, then
        ``persistence_unavailable``; as it is when the database cannot be used now (a
        write whose connection was lost may have committed: the journal's retry stores
        each of its rows once)."""
        params = write_params(batch)
        for _ in range(_ATTEMPTS):
            with self._guard():
                locked, seen, fenced = self.db.execute(WRITE, params).fetchone()
            if locked is None:
                raise ActorError.from_code(
                    Code.PERSISTENCE_UNAVAILABLE, "the journal's epoch row is missing"
                )
            if locked == seen:
                return frozenset(fenced)
        raise ActorError.from_code(
            Code.PERSISTENCE_UNAVAILABLE,
            f"take-overs kept committing while this write waited ({_ATTEMPTS} attempts)",
        )

    def take_lease(self, run_id: str, holder: str, ttl: float) -> int | None:
        """Lease ``run_id`` to ``holder`` for ``ttl`` seconds of the database's clock:
        the new fencing token, or ``None`` while another holder's lease runs. Taking an
        existing lease over bumps the epoch in the same statement (one round trip: a
        replica paused in a take holds no lock)."""
        rows = self._rows(TAKE, run_id, holder, ttl)
        return int(rows[0][0]) if rows else None

    def renew_leases(self, holder: str, tokens: dict[str, int], ttl: float) -> set[str]:
        """Extend ``holder``'s leases that still carry these tokens; the runs renewed."""
        if not tokens:
            return set()
        rows = self._rows(
            "UPDATE journal_leases AS l SET expires = clock_timestamp() + %s * interval"
            " '1 second' FROM unnest(%s::text[], %s::bigint[]) AS t(run_id, token)"
            " WHERE l.run_id = t.run_id AND l.token = t.token AND l.holder = %s"
            " RETURNING l.run_id",
            ttl,
            list(tokens),
            list(tokens.values()),
            holder,
        )
        return {row[0] for row in rows}

    def give_back_lease(self, run_id: str, holder: str, token: int) -> bool:
        """End ``holder``'s lease on ``run_id`` now if it still carries ``token``: it is
        expired, not deleted, so the next take bumps the token past every one given."""
        rows = self._rows(
            "UPDATE journal_leases SET expires = '-infinity'"
            " WHERE run_id = %s AND holder = %s AND token = %s RETURNING run_id",
            run_id,
            holder,
            token,
        )
        return bool(rows)

    def orphans(self, *, thorough: bool = False) -> list[str]:
        """Unfinished runs nobody holds: no lease, or an expired one (oldest first).
        Those whose row says ``running``; ``thorough``, those :meth:`unfinished` lists."""
        if thorough:
            held = {
                row[0]
                for row in self._rows(
                    "SELECT run_id FROM journal_leases WHERE expires >= clock_timestamp()"
                )
            }
            return [run_id for run_id in self.unfinished() if run_id not in held]
        rows = self._rows(
            "SELECT r.run_id FROM journal_runs r LEFT JOIN journal_leases l"
            " ON l.run_id = r.run_id WHERE r.status = 'running'"
            " AND (l.run_id IS NULL OR l.expires < clock_timestamp())"
            " ORDER BY r.started, r.run_id"
        )
        return [row[0] for row in rows]

    def _rows(self, query: str, *params: Any) -> list[Any]:
        """``query``'s rows: one statement in its own transaction, one round trip."""
        with self._guard():
            return list(self.db.execute(query, params).fetchall())

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

    def stored(self, run_id: str) -> tuple[RunRow | None, list[Entry], Checkpoint | None]:
        """Row, entries and checkpoint in one ``REPEATABLE READ`` transaction (one
        snapshot: a replica writing meanwhile cannot make them disagree)."""
        with self._guard():
            db = self.db
            with db.transaction():
                db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                rows = db.execute(
                    f"SELECT {_RUN_COLUMNS} FROM journal_runs WHERE run_id = %s", (run_id,)
                ).fetchall()
                entries = db.execute(
                    "SELECT run_id, seq, name, at, body, checksum FROM journal_events"
                    " WHERE run_id = %s ORDER BY seq",
                    (run_id,),
                ).fetchall()
                points = db.execute(
                    "SELECT run_id, seq, progress, checksum FROM journal_checkpoints"
                    " WHERE run_id = %s",
                    (run_id,),
                ).fetchall()
        return (
            RunRow(*rows[0]) if rows else None,
            [Entry(*row) for row in entries],
            Checkpoint(*points[0]) if points else None,
        )

    def runs(self) -> list[RunRow]:
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM journal_runs ORDER BY started, run_id")
        return [RunRow(*row) for row in rows]

    def run(self, run_id: str) -> RunRow | None:
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM journal_runs WHERE run_id = %s", run_id)
        return RunRow(*rows[0]) if rows else None

    def tails(self) -> list[RunTail]:
        return [tail_of(row) for row in self._rows(tails_query(_TABLES[0], _TABLES[1]))]

    def unfinished(self) -> list[str]:
        return unfinished_of(self.tails())

    def prune(self, ended_before: float) -> int:
        db = self.db
        # Several statements in one transaction: a session paused between them is ended
        # by the server after idle_in_transaction_session_timeout (PostgresTimeouts).
        with self._guard(), db.transaction():
            gone = [
                row[0]
                for row in db.execute(
                    "SELECT run_id FROM journal_runs WHERE status <> 'running' AND ended < %s",
                    (ended_before,),
                ).fetchall()
            ]
            for table in (
                "journal_events",
                "journal_checkpoints",
                "journal_leases",
                "journal_runs",
            ):
                db.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)", (gone,))
        return len(gone)

    def close(self) -> None:
        self._closed = True
        if self._db is not None:
            self._db.close()
            self._db = None
