"""Call and cast outcomes, timed on a mock clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from tests.actor_helpers import Recorder


async def test_call_returns_the_reply(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), name="r")
        assert await ref.call("hello") == "hello"
        assert await runtime.call("r", "again") == "again"
    assert log == ["hello", "again"]


async def test_crash_reaches_the_caller_at_once_classified(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), name="r")
        await ref.call(("sleep", 3))
        with pytest.raises(ActorError) as caught:
            await ref.call("crash")
        assert trio.current_time() == 3.0  # 0 virtual seconds after the crash
        assert (caught.value.code, caught.value.actor) == (Code.INTERNAL, "/root/r")
        assert isinstance(caught.value.__cause__, ValueError)


async def test_typed_error_from_handler_reaches_caller_as_raised(autojump_clock: MockClock) -> None:
    class Limited(Actor):
        async def handle(self, message: Any) -> Any:
            raise ActorError.from_code(Code.RATE_LIMITED, "429", retry_after=7.0)

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Limited)
        with pytest.raises(ActorError) as caught:
            await ref.call("x")
        assert (caught.value.code, caught.value.retry_after) == (Code.RATE_LIMITED, 7.0)


async def test_returned_failure_fails_only_that_caller(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log))
        with pytest.raises(ActorError) as caught:
            await ref.call("fail")
        assert (caught.value.code, caught.value.retryable) == (Code.TOOL_FAILED, True)
        assert await ref.call("next") == "next"
        assert ref.restarts == 0


async def test_call_that_times_out_while_queued_is_never_executed(
    autojump_clock: MockClock,
) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log))
        outcomes: list[Any] = []

        async def busy() -> None:
            outcomes.append(await ref.call(("sleep", 10), timeout=60))

        async def impatient() -> None:
            try:
                await ref.call("queued", timeout=2)
            except ActorError as err:
                outcomes.append((err.code, err.delivered, trio.current_time()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(busy)
            await trio.sleep(0.5)
            nursery.start_soon(impatient)
        assert outcomes == [(Code.CALL_TIMEOUT, False, 2.5), ("sleep", 10)]
        assert await ref.call("after") == "after"
    assert log == [("sleep", 10), "after"]  # "queued" never ran


async def test_late_reply_is_dropped_and_actor_goes_on(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log))
        with pytest.raises(ActorError) as caught:
            await ref.call(("sleep", 5), timeout=1)
        assert (caught.value.code, caught.value.delivered) == (Code.CALL_TIMEOUT, True)
        assert trio.current_time() == 1.0
        assert await ref.call("next", timeout=10) == "next"
        assert trio.current_time() == 5.0
        assert ref.restarts == 0
        assert str(ref.state) == "running"


async def test_calls_to_a_stopped_actor_fail_immediately(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder([]), name="r")
        await ref.stop()
        start = trio.current_time()
        for _ in range(3):
            with pytest.raises(ActorError) as caught:
                await ref.call("x", timeout=30)
            assert (caught.value.code, caught.value.delivered) == (Code.ACTOR_STOPPED, False)
        with pytest.raises(ActorError) as unknown:
            await runtime.call("nobody", "x")
        assert unknown.value.code is Code.ACTOR_STOPPED
        assert trio.current_time() == start


async def test_caller_cancel_leaves_handler_running_by_default(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log))
        with trio.move_on_after(1) as scope:
            await ref.call(("sleep", 4), timeout=None)
        assert scope.cancelled_caught
        assert await ref.call("next", timeout=None) == "next"
        assert trio.current_time() == 4.0  # the handler ran to completion


async def test_caller_cancel_propagates_when_asked(autojump_clock: MockClock) -> None:
    cancelled: list[float] = []

    class Slow(Actor):
        async def handle(self, message: Any) -> Any:
            try:
                await trio.sleep(10)
            except trio.Cancelled:
                cancelled.append(trio.current_time())
                raise
            return message

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Slow)
        with trio.move_on_after(1):
            await ref.call("x", timeout=None, propagate_cancel=True)
        await trio.testing.wait_all_tasks_blocked()
        assert cancelled == [1.0]
        with trio.move_on_after(20):
            assert await ref.call("y", timeout=None) == "y"
        assert trio.current_time() == 11.0
        assert ref.restarts == 0


async def test_cancelled_caller_sees_cancelled_never_converted(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder([]))
        with trio.CancelScope() as scope:
            scope.cancel(reason="test")
            with pytest.raises(trio.Cancelled):
                await ref.call(("sleep", 1))


async def test_fifo_per_sender(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log))
        for i in range(100):
            await ref.cast(i)
        assert await ref.call("end") == "end"
    assert log == [*range(100), "end"]


async def test_handler_that_ignores_a_propagated_cancel_then_returns(
    autojump_clock: MockClock,
) -> None:
    """A ``propagate_cancel`` caller times out while its handler shields itself: the late
    result goes nowhere, the actor serves on, and a later caller's cancel still reaches
    its own handler (a fresh cancel scope, not the spent one)."""
    seen: list[tuple[str, float, str]] = []

    class Stubborn(Actor):
        async def handle(self, message: Any) -> Any:
            kind, seconds = message
            try:
                if kind == "shielded":
                    with trio.CancelScope(shield=True):
                        await trio.sleep(seconds)
                else:
                    await trio.sleep(seconds)
            except trio.Cancelled:
                seen.append((kind, trio.current_time(), "cancelled"))
                raise
            seen.append((kind, trio.current_time(), "returned"))
            return kind

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Stubborn)
        with pytest.raises(ActorError) as caught:
            await ref.call(("shielded", 3), timeout=1, propagate_cancel=True)
        assert (caught.value.code, caught.value.delivered) == (Code.CALL_TIMEOUT, True)
        assert trio.current_time() == 1.0
        assert await ref.call(("plain", 1), timeout=10, propagate_cancel=True) == "plain"
        assert trio.current_time() == 4.0
        with trio.move_on_after(2):
            await ref.call(("plain", 10), timeout=None, propagate_cancel=True)
        await trio.testing.wait_all_tasks_blocked()
        assert seen == [
            ("shielded", 3.0, "returned"),
            ("plain", 4.0, "returned"),
            ("plain", 6.0, "cancelled"),
        ]
        assert ref.restarts == 0
