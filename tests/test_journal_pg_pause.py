"""A replica paused (SIGSTOP) at a round-trip boundary of a write or a take never stalls
the fleet (issue 27), on a real PostgreSQL server: replica ``A`` is a separate process
(tests/pg_pause_child.py), ``B`` this one.

The boundaries: a write sent and its answer unread; a take-over sent and its answer
unread (each is one round trip: the parent catches it in flight by holding the epoch's
row lock until ``A``'s statement waits for it, stops ``A``, then lets go); and, as a
write and a take-over were before issue 27 — several round trips in one transaction —
``A`` stopped between them, holding the epoch's row lock.

Settings: lease TTL 2 s; ``A`` and ``B`` with ``lock_timeout`` 1 s and
``idle_in_transaction_session_timeout`` 1 s. What each test checks:

* ``A``'s statement sent before the pause runs to its end without it: its session is
  idle (no transaction, no lock) while it is stopped;
* ``B`` takes ``A``'s run over at most :data:`MARGIN` seconds after ``A``'s lease expired
  (on the database's clock), so within TTL + MARGIN of the pause;
* an operation of ``B`` that needs the lock a stopped transaction holds (only the
  pre-issue-27 shapes hold one) completes within idle + lock timeout + MARGIN of the
  pause: the server ends the stopped session, ``B``'s attempt that waited past its
  lock timeout is ``persistence_unavailable`` and the next one goes through;
* resumed (SIGCONT), ``A`` is fenced: nothing of the run is written by it after the
  take-over (the journal's rows say who wrote each record), and a session the server
  ended is opened again (one ``persistence_unavailable``, then the write goes on).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import ActorError
from actors.journal import Batch, Entry, PostgresStore
from tests.pg_pause_child import TIMEOUTS
from tests.test_journal_pg_timeouts import wait_for, waits_on_a_lock

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parent.parent
TTL = 2.0
LOCK = TIMEOUTS.lock_timeout
IDLE = TIMEOUTS.idle_in_transaction_session_timeout
#: Slack on every bound, for a loaded two-core machine.
MARGIN = 3.0


class Child:
    """Replica ``A``: commands in, JSON answers out (tests/pg_pause_child.py)."""

    def __init__(self, dsn: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.pg_pause_child", dsn],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._buffer = b""
        self.read("ready")

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, key: str | None = None, seconds: float = 30.0) -> Any:
        """The next answer (its ``key``'s value when given): what the test waits on."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + seconds
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "replica A did not answer"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
                assert chunk, f"replica A ended: {self.proc.wait()}"
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer = json.loads(line)
        if key is None:
            return answer
        assert key in answer, answer
        return answer[key]

    def call(self, command: str, key: str) -> Any:
        """``command``'s answer, past its ``sending`` line if it has one."""
        self.send(command)
        answer = self.read()
        if "sending" in answer:
            answer = self.read()
        assert key in answer, answer
        return answer[key]

    def stop(self) -> float:
        self.proc.send_signal(signal.SIGSTOP)
        return time.monotonic()

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.resume()
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def fleet(postgres_dsn: str) -> Iterator[tuple[Child, PostgresStore, Any]]:
    """Replica A (stopped and resumed by the test), replica B's store, and a plain
    session on the same database to look at the server."""
    import psycopg

    b = PostgresStore(postgres_dsn, timeouts=TIMEOUTS)
    child = Child(postgres_dsn)
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            yield child, b, admin
    finally:
        child.close()
        b.close()


def expiry(admin: Any, run_id: str) -> float:
    """When ``run_id``'s lease expires, on this process's monotonic clock (read from the
    database's clock)."""
    row = admin.execute(
        "SELECT extract(epoch FROM expires - clock_timestamp()) FROM journal_leases"
        " WHERE run_id = %s",
        (run_id,),
    ).fetchone()
    return time.monotonic() + float(row[0])


def session_state(admin: Any, pid: int) -> str | None:
    row = admin.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return None if row is None else str(row[0])


def until_done(attempt: Any, seconds: float = 20.0) -> tuple[Any, float]:
    """``attempt()`` again until it returns something else than ``None``, each
    ``persistence_unavailable`` (a lock timeout) tried again: the result and when."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            result = attempt()
        except ActorError as exc:
            assert exc.code == "persistence_unavailable", exc
            result = None
        if result is not None:
            return result, time.monotonic()
        assert time.monotonic() < deadline, "never done"
        time.sleep(0.02)


def take_over(b: PostgresStore, admin: Any, run_id: str, paused: float) -> int:
    """B takes ``run_id`` over once its lease expired, within the bounds."""
    expires = expiry(admin, run_id)
    token, taken = until_done(lambda: b.take_lease(run_id, "B", 30.0))
    assert taken - expires < MARGIN, f"taken over {taken - expires:.2f} s after expiry"
    assert taken - paused < TTL + MARGIN
    return int(token)


def writers(b: PostgresStore, run_id: str) -> list[tuple[int, str]]:
    """``(seq, who wrote it)`` of each of ``run_id``'s records."""
    return [(e.seq, json.loads(e.body)["by"]) for e in b.entries(run_id)]


def b_writes(b: PostgresStore, run_id: str, seq: int, token: int) -> frozenset[str]:
    entry = Entry(run_id, seq, "node:completed", float(seq), '{"by":"B"}', "b")
    return b.write(Batch(entries=[entry], fences={run_id: ("B", token)}))


def catch_in_flight(child: Child, admin: Any, command: str) -> tuple[float, int]:
    """Stop A with ``command``'s one statement sent and its answer unread: the epoch's
    row lock is held here until the statement waits for it; then let go."""
    admin.execute("BEGIN")
    admin.execute("SELECT epoch FROM journal_epoch WHERE id = 1 FOR UPDATE")
    child.send(command)
    pid = int(child.read("sending"))
    wait_for(lambda: waits_on_a_lock(admin, pid))
    paused = child.stop()
    admin.execute("ROLLBACK")
    # What A sent runs to its end without A: no transaction open, no lock held.
    wait_for(lambda: session_state(admin, pid) == "idle", 5.0)
    return paused, pid


def test_a_replica_stopped_with_its_write_sent_holds_nothing(
    fleet: tuple[Child, PostgresStore, Any],
) -> None:
    child, b, admin = fleet
    assert child.call(f"take r {TTL}", "token") == 1
    assert child.call("write r 0 1", "fenced") == []
    paused, _ = catch_in_flight(child, admin, "write r 1 1")
    assert writers(b, "r") == [(0, "A"), (1, "A")]  # committed while A was stopped
    token = take_over(b, admin, "r", paused)
    assert token == 2
    assert b_writes(b, "r", 2, token) == frozenset()
    child.resume()
    assert child.read("fenced") == []  # its write was before the take-over
    assert child.call("write r 7 1", "fenced") == ["r"]
    assert writers(b, "r") == [(0, "A"), (1, "A"), (2, "B")]


def test_a_replica_stopped_with_its_take_over_sent_holds_nothing(
    fleet: tuple[Child, PostgresStore, Any],
) -> None:
    child, b, admin = fleet
    assert b.take_lease("r", "ghost", 0.01) == 1  # a replica that died
    wait_for(lambda: expiry(admin, "r") < time.monotonic())
    paused, _ = catch_in_flight(child, admin, f"take r {TTL}")
    holder = admin.execute("SELECT holder, token FROM journal_leases WHERE run_id = 'r'")
    assert holder.fetchone() == ("A", 2)  # A's take-over committed while it was stopped
    token = take_over(b, admin, "r", paused)
    assert token == 3
    assert b_writes(b, "r", 0, token) == frozenset()
    child.resume()
    assert child.read("token") == 2
    assert child.call("write r 7 2", "fenced") == ["r"]
    assert writers(b, "r") == [(0, "B")]


def _resumed_and_fenced(child: Child, b: PostgresStore) -> None:
    """A, resumed after the server ended its session: one ``persistence_unavailable``,
    then its write (a new connection) is fenced."""
    child.resume()
    child.send("write r 7 1")
    child.read("sending")
    assert child.read("error") == "persistence_unavailable"
    assert child.call("write r 7 1", "fenced") == ["r"]
    assert writers(b, "r") == [(0, "A"), (1, "B")]


def test_a_replica_stopped_inside_a_write_transaction_is_ended_by_the_server(
    fleet: tuple[Child, PostgresStore, Any],
) -> None:
    """A write as it was before issue 27: the epoch share-locked, then A stopped."""
    child, b, admin = fleet
    assert child.call(f"take r {TTL}", "token") == 1
    assert child.call("write r 0 1", "fenced") == []
    assert b.take_lease("s", "ghost", 0.01) == 1
    wait_for(lambda: expiry(admin, "s") < time.monotonic())
    child.call("hold_share", "held")
    paused = child.stop()
    # B's take-over of another run bumps the epoch: it waits for the stopped session.
    token, taken = until_done(lambda: b.take_lease("s", "B", 30.0))
    assert token == 2
    assert taken - paused < IDLE + LOCK + MARGIN
    token = take_over(b, admin, "r", paused)
    assert b_writes(b, "r", 1, token) == frozenset()
    _resumed_and_fenced(child, b)


def test_a_replica_stopped_inside_a_take_over_transaction_is_ended_by_the_server(
    fleet: tuple[Child, PostgresStore, Any],
) -> None:
    """A take-over as it was before issue 27: the lease row taken and the epoch bumped,
    uncommitted, then A stopped — every write of the fleet waits for that lock."""
    child, b, admin = fleet
    assert child.call(f"take r {TTL}", "token") == 1
    assert child.call("write r 0 1", "fenced") == []
    assert b.take_lease("own", "B", 30.0) == 1
    assert b.take_lease("g", "ghost", 0.01) == 1
    wait_for(lambda: expiry(admin, "g") < time.monotonic())
    child.call(f"hold_take g {TTL}", "held")
    paused = child.stop()
    fenced, written = until_done(lambda: b_writes(b, "own", 0, 1))
    assert fenced == frozenset()
    assert written - paused < IDLE + LOCK + MARGIN
    owner = admin.execute("SELECT holder FROM journal_leases WHERE run_id = 'g'")
    assert owner.fetchone() == ("ghost",)  # A's take never committed
    token = take_over(b, admin, "r", paused)
    assert b_writes(b, "r", 1, token) == frozenset()
    _resumed_and_fenced(child, b)
