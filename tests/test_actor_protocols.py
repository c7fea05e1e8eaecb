"""The two protocols around a slot are all the code on either side needs.

* A ref works against any :class:`~actors.lowlevel.ActorAddress`: here a fake one, with a
  plain mailbox and timer and no cell, runtime or supervision behind it.
* A cell works inside any :class:`~actors.lowlevel.CellHost`: here a fake one that is not
  a :class:`~actors.Runtime` (no registry, no nursery).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from outcome import Error, Value
from trio.testing import MockClock

from actors import Actor, ActorError, ActorRef, Code, DeadLetter, DeadLetters
from actors.lowlevel import (
    ActorAddress,
    ActorCell,
    AfterCrash,
    CellHost,
    CellState,
    Exit,
    ExitKind,
    cell_of,
)
from actors.mailbox import Envelope, Mailbox
from actors.timer import DeadlineTimer


def _expire(envelope: Envelope) -> None:
    envelope.owner.expire(envelope)


class FakeAddress:
    """An :class:`ActorAddress` that records what the ref asks of it."""

    def __init__(self) -> None:
        self.name = "fake"
        self.path = "/nowhere/fake"
        self.state = CellState.RUNNING
        self.restarts = 2
        self.accepting = True
        self.mailbox = Mailbox(2, "drop_oldest")
        self.timer = DeadlineTimer(_expire)
        self.asked: list[tuple[Any, ...]] = []

    def stopped_error(self, *, delivered: bool = False) -> ActorError:
        self.asked.append(("stopped_error", delivered))
        return ActorError.from_code(Code.ACTOR_STOPPED, "fake refuses", delivered=delivered)

    def cancel_reason(self) -> str | None:
        return None

    def evicted(self, envelope: Envelope) -> None:
        self.asked.append(("evicted", envelope.message))

    def caller_gave_up(self, envelope: Envelope) -> None:
        self.asked.append(("caller_gave_up", envelope.message))
        self.mailbox.abandon(envelope)

    def expire(self, envelope: Envelope) -> None:
        self.asked.append(("expire", envelope.message, trio.current_time()))
        self.mailbox.abandon(envelope)
        assert envelope.caller is not None
        err = ActorError.from_code(Code.CALL_TIMEOUT, "fake timeout", delivered=False)
        trio.lowlevel.reschedule(envelope.caller, Error(err))

    def dead_letter(self, message: Any, reason: str) -> None:
        self.asked.append(("dead_letter", message, reason))

    def request_exit(self, reason: str) -> None:
        self.asked.append(("request_exit", reason))

    async def stop(self, reason: str, timeout: float | None) -> None:
        self.asked.append(("stop", reason, timeout))
        await trio.lowlevel.checkpoint()


def _fake_ref() -> tuple[ActorRef, FakeAddress]:
    fake = FakeAddress()
    address: ActorAddress = fake  # the protocol is all a ref needs
    return ActorRef(address), fake


async def test_a_ref_reads_its_address() -> None:
    ref, _ = _fake_ref()
    assert (ref.name, ref.path, ref.state, ref.restarts) == ("fake", "/nowhere/fake", "running", 2)
    assert repr(ref) == "<ActorRef /nowhere/fake running>"
    with pytest.raises(TypeError, match="not backed by an ActorCell but FakeAddress"):
        cell_of(ref)
    await trio.lowlevel.checkpoint()


async def test_a_ref_sends_through_its_address_only(autojump_clock: MockClock) -> None:
    ref, fake = _fake_ref()

    async def serve_one() -> None:
        await fake.mailbox.wait()
        envelope = fake.mailbox.take()
        assert envelope is not None and envelope.owner is fake
        envelope.resolve(Value(("echo", envelope.message)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_one)
        assert await ref.call("hi", timeout=None) == ("echo", "hi")
    ref.try_cast("a")
    ref.try_cast("b")
    ref.try_cast("c")  # a full drop_oldest mailbox evicts "a"
    assert [e.message for e in fake.mailbox.drain()] == ["b", "c"]
    fake.accepting = False
    ref.try_cast("late")
    await ref.cast("later")
    with pytest.raises(ActorError, match="fake refuses"):
        await ref.call("refused")
    assert fake.asked == [
        ("evicted", "a"),
        ("dead_letter", "late", "actor_stopped"),
        ("dead_letter", "later", "actor_stopped"),
        ("stopped_error", False),
    ]


async def test_a_call_timeout_goes_through_the_address_timer(autojump_clock: MockClock) -> None:
    ref, fake = _fake_ref()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.timer.run)
        with pytest.raises(ActorError, match="fake timeout"):
            await ref.call("slow", timeout=3)
        nursery.cancel_scope.cancel()
    assert fake.asked == [("expire", "slow", 3.0)]


async def test_stop_and_stop_self_go_through_the_address() -> None:
    ref, fake = _fake_ref()
    await ref.stop("bye", timeout=2)
    await ref.stop()
    with pytest.raises(ActorError, match="timeout must be None or a number") as info:
        await ref.stop(timeout=-1)
    assert info.value.code is Code.INPUT_VALIDATION
    actor = Actor()
    actor.ref = ref
    actor.stop_self("done")
    assert fake.asked == [("stop", "bye", 2.0), ("stop", "normal", 5.0), ("request_exit", "done")]


# --- a cell in a host that is not a Runtime --------------------------------------------


class FakeHost:
    """A :class:`CellHost`: dead letters, a timer, and a record of what the cell told it."""

    def __init__(self) -> None:
        self.dead_letters = DeadLetters()
        self.timer = DeadlineTimer(_expire)
        self.told: list[tuple[str, str]] = []

    def revive_cell(self, cell: ActorCell) -> None:
        self.told.append(("revive_cell", cell.path))

    def cell_finished(self, cell: ActorCell) -> None:
        self.told.append(("cell_finished", cell.path))


class NoSupervision:
    """Never restarts, never cancels."""

    def after_crash(self, cell: ActorCell, error: ActorError) -> AfterCrash:
        return AfterCrash.STOP

    def cancel_reason(self) -> str | None:
        return None

    def note_cancel(self, reason: str) -> str:
        return reason

    async def stop_child(self, cell: ActorCell, reason: str, timeout: float | None) -> None:
        cell.stop_accepting()
        cell.request_exit(reason)
        await cell.wait_stopped()

    def terminating(self, cell: ActorCell) -> None:
        pass


class Sleeper(Actor):
    async def handle(self, message: Any) -> Any:
        if isinstance(message, float):
            await trio.sleep(message)
        return message


async def test_a_cell_needs_only_its_host(autojump_clock: MockClock) -> None:
    fake = FakeHost()
    host: CellHost = fake  # the protocol is all a cell needs
    cell = ActorCell(
        host,
        Sleeper,
        name="sleeper",
        path="/fake/sleeper",
        mailbox=Mailbox(4),
        supervision=NoSupervision(),
    )
    letters: list[DeadLetter] = []
    fake.dead_letters.add_hook(letters.append)
    exits: list[Exit] = []

    async def run(*, task_status: trio.TaskStatus[ActorRef]) -> None:
        try:
            exits.append(await cell.run_incarnation(task_status=task_status))
        finally:
            cell.close(exits[-1].reason if exits else "failed")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.timer.run)
        ref: ActorRef = await nursery.start(run)
        assert cell_of(ref) is cell
        assert await ref.call("hi") == "hi"
        with pytest.raises(ActorError, match="no reply from /fake/sleeper") as info:
            await ref.call(10.0, timeout=1)  # the host's timer expires it through the cell
        assert (info.value.code, info.value.delivered, trio.current_time()) == (
            Code.CALL_TIMEOUT,
            True,
            1.0,
        )
        await ref.stop("enough")  # waits for the running handler, then the close
        assert trio.current_time() == 10.0
        await ref.cast("late")
        nursery.cancel_scope.cancel()
    assert exits == [Exit(ExitKind.NORMAL, "enough")]
    assert [(d.target, d.message, d.reason) for d in letters] == [
        ("/fake/sleeper", "late", "actor_stopped")
    ]
    cell.revive()
    assert (cell.state, cell.accepting) == (CellState.STARTING, True)
    assert fake.told == [("cell_finished", "/fake/sleeper"), ("revive_cell", "/fake/sleeper")]
