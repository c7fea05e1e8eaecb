"""Start, crash and restart, stop, shutdown: nothing queued is ever lost silently."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from trio.testing import MockClock

from actors import Actor, ActorError, Code, DeadLetter, open_runtime
from actors.testing import capture_events
from tests.actor_helpers import Recorder


async def test_ten_queued_calls_and_three_casts_then_stop(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    letters: list[DeadLetter] = []
    outcomes: list[tuple[Code, bool | None]] = []
    async with open_runtime() as runtime:
        runtime.dead_letters.add_hook(letters.append)
        ref = await runtime.spawn(lambda: Recorder(log), name="r")
        living_before = trio.lowlevel.current_statistics().tasks_living

        async def caller(i: int) -> None:
            try:
                await ref.call(("q", i), timeout=None)
            except ActorError as err:
                outcomes.append((err.code, err.delivered))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ref.call, ("sleep", 1))  # in flight during the stop
            await trio.testing.wait_all_tasks_blocked()
            for i in range(10):
                nursery.start_soon(caller, i)
            await trio.sleep(0.1)
            for i in range(3):
                await ref.cast(("c", i))
            await ref.stop()
        assert trio.lowlevel.current_statistics().tasks_living == living_before - 1
    assert outcomes == [(Code.ACTOR_STOPPED, False)] * 10
    assert [(d.message, d.reason, d.target) for d in letters] == [
        (("c", i), "actor_stopped", "/root/r") for i in range(3)
    ]
    assert log == [("sleep", 1)]  # the in-flight message finished; nothing queued ran


async def test_try_cast_on_full_mailbox_and_cast_backpressure(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), capacity=2)
        await ref.cast(("sleep", 5))
        await (
            trio.testing.wait_all_tasks_blocked()
        )  # the actor takes it; the mailbox is empty again
        ref.try_cast("a")
        ref.try_cast("b")
        with pytest.raises(ActorError) as caught:
            ref.try_cast("c")
        assert (caught.value.code, caught.value.retryable) == (Code.MAILBOX_FULL, True)
        await ref.cast("blocked")  # waits for room
        assert trio.current_time() == 5.0  # room appeared when the actor took "a"
        assert await ref.call("end") == "end"
    assert log == [("sleep", 5), "a", "b", "blocked", "end"]


async def test_drop_oldest_dead_letters_casts_and_fails_calls(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    letters: list[DeadLetter] = []
    async with open_runtime() as runtime:
        runtime.dead_letters.add_hook(letters.append)
        ref = await runtime.spawn(lambda: Recorder(log), capacity=2, overflow="drop_oldest")
        await ref.cast(("sleep", 1))
        await trio.testing.wait_all_tasks_blocked()
        errors: list[ActorError] = []

        async def evicted_call() -> None:
            try:
                await ref.call("call-1")
            except ActorError as err:
                errors.append(err)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(evicted_call)
            await trio.testing.wait_all_tasks_blocked()
            ref.try_cast("c-2")
            ref.try_cast("c-3")  # evicts call-1
            ref.try_cast("c-4")  # evicts c-2
        assert [(e.code, e.delivered) for e in errors] == [(Code.NOT_DELIVERED, False)]
        assert [(d.message, d.reason) for d in letters] == [("c-2", "mailbox_overflow")]
        await trio.sleep(2)  # let the actor drain c-3 and c-4 before the next send
        assert await ref.call("end") == "end"
    assert log == [("sleep", 1), "c-3", "c-4", "end"]


async def test_queued_messages_survive_a_restart(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), max_restarts=1)
        await ref.cast("crash")
        for i in range(3):
            await ref.cast(i)
        assert await ref.call("end") == "end"
        assert ref.restarts == 1
    assert log == ["crash", 0, 1, 2, "end"]


async def test_crash_without_restart_flushes_the_mailbox(autojump_clock: MockClock) -> None:
    letters: list[DeadLetter] = []
    async with open_runtime() as runtime:
        runtime.dead_letters.add_hook(letters.append)
        ref = await runtime.spawn(lambda: Recorder([]))
        await ref.cast("crash")
        await ref.cast("lost?")
        await trio.testing.wait_all_tasks_blocked()
        assert str(ref.state) == "stopped"
        assert [d.message for d in letters] == ["lost?"]


async def test_start_returns_after_on_start(autojump_clock: MockClock) -> None:
    steps: list[str] = []

    class Slow(Actor):
        async def on_start(self) -> None:
            await trio.sleep(2)
            steps.append("on_start done")

        async def handle(self, message: Any) -> Any:
            return message

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Slow, name="slow")
        steps.append("spawn returned")
        assert trio.current_time() == 2.0
        assert str(ref.state) == "running"
    assert steps == ["on_start done", "spawn returned"]


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (ActorError.from_code(Code.AUTH, "no key"), Code.AUTH),
        (ValueError("bad config"), Code.INTERNAL),
    ],
    ids=["typed", "foreign"],
)
async def test_on_start_failure_raises_that_typed_error_only(
    autojump_clock: MockClock, raised: Exception, code: Code
) -> None:
    class Broken(Actor):
        async def on_start(self) -> None:
            raise raised

    async with open_runtime() as runtime:
        with pytest.raises(ActorError) as caught:
            await runtime.spawn(Broken, name="broken")
        assert type(caught.value) is not BaseExceptionGroup
        assert caught.value.code is code
        if isinstance(raised, ActorError):
            assert caught.value is raised
        else:
            assert caught.value.__cause__ is raised
        assert runtime.whereis("broken") is None
        assert len(runtime) == 0


async def test_hooks_run_in_order_on_restart_and_stop(autojump_clock: MockClock) -> None:
    calls: list[str] = []

    class Tracked(Actor):
        def __init__(self) -> None:
            self.generation = len([c for c in calls if c == "start"])

        async def on_start(self) -> None:
            calls.append("start")

        async def handle(self, message: Any) -> Any:
            if message == "crash":
                raise RuntimeError("x")
            return self.generation

        async def on_restart(self, error: ActorError) -> None:
            calls.append(f"restart:{error.code}")

        async def on_stop(self, reason: str) -> None:
            calls.append(f"stop:{reason}")

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Tracked, max_restarts=1)
        assert await ref.call("x") == 0
        await ref.cast("crash")
        assert await ref.call("x") == 1  # a fresh instance
    assert calls == ["start", "restart:internal", "start", "stop:shutdown"]


async def test_stop_timeout_cancels_and_in_flight_caller_learns_outcome_unknown(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder([]))
        errors: list[ActorError] = []

        async def caller() -> None:
            try:
                await ref.call(("sleep", 60), timeout=None)
            except ActorError as err:
                errors.append(err)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(caller)
            await trio.sleep(1)
            await ref.stop(timeout=5)
        assert trio.current_time() == 6.0
        assert [(e.code, e.delivered) for e in errors] == [(Code.OUTCOME_UNKNOWN, True)]


async def test_registry_is_per_runtime_and_names_are_unique(autojump_clock: MockClock) -> None:
    async with open_runtime(name="a") as first, open_runtime(name="b") as second:
        ref_a = await first.spawn(lambda: Recorder([]), name="same")
        ref_b = await second.spawn(lambda: Recorder([]), name="same")
        assert first.whereis("same") is ref_a
        assert second.whereis("same") is ref_b
        with pytest.raises(ActorError) as caught:
            await first.spawn(lambda: Recorder([]), name="same")
        assert caught.value.code is Code.NAME_TAKEN
        await ref_a.stop()
        assert first.whereis("same") is None
        assert await (await first.spawn(lambda: Recorder([]), name="same")).call(1) == 1


async def test_lifecycle_events_carry_the_actor_path(autojump_clock: MockClock) -> None:
    with capture_events() as events:
        async with open_runtime() as runtime:
            ref = await runtime.spawn(lambda: Recorder([]), name="ev", max_restarts=1)
            await ref.cast("crash")
            await ref.call("x")
    names = [(e.name, getattr(e, "actor", None)) for e in events if e.name.startswith("actor.")]
    assert names == [
        ("actor.started", "/root/ev"),
        ("actor.crashed", "/root/ev"),
        ("actor.restarting", "/root/ev"),
        ("actor.started", "/root/ev"),
        ("actor.stopped", "/root/ev"),
    ]


async def test_dead_letter_events_are_throttled_but_hooks_see_all(
    autojump_clock: MockClock,
) -> None:
    letters: list[DeadLetter] = []
    with capture_events("dead_letter", "dead_letter.throttled") as events:
        async with open_runtime() as runtime:
            runtime.dead_letters.add_hook(letters.append)
            ref = await runtime.spawn(lambda: Recorder([]))
            await ref.stop()
            for i in range(25):
                ref.try_cast(i)
            await trio.sleep(1)
            ref.try_cast("later")
    assert len(letters) == 26
    assert [e.name for e in events] == ["dead_letter"] * 10 + [
        "dead_letter.throttled",
        "dead_letter",
    ]
    assert events[10].suppressed == 15
    assert events[0].message_type == "int"
    assert events[0].reason == "actor_stopped"
