"""Issue 26: the journal's decisions live in ``supervisors``. The names that moved out of
``actors.journal`` still work from there, with a ``DeprecationWarning`` naming their new
place; the writer (``actors.journal.JournalWriter``) asks its supervision after a failed
write and follows the answer; ``supervisors.runs.JournalPolicy`` gives the house's."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest
import trio

import actors.journal
import supervisors.runs
from actors import ActorError
from actors.events import RunStarted
from actors.journal import (
    AfterWriteFailed,
    JournalWriter,
    MemoryStore,
    Read,
    WriteFailed,
    entry_of,
    writing,
)
from actors.testing import capture_events
from supervisors.runs import DELAYS, THRESHOLD, Journal, JournalPolicy, open_journal
from tests.journal_helpers import FlakyStore

MOVED = ("DELAYS", "LEASE_TTL", "THRESHOLD", "Journal", "Leases", "open_journal")


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_name_warns_and_is_the_new_one(name: str) -> None:
    with pytest.warns(DeprecationWarning, match="supervisors.runs") as caught:
        old = getattr(actors.journal, name)
    assert old is getattr(supervisors.runs, name)
    (warning,) = caught
    assert str(warning.message) == (
        f"actors.journal.{name} is deprecated: use supervisors.runs.{name}"
    )
    assert warning.filename == __file__  # the warning points at the caller


def test_from_import_of_a_moved_name_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match=r"use supervisors\.runs\.open_journal"):
        from actors.journal import open_journal as old
    assert old is open_journal


def test_the_moved_names_are_no_longer_public_here_and_the_rest_do_not_warn() -> None:
    assert set(MOVED).isdisjoint(actors.journal.__all__)
    assert set(MOVED) <= set(supervisors.runs.__all__)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in actors.journal.__all__:
            getattr(actors.journal, name)
        importlib.reload(actors.journal)  # importing the package warns of nothing
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        actors.journal.nothing  # noqa: B018


# --- the mechanism asks, the policy decides --------------------------------------------


class Asked:
    """A supervision that retries every second and halts from the second failure on."""

    def __init__(self) -> None:
        self.asked: list[WriteFailed] = []

    def after_write_failed(self, failed: WriteFailed) -> AfterWriteFailed:
        self.asked.append(failed)
        return AfterWriteFailed(retry_in=1.0, halt=failed.failures >= 2, give_up=True)

    def halt_fenced(self, batch: list[Any], fenced: frozenset[str]) -> list[Any]:
        raise AssertionError("a memory store fences nothing")

    async def keep_leases(self, read: Read) -> None:
        pass


def started(run_id: str = "r") -> Any:
    return entry_of(
        RunStarted(run_id=run_id, seq=0, at=0.0, workflow="w", inputs={}, wall_time=0.0)
    )


async def test_the_writer_follows_its_supervisions_answer(autojump_clock: Any) -> None:
    store, supervision = FlakyStore(), Asked()
    store.fail = 2
    journal = JournalWriter(store, supervision)
    late = Owner()
    with capture_events("journal.append_failed", "journal.recovered") as seen:
        async with writing(journal, 10.0):
            with pytest.raises(ActorError, match="persistence_unavailable"):
                await journal.append(started())
            assert trio.current_time() == 1.0  # halted at the second failure, 1 s later
            journal.submit(started("s"), late)  # while halting: halted at once
            assert [e.code for e in late.halts] == ["persistence_unavailable"]
            await journal.flush()
            assert trio.current_time() == 2.0  # written at the third try
            journal.submit(started("t"), Owner())
            await journal.flush()
    assert len(late.halts) == 1  # a write worked: no more halting
    assert [(f.failures, f.entries, f.runs, f.closing) for f in supervision.asked] == [
        (1, 1, ("r",), False),
        (2, 1, ("r",), False),
    ]
    assert supervision.asked[0].error == "OSError: disk full"
    assert isinstance(supervision.asked[0].exception, OSError)
    # The supervision reports the failures (this one does not); the writer, a recovery.
    assert [(e.name, e.failures) for e in seen] == [("journal.recovered", 2)]
    assert [e.seq for e in store.entries("r")] == [0]
    assert late.durable_at == [0]


async def test_give_up_is_heeded_only_while_closing(autojump_clock: Any) -> None:
    store, supervision = FlakyStore(), Asked()
    store.fail = -1
    journal = JournalWriter(store, supervision)
    async with writing(journal, 100.0):
        journal.submit(started(), Owner())
        await trio.sleep(2.5)  # give_up=True all along: it keeps trying while open
        assert len(supervision.asked) == 3
    assert [f.closing for f in supervision.asked] == [False, False, False, True]
    assert trio.current_time() == 3.0  # the first failure while closing halts and gives up


class Owner:
    def __init__(self) -> None:
        self.durable_at: list[int] = []
        self.halts: list[ActorError] = []

    def durable(self, seq: int) -> None:
        self.durable_at.append(seq)

    def halted(self, error: ActorError) -> None:
        self.halts.append(error)


def failed(failures: int, *, closing: bool = False) -> WriteFailed:
    return WriteFailed(
        failures=failures,
        entries=2,
        runs=("a", "b"),
        error="OSError: x",
        exception=OSError("x"),
        closing=closing,
    )


def test_the_house_policy_schedule_and_threshold() -> None:
    policy = JournalPolicy(MemoryStore())
    assert (policy.delays, policy.threshold, policy.leases) == (DELAYS, THRESHOLD, None)
    with capture_events("journal.append_failed", "journal.unavailable") as seen:
        answers = [policy.after_write_failed(failed(n)) for n in range(1, 6)]
    assert [(a.retry_in, a.halt, a.give_up) for a in answers] == [
        (2.0, False, False),
        (4.0, False, False),
        (6.0, True, False),
        (6.0, True, False),
        (6.0, True, False),
    ]
    assert [(e.name, e.failures) for e in seen] == [
        ("journal.append_failed", 1),
        ("journal.append_failed", 2),
        ("journal.append_failed", 3),
        ("journal.unavailable", 3),  # once, when the threshold is reached
        ("journal.append_failed", 4),
        ("journal.append_failed", 5),
    ]
    assert (seen[0].entries, seen[0].runs, seen[0].error) == (2, ("a", "b"), "OSError: x")
    assert seen[3].runs == ("a", "b")
    # Closing: it gives up once it halts, not before.
    assert not policy.after_write_failed(failed(2, closing=True)).give_up
    assert policy.after_write_failed(failed(3, closing=True)).give_up


def test_a_journal_is_a_writer_with_the_house_policy() -> None:
    journal = Journal(MemoryStore(), delays=(1.0,), threshold=2)
    assert isinstance(journal, JournalWriter)
    assert journal.supervision is journal.policy
    assert (journal.delays, journal.threshold, journal.leases) == ((1.0,), 2, None)
