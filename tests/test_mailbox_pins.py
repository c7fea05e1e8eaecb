"""Pins of actors.mailbox: capacity and overflow defaults, the waiting line, abandonment,
draining and the receiver's wake-ups — directly on a Mailbox, and through actors.

Each test fails if one default or one rule of the line changes
(``make mutate MODULE=actors/mailbox.py`` measures how well they do).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing
from outcome import Value
from trio.testing import MockClock

from actors import ActorError, Code, DeadLetter, open_runtime
from actors.mailbox import DEFAULT_CAPACITY, Envelope, Mailbox, State
from tests.actor_helpers import Recorder


def cast(message: Any) -> Envelope:
    return Envelope(message, False, None)


def messages(envelopes: list[Envelope]) -> list[Any]:
    return [e.message for e in envelopes]


def take_all(mailbox: Mailbox) -> list[Any]:
    taken = []
    while (envelope := mailbox.take()) is not None:
        assert envelope.state is State.RUNNING
        taken.append(envelope.message)
    return taken


# --- defaults ------------------------------------------------------------------------


def test_mailbox_defaults() -> None:
    mailbox = Mailbox()
    assert (mailbox.capacity, mailbox.overflow) == (1000, "backpressure")
    assert DEFAULT_CAPACITY == 1000
    assert (len(mailbox), mailbox.full(), mailbox.take()) == (0, False, None)
    assert Mailbox(1).capacity == 1  # the smallest mailbox


def test_envelope_defaults() -> None:
    envelope = cast("m")
    assert (envelope.message, envelope.is_call, envelope.caller, envelope.owner) == (
        "m",
        False,
        None,
        None,
    )
    assert (envelope.state, envelope.deadline, envelope.scope) == (State.QUEUED, math.inf, None)
    assert (envelope.propagate_cancel, envelope.sender_parked) == (False, False)
    assert [int(s) for s in State] == [0, 1, 2, 3, 4]


def test_resolve_hands_over_once() -> None:
    envelope = cast("m")
    assert envelope.resolve(Value(1)) is True
    assert envelope.state is State.DONE
    assert envelope.resolve(Value(2)) is False
    assert envelope.state is State.DONE
    abandoned = cast("n")
    Mailbox().abandon(abandoned)
    assert abandoned.resolve(Value(3)) is False
    assert abandoned.state is State.ABANDONED


# --- the line, directly ----------------------------------------------------------------


def test_backpressure_lines_up_the_rest_in_order() -> None:
    mailbox = Mailbox(2)
    a, b, c, d = (cast(m) for m in "abcd")
    assert [mailbox.put(e) for e in (a, b, c, d)] == [None] * 4
    assert [e.state for e in (a, b, c, d)] == [State.QUEUED] * 2 + [State.WAITING_ROOM] * 2
    assert (len(mailbox), mailbox.full()) == (2, True)
    assert mailbox.take() is a  # room for exactly one waiter
    assert (c.state, d.state, len(mailbox)) == (State.QUEUED, State.WAITING_ROOM, 2)
    assert take_all(mailbox) == ["b", "c", "d"]
    assert len(mailbox) == 0


def test_drop_oldest_evicts_the_oldest_live_envelope() -> None:
    mailbox = Mailbox(2, "drop_oldest")
    a, b, c, d = (cast(m) for m in "abcd")
    assert mailbox.put(a) is None and mailbox.put(b) is None
    mailbox.abandon(a)  # an abandoned head is not live: it is skipped, not evicted
    assert mailbox.put(c) is None
    assert mailbox.put(d) is b
    assert (len(mailbox), take_all(mailbox)) == (2, ["c", "d"])


def test_abandoning_a_queued_envelope_frees_its_room_at_once() -> None:
    mailbox = Mailbox(2)
    a, b, c = (cast(m) for m in "abc")
    for envelope in (a, b, c):
        mailbox.put(envelope)
    mailbox.abandon(a)
    assert (a.state, c.state, len(mailbox)) == (State.ABANDONED, State.QUEUED, 2)
    assert take_all(mailbox) == ["b", "c"]


def test_abandoning_a_waiting_envelope_frees_no_room() -> None:
    mailbox = Mailbox(1)
    a, b = cast("a"), cast("b")
    mailbox.put(a)
    mailbox.put(b)
    mailbox.abandon(b)
    assert (b.state, len(mailbox), mailbox.full()) == (State.ABANDONED, 1, True)
    assert take_all(mailbox) == ["a"]
    assert (len(mailbox), mailbox.full()) == (0, False)


def test_an_abandoned_waiter_is_skipped_and_the_next_one_admitted() -> None:
    mailbox = Mailbox(1)
    a, b, c = (cast(m) for m in "abc")
    for envelope in (a, b, c):
        mailbox.put(envelope)
    mailbox.abandon(b)
    assert mailbox.take() is a
    assert (c.state, len(mailbox)) == (State.QUEUED, 1)
    assert take_all(mailbox) == ["c"]


def test_a_line_of_only_abandoned_waiters_admits_nothing() -> None:
    mailbox = Mailbox(1)
    a, b = cast("a"), cast("b")
    mailbox.put(a)
    mailbox.put(b)
    mailbox.abandon(b)
    assert mailbox.take() is a
    assert (len(mailbox), mailbox.take()) == (0, None)
    c = cast("c")
    assert mailbox.put(c) is None
    assert (c.state, take_all(mailbox)) == (State.QUEUED, ["c"])


def test_admitting_a_parked_sender_clears_its_parking() -> None:
    mailbox = Mailbox(1)
    a, b = cast("a"), cast("b")
    mailbox.put(a)
    mailbox.put(b)
    b.sender_parked = True  # as ActorRef.cast marks it (here with no task to wake)
    mailbox.take()
    assert (b.state, b.sender_parked, b.caller) == (State.QUEUED, False, None)


def test_drain_returns_live_envelopes_queued_then_waiting() -> None:
    mailbox = Mailbox(2)
    a, b, c, d = (cast(m) for m in "abcd")
    for envelope in (a, b, c, d):
        mailbox.put(envelope)
    mailbox.abandon(a)  # c moves in; a stays in the queue, abandoned
    mailbox.put(e := cast("e"))
    running = mailbox.take()
    assert running is b
    drained = mailbox.drain()
    assert messages(drained) == ["c", "d", "e"]
    assert [x.state for x in drained] == [State.ABANDONED] * 3
    assert (running.state, len(mailbox), mailbox.full(), mailbox.take()) == (
        State.RUNNING,
        0,
        False,
        None,
    )
    assert e.state is State.ABANDONED
    assert mailbox.drain() == []
    mailbox.put(f := cast("f"))
    assert (len(mailbox), take_all(mailbox)) == (1, ["f"])
    assert f.state is State.RUNNING


# --- the receiver ----------------------------------------------------------------------


async def test_a_put_wakes_the_parked_receiver(autojump_clock: MockClock) -> None:
    mailbox = Mailbox()
    woke: list[float] = []

    async def receiver() -> None:
        await mailbox.wait()
        woke.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.sleep(3)
        mailbox.put(cast("a"))
    assert woke == [3.0]
    await mailbox.wait()  # something is queued: a checkpoint, no parking
    assert len(mailbox) == 1


async def test_a_wake_without_a_message_then_puts(autojump_clock: MockClock) -> None:
    mailbox = Mailbox()
    woke: list[float] = []

    async def receiver() -> None:
        await mailbox.wait()
        woke.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.sleep(2)
        mailbox.wake()
        mailbox.wake()  # nobody parked any more: nothing happens
    mailbox.put(cast("a"))  # the receiver left: a put wakes nobody
    assert (woke, len(mailbox)) == ([2.0], 1)


async def test_a_cancelled_receiver_is_forgotten(autojump_clock: MockClock) -> None:
    mailbox = Mailbox()
    with trio.move_on_after(1) as scope:
        await mailbox.wait()
    assert scope.cancelled_caught
    mailbox.put(cast("a"))  # must not reschedule the task that left
    mailbox.wake()
    assert take_all(mailbox) == ["a"]


# --- through actors --------------------------------------------------------------------


async def test_several_waiting_senders_are_admitted_in_order(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    admitted: list[tuple[str, float]] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), capacity=1)
        await ref.cast(("sleep", 10))
        await trio.testing.wait_all_tasks_blocked()  # the actor is busy; the mailbox empty
        ref.try_cast("fill")

        async def sender(name: str) -> None:
            await ref.cast(name)
            admitted.append((name, trio.current_time()))

        async with trio.open_nursery() as nursery:
            for name in ("s1", "s2", "s3"):
                nursery.start_soon(sender, name)
                await trio.testing.wait_all_tasks_blocked()
        assert await ref.call("end") == "end"
    assert sorted(admitted) == [("s1", 10.0), ("s2", 10.0), ("s3", 10.0)]
    assert log == [("sleep", 10), "fill", "s1", "s2", "s3", "end"]


async def test_an_abandoned_sender_then_new_senders(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), capacity=1)
        await ref.cast(("sleep", 10))
        await trio.testing.wait_all_tasks_blocked()
        ref.try_cast("fill")
        with trio.move_on_after(2) as gave_up:
            await ref.cast("withdrawn")  # waits in line, then its sender gives up
        assert gave_up.cancelled_caught
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ref.cast, "late-1")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ref.cast, "late-2")
        assert trio.current_time() == 10.0  # both got room once the actor was free
        assert await ref.call("end") == "end"
    assert log == [("sleep", 10), "fill", "late-1", "late-2", "end"]


async def test_a_call_that_times_out_in_the_queue_never_runs(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), capacity=1)
        await ref.cast(("sleep", 10))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(ActorError) as caught:
            await ref.call("late", timeout=5)
        assert (caught.value.code, caught.value.delivered) == (Code.CALL_TIMEOUT, False)
        ref.try_cast("next")  # the timed-out call's room was freed at once
        with pytest.raises(ActorError, match=r"^\[mailbox_full\] mailbox of .* is full \(1\)$"):
            ref.try_cast("one too many")
        assert await ref.call("end", timeout=None) == "end"
    assert log == [("sleep", 10), "next", "end"]


async def test_stopping_dead_letters_queued_and_waiting_casts(autojump_clock: MockClock) -> None:
    letters: list[DeadLetter] = []
    async with open_runtime() as runtime:
        runtime.dead_letters.add_hook(letters.append)
        ref = await runtime.spawn(lambda: Recorder([]), capacity=1)
        await ref.cast(("sleep", 10))
        await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as nursery:
            for name in ("q", "w1", "w2"):
                nursery.start_soon(ref.cast, name)
                await trio.testing.wait_all_tasks_blocked()
            await ref.stop()
    assert [(d.message, d.reason) for d in letters] == [
        ("q", "actor_stopped"),
        ("w1", "actor_stopped"),
        ("w2", "actor_stopped"),
    ]
