"""The example daemon as a user runs it: a subprocess fed tasks on stdin, stopped with a
real SIGTERM or SIGINT (and a second one), then restarted on its journal to resume what
the shutdown interrupted."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from actors.journal import SqliteStore, record_of

ROOT = Path(__file__).resolve().parent.parent
WAIT = 60.0  # seconds for the daemon to reach a line (a slow CI machine, imports)
# Seconds a shutdown may take beyond its grace on a loaded machine: far less than the
# work it cuts (600 s) or a grace it ends (60 s), so the bounds still tell them apart.
SLACK = 10.0


class Daemon:
    """``agent_daemon.py serve`` in a subprocess; its stdout read line by line."""

    def __init__(self, journal: Path, *options: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "examples/agent_daemon.py",
                "serve",
                "--journal",
                str(journal),
                *list(options),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def send(self, *tasks: str) -> None:
        """Write task lines (a lone surrogate stands for a byte that is not UTF-8)."""
        assert self.process.stdin is not None
        data = "".join(task + "\n" for task in tasks).encode("utf-8", "surrogateescape")
        self.process.stdin.buffer.write(data)
        self.process.stdin.buffer.flush()

    def close_input(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def wait_for(self, *wanted: str) -> None:
        """Read until every line of ``wanted`` has been printed."""
        deadline = time.monotonic() + WAIT
        while not set(wanted) <= set(self.lines):
            line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"the daemon ended early: {self.lines}")
            self.lines.append(line)

    def finish(self, timeout: float) -> tuple[int, str]:
        """The exit code (within ``timeout`` seconds) and stderr; the rest of stdout read."""
        code = self.process.wait(timeout=timeout)
        while (line := self._queue.get(timeout=WAIT)) is not None:
            self.lines.append(line)
        assert self.process.stderr is not None
        return code, self.process.stderr.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


TASKS = (
    '{"id": "quick", "question": "status", "work": 0}',
    '{"id": "long-1", "question": "report", "work": 600}',
    '{"id": "long-2", "question": "audit", "work": 600}',
)


def _records(journal: Path, run_id: str) -> list[object]:
    store = SqliteStore(journal)
    try:
        return [record_of(entry) for entry in store.entries(run_id)]
    finally:
        store.close()


def _unfinished(journal: Path) -> list[str]:
    store = SqliteStore(journal)
    try:
        return store.unfinished()
    finally:
        store.close()


def _start_with_runs_in_flight(journal: Path, grace: float) -> Daemon:
    daemon = Daemon(journal, "--grace", str(grace))
    daemon.wait_for(f"ready journal={journal} grace={grace:g}s")
    daemon.send(*TASKS)
    daemon.wait_for("ended quick completed", "working long-1", "working long-2")
    return daemon


def _summary_took(prefix: str, line: str) -> float:
    """The seconds a summary ``line`` that starts with ``prefix`` reports."""
    match = re.fullmatch(prefix + r" (\d+\.\d\d) s", line)
    assert match, line
    return float(match[1])


def _assert_clean(code: int, stderr: str) -> None:
    assert code == 0
    for sign in ("Traceback", "ExceptionGroup", "KeyboardInterrupt"):
        assert sign not in stderr


@pytest.mark.parametrize(
    ("signum", "reason"), [(signal.SIGTERM, "sigterm"), (signal.SIGINT, "sigint")]
)
def test_a_signal_stops_the_daemon_gracefully_and_a_restart_resumes_its_runs(
    tmp_path: Path, signum: int, reason: str
) -> None:
    journal = tmp_path / "runs.journal"
    daemon = _start_with_runs_in_flight(journal, 1.5)
    try:
        sent = time.monotonic()
        os.kill(daemon.process.pid, signum)
        code, stderr = daemon.finish(timeout=WAIT)
        took = time.monotonic() - sent
    finally:
        daemon.kill()
    _assert_clean(code, stderr)
    # The grace is honoured, and the runs are cut after it (their work is 600 s): the
    # upper bound leaves room for a loaded machine.
    assert 1.5 <= took < 1.5 + SLACK, took
    assert sorted(daemon.lines[-3:-1]) == ["ended long-1 interrupted", "ended long-2 interrupted"]
    assert (
        1.5
        <= _summary_took(
            rf"shutdown \({reason}\): 0 runs ended in the grace, 2 interrupted and resumable,",
            daemon.lines[-1],
        )
        < 1.5 + SLACK
    )
    for run_id in ("long-1", "long-2"):
        last = _records(journal, run_id)[-1]
        assert (last.name, last.reason, last.in_flight, last.resumable) == (  # type: ignore[attr-defined]
            "run:cancelled",
            reason,
            ("work",),
            True,
        )
    assert _unfinished(journal) == ["long-1", "long-2"]

    _restart_and_finish(journal)


def _restart_and_finish(journal: Path) -> None:
    """Restarted on the same journal with no new task: it resumes both interrupted runs
    and completes them."""
    again = Daemon(journal, "--grace", "30", "--max-work", "0")
    try:
        again.close_input()
        code, stderr = again.finish(timeout=WAIT)
    finally:
        again.kill()
    _assert_clean(code, stderr)
    assert {
        "resumed long-1",
        "resumed long-2",
        "ended long-1 completed",
        "ended long-2 completed",
    } <= set(again.lines)
    assert again.lines[-1].startswith("shutdown (eof): ")
    assert _unfinished(journal) == []
    for run_id in ("long-1", "long-2"):
        names = [record.name for record in _records(journal, run_id)]  # type: ignore[attr-defined]
        assert names[-5:] == [
            "run:cancelled",
            "run:resumed",
            "node:started",
            "node:completed",
            "run:completed",
        ]
        assert names.count("run:cancelled") == 1


def test_a_second_signal_ends_the_grace_at_once(tmp_path: Path) -> None:
    journal = tmp_path / "runs.journal"
    daemon = _start_with_runs_in_flight(journal, 60)
    try:
        os.kill(daemon.process.pid, signal.SIGTERM)
        daemon.wait_for("stopping (sigterm) grace=60s")
        sent = time.monotonic()
        os.kill(daemon.process.pid, signal.SIGINT)
        code, stderr = daemon.finish(timeout=WAIT)
        took = time.monotonic() - sent
    finally:
        daemon.kill()
    _assert_clean(code, stderr)
    assert took < SLACK, took  # not the 60 s grace
    assert (
        _summary_took(
            r"shutdown \(sigterm\): 0 runs ended in the grace, 2 interrupted and resumable,",
            daemon.lines[-1],
        )
        < SLACK
    )
    assert _unfinished(journal) == ["long-1", "long-2"]
    _restart_and_finish(journal)


def test_bad_task_lines_are_refused_and_the_daemon_goes_on(tmp_path: Path) -> None:
    journal = tmp_path / "runs.journal"
    daemon = Daemon(journal, "--grace", "5")
    try:
        daemon.send(
            "{not json",
            "\udcff\udcfe not utf-8",
            '{"id": "w", "work": -1}',
            '{"id": "ok", "work": 0}',
            '{"id": "ok", "work": 0}',
            "",
            "a plain question",
        )
        daemon.close_input()
        code, stderr = daemon.finish(timeout=WAIT)
    finally:
        daemon.kill()
    _assert_clean(code, stderr)
    refused = [line for line in daemon.lines if line.startswith("refused ")]
    assert len(refused) == 4, daemon.lines
    assert refused[0].startswith("refused '{not json': ")
    assert refused[1] == (
        "refused '\ufffd\ufffd not utf-8': 'utf-8' codec can't decode byte 0xff in position 0:"
        " invalid start byte"
    )
    assert (
        refused[2]
        == 'refused \'{"id": "w", "work": -1}\': a task is an object whose work is seconds >= 0'
    )
    assert refused[3] == "refused 'ok': name_taken"
    ended = sorted(line for line in daemon.lines if line.startswith("ended "))
    assert len(ended) == 2 and all(line.endswith(" completed") for line in ended)


def _minimal(tmp_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "minimal_daemon.py")],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _read_until(stream: IO[bytes], text: bytes) -> bytes:
    """Lines of ``stream`` up to and including the first that contains ``text``."""
    seen = b""
    while True:  # a daemon that never prints it: the suite's per-test timeout ends it
        line = stream.readline()
        if not line:
            raise AssertionError(f"the daemon ended early: {seen.decode(errors='replace')}")
        seen += line
        if text in line:
            return seen


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process`` if a failed assertion left it running; close its pipes."""
    if process.poll() is None:
        process.kill()
        process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def test_the_minimal_daemon_takes_every_line_even_bad_bytes_and_a_last_one(
    tmp_path: Path,
) -> None:
    process = _minimal(tmp_path)
    try:
        out, err = process.communicate(b"one\n\xff\xfe bad\ntwo", timeout=WAIT)
    finally:
        _reap(process)
    lines = [line for line in out.decode().splitlines() if not line.startswith("20")]
    assert process.returncode == 0 and b"Traceback" not in err
    answers = sorted(line.split(" ", 2)[2] for line in lines if " completed " in line)
    assert answers == ["ONE", "TWO", "\ufffd\ufffd BAD"]
    assert lines[-1].startswith("shutdown (eof): 3 runs ended in the grace (3 completed)")


def test_the_minimal_daemon_refuses_a_line_that_comes_during_the_grace(tmp_path: Path) -> None:
    process = _minimal(tmp_path)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b"hello\n")
        process.stdin.flush()
        seen = _read_until(process.stdout, b"run:started")  # hello runs: its step takes 1 s
        process.send_signal(signal.SIGTERM)  # the grace is 5 s
        seen += _read_until(process.stdout, b"daemon.stopping")
        time.sleep(0.2)  # the daemon's next steps: its shutdown closes the intake
        process.stdin.write(b"late\n")
        process.stdin.flush()
        out, err = process.communicate(timeout=WAIT)
    finally:
        _reap(process)
    lines = [line for line in (seen + out).decode().splitlines() if not line.startswith("20")]
    assert process.returncode == 0 and b"Traceback" not in err
    assert "refused 'late' actor_stopped" in lines
    assert any(line.endswith(" completed HELLO") for line in lines)  # its grace was whole
    assert lines[-1].startswith("shutdown (sigterm): 1 run ended in the grace (1 completed)")
