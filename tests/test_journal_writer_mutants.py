"""`actors.journal.JournalWriter` pinned on what its mutants changed: the exact
``WriteFailed`` its supervision is asked with (count, entries, runs in first-seen order,
the error cut at 500 characters, ``closing``), what ``halt`` and ``give_up`` do (and
when a ``give_up`` is not heeded), the recovery event and the reset of the failure
count, the owners told their last durable seq, the errors of a closed or stopped
journal (codes and messages), the fences a batch carries to a store with leases, and
``read`` in the store thread. Virtual time (``autojump_clock``) on an in-memory store;
a real SQLite file where the store thread matters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from actors import ActorError, Code
from actors.events import NodeCompleted
from actors.journal import (
    AfterWriteFailed,
    Batch,
    JournalWriter,
    LeaseHolder,
    MemoryStore,
    RunHeader,
    SqliteStore,
    WriteFailed,
    entry_of,
    writing,
)
from actors.testing import capture_events
from tests.journal_helpers import FlakyStore


def completed(run_id: str, seq: int) -> Any:
    return entry_of(
        NodeCompleted(
            run_id=run_id,
            seq=seq,
            at=2.0,
            node_id="a",
            execution=1,
            attempt=1,
            updates={},
            next=(),
            duration=0.5,
        )
    )


class Supervision:
    """A journal supervision double: records every ``WriteFailed`` (with the virtual
    time) and answers with ``answers`` in turn (the last one repeats)."""

    def __init__(self, *answers: AfterWriteFailed) -> None:
        self.answers = list(answers) or [AfterWriteFailed(retry_in=1.0)]
        self.failed: list[tuple[float, WriteFailed]] = []
        self.fenced: list[tuple[list[Any], frozenset[str]]] = []

    def after_write_failed(self, failed: WriteFailed) -> AfterWriteFailed:
        self.failed.append((trio.current_time(), failed))
        return self.answers[min(len(self.failed), len(self.answers)) - 1]

    def halt_fenced(self, batch: list[Any], fenced: frozenset[str]) -> list[Any]:
        self.fenced.append((list(batch), fenced))
        return [i for i in batch if i.entry is None or i.entry.run_id not in fenced]

    async def keep_leases(self, read: Any) -> None:
        await trio.sleep_forever()


class Owner:
    def __init__(self) -> None:
        self.durable_at: list[int] = []
        self.halts: list[str] = []

    def durable(self, seq: int) -> None:
        self.durable_at.append(seq)

    def halted(self, error: ActorError) -> None:
        self.halts.append(str(error))


class Failing(FlakyStore):
    """A flaky memory store whose error text is ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def write(self, batch: Batch) -> None:
        if self.fail:
            if self.fail > 0:
                self.fail -= 1
            self.failed += 1
            raise ValueError(self.text)
        MemoryStore.write(self, batch)


# -- what the supervision is asked ------------------------------------------------------


async def test_a_failed_write_is_described_exactly(autojump_clock: Any) -> None:
    store = Failing("x" * 600)
    store.fail = 2
    supervision = Supervision(AfterWriteFailed(retry_in=1.5))
    journal = JournalWriter(store, supervision)
    owner = Owner()
    async with writing(journal, 10.0):
        journal.submit(completed("b", 0), owner)
        journal.submit(completed("a", 0), owner)
        journal.submit(completed("b", 1), owner)
        await journal.flush()
        assert trio.current_time() == 3.0
        assert journal.failures == 0
    assert [t for t, _ in supervision.failed] == [0.0, 1.5]
    first, second = (f for _, f in supervision.failed)
    assert (first.failures, first.entries, first.runs, first.closing) == (1, 3, ("b", "a"), False)
    assert (second.failures, second.entries, second.runs) == (2, 3, ("b", "a"))
    assert first.error == "ValueError: " + "x" * 488
    assert len(first.error) == 500
    assert isinstance(first.exception, ValueError)
    assert owner.durable_at == [1] and owner.halts == []
    assert [e.seq for e in store.entries("b")] == [0, 1]


async def test_entries_queued_during_the_wait_are_retried_with_the_batch(
    autojump_clock: Any,
) -> None:
    store = Failing("down")
    store.fail = 1
    supervision = Supervision(AfterWriteFailed(retry_in=2.0))
    journal = JournalWriter(store, supervision)
    async with writing(journal, 10.0):
        journal.submit(completed("a", 0), Owner())
        await trio.sleep(1)
        assert journal.failures == 1
        late = Owner()
        journal.submit(completed("c", 0), late)
        await journal.flush()
        assert trio.current_time() == 2.0
        assert late.durable_at == [0]
    assert store.writes == 1  # one transaction held both
    assert [f.error for _, f in supervision.failed] == ["ValueError: down"]


async def test_a_short_error_is_whole(autojump_clock: Any) -> None:
    store = Failing("disk full")
    store.fail = 1
    supervision = Supervision()
    journal = JournalWriter(store, supervision)
    async with writing(journal, 10.0):
        await journal.append(completed("r", 0))
    ((_, failed),) = supervision.failed
    assert failed.error == "ValueError: disk full"
    assert (failed.entries, failed.runs) == (1, ("r",))


async def test_a_flush_marker_is_no_entry_and_no_run(autojump_clock: Any) -> None:
    store = Failing("down")
    store.fail = 1
    supervision = Supervision()
    journal = JournalWriter(store, supervision)
    async with writing(journal, 10.0):
        journal.submit(completed("r", 0), Owner())
        with trio.move_on_after(0.5):
            await journal.flush()
        await journal.flush()
    ((_, failed),) = supervision.failed
    assert (failed.entries, failed.runs) == (1, ("r",))


async def test_a_write_failing_while_closing_says_so(autojump_clock: Any) -> None:
    store = Failing("down")
    store.fail = -1
    supervision = Supervision(AfterWriteFailed(retry_in=1.0, give_up=True))
    journal = JournalWriter(store, supervision)
    owner = Owner()
    async with writing(journal, 10.0):
        journal.submit(completed("r", 0), owner)
        await trio.sleep(2.5)  # failed at 0, 1 and 2: give_up is not heeded yet
        assert [f.closing for _, f in supervision.failed] == [False, False, False]
    assert trio.current_time() == 3.0  # the next failure, while closing: given up
    assert [(t, f.closing) for t, f in supervision.failed][3:] == [(3.0, True)]
    assert owner.halts == ["[persistence_unavailable] the journal stopped before writing this"]
    assert owner.durable_at == []
    assert store.entries("r") == []
    assert journal.closed


async def test_give_up_without_closing_keeps_writing(autojump_clock: Any) -> None:
    store = Failing("down")
    store.fail = 2
    supervision = Supervision(AfterWriteFailed(retry_in=1.0, give_up=True))
    journal = JournalWriter(store, supervision)
    async with writing(journal, 10.0):
        await journal.append(completed("r", 0))
        assert trio.current_time() == 2.0
    assert [e.seq for e in store.entries("r")] == [0]


async def test_a_give_up_while_closing_wakes_appenders_with_the_failure_count(
    autojump_clock: Any,
) -> None:
    store = Failing("down")
    store.fail = -1
    supervision = Supervision(AfterWriteFailed(retry_in=1.0, give_up=True))
    journal = JournalWriter(store, supervision)
    errors: list[str] = []

    async def appender() -> None:
        try:
            await journal.append(completed("r", 0))
        except ActorError as exc:
            errors.append(str(exc))

    async with trio.open_nursery() as nursery, writing(journal, 10.0):
        nursery.start_soon(appender)
        await trio.sleep(0.5)
    assert errors == ["[persistence_unavailable] the journal failed 2 consecutive writes"]
    with pytest.raises(ActorError, match=r"^\[actor_stopped\] the journal is closed$"):
        await journal.flush()


# -- halting and recovering -------------------------------------------------------------


async def test_a_halt_wakes_the_batch_and_halts_owners_until_a_write_works(
    autojump_clock: Any,
) -> None:
    store = Failing("down")
    store.fail = 2
    supervision = Supervision(AfterWriteFailed(retry_in=1.0, halt=True))
    journal = JournalWriter(store, supervision)
    owner = Owner()
    with capture_events("journal.recovered") as seen:
        async with writing(journal, 10.0):
            journal.submit(completed("r", 0), owner)
            with pytest.raises(
                ActorError,
                match=r"^\[persistence_unavailable\] the journal failed 1 consecutive writes$",
            ) as info:
                await journal.append(completed("s", 0))
            assert info.value.code is Code.PERSISTENCE_UNAVAILABLE
            assert trio.current_time() == 0.0
            assert owner.halts == [
                "[persistence_unavailable] the journal failed 1 consecutive writes"
            ]
            late = Owner()
            journal.submit(completed("t", 0), late)  # halted at once while it lasts
            assert late.halts == [
                "[persistence_unavailable] the journal failed 1 consecutive writes"
            ]
            await trio.sleep(1.5)  # the second failure, at 1: halted again
            assert len(owner.halts) == 2 and owner.halts[1].endswith("failed 2 consecutive writes")
            await journal.flush()  # written at 2
            assert trio.current_time() == 2.0
            assert journal.failures == 0
            after = Owner()
            journal.submit(completed("u", 0), after)  # the halt ended with the write
            await journal.flush()
            assert after.halts == [] and after.durable_at == [0]
            assert owner.durable_at == [0] and late.durable_at == [0]
    assert [(e.name, getattr(e, "failures", None)) for e in seen] == [("journal.recovered", 2)]
    assert [e.seq for e in store.entries("s")] == [0]


async def test_no_halt_leaves_owners_and_waiters_alone(autojump_clock: Any) -> None:
    store = Failing("down")
    store.fail = 1
    supervision = Supervision(AfterWriteFailed(retry_in=1.0, halt=False))
    journal = JournalWriter(store, supervision)
    owner = Owner()
    async with writing(journal, 10.0):
        journal.submit(completed("r", 0), owner)
        await trio.sleep(0.5)
        late = Owner()
        journal.submit(completed("t", 0), late)
        await journal.append(completed("s", 0))
        assert trio.current_time() == 1.0
        assert owner.halts == [] and late.halts == []
        assert owner.durable_at == [0] and late.durable_at == [0]


async def test_a_success_after_one_failure_is_recovered_once(autojump_clock: Any) -> None:
    store = Failing("down")
    store.fail = 1
    journal = JournalWriter(store, Supervision())
    with capture_events("journal.recovered") as seen:
        async with writing(journal, 10.0):
            await journal.append(completed("r", 0))
            await journal.append(completed("r", 1))
            assert journal.failures == 0
    assert [(e.name, getattr(e, "failures", None)) for e in seen] == [("journal.recovered", 1)]


async def test_after_a_recovery_the_count_starts_again(autojump_clock: Any) -> None:
    store = Failing("down")
    store.fail = 1
    supervision = Supervision()
    journal = JournalWriter(store, supervision)
    async with writing(journal, 10.0):
        await journal.append(completed("r", 0))
        store.fail = 1
        await journal.append(completed("r", 1))
    assert [f.failures for _, f in supervision.failed] == [1, 1]


# -- owners -----------------------------------------------------------------------------


async def test_each_owner_hears_of_the_seq_it_submitted_last(autojump_clock: Any) -> None:
    store = MemoryStore()
    journal = JournalWriter(store, Supervision())
    one, two = Owner(), Owner()
    async with writing(journal, 10.0):
        journal.submit(completed("a", 5), one)
        journal.submit(completed("b", 1), two)
        journal.submit(completed("a", 3), one)
        journal.submit(completed("b", 2), two)
        await journal.flush()
    assert one.durable_at == [3] and two.durable_at == [2]
    assert store.writes == 1


async def test_headers_endings_and_checkpoints_ride_with_their_entries(
    autojump_clock: Any,
) -> None:
    from actors.journal import Checkpoint, RunEnding

    store = MemoryStore()
    journal = JournalWriter(store, Supervision())
    async with writing(journal, 10.0):
        journal.submit(completed("r", 0), Owner(), header=RunHeader("r", "w", "{}", "{}", 100.0))
        journal.submit(
            completed("r", 1),
            Owner(),
            ending=RunEnding("r", "completed", None, 200.0, 1.0, 7, 0.5),
            checkpoint=Checkpoint("r", 1, "{}", "c"),
        )
        await journal.flush()
    row = store.run("r")
    assert row is not None
    assert (row.status, row.started, row.ended, row.tokens, row.events) == (
        "completed",
        100.0,
        200.0,
        7,
        2,
    )
    point = store.checkpoint("r")
    assert point is not None and point.seq == 1


async def test_a_flush_alone_writes_no_transaction(autojump_clock: Any) -> None:
    store = MemoryStore()
    journal = JournalWriter(store, Supervision())
    async with writing(journal, 10.0):
        journal.submit(completed("r", 0), Owner())
        await journal.flush()
        assert store.writes == 1
        async with trio.open_nursery() as nursery:
            nursery.start_soon(journal.flush)
            nursery.start_soon(journal.flush)
        assert store.writes == 1


# -- a closed journal -------------------------------------------------------------------


async def test_a_closed_journal_refuses_everything(autojump_clock: Any) -> None:
    journal = JournalWriter(MemoryStore(), Supervision())
    states = [journal.closed]
    async with writing(journal, 10.0):
        states.append(journal.closed)
    states.append(journal.closed)
    assert states == [False, False, True]
    with pytest.raises(ActorError, match=r"^\[actor_stopped\] the journal is closed$"):
        journal.submit(completed("r", 0), Owner())
    with pytest.raises(ActorError, match=r"^\[actor_stopped\] the journal is closed$") as info:
        await journal.append(completed("r", 0))
    assert info.value.code is Code.ACTOR_STOPPED
    with pytest.raises(ActorError, match=r"^\[actor_stopped\] the journal is closed$"):
        await journal.flush()


# -- leases -----------------------------------------------------------------------------


class LeasedStore(MemoryStore):
    """A memory store with leases: takes leases from ``tokens``, records the fences of
    every write and fences off the runs in ``taken``."""

    leases = True

    def __init__(self, **tokens: int | None) -> None:
        super().__init__()
        self.tokens = tokens
        self.fences: list[dict[str, tuple[str, int]]] = []
        self.taken: set[str] = set()
        self.given: list[tuple[str, int]] = []
        self.fail = 0  # the next writes that raise

    def take_lease(self, run_id: str, holder: str, ttl: float) -> int | None:
        return self.tokens.get(run_id)

    def give_back_lease(self, run_id: str, holder: str, token: int) -> bool:
        self.given.append((run_id, token))
        return True

    def renew_leases(self, holder: str, tokens: dict[str, int], ttl: float) -> set[str]:
        return set(tokens)

    def orphans(self) -> list[str]:
        return []

    def write(self, batch: Batch) -> frozenset[str]:  # type: ignore[override]
        if self.fail:
            self.fail -= 1
            raise OSError("down")
        self.fences.append(dict(batch.fences))
        fenced = frozenset(self.taken & {e.run_id for e in batch.entries})
        MemoryStore.write(
            self,
            Batch(
                entries=[e for e in batch.entries if e.run_id not in fenced],
                headers=batch.headers,
            ),
        )
        return fenced


async def test_a_batch_carries_the_fences_of_the_runs_it_holds(autojump_clock: Any) -> None:
    store = LeasedStore(a=4, b=None)
    leases = LeaseHolder(store, 30.0)
    journal = JournalWriter(store, Supervision(), leases)
    async with writing(journal, 10.0):
        await journal.acquire("a")
        with pytest.raises(
            ActorError, match=r"^\[name_taken\] run 'b' is leased by another daemon$"
        ) as info:
            await journal.acquire("b")
        assert (info.value.code, info.value.run_id) == (Code.NAME_TAKEN, "b")
        assert journal.claim("b")  # refused by the store: the claim was given back
        journal.release("b")
        with pytest.raises(
            ActorError, match=r"^\[name_taken\] run 'a' is running on this journal$"
        ) as again:
            await journal.acquire("a")
        assert (again.value.code, again.value.run_id) == (Code.NAME_TAKEN, "a")
        journal.submit(completed("a", 0), Owner())
        journal.submit(completed("c", 0), Owner())
        await journal.flush()
        assert store.fences == [{"a": (leases.holder, 4)}]
        journal.release("a")
        assert leases.tokens == {}
        assert journal.claim("a")
        journal.release("a")
        await journal.acquire("a")
        await journal.give_back("a")
        assert store.given == [("a", 4)]
        assert journal.claim("a")


async def test_a_fenced_run_is_handed_to_the_supervision_and_its_waiters_refused(
    autojump_clock: Any,
) -> None:
    store = LeasedStore(a=1, b=2)
    leases = LeaseHolder(store, 30.0)
    supervision = Supervision()
    journal = JournalWriter(store, supervision, leases)
    async with writing(journal, 10.0):
        await journal.acquire("a")
        await journal.acquire("b")
        store.taken = {"a"}
        store.fail = 1  # the first write fails: all four are retried in one batch at t=1
        kept, lost = Owner(), Owner()
        journal.submit(completed("a", 0), lost)
        journal.submit(completed("b", 0), kept)
        outcomes: dict[str, str] = {}

        async def append(run_id: str) -> None:
            try:
                await journal.append(completed(run_id, 1))
            except ActorError as exc:
                outcomes[run_id] = str(exc)
            else:
                outcomes[run_id] = "durable"

        async with trio.open_nursery() as nursery:  # both wait on one batch
            nursery.start_soon(append, "a")
            nursery.start_soon(append, "b")
    assert outcomes == {
        "a": "[lease_lost] another daemon took this run over (its lease had expired)",
        "b": "durable",
    }
    ((batch, fenced),) = supervision.fenced
    assert fenced == frozenset({"a"})
    handed = [(i.entry.run_id, i.entry.seq) for i in batch]
    assert sorted(handed) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert handed[:2] == [("a", 0), ("b", 0)]
    assert kept.durable_at == [0] and lost.durable_at == []
    assert [e.seq for e in store.entries("b")] == [0, 1]
    assert store.entries("a") == []


async def test_a_lease_store_that_raises_gives_the_claim_back(autojump_clock: Any) -> None:
    class Broken(LeasedStore):
        def take_lease(self, run_id: str, holder: str, ttl: float) -> int | None:
            raise OSError("no database")

    store = Broken()
    journal = JournalWriter(
        store,
        Supervision(),
        LeaseHolder(store, 30.0),
    )
    async with writing(journal, 10.0):
        with pytest.raises(OSError, match="no database"):
            await journal.acquire("r")
        assert journal.claim("r")


def test_a_journal_without_leases_claims_in_process_only() -> None:
    journal = JournalWriter(MemoryStore(), Supervision())
    assert journal.claim("r")
    assert not journal.claim("r")
    journal.release("r")
    assert journal.claim("r")
    assert journal.leases is None and journal.failures == 0


async def test_give_back_without_leases_frees_the_claim(autojump_clock: Any) -> None:
    journal = JournalWriter(MemoryStore(), Supervision())
    await journal.acquire("r")
    await journal.give_back("r")
    assert journal.claim("r")


# -- a store in its thread --------------------------------------------------------------


async def test_a_sqlite_journal_reads_and_writes_in_the_store_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "j.journal")
    journal = JournalWriter(store, Supervision())
    owner = Owner()
    async with writing(journal, 10.0):
        journal.submit(completed("r", 0), owner, header=RunHeader("r", "w", "{}", "{}", 1.0))
        await journal.append(completed("r", 1))
        entries = await journal.read(store.entries, "r")
        assert [e.seq for e in entries] == [0, 1]
        assert await journal.read(store.unfinished) == ["r"]
    assert owner.durable_at == [0]
    again = SqliteStore(tmp_path / "j.journal", create=False)
    assert [e.seq for e in again.entries("r")] == [0, 1]
    again.close()


async def test_a_store_that_is_not_inline_is_called_in_the_store_thread() -> None:
    import threading

    class Threaded(MemoryStore):
        inline = False

        def __init__(self) -> None:
            super().__init__()
            self.threads: list[bool] = []

        def write(self, batch: Batch) -> None:
            self.threads.append(threading.current_thread() is threading.main_thread())
            super().write(batch)

        def unfinished(self) -> list[str]:
            self.threads.append(threading.current_thread() is threading.main_thread())
            return super().unfinished()

    store = Threaded()
    journal = JournalWriter(store, Supervision())
    async with writing(journal, 10.0):
        await journal.append(completed("r", 0))
        # Records without a row are listed (recovery reports such a run, never drops it).
        assert await journal.read(store.unfinished) == ["r"]
    assert store.threads == [False, False]  # neither in the trio thread
