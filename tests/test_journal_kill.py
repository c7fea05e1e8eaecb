"""kill -9: a daemon running 10-node workflows with a journal is SIGKILLed at 20 random
points (some of them while it resumes); after each, a fresh process resumes: every run
completes, every node's side effect happened exactly once per idempotency key, no node
whose completion was durable ran again, and every run's journal is gap-free."""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from actors.journal import SqliteStore, record_of
from actors.journal.store import JournalStore
from tests.journal_kill_child import NODES

ROOT = Path(__file__).resolve().parent.parent
KILLS = 20
RUNS_PER_KILL = 3
SEED = 20261122


def _reader(journal: Path | str) -> JournalStore:
    """A store on the journal: the SQLite file, or the PostgreSQL database (a DSN)."""
    if isinstance(journal, str):
        from actors.journal.postgres import PostgresStore

        return PostgresStore(journal)
    return SqliteStore(journal, create=False)


class Forked:
    """A daemon forked by the zygote (tests/journal_kill_zygote.py), with the part of
    ``subprocess.Popen``'s interface the test uses."""

    def __init__(self, zygote: subprocess.Popen[str], fifo: Path, argv: list[str]) -> None:
        os.mkfifo(fifo)
        assert zygote.stdin is not None and zygote.stdout is not None
        zygote.stdin.write(json.dumps({"fifo": str(fifo), "argv": argv}) + "\n")
        zygote.stdin.flush()
        self.pid = int(zygote.stdout.readline())
        self.stdout: IO[str] = open(fifo)  # noqa: SIM115 - closed by wait / communicate
        self.returncode: int | None = None

    def send_signal(self, signum: int) -> None:
        """As ``Popen.send_signal``: nothing if the process already ended by itself (the
        zygote's kernel reaped it, so its pid is gone — a quick resume can end before
        the kill's random instant)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float) -> None:
        """Until the process is gone (the zygote's kernel reaps it)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.005)

    def communicate(self, timeout: float) -> tuple[str, None]:
        """Everything it prints until it ends (within ``timeout``); ``returncode`` from
        its exit line (``None``: it did not end by itself)."""
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.stdout], [], [], left)[0]:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            line = self.stdout.readline()
            if not line:
                break
            lines.append(line)
        self.stdout.close()
        if lines and lines[-1].startswith("EXIT "):
            self.returncode = int(lines.pop().split()[1])
        self.wait(timeout=max(0.0, deadline - time.monotonic()) + 5)
        return "".join(lines), None


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Forked]]:
    """Starts daemons (``journal_kill_child`` arguments) forked by one zygote process."""
    zygote = subprocess.Popen(
        [sys.executable, "-m", "tests.journal_kill_zygote"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    children: list[Forked] = []

    def start(*argv: str) -> Forked:
        child = Forked(zygote, tmp_path / f"child-{len(children)}.out", list(argv))
        children.append(child)
        return child

    try:
        yield start
    finally:
        for child in children:
            child.kill()
            if not child.stdout.closed:
                child.stdout.close()
        assert zygote.stdin is not None and zygote.stdout is not None
        zygote.stdin.close()
        zygote.wait(timeout=30)
        zygote.stdout.close()


def _kill_after_start(process: Forked, delay: float) -> None:
    line = process.stdout.readline()
    assert line.startswith("STARTED"), line
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    process.stdout.close()


def _finish(spawn: Callable[..., Forked], journal: Path | str, effects: Path) -> str:
    process = spawn(str(journal), str(effects), "resume")
    try:
        out, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()  # a resume that hangs fails the test and leaves no process behind
        raise
    assert process.returncode == 0, out
    return out


def _durably_completed(journal: Path | str) -> set[tuple[str, str]]:
    store = _reader(journal)
    try:
        return {
            (record.run_id, record.node_id)
            for row in store.runs()
            for record in map(record_of, store.entries(row.run_id))
            if record.name == "node:completed"
        }
    finally:
        store.close()


def _calls(effects: Path) -> list[tuple[str, str, int]]:
    db = sqlite3.connect(effects)
    try:
        return list(db.execute("SELECT key, node, pid FROM calls"))
    finally:
        db.close()


@pytest.mark.timeout(180)  # ~45 processes (forked: no import each); PostgreSQL waits on leases
@pytest.mark.parametrize(
    "backend",
    # PostgreSQL: each resuming process waits for the dead one's leases to expire.
    ["sqlite", "postgres"],
)
def test_kill_9_at_random_points_then_resume(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest, spawn: Callable[..., Forked]
) -> None:
    rng = random.Random(SEED)
    effects = tmp_path / "effects.db"
    journal: Path | str = (
        tmp_path / "daemon.journal"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_dsn")
    )
    all_runs: list[str] = []
    unfinished: list[int] = []  # runs each kill left unfinished
    for kill in range(KILLS):
        run_ids = [f"k{kill}-{n}" for n in range(RUNS_PER_KILL)]
        all_runs += run_ids
        process = spawn(str(journal), str(effects), "start", *run_ids)
        _kill_after_start(process, rng.uniform(0.0, 0.12))
        if kill % 4 == 3:  # kill the resuming process too
            durable = _durably_completed(journal)
            before = {pid for _, _, pid in _calls(effects)}
            _kill_after_start(spawn(str(journal), str(effects), "resume"), rng.uniform(0.0, 0.05))
            _assert_not_rerun(effects, durable, before)
        durable = _durably_completed(journal)
        before = {pid for _, _, pid in _calls(effects)}
        unfinished.append(len(_unfinished(journal)))
        out = _finish(spawn, journal, effects)
        assert "DONE completed" in out or "STARTED 0" in out, out
        _assert_not_rerun(effects, durable, before)
    _assert_journal_and_effects(journal, effects, all_runs)
    assert sum(1 for count in unfinished if count) >= KILLS // 2, unfinished  # kills hit runs


def _unfinished(journal: Path | str) -> list[str]:
    store = _reader(journal)
    try:
        return store.unfinished()
    finally:
        store.close()


def _assert_not_rerun(effects: Path, durable: set[tuple[str, str]], earlier_pids: set[int]) -> None:
    """No process after the kill called a node whose completion was durable at the kill."""
    again = [
        (key, node)
        for key, node, pid in _calls(effects)
        if pid not in earlier_pids and (key.split(":")[0], node) in durable
    ]
    assert again == []


def _assert_journal_and_effects(journal: Path | str, effects: Path, run_ids: list[str]) -> None:
    store = _reader(journal)
    try:
        assert store.unfinished() == []
        for run_id in run_ids:
            row = store.run(run_id)
            assert row is not None and row.status == "completed", run_id
            records = [record_of(entry) for entry in store.entries(run_id)]
            assert [r.seq for r in records] == list(range(len(records)))
            assert records[0].name == "run:started" and records[-1].name == "run:completed"
            assert records[-1].state == {node: f"{run_id}:{node}:1" for node in NODES}
            completed = [r.node_id for r in records if r.name == "node:completed"]
            assert sorted(completed) == sorted(NODES)  # each node completed exactly once
    finally:
        store.close()
    db = sqlite3.connect(effects)
    try:
        done = {key for (key,) in db.execute("SELECT key FROM done")}
        assert done == {f"{run}:{node}:1" for run in run_ids for node in NODES}
        called = {key for (key,) in db.execute("SELECT key FROM calls")}
        assert called == done  # no other execution of any node, ever
        charged = {key for (key,) in db.execute("SELECT key FROM tool_done")}
        assert charged == {f"{run}:s6:1:charge" for run in run_ids}
        tool_keys = {key for (key,) in db.execute("SELECT key FROM tool_calls")}
        assert tool_keys == charged
    finally:
        db.close()
