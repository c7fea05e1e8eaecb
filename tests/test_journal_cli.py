"""``python -m actors runs …`` on real journal files: each command's output, and one
line on stderr with exit code 2 for every bad input."""

from __future__ import annotations

import io
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from actors.journal.cli import main
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import open_journal, open_runs
from tests.journal_cli_app import BROKEN, GATED
from tests.journal_helpers import copy_file

ROOT = Path(__file__).resolve().parent.parent
DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


async def _journal(path: Path, *, leave_open: bool = False) -> None:
    """``done`` completed, ``bad`` failed, ``gone`` cancelled; with ``leave_open`` a copy
    of the file is taken while ``open`` waits on its approval (``path`` then holds it)."""
    live = path.with_suffix(".live")
    async with (
        open_journal(live) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal) as runs,
    ):
        done = await runs.start(GATED, {"ticket": "T-1"}, run_id="done")
        while not done.pending:
            await trio.sleep(0.01)
        done.decide("ok", "approve", by="ops")
        await done.wait()
        await (await runs.start(BROKEN, run_id="bad")).wait()
        gone = await runs.start(GATED, run_id="gone")
        while not gone.pending:
            await trio.sleep(0.01)
        gone.cancel("operator: withdrawn")
        await gone.wait()
        waiting = await runs.start(GATED, run_id="open")
        while not waiting.pending:
            await trio.sleep(0.01)
        await journal.flush()
        copy_file(live, path)
        waiting.cancel("test over")


@pytest.fixture
async def journal_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs.journal"
    await _journal(path)
    return path


async def test_list_prints_every_run_as_a_table(journal_file: Path) -> None:
    code, out = cli("runs", "list", "--journal", str(journal_file))
    assert code == 0
    lines = out.splitlines()
    assert re.fullmatch(r"RUN +WORKFLOW +STATUS +STARTED +DURATION +TOKENS +COST +EVENTS", lines[0])
    rows = [line.split() for line in lines[1:-1]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("done", "gated", "completed"),
        ("bad", "broken", "failed/tool_failed"),
        ("gone", "gated", "cancelled"),
        ("open", "gated", "running"),
    ]
    assert all(re.fullmatch(DATE, r[3]) for r in rows)
    assert rows[0][5:] == ["0", "$0.000000", "10"] and re.fullmatch(r"\d+\.\d\ds", rows[0][4])
    assert rows[3][4:] == ["0", "$0.000000", "5"]  # no duration while running
    assert lines[-1] == "4 runs"
    code, out = cli("runs", "list", "--journal", str(journal_file), "--status", "failed")
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["bad"]
    assert out.splitlines()[-1] == "1 run"


async def test_show_prints_the_records_with_timings_and_the_failure(journal_file: Path) -> None:
    code, out = cli("runs", "show", "done", "--journal", str(journal_file))
    assert code == 0
    lines = out.splitlines()
    assert re.fullmatch(
        rf"run done  workflow gated  status completed  started {DATE}  duration \d+\.\d\ds"
        r"  tokens 0  cost \$0\.000000",
        lines[0],
    )
    records = [line.split()[:3] for line in lines[1:]]
    assert [(int(seq), name) for seq, _, name in records] == list(
        enumerate(
            [
                "run:started",
                "node:started",
                "node:completed",
                "node:started",
                "approval:requested",
                "approval:decided",
                "node:completed",
                "node:started",
                "node:completed",
                "run:completed",
            ]
        )
    )
    assert lines[1].split()[1] == "0.000"
    assert lines[1].endswith("run:started         workflow=gated inputs=ticket")
    assert re.search(r"node:completed      a #1\.1 \d\.\d{3}s wrote=a next=ok$", out, re.M)
    assert re.search(r"approval:decided    ok approve by ops$", out, re.M)
    code, out = cli("runs", "show", "bad", "--journal", str(journal_file))
    assert code == 0
    assert re.search(r"node:failed +x #1\.1 tool_failed unhandled next=-$", out, re.M)
    failure = out.splitlines()[-1]
    assert re.fullmatch(r"failure: tool_failed: .+ \(correlation id [0-9a-f]{24}\)", failure), (
        failure
    )
    assert "the ticket system is down" not in out  # the error's own text stays in the log
    code, out = cli("runs", "show", "gone", "--journal", str(journal_file))
    assert "run:cancelled       reason='operator: withdrawn' in_flight=ok" in out


async def test_show_marks_a_damaged_record_and_exits_1(journal_file: Path) -> None:
    db = sqlite3.connect(journal_file, isolation_level=None)
    db.execute("UPDATE events SET body = body || ' ' WHERE run_id = 'done' AND seq = 2")
    db.close()
    code, out = cli("runs", "show", "done", "--journal", str(journal_file))
    assert code == 1
    assert "    2  CORRUPT  run 'done': journal corrupt at seq 2: checksum mismatch" in out
    assert "run:completed" in out  # the other records are still shown


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "list", "--journal", "{missing}"], r"no journal at '.*missing\.journal'"),
        (["runs", "list", "--journal", "{foreign}"], r"'.*notes\.txt' is not a journal"),
        (["runs", "show", "nope", "--journal", "{journal}"], r"no run 'nope' in .*runs\.journal"),
        (["runs", "tail", "nope", "--journal", "{journal}"], r"no run 'nope' in .*runs\.journal"),
        (
            ["runs", "tail", "done", "--interval", "0", "--journal", "{journal}"],
            r"--interval must be seconds > 0",
        ),
        (["runs", "prune", "--older-than", "7 days", "--journal", "{journal}"], r"--older-than"),
        (["runs", "prune", "--older-than", "0d", "--journal", "{journal}"], r"--older-than"),
        (["runs", "prune", "--older-than=-3h", "--journal", "{journal}"], r"--older-than"),
        (["runs", "resume", "open", "--journal", "{journal}"], r"resume needs the daemon's"),
        (
            ["runs", "resume", "done", "--app", "x:y", "--journal", "{journal}"],
            r"run 'done' has ended \(completed\)",
        ),
        (
            ["runs", "resume", "open", "--app", "nomodule", "--journal", "{journal}"],
            r"--app must be MODULE:CALLABLE, got 'nomodule'",
        ),
        (
            ["runs", "resume", "open", "--app", "no_such_mod:x", "--journal", "{journal}"],
            r"cannot import 'no_such_mod'",
        ),
        (
            [
                "runs",
                "resume",
                "open",
                "--app",
                "tests.journal_cli_app:GATED",
                "--journal",
                "{journal}",
            ],
            r"'tests\.journal_cli_app:GATED' is not a callable",
        ),
    ],
)
async def test_bad_input_is_one_line_and_exit_2(
    journal_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database\n" * 50)
    paths = {
        "{missing}": str(tmp_path / "missing.journal"),
        "{foreign}": str(foreign),
        "{journal}": str(journal_file),
    }
    code, out = cli(*[paths.get(arg, arg) for arg in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert re.fullmatch(rf"python -m actors runs: error: {message}.*\n", err), err
    assert not (tmp_path / "missing.journal").exists()


def test_the_module_runs_with_its_name_and_argparse_errors_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "actors", "runs", "show"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    # One line, as every error of the CLI (docs/journal.md): not argparse's usage block.
    assert (
        done.stderr == "python -m actors runs: error: the following arguments are required: run\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "actors", "runs", "list"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "python -m actors runs: error: no journal at 'runs.journal'\n"


async def test_tail_follows_a_live_run_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "live.journal"
    async with (
        open_journal(path) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal) as runs,
    ):
        run = await runs.start(GATED, run_id="live")
        while not run.pending:
            await trio.sleep(0.01)
        await journal.flush()
        output = tmp_path / "tail.out"
        with output.open("w") as sink:
            tail = await trio.lowlevel.open_process(
                [
                    sys.executable,
                    "-m",
                    "actors",
                    "runs",
                    "tail",
                    "live",
                    "-f",
                    "--interval",
                    "0.05",
                    "--journal",
                    str(path),
                ],
                cwd=ROOT,
                stdout=sink,
            )
            await trio.sleep(1.0)
            assert tail.poll() is None  # still following
            run.decide("ok", "approve", by="ops")
            await run.wait()
            with trio.fail_after(30):
                code = await tail.wait()
    out = output.read_text()
    assert code == 0
    names = [line.split()[2] for line in out.splitlines()[1:]]
    assert names[:5] == [
        "run:started",
        "node:started",
        "node:completed",
        "node:started",
        "approval:requested",
    ]
    assert names[-1] == "run:completed"
    assert len(names) == len(run.history)


async def test_tail_without_follow_prints_what_there_is(journal_file: Path) -> None:
    code, out = cli("runs", "tail", "open", "--journal", str(journal_file))
    assert code == 0
    assert out.splitlines()[-1].split()[2] == "approval:requested"


def test_resume_runs_the_daemons_entry_point(tmp_path: Path) -> None:
    path = tmp_path / "runs.journal"
    trio.run(_journal, path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors",
            "runs",
            "resume",
            "open",
            "--app",
            "tests.journal_cli_app:resume",
            "--journal",
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "open: completed"
    _, out = cli("runs", "list", "--journal", str(path), "--status", "running")
    assert out.splitlines()[-1] == "0 runs"


def test_prune_deletes_old_finished_runs_only(tmp_path: Path) -> None:
    path = tmp_path / "runs.journal"
    trio.run(_journal, path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(
        "UPDATE runs SET ended = ? WHERE run_id IN ('done', 'bad')", (time.time() - 8 * 86400,)
    )
    db.execute("UPDATE runs SET started = 0 WHERE run_id = 'open'")  # old, but still running
    db.close()
    assert cli("runs", "prune", "--older-than", "7d", "--journal", str(path)) == (
        0,
        "pruned 2 runs\n",
    )
    _, out = cli("runs", "list", "--journal", str(path))
    assert sorted(line.split()[0] for line in out.splitlines()[1:-1]) == ["gone", "open"]
    assert cli("runs", "prune", "--older-than", "30s", "--journal", str(path)) == (
        0,
        "pruned 0 runs\n",
    )
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM events WHERE run_id IN ('done', 'bad')").fetchone() == (
        0,
    )
    db.close()
