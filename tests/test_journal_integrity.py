"""``actors.journal.integrity`` directly: the one check of a run's stored data
(:func:`sound`), which runs are looked at (:func:`unfinished_of`, :func:`ends_for_good`),
every damaged run of a store (:func:`damaged`) — exact messages, ``seq`` and
boundaries, on a memory store (the SQL stores are covered by tests/test_journal_fuzz.py
and tests/test_journal_corrupt.py)."""

from __future__ import annotations

from typing import Any

import pytest

from actors import ActorError, Code
from actors.events import (
    NodeCompleted,
    NodeStarted,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
)
from actors.journal import (
    STATUS_OF,
    Batch,
    Checkpoint,
    Entry,
    MemoryStore,
    RunEnding,
    RunHeader,
    RunRow,
    RunTail,
    checkpoint_checksum,
    checksum,
    corrupt,
    corrupt_seq,
    damaged,
    ends_for_good,
    entry_of,
    header_checksum,
    sound,
    unfinished_of,
)


def _records(run_id: str = "r", end: str | None = None) -> list[Any]:
    records: list[Any] = [
        RunStarted(run_id=run_id, seq=0, at=1.0, workflow="w", inputs={}, wall_time=9.0),
        NodeStarted(run_id=run_id, seq=1, at=1.5, node_id="a", execution=1, attempt=1, kind="step"),
        NodeCompleted(
            run_id=run_id,
            seq=2,
            at=2.0,
            node_id="a",
            execution=1,
            attempt=1,
            updates={"a": 1},
            next=(),
            duration=0.5,
        ),
    ]
    common = {"run_id": run_id, "seq": 3, "at": 3.0, "duration": 2.0, "tokens": 5, "cost": 0.25}
    if end == "completed":
        records.append(RunCompleted(state={"a": 1}, **common))
    elif end == "failed":
        records.append(
            RunFailed(code="tool_failed", message="m", correlation_id="c", node_id="a", **common)
        )
    elif end in ("cancelled", "interrupted"):
        records.append(
            RunCancelled(reason="x", in_flight=(), resumable=end == "interrupted", **common)
        )
    return records


def _row(
    run_id: str = "r", status: str = "running", code: str | None = None, **changed: Any
) -> RunRow:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "workflow": "w",
        "status": status,
        "code": code,
        "started": 9.0,
        "ended": None,
        "duration": None,
        "tokens": 0,
        "cost": 0.0,
        "definition": '{"digest":"d"}',
        "limits": "{}",
        "events": 3,
    }
    fields.update(changed)
    if "checksum" not in changed:
        fields["checksum"] = header_checksum(
            run_id, fields["workflow"], fields["definition"], fields["limits"], fields["started"]
        )
    return RunRow(**fields)


def _point(run_id: str = "r", seq: int = 2, progress: str = '{"seq":3}') -> Checkpoint:
    return Checkpoint(run_id, seq, progress, checkpoint_checksum(run_id, seq, progress))


def _corrupt_message(run_id: str, row: Any, entries: Any, point: Any) -> tuple[int | None, str]:
    with pytest.raises(ActorError) as info:
        sound(run_id, row, entries, point)
    error = info.value
    assert error.code is Code.EVENT_LOG_CORRUPT and error.run_id == run_id
    return corrupt_seq(error), error.message


# -- checksums, pinned ------------------------------------------------------------------


def test_the_checksums_are_pinned() -> None:
    # A stored journal stays readable: these values never change.
    assert checksum("r", 0, "run:started", 1.0, "{}") == "d45fd967aa427a5b613fbdf801e73c7c"
    assert header_checksum("r", "w", "D", "L", 9.0) == "7a12299a936c4ddce383ebbefad77168"
    assert checkpoint_checksum("r", 2, "P") == "2b72c9a8db948206ef4dc4bdf4a3cb94"
    assert header_checksum("r", "w", "D", "L", 9.0) == checksum("r", -1, "w", 9.0, "D\x1eL")
    assert checkpoint_checksum("r", 2, "P") == checksum("r", 2, "", 0.0, "P")
    # Each field counts.
    base = header_checksum("r", "w", "D", "L", 9.0)
    assert (
        len(
            {
                base,
                header_checksum("s", "w", "D", "L", 9.0),
                header_checksum("r", "x", "D", "L", 9.0),
                header_checksum("r", "w", "E", "L", 9.0),
                header_checksum("r", "w", "D", "M", 9.0),
                header_checksum("r", "w", "D", "L", 9.5),
                header_checksum("r", "w", "D\x1eL", "", 9.0),
            }
        )
        == 7
    )
    assert STATUS_OF == {
        "run:completed": "completed",
        "run:failed": "failed",
        "run:cancelled": "cancelled",
    }


# -- sound ------------------------------------------------------------------------------


def test_a_sound_run_gives_its_records_back() -> None:
    records = _records()
    entries = [entry_of(r) for r in records]
    assert sound("r", _row(), entries, _point()) == tuple(records)
    assert sound("r", _row(), entries, None) == tuple(records)
    for end, code in (("completed", None), ("failed", "tool_failed"), ("cancelled", None)):
        ended = [entry_of(r) for r in _records(end=end)]
        row = _row(status=STATUS_OF[f"run:{end}"], code=code, events=4)
        assert [r.name for r in sound("r", row, ended, None)][-1] == f"run:{end}"
    # A resumable cancel does not end the run: the row stays running.
    paused = [entry_of(r) for r in _records(end="interrupted")]
    assert len(sound("r", _row(), paused, None)) == 4


@pytest.mark.parametrize(
    ("change", "seq", "what"),
    [
        ("no entries", None, "journal corrupt: no events"),
        ("no start", 0, "journal corrupt at seq 0: no run:started"),
        ("gap", 1, "journal corrupt at seq 1: seq 1 is missing"),
        ("no row", 0, "journal corrupt at seq 0: the run has records but no row"),
        ("workflow", 0, "journal corrupt at seq 0: the run's row does not match its checksum"),
        ("limits", 0, "journal corrupt at seq 0: the run's row does not match its checksum"),
        ("definition", 0, "journal corrupt at seq 0: the run's row does not match its checksum"),
        ("started", 0, "journal corrupt at seq 0: the run's row does not match its checksum"),
        ("no checksum", 0, "journal corrupt at seq 0: the run's row does not match its checksum"),
        (
            "point past",
            3,
            "journal corrupt at seq 3: the checkpoint is at seq 3, past the last record",
        ),
        (
            "point negative",
            3,
            "journal corrupt at seq 3: the checkpoint is at seq -1, past the last record",
        ),
        ("point checksum", 2, "journal corrupt at seq 2: checkpoint checksum mismatch"),
        (
            "point at a start",
            1,
            "journal corrupt at seq 1: the checkpoint is not at a node:completed record",
        ),
        (
            "said ended",
            3,
            "journal corrupt at seq 3: the run's row says 'completed' but its records end at seq 2 without ending it",
        ),
        (
            "said running",
            3,
            "journal corrupt at seq 3: the run's row says 'running' but its records end with run:completed",
        ),
        (
            "other status",
            3,
            "journal corrupt at seq 3: the run's row says 'cancelled' but its records end with run:completed",
        ),
        (
            "other code",
            3,
            "journal corrupt at seq 3: the run's row says 'failed/internal' but its records end with run:failed",
        ),
        (
            "no code",
            3,
            "journal corrupt at seq 3: the run's row says 'failed' but its records end with run:failed",
        ),
        (
            "a code",
            3,
            "journal corrupt at seq 3: the run's row says 'completed/x' but its records end with run:completed",
        ),
    ],
)
def test_each_damage_names_the_run_and_the_first_bad_seq(
    change: str, seq: int | None, what: str
) -> None:
    entries: list[Entry] = [entry_of(r) for r in _records()]
    row: RunRow | None = _row()
    point: Checkpoint | None = _point()
    if change == "no entries":
        entries = []
    elif change == "no start":
        entries = entries[1:]
    elif change == "gap":
        entries = [entries[0], entries[2]]
    elif change == "no row":
        row = None
    elif change in ("workflow", "limits", "definition", "started"):
        assert row is not None
        fields = {"workflow": "x", "limits": '{"a":1}', "definition": "{}", "started": 9.5}
        row = _row(**{change: fields[change], "checksum": row.checksum})
    elif change == "no checksum":
        row = _row(checksum=None)
    elif change == "point past":
        point = _point(seq=3)
    elif change == "point negative":
        point = _point(seq=-1)
    elif change == "point checksum":
        point = Checkpoint("r", 2, '{"seq":3}', "0" * 32)
    elif change == "point at a start":
        point = _point(seq=1)
    elif change == "said ended":
        row = _row(status="completed")
    else:
        end = {
            "said running": "completed",
            "other status": "completed",
            "other code": "failed",
            "no code": "failed",
            "a code": "completed",
        }[change]
        entries = [entry_of(r) for r in _records(end=end)]
        status, code = {
            "said running": ("running", None),
            "other status": ("cancelled", None),
            "other code": ("failed", "internal"),
            "no code": ("failed", None),
            "a code": ("completed", "x"),
        }[change]
        row = _row(status=status, code=code)
    assert _corrupt_message("r", row, entries, point) == (seq, f"run 'r': {what}")


def test_the_checkpoint_at_the_last_record_is_sound() -> None:
    entries = [entry_of(r) for r in _records()]
    assert len(sound("r", _row(), entries, _point(seq=2))) == 3  # the boundary: seq == last


# -- which runs are looked at ----------------------------------------------------------


def _tail(
    run_id: str, status: str | None, last: str | None, resumable: bool | None = None
) -> RunTail:
    cancel = None
    if resumable is not None:
        record = RunCancelled(
            run_id=run_id,
            seq=3,
            at=3.0,
            reason="x",
            in_flight=(),
            duration=1.0,
            tokens=0,
            cost=0.0,
            resumable=resumable,
        )
        cancel = entry_of(record)
    return RunTail(run_id, status, last, cancel)


def test_ends_for_good_reads_the_last_record() -> None:
    assert ends_for_good(_tail("r", "completed", "run:completed"))
    assert ends_for_good(_tail("r", "failed", "run:failed"))
    assert ends_for_good(_tail("r", "cancelled", "run:cancelled", resumable=False))
    assert not ends_for_good(_tail("r", "running", "run:cancelled", resumable=True))
    assert not ends_for_good(_tail("r", "cancelled", "run:cancelled"))  # no record to read
    assert not ends_for_good(_tail("r", "running", "node:completed"))
    assert not ends_for_good(_tail("r", "running", None))
    forged = RunTail(
        "r", "cancelled", "run:cancelled", Entry("r", 3, "run:cancelled", 3.0, "{}", "x")
    )
    assert not ends_for_good(forged)  # cannot be read: looked at, so reported


def test_unfinished_runs_are_read_from_both_sides_in_order() -> None:
    tails = [
        _tail("ended", "completed", "run:completed"),
        _tail("live", "running", "node:completed"),
        _tail("status-lost", "complxted", "node:started"),  # a damaged status
        _tail("said-running", "running", "run:completed"),  # the row is believed: looked at
        _tail("no-row", None, "node:completed"),
        _tail("no-records", "running", None),
        _tail("paused", "running", "run:cancelled", resumable=True),
        _tail("cancelled", "cancelled", "run:cancelled", resumable=False),
        _tail("terminal-lost", "completed", "node:completed"),
    ]
    assert unfinished_of(tails) == [
        "live",
        "status-lost",
        "said-running",
        "no-row",
        "no-records",
        "paused",
        "terminal-lost",
    ]
    assert unfinished_of([]) == []


# -- a store's damaged runs ----------------------------------------------------------


def _store() -> MemoryStore:
    store = MemoryStore()
    for run_id, end in (("a", "completed"), ("b", None), ("c", "failed")):
        records = _records(run_id, end)
        endings = []
        if end is not None:
            endings = [
                RunEnding(
                    run_id, end, "tool_failed" if end == "failed" else None, 5.0, 2.0, 5, 0.25
                )
            ]
        store.write(
            Batch(
                entries=[entry_of(r) for r in records],
                headers=[RunHeader(run_id, "w", '{"digest":"d"}', "{}", 9.0)],
                endings=endings,
                checkpoints=[_point(run_id)],
            )
        )
    return store


def test_a_sound_store_has_no_damaged_run_and_one_unfinished() -> None:
    store = _store()
    assert damaged(store) == []
    assert store.unfinished() == ["b"]
    assert [t.run_id for t in store.tails()] == ["a", "b", "c"]


def test_damaged_lists_each_damaged_run_once_in_order() -> None:
    store = _store()
    store.rows["a"]["status"] = "running"
    del store.events["c"][1]
    store.rows.pop("b")
    found = damaged(store)
    assert [(e.run_id, corrupt_seq(e), e.message) for e in found] == [
        (
            "a",
            3,
            "run 'a': journal corrupt at seq 3: the run's row says 'running' but its records end with run:completed",
        ),
        ("c", 1, "run 'c': journal corrupt at seq 1: seq 1 is missing"),
        ("b", 0, "run 'b': journal corrupt at seq 0: the run has records but no row"),
    ]
    assert store.unfinished() == ["a", "b"]


def test_a_read_that_fails_names_the_run() -> None:
    class Broken(MemoryStore):
        def entries(self, run_id: str, after: int = -1) -> list[Entry]:
            if run_id == "b":
                raise ActorError.from_code(
                    Code.EVENT_LOG_CORRUPT, "journal 'x' is damaged: bad page"
                )
            return super().entries(run_id, after)

    store = Broken()
    store.__dict__.update(_store().__dict__)
    (error,) = damaged(store)
    assert (error.run_id, corrupt_seq(error), error.message) == (
        "b",
        None,
        "run 'b': journal corrupt: cannot be read (journal 'x' is damaged: bad page)",
    )

    class Down(MemoryStore):
        def entries(self, run_id: str, after: int = -1) -> list[Entry]:
            raise ActorError.from_code(Code.PERSISTENCE_UNAVAILABLE, "locked")

    down = Down()
    down.__dict__.update(_store().__dict__)
    with pytest.raises(ActorError, match=r"^\[persistence_unavailable\] locked$"):
        damaged(down)  # not a damaged run: the store cannot be read now


def test_corrupt_seq_reads_only_what_corrupt_writes() -> None:
    assert corrupt_seq(corrupt("r", 12, "x")) == 12
    assert corrupt_seq(corrupt("r", 0, "x")) == 0
    assert corrupt_seq(corrupt("r", None, "x")) is None
    assert (
        corrupt_seq(ActorError.from_code(Code.INTERNAL, "run 'r': journal corrupt at seq 3: x"))
        is None
    )
    assert corrupt_seq(ActorError.from_code(Code.EVENT_LOG_CORRUPT, "at seq x3: y")) is None
