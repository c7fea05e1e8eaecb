"""The journal below the runs: entries, the SQLite store, the writer's group commit and
its degradation (exact virtual times on the in-memory store)."""

from __future__ import annotations

import math
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from actors import ActorError, Code
from actors.events import NodeCompleted, RunStarted
from actors.journal import (
    DEFAULT_PATH,
    Batch,
    Entry,
    MemoryStore,
    RunHeader,
    SqliteStore,
    checksum,
    dumps,
    entry_of,
    record_of,
)
from actors.testing import capture_events
from supervisors.runs import Journal, open_journal
from tests.journal_helpers import FlakyStore


def started(run_id: str = "r", seq: int = 0, **inputs: Any) -> RunStarted:
    return RunStarted(run_id=run_id, seq=seq, at=1.5, workflow="w", inputs=inputs, wall_time=9.0)


def completed(run_id: str = "r", seq: int = 1, **updates: Any) -> NodeCompleted:
    return NodeCompleted(
        run_id=run_id,
        seq=seq,
        at=2.0,
        node_id="a",
        execution=1,
        attempt=1,
        updates=updates,
        next=("b",),
        duration=0.5,
    )


# -- entries --------------------------------------------------------------------------


def _shared(levels: int) -> Any:
    value: Any = [0]
    for _ in range(levels):
        value = [value, value]
    return value


def _nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def test_an_entry_gives_its_record_back_exactly() -> None:
    record = completed("r", 3, doc={"ids": [1, 2], "ok": True, "n": None}, score=0.25)
    entry = entry_of(record)
    assert (entry.run_id, entry.seq, entry.name, entry.at) == ("r", 3, "node:completed", 2.0)
    assert entry.body == (
        '{"node_id":"a","execution":1,"attempt":1,"updates":{"doc":{"ids":[1,2],"ok":true,'
        '"n":null},"score":0.25},"next":["b"],"duration":0.5}'
    )
    assert record_of(entry) == record
    assert record_of(entry).next == ("b",)  # a tuple field is a tuple again


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({1: "a"}, "a key of type int is not JSON data"),
        (math.nan, "Out of range float values are not JSON compliant"),
        (math.inf, "Out of range float values are not JSON compliant"),
        ({"a"}, "set is not JSON data"),
        (object(), "object is not JSON data"),
        (b"x", "bytes is not JSON data"),
        (_shared(60), "more than 1000000 items"),  # 2**60 paths: refused at once
        (_nested(250), "nested deeper than 200 levels"),
    ],
)
def test_a_value_json_cannot_carry_is_refused(value: Any, why: str) -> None:
    with pytest.raises(
        ActorError, match=r"^\[output_validation\] run 'r' seq 4 \(node:completed\)"
    ) as info:
        entry_of(completed("r", 4, x=value))
    assert why in info.value.message
    with pytest.raises((TypeError, ValueError)):
        dumps({"x": value})


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"checksum": "0" * 32}, "at seq 1: checksum mismatch"),
        ({"name": "node:exploded"}, "at seq 1: unknown record 'node:exploded'"),
        ({"body": '{"node_id":"a"}'}, "at seq 1: node:completed does not fit its record"),
        ({"body": "[1, 2]"}, "at seq 1: node:completed does not fit its record"),
        ({"body": "not json"}, "at seq 1: node:completed does not fit its record"),
    ],
)
def test_an_entry_that_cannot_be_trusted_is_event_log_corrupt(
    change: dict[str, str], what: str
) -> None:
    good = entry_of(completed("r", 1, x=1))
    fields = {
        "run_id": good.run_id,
        "seq": good.seq,
        "name": good.name,
        "at": good.at,
        "body": good.body,
        **change,
    }
    if "checksum" not in change:
        fields["checksum"] = checksum(
            fields["run_id"], fields["seq"], fields["name"], fields["at"], fields["body"]
        )
    bad = Entry(**fields)
    with pytest.raises(ActorError, match=r"^\[event_log_corrupt\] ") as info:
        record_of(bad)
    assert info.value.code is Code.EVENT_LOG_CORRUPT
    assert info.value.message == f"run 'r': journal corrupt {what}"
    assert info.value.run_id == "r"


# -- stores ---------------------------------------------------------------------------


def header(run_id: str) -> RunHeader:
    return RunHeader(run_id, "w", '{"digest":"d"}', "{}", 100.0)


STORES = ["sqlite", "memory", "postgres"]


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """A fresh store of each backend: the same tests hold for all of them."""
    if kind == "sqlite":
        return SqliteStore(tmp_path / "j.journal")
    if kind == "postgres":
        from actors.journal.postgres import PostgresStore

        return PostgresStore(request.getfixturevalue("postgres_dsn"))
    return MemoryStore()


@pytest.mark.parametrize("kind", STORES)
def test_the_same_key_twice_is_stored_once(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    store: Any = make_store(kind, tmp_path, request)
    first = Batch(
        entries=[entry_of(started()), entry_of(completed("r", 1, x=1))], headers=[header("r")]
    )
    store.write(first)
    store.write(first)  # a retried batch
    store.write(Batch(entries=[entry_of(completed("r", 1, x=2))]))  # same key, other body
    stored = store.entries("r")
    assert [e.seq for e in stored] == [0, 1]
    assert record_of(stored[1]).updates == {"x": 1}  # the first write stays
    assert store.entries("r", after=0) == stored[1:]
    (row,) = store.runs()
    assert (row.run_id, row.status, row.events, row.started) == ("r", "running", 2, 100.0)
    assert store.unfinished() == ["r"]
    store.close()
    store.close()  # idempotent


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_batch_is_all_or_nothing_and_a_failed_one_is_rolled_back(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    bad = Entry("r", 0, "run:started", 1.0, "{}", None)  # type: ignore[arg-type]
    with pytest.raises(Exception, match=r"(?i)not null|null value") as failed:
        store.write(Batch(entries=[entry_of(started("ok")), bad], headers=[header("ok")]))
    error = failed.value
    if kind == "sqlite":  # typed, the driver's error kept as the cause
        assert isinstance(error, ActorError) and error.code is Code.PERSISTENCE_UNAVAILABLE
    raw = error.__cause__ if isinstance(error, ActorError) else error
    assert type(raw).__name__ in {"IntegrityError", "NotNullViolation"}
    assert store.entries("ok") == [] and store.runs() == []
    # The failed transaction was ended: the next write of the same store goes through.
    store.write(Batch(entries=[entry_of(started("ok"))], headers=[header("ok")]))
    assert len(store.entries("ok")) == 1
    store.close()


def test_sqlite_is_in_wal_mode_with_full_sync_and_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    store = SqliteStore(path)
    assert store.db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert store.db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    store.write(Batch(entries=[entry_of(started())], headers=[header("r")]))
    store.close()
    again = SqliteStore(path, create=False)
    assert [record_of(e) for e in again.entries("r")] == [started()]


def test_opening_a_missing_or_foreign_file_for_reading_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] no journal at '.*missing'$"):
        SqliteStore(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()
    foreign = tmp_path / "notes.txt"
    foreign.write_text("hello, not a database\n" * 100)
    with pytest.raises(ActorError, match=r"^\[config_invalid\] '.*notes.txt' is not a journal$"):
        SqliteStore(foreign, create=False)


@pytest.mark.parametrize("kind", STORES)
def test_prune_removes_only_runs_that_ended_before_the_cutoff(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    from actors.journal import RunEnding

    store: Any = make_store(kind, tmp_path, request)
    for run_id in ("old", "new", "live"):
        store.write(Batch(entries=[entry_of(started(run_id))], headers=[header(run_id)]))
    store.write(
        Batch(
            endings=[
                RunEnding("old", "completed", None, 1000.0, 1.0, 5, 0.5),
                RunEnding("new", "failed", "timeout", 3000.0, 1.0, 0, 0.0),
            ]
        )
    )
    assert store.prune(2000.0) == 1
    assert sorted(row.run_id for row in store.runs()) == ["live", "new"]
    assert store.entries("old") == [] and store.checkpoint("old") is None
    assert store.run("new").code == "timeout"  # type: ignore[union-attr]
    assert store.prune(10_000.0) == 1  # "live" never ended: never pruned
    assert [row.run_id for row in store.runs()] == ["live"]
    store.close()


# -- the writer -----------------------------------------------------------------------


async def test_concurrent_appends_share_commits(autojump_clock: Any) -> None:
    store = MemoryStore()
    async with open_journal(store) as journal:
        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(journal.append, entry_of(started(f"r{i}")))
        assert sum(len(v) for v in store.events.values()) == 100
        assert store.writes <= 3  # one commit for the first, one for the 99 queued meanwhile


async def test_appends_to_a_real_file_are_durable_when_append_returns(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    async with open_journal(path) as journal:

        async def appender(run: int) -> None:
            for seq in range(10):
                await journal.append(entry_of(completed(f"r{run}", seq, i=seq)))
                reader = sqlite3.connect(path)  # another connection sees it at once
                found = reader.execute(
                    "SELECT COUNT(*) FROM events WHERE run_id = ? AND seq = ?", (f"r{run}", seq)
                ).fetchone()
                reader.close()
                assert found == (1,)

        async with trio.open_nursery() as nursery:
            for run in range(20):
                nursery.start_soon(appender, run)
    again = SqliteStore(path, create=False)
    assert sum(len(again.entries(f"r{run}")) for run in range(20)) == 200


async def test_a_store_failing_twice_then_working_loses_nothing(autojump_clock: Any) -> None:
    store = FlakyStore()
    store.fail = 2
    with capture_events(
        "journal.append_failed", "journal.recovered", "journal.unavailable"
    ) as seen:
        async with open_journal(store) as journal:
            await journal.append(entry_of(started()))
            assert trio.current_time() == 6.0
    assert [(e.name, getattr(e, "failures", None), getattr(e, "retry_in", None)) for e in seen] == [
        ("journal.append_failed", 1, 2.0),
        ("journal.append_failed", 2, 4.0),
        ("journal.recovered", 2, None),
    ]
    assert seen[0].runs == ("r",) and seen[0].entries == 1
    assert seen[0].error == "OSError: disk full"
    assert [e.seq for e in store.entries("r")] == [0]


async def test_three_failures_make_the_journal_unavailable_then_it_keeps_trying(
    autojump_clock: Any,
) -> None:
    store = FlakyStore()
    store.fail = -1
    times: list[float] = []
    with capture_events("journal.append_failed", "journal.unavailable") as seen:
        async with open_journal(store) as journal:
            with pytest.raises(
                ActorError,
                match=r"^\[persistence_unavailable\] the journal failed 3 consecutive writes$",
            ):
                await journal.append(entry_of(started()))
            times.append(trio.current_time())
            await trio.sleep(5)
            store.fail = 0  # the disk is back: the entry still queued is written at t=12
            await journal.flush()
            times.append(trio.current_time())
    assert times == [6.0, 12.0]
    assert [(e.name, e.failures) for e in seen] == [
        ("journal.append_failed", 1),
        ("journal.append_failed", 2),
        ("journal.append_failed", 3),
        ("journal.unavailable", 3),
    ]
    assert [e.retry_in for e in seen[:3]] == [2.0, 4.0, 6.0]
    assert [e.seq for e in store.entries("r")] == [0]


async def test_leaving_the_block_with_the_store_down_gives_up_after_the_threshold(
    autojump_clock: Any,
) -> None:
    store = FlakyStore()
    store.fail = -1
    async with open_journal(store) as journal:
        journal.submit(entry_of(started()), _Owner())
    assert trio.current_time() == 6.0  # 0, 2, 6: three failures, then it stops
    assert store.entries("r") == []
    with pytest.raises(ActorError, match=r"^\[actor_stopped\] the journal is closed$"):
        journal.submit(entry_of(started()), _Owner())
    with pytest.raises(ActorError, match=r"^\[actor_stopped\] the journal is closed$"):
        await journal.append(entry_of(started()))


async def test_leaving_a_cancelled_block_still_writes_what_is_queued(autojump_clock: Any) -> None:
    store = MemoryStore()
    with trio.CancelScope() as scope:
        async with open_journal(store) as journal:
            scope.cancel()
            journal.submit(entry_of(started()), _Owner())
            await trio.sleep(1)
    assert [e.seq for e in store.entries("r")] == [0]


async def test_a_close_timeout_bounds_the_wait(autojump_clock: Any) -> None:
    store = FlakyStore()
    store.fail = -1
    async with open_journal(store, threshold=100, close_timeout=3.0) as journal:
        journal.submit(entry_of(started()), _Owner())
    assert trio.current_time() == 3.0


class _Owner:
    def __init__(self) -> None:
        self.durable_at: list[int] = []
        self.halts: list[ActorError] = []

    def durable(self, seq: int) -> None:
        self.durable_at.append(seq)

    def halted(self, error: ActorError) -> None:
        self.halts.append(error)


async def test_owners_hear_of_their_last_durable_seq_and_of_halts(autojump_clock: Any) -> None:
    store = FlakyStore()
    owner = _Owner()
    async with open_journal(store) as journal:
        for seq in range(3):
            journal.submit(entry_of(completed("r", seq)), owner)
        await journal.flush()
        assert owner.durable_at == [2]
        store.fail = 3
        journal.submit(entry_of(completed("r", 3)), owner)
        await trio.sleep(6.5)  # failures at 0, 2 and 6
        assert [e.code for e in owner.halts] == [Code.PERSISTENCE_UNAVAILABLE]
        late = _Owner()
        journal.submit(entry_of(completed("s", 0)), late)  # while unavailable: halted at once
        assert len(late.halts) == 1
        await journal.flush()
        assert owner.durable_at == [2, 3] and late.durable_at == [0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delays": ()}, "Journal: delays must be finite seconds >= 0, at least one"),
        ({"delays": (1.0, -1.0)}, "Journal: delays must be finite seconds >= 0, at least one"),
        ({"delays": (math.nan,)}, "Journal: delays must be finite seconds >= 0, at least one"),
        ({"delays": (math.inf,)}, "Journal: delays must be finite seconds >= 0, at least one"),
        ({"delays": (True,)}, "Journal: delays must be finite seconds >= 0, at least one"),
        ({"delays": ("2",)}, "Journal: delays must be finite seconds >= 0, at least one"),
        ({"threshold": 0}, "Journal: threshold must be an int >= 1"),
        ({"threshold": 2.0}, "Journal: threshold must be an int >= 1"),
        ({"threshold": True}, "Journal: threshold must be an int >= 1"),
    ],
)
def test_bad_journal_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ActorError, match=rf"^\[input_validation\] {message}$"):
        Journal(MemoryStore(), **options)


def test_the_defaults() -> None:
    journal = Journal(MemoryStore())
    assert (journal.delays, journal.threshold, journal.failures) == ((2.0, 4.0, 6.0), 3, 0)
    assert DEFAULT_PATH == "runs.journal"


async def test_the_default_file_is_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_journal() as journal:
        await journal.append(entry_of(started()))
    assert [e.seq for e in SqliteStore(tmp_path / "runs.journal", create=False).entries("r")] == [0]


@pytest.mark.parametrize("value", [-1.0, math.nan, True, "1", None])
async def test_a_bad_close_timeout_is_refused(value: Any) -> None:
    with pytest.raises(
        ActorError, match=r"^\[input_validation\] open_journal: close_timeout must be seconds >= 0$"
    ):
        async with open_journal(MemoryStore(), close_timeout=value):
            pass  # pragma: no cover


async def test_prune_by_age_through_the_journal(autojump_clock: Any) -> None:
    import time

    from actors.journal import RunEnding

    store = MemoryStore()
    async with open_journal(store) as journal:
        for run_id in ("old", "recent", "live"):
            journal.submit(entry_of(started(run_id)), _Owner(), header=header(run_id))
        now = time.time()
        journal.submit(
            entry_of(completed("old", 1)),
            _Owner(),
            ending=RunEnding("old", "completed", None, now - 8 * 86400, 1.0, 0, 0.0),
        )
        journal.submit(
            entry_of(completed("recent", 1)),
            _Owner(),
            ending=RunEnding("recent", "failed", "timeout", now - 3600, 1.0, 0, 0.0),
        )
        await journal.flush()
        assert await journal.prune(7 * 86400) == 1
        assert sorted(row.run_id for row in store.runs()) == ["live", "recent"]
        assert await journal.prune(0) == 1
        assert [row.run_id for row in store.runs()] == ["live"]
        for bad in (-1, math.nan, math.inf, True, "7d"):
            with pytest.raises(
                ActorError,
                match=r"^\[input_validation\] Journal\.prune: older_than must be finite seconds",
            ):
                await journal.prune(bad)  # type: ignore[arg-type]


async def test_a_cancelled_appender_leaves_its_entry_queued(autojump_clock: Any) -> None:
    store = FlakyStore()
    store.fail = 1
    async with open_journal(store) as journal:
        with trio.move_on_after(1) as scope:
            await journal.append(entry_of(started("gone")))
        assert scope.cancelled_caught
        assert store.entries("gone") == []
        await journal.append(entry_of(started("next")))  # written with it at t=2
        assert trio.current_time() == 2.0
    assert [e.seq for e in store.entries("gone")] == [0]
    assert store.writes == 1


async def test_a_flush_with_nothing_queued_returns_at_once(autojump_clock: Any) -> None:
    store = MemoryStore()
    async with open_journal(store) as journal:
        await journal.flush()
        assert (trio.current_time(), store.writes) == (0.0, 0)


def test_one_writer_per_journal_file(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    first = SqliteStore(path)
    with pytest.raises(
        ActorError, match=r"^\[config_invalid\] journal '.*j\.journal' is in use by another writer$"
    ):
        SqliteStore(path)
    reader = SqliteStore(path, create=False)  # readers take no lock
    with pytest.raises(ActorError, match=r"in use by another writer"):
        SqliteStore(path, create=False, exclusive=True)
    reader.close()
    first.close()
    SqliteStore(path).close()  # released with the store


def test_the_checksum_is_pinned() -> None:
    """Stored journals outlive the code: the checksum of an entry may never change."""
    assert checksum("r", 1, "node:completed", 2.0, '{"a":1}') == "d6cb984d0d420b72085aef5618954342"
    assert checksum("r", 1, "", 0.0, "{}") == "ac328c62b91ed020246e435d3b33d008"
    assert (
        len(
            {
                checksum("r", 1, "n", 2.0, "{}"),
                checksum("r", 1, "n", 2.5, "{}"),
                checksum("r", 2, "n", 2.0, "{}"),
                checksum("s", 1, "n", 2.0, "{}"),
                checksum("r", 1, "m", 2.0, "{}"),
                checksum("r", 1, "n", 2.0, "[]"),
            }
        )
        == 6
    )


def test_a_checked_record_is_written_as_compact_json_without_the_size_walk() -> None:
    from types import MappingProxyType

    record = completed("r", 2, shared=_shared(25))  # 2**25 leaves: over the item limit
    with pytest.raises(ActorError, match=r"more than 1000000 items"):
        entry_of(record)
    small = completed("r", 3, doc=MappingProxyType({"k": [1, 2.5, None, True]}))
    entry = entry_of(small, checked=True)
    assert entry.body == (
        '{"node_id":"a","execution":1,"attempt":1,"updates":{"doc":{"k":[1,2.5,null,true]}},'
        '"next":["b"],"duration":0.5}'
    )
    assert entry == entry_of(small)
    assert entry.checksum == checksum("r", 3, "node:completed", 2.0, entry.body)
    with pytest.raises(ActorError, match=r"^\[output_validation\] run 'r' seq 4 .*set is not JSON"):
        entry_of(completed("r", 4, bad={1}), checked=True)


def test_postgres_leases_one_holder_at_a_time_on_the_database_clock(
    request: pytest.FixtureRequest,
) -> None:
    from actors.journal.postgres import PostgresStore

    dsn = request.getfixturevalue("postgres_dsn")
    one, two = PostgresStore(dsn), PostgresStore(dsn)  # two daemons on one database
    try:
        assert one.take_lease("r", "A", 0.3) == 1
        assert two.take_lease("r", "B", 0.3) is None  # A's lease runs
        assert one.take_lease("r", "A", 0.3) == 2  # the holder takes it again: a new token
        assert one.renew_leases("A", {"r": 2}, 0.3) == {"r"}
        assert one.renew_leases("A", {"r": 1}, 0.3) == set()  # a stale token renews nothing
        assert one.renew_leases("B", {"r": 2}, 0.3) == set()  # nor another holder
        assert one.renew_leases("A", {}, 0.3) == set()
        for store in (one, two):  # each writes its own run: no lock between daemons
            run_id = "r" if store is one else "s"
            store.write(
                Batch(
                    entries=[entry_of(started(run_id))],
                    headers=[header(run_id)],
                    fences={"r": ("A", 2)} if store is one else {},
                )
            )
        # Verified once, r's records then go in guarded by the epoch alone; a batch sent
        # again (a retry) stores nothing twice and fences nothing.
        again = Batch(entries=[entry_of(completed("r", 5, x=0))], fences={"r": ("A", 2)})
        assert one.write(again) == frozenset()
        assert one.write(again) == frozenset()
        assert [e.seq for e in one.entries("r")] == [0, 5]
        assert two.orphans() == ["s"]  # unfinished, never leased; r is held
        time.sleep(0.35)
        assert two.orphans() == ["r", "s"]  # r's lease expired
        assert two.take_lease("r", "B", 30.0) == 3  # taken over, with a higher token
        assert two.orphans() == ["s"]
        # A wakes up: its write for r is fenced off (nothing of r written), the rest is.
        fenced = one.write(
            Batch(
                entries=[entry_of(completed("r", 1, x=1)), entry_of(completed("s", 1, y=1))],
                fences={"r": ("A", 2)},
            )
        )
        assert fenced == frozenset({"r"})
        assert [e.seq for e in two.entries("r")] == [0, 5]
        assert [e.seq for e in two.entries("s")] == [0, 1]
        assert one.renew_leases("A", {"r": 2}, 30.0) == set()
        # B writes for r with its token.
        assert (
            two.write(Batch(entries=[entry_of(completed("r", 1, x=2))], fences={"r": ("B", 3)}))
            == frozenset()
        )
        assert [e.seq for e in one.entries("r")] == [0, 1, 5]
    finally:
        one.close()
        two.close()


def test_sqlite_and_memory_stores_have_no_leases(tmp_path: Path) -> None:
    assert not getattr(SqliteStore(tmp_path / "j.journal"), "leases", False)
    assert not getattr(MemoryStore(), "leases", False)


def test_a_journal_that_cannot_be_opened_is_config_invalid_and_holds_nothing(
    tmp_path: Path,
) -> None:
    with pytest.raises(
        ActorError,
        match=r"^\[config_invalid\] '.*missing-dir/j\.journal' cannot be opened "
        r"\(FileNotFoundError\)$",
    ):
        SqliteStore(tmp_path / "missing-dir" / "j.journal")
    foreign = tmp_path / "foreign.journal"
    foreign.write_bytes(b"not sqlite" * 100)
    with pytest.raises(ActorError, match=r"is not a journal$"):
        SqliteStore(foreign)  # creating over a foreign file
    folder = tmp_path / "a-folder"
    folder.mkdir()
    for _ in range(2):  # the lock taken before the failed connect is released each time
        with pytest.raises(ActorError, match=r"a-folder' cannot be opened \(OperationalError\)$"):
            SqliteStore(folder)
    # The failed open released its lock: a writer can take the file once it is a journal.
    foreign.unlink()
    SqliteStore(foreign).close()


async def test_open_journal_on_a_path_that_cannot_be_opened_is_config_invalid(
    tmp_path: Path,
) -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] .* cannot be opened"):
        async with open_journal(tmp_path / "nope" / "j.journal"):
            pass  # pragma: no cover


async def test_a_cancelled_flush_leaves_the_queue_alone(autojump_clock: Any) -> None:
    store = FlakyStore()
    store.fail = 1
    async with open_journal(store) as journal:
        journal.submit(entry_of(started("q")), _Owner())
        with trio.move_on_after(1) as scope:
            await journal.flush()
        assert scope.cancelled_caught and store.entries("q") == []
        await journal.flush()  # the write at t=2 takes the entry
        assert trio.current_time() == 2.0
    assert [e.seq for e in store.entries("q")] == [0]
