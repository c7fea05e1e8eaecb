"""A damaged journal never loses a run silently and never lets a raw driver exception
out (issue 27): hundreds of seeded random truncations and byte garbles of a real SQLite
journal, and row-level edits on SQLite and PostgreSQL.

The journal holds runs that ended (``done1``, ``done2``, ``gone``) and runs paused on an
approval (``open1``, ``open2``). For every damage, opening the runs either

* raises one typed error naming the file (the file as a whole cannot be read), or
* for each unfinished run: resumes it — and, approved, it completes with exactly the
  state an uninterrupted run has, no node completed twice (recovery started from a
  point the run really reached) — or reports it (``run.not_resumed``), or the resumed
  run halts with a typed journal error (its next write hit the damage);
* and never resumes a run that ended.

``python -m actors runs list`` and ``runs verify`` on each damaged file answer with exit 0,
1 or 2, never a traceback; ``verify`` on an undamaged journal finds nothing.
"""

from __future__ import annotations

import io
import random
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from actors import ActorError, Code
from actors.journal import JournalStore, SqliteStore, checkpoint_checksum
from actors.journal.cli import main as cli
from actors.testing import capture_events
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import Approval, Edge, NodeContext, Step, Workflow, open_journal, open_runs
from tests.journal_helpers import copy_file

#: Node executions in this process, by (run, node): a resumed run must not run again a
#: node its recovered records completed.
EXECUTED: Counter[tuple[str, str]] = Counter()


def _step(key: str, value: int) -> Callable[[NodeContext], Any]:
    async def step(ctx: NodeContext) -> dict[str, Any]:
        EXECUTED[ctx.run_id, key] += 1
        return {key: value}

    step.__qualname__ = f"fuzz_step_{key}"
    return step


WF = Workflow(
    name="fuzzed",
    nodes=[
        Step(id="a", fn=_step("a", 1), writes=["a"]),
        Step(id="b", fn=_step("b", 2), writes=["b"]),
        Approval(id="gate"),
        Step(id="c", fn=_step("c", 3), writes=["c"]),
    ],
    edges=[
        Edge(source="a", target="b"),
        Edge(source="b", target="gate"),
        Edge(source="gate", target="c"),
    ],
)
FINAL = {"a": 1, "b": 2, "c": 3}
OPEN = ("open1", "open2")
ENDED = ("done1", "done2", "gone")


async def _until_pending(run: Any) -> None:
    with trio.fail_after(20):
        while run.pending != ("gate",):
            await trio.sleep(0.005)


async def _make_image(path: Path) -> None:
    live = path.with_suffix(".live")
    async with (
        open_journal(live) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal) as runs,
    ):
        for run_id in ("done1", "gone", "open1", "done2", "open2"):
            run = await runs.start(WF, run_id=run_id)
            await _until_pending(run)
            if run_id.startswith("done"):
                run.decide("gate", "approve", by="ops")
                assert (await run.wait()).status == "completed"
            elif run_id == "gone":
                run.cancel("for good")
                assert (await run.wait()).status == "cancelled"
        await journal.flush()
        copy_file(live, path)
        for run in list(runs.live.values()):
            run.cancel("image taken")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "pristine.journal"
    trio.run(_make_image, path)
    return path


# -- the check every damaged journal gets ------------------------------------------------


async def _open_and_finish(store: JournalStore | Path, name: str) -> str:
    """Open the runs on a damaged journal and drive every resumed run to its end;
    checks the rules of the module docstring. Returns what happened, for the tally."""
    EXECUTED.clear()
    with capture_events("run.not_resumed") as refused:
        try:
            async with (
                open_journal(store, delays=(0.01,), threshold=1, close_timeout=2.0) as journal,
                open_tree(SupervisorSpec()) as tree,
                open_runs(tree, journal=journal, workflows=[WF]) as runs,
            ):
                resumed = {run.run_id: run for run in runs.resumed}
                outcomes = {}
                for run_id, run in resumed.items():
                    assert run_id in OPEN, f"{run_id} ended and was resumed"
                    # What recovery replayed: a prefix the run really reached.
                    completed = Counter(
                        r.node_id for r in run.history if r.name == "node:completed"
                    )
                    with trio.fail_after(20):
                        while run.pending != ("gate",) and not run.done:
                            await trio.sleep(0.005)
                    if not run.done:
                        run.decide("gate", "approve", by="ops")
                    outcomes[run_id] = await run.wait()
                    for node, count in completed.items():
                        assert count == 1, (run_id, node, count)
                        assert EXECUTED[run_id, node] == 0, f"{run_id}: {node} ran again"
        except ActorError as error:
            assert error.code in (
                Code.EVENT_LOG_CORRUPT,
                Code.PERSISTENCE_UNAVAILABLE,
                Code.CONFIG_INVALID,
            ), error
            assert name in error.message, error.message  # it names the file
            return "file"
    reported = {event.run_id: event for event in refused}
    for event in refused:
        assert event.code in ("event_log_corrupt", "persistence_unavailable"), event
    for run_id in OPEN:
        if run_id in reported:
            continue
        assert run_id in outcomes, f"{run_id} was neither resumed nor reported"
        outcome = outcomes[run_id]
        if outcome.status == "completed":
            assert dict(outcome.state) == FINAL
        else:  # its next write hit the damage: halted, typed
            assert outcome.error is not None and outcome.error.code in (
                Code.PERSISTENCE_UNAVAILABLE,
                Code.EVENT_LOG_CORRUPT,
            ), outcome
    return f"{len(outcomes)} resumed, {len(reported)} reported"


def _cli_answers(path: Path) -> None:
    """``runs list`` and ``runs verify`` exit 0, 1 or 2 — never a traceback."""
    for command in ("list", "verify"):
        code = cli(["runs", command, "--journal", str(path)], io.StringIO())
        assert code in (0, 1, 2)


# -- SQLite: the file itself ---------------------------------------------------------------


def _truncate(data: bytearray, rng: random.Random) -> bytearray:
    return data[: rng.randrange(1, len(data))]


def _garble(data: bytearray, rng: random.Random) -> bytearray:
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return data


FILE_CASES = [(kind, seed) for kind in ("truncate", "garble") for seed in range(110)]


async def test_random_damage_to_the_file_loses_no_run_silently(image: Path, tmp_path: Path) -> None:
    tally: Counter[str] = Counter()
    pristine = await trio.Path(image).read_bytes()
    for kind, seed in FILE_CASES:
        rng = random.Random(f"{kind}-{seed}")
        data = bytearray(pristine)
        damaged = tmp_path / f"{kind}-{seed}.journal"
        await trio.Path(damaged).write_bytes(
            _truncate(data, rng) if kind == "truncate" else _garble(data, rng)
        )
        _cli_answers(damaged)
        try:
            tally[await _open_and_finish(damaged, damaged.name)] += 1
        except AssertionError as failure:
            raise AssertionError(f"{kind} seed {seed}: {failure}") from failure
    assert sum(tally.values()) == len(FILE_CASES) == 220
    # The damage was real: some files were unreadable, some runs reported, some resumed.
    assert tally["file"] > 0 and len(tally) > 2, tally


# -- row-level edits, on both backends ---------------------------------------------------------

#: (name, SQL with {runs}, {events}, {checkpoints} for the table names; the run is
#: picked by the seed) — each a damage recovery must see.
ROW_EDITS = [
    ("delete the row", "DELETE FROM {runs} WHERE run_id = %(run)s"),
    (
        "change a status byte",
        "UPDATE {runs} SET status = 'r' || substr(status, 2) || 'x' WHERE run_id = %(run)s",
    ),
    ("mark it running", "UPDATE {runs} SET status = 'running', code = NULL WHERE run_id = %(run)s"),
    ("mark it completed", "UPDATE {runs} SET status = 'completed' WHERE run_id = %(run)s"),
    ("delete the tail", "DELETE FROM {events} WHERE run_id = %(run)s AND seq >= %(seq)s"),
    ("delete one record", "DELETE FROM {events} WHERE run_id = %(run)s AND seq = %(seq)s"),
    ("delete the records", "DELETE FROM {events} WHERE run_id = %(run)s"),
    (
        "garble a body",
        "UPDATE {events} SET body = replace(body, ':', ': ') WHERE run_id = %(run)s AND seq = %(seq)s",
    ),
    (
        "rename a record",
        "UPDATE {events} SET name = 'node:skipped' WHERE run_id = %(run)s AND seq = %(seq)s",
    ),
    (
        "move a record's time",
        "UPDATE {events} SET at = at + 1 WHERE run_id = %(run)s AND seq = %(seq)s",
    ),
    (
        "change the limits",
        "UPDATE {runs} SET limits = replace(limits, 'null', '5') WHERE run_id = %(run)s",
    ),
    ("change the workflow", "UPDATE {runs} SET workflow = 'other' WHERE run_id = %(run)s"),
    ("drop the checksum", "UPDATE {runs} SET checksum = NULL WHERE run_id = %(run)s"),
    ("move the checkpoint", "UPDATE {checkpoints} SET seq = seq + 1 WHERE run_id = %(run)s"),
    (
        "garble the checkpoint",
        "UPDATE {checkpoints} SET progress = replace(progress, '1', '7') WHERE run_id = %(run)s",
    ),
    ("delete the checkpoint", "DELETE FROM {checkpoints} WHERE run_id = %(run)s"),
    (
        "renumber a record",
        "UPDATE {events} SET seq = seq + 100 WHERE run_id = %(run)s AND seq = %(seq)s",
    ),
]
RUN_IDS = OPEN + ENDED


def _row_cases() -> list[tuple[str, str, dict[str, Any]]]:
    cases = []
    for index, (name, sql) in enumerate(ROW_EDITS):
        for run_id in RUN_IDS:
            seq = random.Random(f"{name}-{run_id}").randint(1, 4)
            cases.append(
                (f"{name} of {run_id} (seq {seq}, #{index})", sql, {"run": run_id, "seq": seq})
            )
    return cases


ROW_CASES = _row_cases()
SQLITE_TABLES = {"runs": "runs", "events": "events", "checkpoints": "checkpoints"}
PG_TABLES = {
    "runs": "journal_runs",
    "events": "journal_events",
    "checkpoints": "journal_checkpoints",
}


def _sqlite_sql(sql: str) -> str:
    return sql.format(**SQLITE_TABLES).replace("%(run)s", ":run").replace("%(seq)s", ":seq")


async def test_row_level_edits_on_sqlite_lose_no_run_silently(image: Path, tmp_path: Path) -> None:
    assert len(ROW_CASES) == 17 * 5
    tally: Counter[str] = Counter()
    for case, sql, params in ROW_CASES:
        damaged = tmp_path / "edited.journal"
        shutil.copy(image, damaged)
        db = sqlite3.connect(damaged, isolation_level=None)
        db.execute(_sqlite_sql(sql), params)
        db.close()
        _cli_answers(damaged)
        try:
            tally[await _open_and_finish(damaged, damaged.name)] += 1
        except AssertionError as failure:
            raise AssertionError(f"{case}: {failure}") from failure
        damaged.unlink()
    assert tally["file"] == 0, tally  # row damage stays confined to its run


def test_verify_lists_each_damaged_run_and_exits_1(image: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    assert cli(["runs", "verify", "--journal", str(image)], out) == 0
    assert out.getvalue() == "5 runs, 0 damaged\n"
    damaged = tmp_path / "two.journal"
    shutil.copy(image, damaged)
    db = sqlite3.connect(damaged, isolation_level=None)
    db.execute("UPDATE runs SET status = 'running', code = NULL WHERE run_id = 'done1'")
    db.execute("DELETE FROM events WHERE run_id = 'open2' AND seq >= 3")
    db.close()
    out = io.StringIO()
    assert cli(["runs", "verify", "--journal", str(damaged)], out) == 1
    lines = out.getvalue().splitlines()
    assert lines[-1] == "5 runs, 2 damaged"
    assert sorted(lines[:-1]) == [
        "done1  seq 11  the run's row says 'running' but its records end with run:completed",
        "open2  seq 3  the checkpoint is at seq 4, past the last record",
    ]


def test_a_file_too_damaged_to_read_is_exit_2_with_one_line(
    image: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = tmp_path / "half.journal"
    data = image.read_bytes()
    damaged.write_bytes(data[: len(data) // 3])
    for command in (["list"], ["verify"], ["show", "open1"]):
        assert cli(["runs", *command, "--journal", str(damaged)], io.StringIO()) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "half.journal" in err, err
        assert err.startswith("python -m actors runs: error: "), err


async def test_a_checkpoint_left_past_lost_records_is_reported_not_rerun(
    image: Path, tmp_path: Path
) -> None:
    """The targeted case of the issue: the run's last records deleted, its later
    checkpoint kept — it would otherwise resume from the records and run ``b`` again."""
    damaged = tmp_path / "tail.journal"
    shutil.copy(image, damaged)
    db = sqlite3.connect(damaged, isolation_level=None)
    (point,) = db.execute("SELECT seq FROM checkpoints WHERE run_id = 'open1'").fetchone()
    db.execute("DELETE FROM events WHERE run_id = 'open1' AND seq >= ?", (point,))
    db.close()
    with capture_events("run.not_resumed") as refused:
        async with (
            open_journal(damaged) as journal,
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree, journal=journal, workflows=[WF]) as runs,
        ):
            assert [run.run_id for run in runs.resumed] == ["open2"]
            for run in runs.resumed:
                run.cancel("test over")
    assert [(e.run_id, e.code, e.seq) for e in refused] == [("open1", "event_log_corrupt", point)]
    assert refused[0].message == (
        f"run 'open1': journal corrupt at seq {point}: the checkpoint is at seq {point}, "
        "past the last record"
    )


async def test_the_pristine_image_resumes_both_open_runs(image: Path, tmp_path: Path) -> None:
    """The fuzz's reference: undamaged, both open runs resume and complete, no node
    runs twice, nothing is reported."""
    copy = tmp_path / "same.journal"
    shutil.copy(image, copy)
    assert await _open_and_finish(copy, copy.name) == "2 resumed, 0 reported"
    assert Counter({("open1", "c"): 1, ("open2", "c"): 1}) == EXECUTED


# -- PostgreSQL: the same rows, the same edits --------------------------------------------


def _load_into_postgres(image: Path, dsn: str) -> None:
    import psycopg

    source = SqliteStore(image, create=False)
    rows = source.db.execute(
        "SELECT run_id, workflow, definition, limits, started, status, code, ended, duration,"
        " tokens, cost, checksum FROM runs"
    ).fetchall()
    events = source.db.execute("SELECT * FROM events").fetchall()
    points = source.db.execute("SELECT * FROM checkpoints").fetchall()
    source.close()
    with psycopg.connect(dsn, autocommit=True) as db, db.transaction():
        for table in ("journal_runs", "journal_events", "journal_checkpoints", "journal_leases"):
            db.execute(f"DELETE FROM {table}")
        with db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO journal_runs (run_id, workflow, definition, limits, started, status,"
                " code, ended, duration, tokens, cost, checksum)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
            cursor.executemany("INSERT INTO journal_events VALUES (%s, %s, %s, %s, %s, %s)", events)
            cursor.executemany("INSERT INTO journal_checkpoints VALUES (%s, %s, %s, %s)", points)


async def test_row_level_edits_on_postgres_lose_no_run_silently(
    image: Path, postgres_dsn: str
) -> None:
    import psycopg

    from actors.journal import PostgresStore

    PostgresStore(postgres_dsn).close()  # the tables
    tally: Counter[str] = Counter()
    # The unfinished runs and one that ended (SQLite takes every run: the suite's time).
    mine = [case for case in ROW_CASES if case[2]["run"] in ("open1", "open2", "done1")]
    assert len(mine) == 17 * 3
    cases = [("none", "SELECT 1", {}), *mine]
    for case, sql, params in cases:
        _load_into_postgres(image, postgres_dsn)
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute(sql.format(**PG_TABLES), params)
        store = await trio.to_thread.run_sync(PostgresStore, postgres_dsn)
        try:
            tally[await _open_and_finish(store, "journal")] += 1
        except AssertionError as failure:
            raise AssertionError(f"postgres, {case}: {failure}") from failure
    assert tally["file"] == 0, tally
    assert tally["2 resumed, 0 reported"] >= 1, tally


def test_a_forged_checkpoint_at_a_record_that_is_not_a_completion_is_reported(
    image: Path, tmp_path: Path
) -> None:
    """Even with its checksum forged to match, a checkpoint is only ever after a
    ``node:completed``: ``verify`` reports one moved elsewhere."""
    damaged = tmp_path / "forged.journal"
    shutil.copy(image, damaged)
    db = sqlite3.connect(damaged, isolation_level=None)
    (progress,) = db.execute("SELECT progress FROM checkpoints WHERE run_id = 'open1'").fetchone()
    db.execute(
        "UPDATE checkpoints SET seq = 0, checksum = ? WHERE run_id = 'open1'",
        (checkpoint_checksum("open1", 0, progress),),
    )
    db.close()
    out = io.StringIO()
    assert cli(["runs", "verify", "--journal", str(damaged)], out) == 1
    assert out.getvalue().splitlines() == [
        "open1  seq 0  the checkpoint is not at a node:completed record",
        "5 runs, 1 damaged",
    ]


async def test_a_schema_1_journal_is_migrated_and_its_runs_resume(
    image: Path, tmp_path: Path
) -> None:
    """A journal written before the row checksum (schema 1): a reader sees it (every row
    unchecked: ``verify`` says so), and the first store that opens it for writing adds
    the column, fills it from the rows, and the runs resume."""
    old = tmp_path / "old.journal"
    shutil.copy(image, old)
    db = sqlite3.connect(old, isolation_level=None)
    db.execute("ALTER TABLE runs DROP COLUMN checksum")
    db.execute("UPDATE journal_meta SET value = '1' WHERE key = 'schema'")
    db.close()
    out = io.StringIO()
    assert cli(["runs", "list", "--journal", str(old)], out) == 0
    assert out.getvalue().splitlines()[-1] == "5 runs"
    out = io.StringIO()
    assert cli(["runs", "verify", "--journal", str(old)], out) == 1
    assert out.getvalue().splitlines()[-1] == "5 runs, 5 damaged"
    assert await _open_and_finish(old, old.name) == "2 resumed, 0 reported"
    db = sqlite3.connect(old, isolation_level=None)
    assert db.execute("SELECT value FROM journal_meta WHERE key = 'schema'").fetchone() == ("2",)
    assert db.execute("SELECT COUNT(*) FROM runs WHERE checksum IS NULL").fetchone() == (0,)
    db.close()
    out = io.StringIO()
    assert cli(["runs", "verify", "--journal", str(old)], out) == 0
    assert out.getvalue() == "5 runs, 0 damaged\n"


async def test_a_postgres_journal_without_the_row_checksum_is_migrated(
    image: Path, postgres_dsn: str
) -> None:
    import psycopg

    from actors.journal import PostgresStore

    PostgresStore(postgres_dsn).close()
    _load_into_postgres(image, postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("ALTER TABLE journal_runs DROP COLUMN checksum")
    store = await trio.to_thread.run_sync(PostgresStore, postgres_dsn)
    assert await _open_and_finish(store, "journal") == "2 resumed, 0 reported"
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        assert db.execute(
            "SELECT COUNT(*) FROM journal_runs WHERE checksum IS NULL"
        ).fetchone() == (0,)


# -- found in a hostile review ---------------------------------------------------------


@pytest.mark.parametrize("value", ["'x'", "X'00'", "1.5"])
async def test_a_stored_value_of_the_wrong_kind_is_that_runs_damage(
    image: Path, tmp_path: Path, value: str
) -> None:
    """SQLite keeps what a garbled type byte says: text where the checkpoint's ``seq``
    belongs. It is ``open1``'s damage — reported, ``open2`` resumes — not a raw
    ``TypeError`` out of ``open_runs`` or ``verify``."""
    damaged = tmp_path / "kinds.journal"
    shutil.copy(image, damaged)
    db = sqlite3.connect(damaged, isolation_level=None)
    db.execute(f"UPDATE checkpoints SET seq = {value} WHERE run_id = 'open1'")
    db.close()
    with capture_events("run.not_resumed") as refused:
        assert await _open_and_finish(damaged, damaged.name) == "1 resumed, 1 reported"
    assert [(e.run_id, e.code) for e in refused] == [("open1", "event_log_corrupt")]
    out = io.StringIO()
    assert cli(["runs", "verify", "--journal", str(damaged)], out) == 1
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("open1")]
    assert line.startswith("open1  -  the checkpoint's seq is not a number"), line


def test_list_and_show_print_a_value_of_the_wrong_kind_as_a_question_mark(
    image: Path, tmp_path: Path
) -> None:
    damaged = tmp_path / "cells.journal"
    shutil.copy(image, damaged)
    db = sqlite3.connect(damaged, isolation_level=None)
    db.execute("UPDATE runs SET started = 'x', cost = X'00', duration = 'y' WHERE run_id = 'done1'")
    db.close()
    out = io.StringIO()
    assert cli(["runs", "list", "--journal", str(damaged)], out) == 0
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("done1")]
    assert line.split()[3:5] == ["?", "?"], line
    out = io.StringIO()
    assert cli(["runs", "show", "done1", "--journal", str(damaged)], out) == 0
    assert "started ?" in out.getvalue() and "cost ?" in out.getvalue()


async def test_an_id_with_records_but_no_row_is_taken(image: Path, tmp_path: Path) -> None:
    """A run reported for a lost row keeps its records: starting a new run under its id
    would write records the store keeps the old ones of (same keys) — refused."""
    damaged = tmp_path / "reuse.journal"
    shutil.copy(image, damaged)
    db = sqlite3.connect(damaged, isolation_level=None)
    db.execute("DELETE FROM runs WHERE run_id = 'open1'")
    db.close()
    async with (
        open_journal(damaged) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal, workflows=[WF]) as runs,
    ):
        with pytest.raises(ActorError, match=r"^\[name_taken\] run 'open1' is in the journal"):
            await runs.start(WF, {"x": 42}, run_id="open1")
        for run in runs.resumed:
            run.cancel("test over")


def test_the_readers_change_nothing_on_disk(tmp_path: Path) -> None:
    """``list``/``show``/``verify`` open the file read-only: a SQLite file that is not a
    journal keeps its journal mode, an empty file stays empty — both "not a journal"."""
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    empty = tmp_path / "empty.journal"
    empty.write_bytes(b"")
    for path in (other, empty):
        for command in (["list"], ["verify"], ["show", "r"]):
            assert cli(["runs", *command, "--journal", str(path)], io.StringIO()) == 2
    assert empty.read_bytes() == b""
    db = sqlite3.connect(other)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    db.close()
