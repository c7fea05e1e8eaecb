"""The PostgreSQL store's session bounds (issue 27) and its one-statement write, on a
real server: ``PostgresTimeouts`` validated field by field; the settings on both ends of
the store's connection (and again after it reconnects); a lock wait past
``lock_timeout``, a session ended by the server and a lost connection are
``persistence_unavailable`` and the store goes on; a write that waited while a
take-over committed is sent again and fenced; a batch's several rows of one run keep
what the other stores keep. The pauses of a whole replica: tests/test_journal_pg_pause.py.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import ActorError
from actors.journal import (
    Batch,
    Checkpoint,
    Entry,
    PostgresStore,
    PostgresTimeouts,
    RunEnding,
    RunHeader,
)
from supervisors.runs import LEASE_TTL
from tests.test_journal_store import make_store

pytestmark = pytest.mark.timeout(60)

SECONDS = [
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "statement_timeout",
    "keepalives_idle",
    "keepalives_interval",
    "tcp_user_timeout",
]
SHORT = PostgresTimeouts(
    lock_timeout=0.5,
    idle_in_transaction_session_timeout=0.5,
    statement_timeout=5.0,
    keepalives_idle=2.2,
    keepalives_interval=1.0,
    keepalives_count=4,
    tcp_user_timeout=7.25,
)
SERVER = {  # what SHORT sets on the server, in pg_settings' units (ms; s for keepalives)
    "lock_timeout": "500",
    "idle_in_transaction_session_timeout": "500",
    "statement_timeout": "5000",
    "tcp_keepalives_idle": "3",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "4",
    "tcp_user_timeout": "7250",
}
CLIENT = {  # and as libpq connection parameters
    "keepalives": "1",
    "keepalives_idle": "3",
    "keepalives_interval": "1",
    "keepalives_count": "4",
    "tcp_user_timeout": "7250",
}
UNAVAILABLE = r"^\[persistence_unavailable\] the journal database cannot be used now \({}\)$"


def entry(run_id: str, seq: int, body: str = "{}") -> Entry:
    return Entry(run_id, seq, "node:completed", float(seq), body, f"c{seq}")


def header(run_id: str, workflow: str = "w") -> RunHeader:
    return RunHeader(run_id, workflow, '{"digest":"d"}', "{}", 100.0)


@pytest.fixture
def admin(postgres_dsn: str) -> Iterator[Any]:
    """A plain connection to the test's database, with no timeouts: another session."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        yield db


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def waits_on_a_lock(admin: Any, pid: int) -> bool:
    row = admin.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "Lock"


def test_the_defaults_bound_every_stall_within_the_default_lease_ttl() -> None:
    t = PostgresTimeouts()
    assert (t.lock_timeout, t.idle_in_transaction_session_timeout, t.statement_timeout) == (
        10.0,
        10.0,
        30.0,
    )
    assert (t.keepalives_idle, t.keepalives_interval, t.keepalives_count) == (10.0, 5.0, 3)
    assert t.tcp_user_timeout == 25.0
    silence = t.keepalives_idle + t.keepalives_interval * t.keepalives_count
    assert max(t.lock_timeout, t.idle_in_transaction_session_timeout) < LEASE_TTL / 2
    assert max(t.statement_timeout, silence, t.tcp_user_timeout) <= LEASE_TTL == 30.0


@pytest.mark.parametrize("field", SECONDS)
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (-1.0, "-1.0"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (True, "True"),
        ("10", "'10'"),
        (None, "None"),
        (2_147_484, "2147484"),
    ],
)
def test_a_bad_number_of_seconds_is_config_invalid_naming_the_field(
    field: str, value: object, shown: str
) -> None:
    with pytest.raises(ActorError) as raised:
        PostgresTimeouts(**{field: value})  # type: ignore[arg-type]
    assert raised.value.code == "config_invalid"
    assert str(raised.value) == (
        f"[config_invalid] PostgresTimeouts.{field} must be a finite number of seconds > 0"
        f" (at most 2147483), got {shown}"
    )


@pytest.mark.parametrize("value", [0, -3, 1.5, True, "3", 2**31])
def test_a_bad_keepalives_count_is_config_invalid(value: object) -> None:
    with pytest.raises(ActorError) as raised:
        PostgresTimeouts(keepalives_count=value)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "[config_invalid] PostgresTimeouts.keepalives_count must be an integer from 1 to"
        f" 2147483647, got {value!r}"
    )


def test_the_largest_and_smallest_settings_are_taken() -> None:
    big = PostgresTimeouts(lock_timeout=2_147_483, keepalives_count=2**31 - 1)
    assert big.settings()["lock_timeout"] == 2_147_483_000
    tiny = PostgresTimeouts(lock_timeout=1e-9, keepalives_idle=0.001)
    assert tiny.settings()["lock_timeout"] == 1  # rounded up: 0 would mean no bound
    assert tiny.libpq()["keepalives_idle"] == tiny.settings()["tcp_keepalives_idle"] == 1


def test_timeouts_that_are_not_a_postgres_timeouts_are_input_validation() -> None:
    with pytest.raises(ActorError) as raised:
        PostgresStore("host=127.0.0.1 port=1", timeouts={"lock_timeout": 1})  # type: ignore[arg-type]
    assert str(raised.value) == (
        "[input_validation] PostgresStore: timeouts must be a PostgresTimeouts, got dict"
    )


def test_a_dsn_password_is_in_no_error() -> None:
    dsn = "host=127.0.0.1 port=1 user=u password=s3cret-pw-77 connect_timeout=2"
    with pytest.raises(ActorError) as raised:
        PostgresStore(dsn)
    assert str(raised.value) == (
        "[persistence_unavailable] cannot connect to the journal database (OperationalError)"
    )
    assert "s3cret" not in repr(raised.value)


def _settings(store: PostgresStore) -> tuple[dict[str, str], dict[str, str]]:
    rows = store.db.execute(
        "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(SERVER),)
    ).fetchall()
    client = store.db.info.get_parameters()
    return dict(rows), {k: client.get(k, "") for k in CLIENT}


def test_the_settings_reach_both_ends_and_a_new_connection_again(
    postgres_dsn: str, admin: Any
) -> None:
    store = PostgresStore(postgres_dsn, timeouts=SHORT)
    try:
        assert store.timeouts is SHORT
        assert _settings(store) == (SERVER, CLIENT)
        first = store.db.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
        with pytest.raises(
            ActorError, match=UNAVAILABLE.format("AdminShutdown 57P01; connection lost")
        ):
            store.entries("r")  # the server ended the session: found on the next call
        assert store.entries("r") == []  # ... and the one after reconnects
        assert store.db.info.backend_pid != first
        assert _settings(store) == (SERVER, CLIENT)
    finally:
        store.close()
    defaults = PostgresStore(postgres_dsn)
    try:
        server, _ = _settings(defaults)
        assert server["lock_timeout"] == "10000" and server["statement_timeout"] == "30000"
    finally:
        defaults.close()
    with pytest.raises(ActorError, match=r"^\[actor_stopped\] the journal store is closed$"):
        defaults.entries("r")  # closed: never reconnects


def test_a_lock_wait_past_lock_timeout_is_persistence_unavailable_then_the_store_goes_on(
    postgres_dsn: str, admin: Any
) -> None:
    import psycopg

    store = PostgresStore(postgres_dsn, timeouts=SHORT)
    try:
        assert store.take_lease("r", "A", 30.0) == 1
        pid = store.db.info.backend_pid
        admin.execute("BEGIN")
        admin.execute("SELECT epoch FROM journal_epoch WHERE id = 1 FOR UPDATE")
        batch = Batch(entries=[entry("r", 0)], fences={"r": ("A", 1)})
        for call in (lambda: store.write(batch), lambda: store.take_lease("r", "A", 30.0)):
            started = time.monotonic()
            with pytest.raises(
                ActorError, match=UNAVAILABLE.format("LockNotAvailable 55P03")
            ) as raised:
                call()
            assert 0.45 < time.monotonic() - started < 5
            assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
        admin.execute("ROLLBACK")
        assert store.entries("r") == []  # nothing of the failed write
        assert store.write(batch) == frozenset()  # the same connection goes on
        assert store.take_lease("r", "A", 30.0) == 2  # the take failed: nothing was taken
        assert [e.seq for e in store.entries("r")] == [0]
        assert store.db.info.backend_pid == pid
    finally:
        store.close()


def test_a_session_paused_inside_a_transaction_is_ended_and_the_store_reconnects(
    postgres_dsn: str, admin: Any
) -> None:
    """What a write did before issue 27 — the epoch share-locked in one round trip, the
    rows in the next — with the store's process stalled between them: the server ends
    the session after idle_in_transaction_session_timeout, and a take-over waiting for
    the lock (with no lock_timeout of its own) goes through."""
    store = PostgresStore(postgres_dsn, timeouts=SHORT)
    try:
        store.db.execute("BEGIN")
        store.db.execute("SELECT epoch FROM journal_epoch WHERE id = 1 FOR SHARE")
        started = time.monotonic()
        admin.execute("UPDATE journal_epoch SET epoch = epoch + 1 WHERE id = 1")
        assert 0.3 < time.monotonic() - started < 5  # waited for the idle session's end
        with pytest.raises(ActorError) as raised:
            store.write(Batch(entries=[entry("free", 0)]))
        assert re.match(
            UNAVAILABLE.format(
                r"(IdleInTransactionSessionTimeout 25P03|OperationalError); connection lost"
            ),
            str(raised.value),
        )
        assert store.write(Batch(entries=[entry("free", 0)])) == frozenset()
        assert [e.seq for e in store.entries("free")] == [0]
        assert _settings(store) == (SERVER, CLIENT)
    finally:
        store.close()


def test_a_write_that_waited_while_a_take_over_committed_is_sent_again_and_fenced(
    postgres_dsn: str, admin: Any
) -> None:
    """The write's snapshot is taken before the epoch's lock is granted: had it kept
    the lease rows it read then, it would have written for a run taken over meanwhile."""
    store = PostgresStore(postgres_dsn, timeouts=PostgresTimeouts(lock_timeout=20.0))
    try:
        assert store.take_lease("r", "A", 30.0) == 1
        admin.execute("BEGIN")  # B's take-over, committing slowly
        admin.execute("UPDATE journal_leases SET holder = 'B', token = 2 WHERE run_id = 'r'")
        admin.execute("UPDATE journal_epoch SET epoch = epoch + 1 WHERE id = 1")
        batch = Batch(entries=[entry("r", 0), entry("free", 0)], fences={"r": ("A", 1)})
        result: list[Any] = []
        writer = threading.Thread(target=lambda: result.append(store.write(batch)))
        pid = store.db.info.backend_pid
        writer.start()
        wait_for(lambda: waits_on_a_lock(admin, pid))
        admin.execute("COMMIT")
        writer.join(10)
        assert result == [frozenset({"r"})]
        assert store.entries("r") == []
        assert [e.seq for e in store.entries("free")] == [0]  # the rest of the batch
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "memory", "postgres"])
def test_several_rows_of_one_run_in_one_batch_keep_what_writing_them_in_order_keeps(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    try:
        ended = [
            RunEnding("r", "failed", "x", 5.0, 4.0, 7, 0.5),
            RunEnding("r", "completed", None, 6.0, 5.0, 9, 0.75),
        ]
        points = [
            Checkpoint("r", 2, '{"p":2}', "k2"),
            Checkpoint("r", 5, '{"p":5}', "k5"),
            Checkpoint("r", 5, '{"p":"5b"}', "k5b"),
            Checkpoint("r", 3, '{"p":3}', "k3"),
        ]
        store.write(
            Batch(
                entries=[entry("r", 0, '{"first":1}'), entry("r", 0, '{"second":2}')],
                headers=[header("r"), header("r", "other")],
                endings=ended,
                checkpoints=points,
            )
        )
        (row,) = store.runs()
        assert (row.workflow, row.status, row.code, row.ended, row.tokens, row.cost) == (
            "w",
            "completed",
            None,
            6.0,
            9,
            0.75,
        )
        assert row.checksum == header("r").checksum
        assert store.checkpoint("r") == points[1]
        assert [e.body for e in store.entries("r")] == ['{"first":1}']
        store.write(Batch(checkpoints=[Checkpoint("r", 4, "{}", "k4")]))  # not later
        assert store.checkpoint("r") == points[1]
        store.write(Batch(endings=[RunEnding("r", "cancelled", "c", 7.0, 6.0, 1, 0.0)]))
        assert store.runs()[0].status == "cancelled"  # an ending of a stored row
    finally:
        store.close()


def test_text_that_needs_escaping_is_stored_as_it_is(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn)
    try:
        odd = ['{"q":"a\\"b"}', "back\\slash", "NULL", "", "{,}", "'; DROP TABLE x; --", "é ✓"]
        store.write(Batch(entries=[entry("r", i, body) for i, body in enumerate(odd)]))
        assert [e.body for e in store.entries("r")] == odd
        store.write(Batch(entries=[Entry("n", 0, "x", 1e-05, "{}", "c")]))
        assert store.entries("n")[0].at == 1e-05
    finally:
        store.close()
