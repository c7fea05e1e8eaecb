"""The PostgreSQL journal store (extra ``postgres``): psycopg 3, its synchronous API.

The journal calls a store's methods in a worker thread, one at a time, so the store is a
plain blocking object: psycopg's async API is asyncio-only, and a thread per call is
what the SQLite store does too. One connection; each
:meth:`~actors.journal.store.JournalStore.write` is one transaction, committed before
it returns (PostgreSQL's ``synchronous_commit`` decides what "durable" means: on by
default, on disk). The same tables as the SQLite store, created on first use; entries
keyed ``(run_id, seq)`` with ``ON CONFLICT DO NOTHING``.

**Leases and fencing** (a fleet of daemons on one database). A run is owned by one
journal at a time through a lease row: its holder, a fencing token and an expiry on the
*database* clock (``clock_timestamp()``; replicas' clocks do not matter). A lease is
taken when it is free, expired, or already the taker's; each take bumps the token.
Every write checks, in its own transaction, that each run it writes for is still leased
with the writer's token: a run whose lease was taken over is *fenced* — nothing of it is
written, and :meth:`PostgresStore.write` returns its id (the rest of the batch is
written). Each take-over bumps a one-row epoch under its row lock, and every write
share-locks that row first, so a take-over and a write never interleave, and the runs
are compared with their lease rows only when the epoch moved since they were last found
valid. So two replicas never both append to one run, even when the first one wakes up
from a long pause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from actors.errors import ActorError, Code
from actors.journal.integrity import unfinished_of
from actors.journal.records import Entry, header_checksum
from actors.journal.sql import tail_of, tails_query, write_statements
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

#: How many (run, fence) checks a store remembers (one per run it writes for).
_VERIFIED_MAX: Final = 10_000

#: A write's first round trip: its transaction begun, and the epoch read, share-locked
#: (two statements without parameters: one simple query).
_BEGIN: Final = "BEGIN; SELECT epoch FROM journal_epoch WHERE id = 1 FOR SHARE"

_TAKE: Final = (
    "INSERT INTO journal_leases (run_id, holder, token, expires)"
    " VALUES (%s, %s, 1, clock_timestamp() + %s * interval '1 second')"
    " ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder,"
    " token = journal_leases.token + 1, expires = excluded.expires"
    " WHERE journal_leases.expires < clock_timestamp()"
    " OR journal_leases.holder = excluded.holder"
    " RETURNING token"
)

_RUN_COLUMNS: Final = (
    "run_id, workflow, status, code, started, ended, duration, tokens, cost, definition,"
    " limits, (SELECT COUNT(*) FROM journal_events e WHERE e.run_id = journal_runs.run_id),"
    " checksum"
)


class PostgresStore(LeaseStore):
    """A :class:`~actors.journal.store.JournalStore` in a PostgreSQL database (see the
    module docstring). ``dsn``: a libpq connection string or URL (its password never
    appears in an error of this store). Several daemons may write to one database:
    runs are kept apart by their leases."""

    #: Runs are owned through leases (the journal takes one before running a run).
    leases = True

    def __init__(self, dsn: str) -> None:
        import psycopg

        try:
            self._db: Any = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise ActorError.from_code(
                Code.PERSISTENCE_UNAVAILABLE,
                f"cannot connect to the journal database ({type(exc).__name__})",
                cause=exc,
            ) from exc
        # (run, (holder, token)) -> the epoch at which its lease was found to be that.
        self._verified: dict[tuple[str, tuple[str, int]], int] = {}
        try:
            with self._db.transaction():
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
        """The open psycopg connection; ``actor_stopped`` once the store is closed."""
        if self._db is None:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the journal store is closed")
        return self._db

    def write(self, batch: Batch) -> frozenset[str]:
        """Write ``batch`` in one transaction, except the runs it fences (see the module
        docstring): their ids are returned, and nothing of theirs is written.

        The check is cheap when nothing was taken over: every take-over of a lease bumps
        the one-row epoch, under its row lock. A write share-locks that row (a take-over
        waits for the write in progress, a write for the take-over committing) and reads
        the epoch in the round trip that begins its transaction; the rows and the commit
        go in one more (a pipeline): two round trips a write. Each run is compared with
        its lease row only when it was not already found valid, with the same token, at
        this epoch. A write that fails is rolled back (when its connection still can)."""
        db = self.db
        with db.cursor() as cursor:
            try:
                cursor.execute(_BEGIN)
                cursor.nextset()
                row = cursor.fetchone()
                fenced = self._fenced(cursor, batch.fences, int(row[0]) if row else -1)
                if fenced:
                    batch = batch.without(fenced)
                with db.pipeline():  # the rows and the commit: one round trip
                    for sql, rows in write_statements(batch, "%s", _TABLES):
                        cursor.executemany(sql, rows)
                    cursor.execute("COMMIT")
            except BaseException:
                self._roll_back()
                raise
        return fenced

    def _roll_back(self) -> None:
        """After a failed write: end its transaction, if the connection still has one."""
        import psycopg

        db = self._db
        if (
            db is not None
            and not db.closed
            and db.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        ):
            db.execute("ROLLBACK")

    def _fenced(
        self, cursor: Any, fences: Mapping[str, tuple[str, int]], epoch: int
    ) -> frozenset[str]:
        """In a write's transaction, at ``epoch``: compare with its lease row each run
        not already found valid at that epoch; the runs whose lease no longer carries
        the writer's holder and token."""
        if not fences:
            return frozenset()
        verified = self._verified
        if len(verified) > _VERIFIED_MAX:  # bounded: what is dropped is checked again
            verified.clear()
        unchecked = {
            run: fence for run, fence in fences.items() if verified.get((run, fence)) != epoch
        }
        if not unchecked:
            return frozenset()
        cursor.execute(
            "SELECT run_id, holder, token FROM journal_leases WHERE run_id = ANY(%s)",
            (list(unchecked),),
        )
        held = {r[0]: (r[1], int(r[2])) for r in cursor.fetchall()}
        fenced = frozenset(run for run, fence in unchecked.items() if held.get(run) != fence)
        verified.update(
            {(run, fence): epoch for run, fence in unchecked.items() if run not in fenced}
        )
        return fenced

    def take_lease(self, run_id: str, holder: str, ttl: float) -> int | None:
        """Lease ``run_id`` to ``holder`` for ``ttl`` seconds of the database's clock:
        the new fencing token, or ``None`` while another holder's lease runs. Taking an
        existing lease over bumps the epoch in the same transaction."""
        db = self.db
        with db.transaction(), db.cursor() as cursor:
            cursor.execute(_TAKE, (run_id, holder, ttl))
            row = cursor.fetchone()
            if row is None:
                return None
            token = int(row[0])
            if token > 1:
                cursor.execute("UPDATE journal_epoch SET epoch = epoch + 1 WHERE id = 1")
        return token

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

    def tails(self) -> list[RunTail]:
        return [tail_of(row) for row in self._rows(tails_query(_TABLES[0], _TABLES[1]))]

    def unfinished(self) -> list[str]:
        return unfinished_of(self.tails())

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
            for table in (
                "journal_events",
                "journal_checkpoints",
                "journal_leases",
                "journal_runs",
            ):
                db.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)", (gone,))
        return len(gone)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
