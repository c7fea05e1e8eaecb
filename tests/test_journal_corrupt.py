"""A journal that cannot be trusted: each kind of damage, done to a real SQLite file,
is ``event_log_corrupt`` naming the run and the first bad ``seq``; the run is not
resumed and the other runs are."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from actors import ActorError
from actors.journal import checkpoint_checksum, checksum
from actors.testing import capture_events
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import Approval, Edge, NodeContext, Step, Workflow, open_journal, open_runs
from tests.journal_helpers import copy_file


async def _step(ctx: NodeContext) -> dict[str, Any]:
    return {"a": 1}


WF = Workflow(
    name="gated",
    nodes=[Step(id="a", fn=_step, writes=["a"]), Approval(id="ok")],
    edges=[Edge(source="a", target="ok")],
)


async def _image(tmp_path: Path) -> Path:
    """A journal file as a crash would leave it: runs ``good`` and ``bad`` paused on
    their approval (seq 0-4: run:started, node:started a, node:completed a,
    node:started ok, approval:requested)."""
    live = tmp_path / "live.journal"
    image = tmp_path / "crash.journal"
    async with (
        open_journal(live) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal) as runs,
    ):
        for run_id in ("good", "bad"):
            run = await runs.start(WF, run_id=run_id)
            while run.pending != ("ok",):
                await trio.sleep(0.01)
        await journal.flush()
        copy_file(live, image)
        for run in list(runs.live.values()):
            run.cancel("test over")
    return image


def _forge(db: sqlite3.Connection, seq: int, name: str, body: str) -> None:
    at = db.execute("SELECT at FROM events WHERE run_id='bad' AND seq=?", (seq,)).fetchone()[0]
    db.execute(
        "UPDATE events SET name=?, body=?, checksum=? WHERE run_id='bad' AND seq=?",
        (name, body, checksum("bad", seq, name, at, body), seq),
    )


COMPLETED_OK = '{"node_id":"ok","execution":1,"attempt":1,"updates":{},"next":[],"duration":0.0}'

CASES = [
    ("DELETE FROM events WHERE run_id='bad'", None, "journal corrupt: no events"),
    (
        "DELETE FROM events WHERE run_id='bad' AND seq=0",
        0,
        "journal corrupt at seq 0: no run:started",
    ),
    (
        "DELETE FROM events WHERE run_id='bad' AND seq=2",
        2,
        "journal corrupt at seq 2: seq 2 is missing",
    ),
    (
        "UPDATE events SET body=replace(body, '\"a\":1', '\"a\":2') WHERE run_id='bad' AND seq=2",
        2,
        "journal corrupt at seq 2: checksum mismatch",
    ),
    (
        lambda db: _forge(db, 3, "node:completed", COMPLETED_OK),
        3,
        "journal corrupt at seq 3: node:completed: node 'ok' was not in flight",
    ),
    (
        lambda db: _forge(db, 4, "run:started", '{"workflow":"gated","inputs":{},"wall_time":1.0}'),
        4,
        "journal corrupt at seq 4: run:started: run:started is not the first record",
    ),
    (
        "UPDATE checkpoints SET progress=replace(progress, '\"a\":1', '\"a\":9') WHERE run_id='bad'",
        2,
        "journal corrupt at seq 2: checkpoint checksum mismatch",
    ),
    # The run's row: every field recovery reads is checked against the records or a
    # checksum, so a damaged row is reported, never taken at its word or dropped.
    (
        "DELETE FROM runs WHERE run_id='bad'",
        0,
        "journal corrupt at seq 0: the run has records but no row",
    ),
    (
        "UPDATE runs SET status='rxnning' WHERE run_id='bad'",
        5,
        "journal corrupt at seq 5: the run's row says 'rxnning' but its records end at seq 4"
        " without ending it",
    ),
    (
        "UPDATE runs SET status='completed' WHERE run_id='bad'",
        5,
        "journal corrupt at seq 5: the run's row says 'completed' but its records end at seq 4"
        " without ending it",
    ),
    (
        "UPDATE runs SET limits=replace(limits, 'null', '1') WHERE run_id='bad'",
        0,
        "journal corrupt at seq 0: the run's row does not match its checksum",
    ),
    (
        "UPDATE runs SET definition=replace(definition, 'gated', 'gatex') WHERE run_id='bad'",
        0,
        "journal corrupt at seq 0: the run's row does not match its checksum",
    ),
    (
        "UPDATE runs SET checksum=NULL WHERE run_id='bad'",
        0,
        "journal corrupt at seq 0: the run's row does not match its checksum",
    ),
    # Its last records lost while the checkpoint after them stays: a completed node would
    # run again from the records alone.
    (
        "DELETE FROM events WHERE run_id='bad' AND seq>=2",
        2,
        "journal corrupt at seq 2: the checkpoint is at seq 2, past the last record",
    ),
    (
        "UPDATE checkpoints SET seq=3 WHERE run_id='bad'",
        3,
        "journal corrupt at seq 3: checkpoint checksum mismatch",
    ),
    (
        lambda db: _move_checkpoint(db, 1),
        1,
        "journal corrupt at seq 1: the checkpoint is not at a node:completed record",
    ),
    (
        lambda db: _move_checkpoint(db, 4, '{"seq":4}'),
        4,
        "journal corrupt at seq 4: the checkpoint is not at a node:completed record",
    ),
]


def _move_checkpoint(db: sqlite3.Connection, seq: int, progress: str | None = None) -> None:
    """The checkpoint moved to ``seq``, its checksum forged to match."""
    body = (
        progress or db.execute("SELECT progress FROM checkpoints WHERE run_id='bad'").fetchone()[0]
    )
    db.execute(
        "UPDATE checkpoints SET seq=?, progress=?, checksum=? WHERE run_id='bad'",
        (seq, body, checkpoint_checksum("bad", seq, body)),
    )


@pytest.mark.parametrize(("damage", "seq", "what"), CASES)
async def test_damage_is_event_log_corrupt_and_leaves_other_runs_alone(
    tmp_path: Path, damage: Any, seq: int | None, what: str
) -> None:
    image = await _image(tmp_path)
    db = sqlite3.connect(image, isolation_level=None)
    if callable(damage):
        damage(db)
    else:
        db.execute(damage)
    db.close()
    with capture_events("run.not_resumed") as refused:
        async with (
            open_journal(image) as journal,
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree, journal=journal, workflows=[WF]) as runs,
        ):
            assert [run.run_id for run in runs.resumed] == ["good"]
            (good,) = runs.resumed
            while good.pending != ("ok",):
                await trio.sleep(0.01)
            good.decide("ok", "approve", by="ops")
            assert (await good.wait()).status == "completed"
            with pytest.raises(ActorError, match=r"^\[event_log_corrupt\] ") as info:
                await runs.resume("bad")
    assert info.value.message == f"run 'bad': {what}"
    assert info.value.run_id == "bad"
    assert [(r.run_id, r.code, r.seq, r.message) for r in refused] == [
        ("bad", "event_log_corrupt", seq, f"run 'bad': {what}")
    ]
