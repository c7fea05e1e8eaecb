"""Deferred replies: concurrent work behind one actor, bounded, answered exactly once."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime


class Worker(Actor):
    max_deferred = 3

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    async def handle(self, message: Any) -> Any:
        if message == "crash":
            raise ValueError("handler bug")
        return self.defer(self.work, message)

    async def work(self, message: Any) -> Any:
        kind, seconds = message
        try:
            await trio.sleep(seconds)
        except trio.Cancelled:
            self.log.append(("cancelled", kind, trio.current_time()))
            raise
        self.log.append(("done", kind, trio.current_time()))
        if kind == "fail":
            return fail(Code.UNAVAILABLE, "deferred failure", retryable=True)
        if kind == "raise":
            raise RuntimeError("deferred bug")
        return kind


async def test_calls_run_concurrently_up_to_the_bound(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    finished: list[tuple[str, float]] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Worker(log))

        async def call(kind: str) -> None:
            finished.append((await ref.call((kind, 10), timeout=None), trio.current_time()))

        async with trio.open_nursery() as nursery:
            for kind in "abcd":
                nursery.start_soon(call, kind)
                await trio.testing.wait_all_tasks_blocked()
    # three at once, the fourth waited for a slot
    assert sorted(finished) == [("a", 10.0), ("b", 10.0), ("c", 10.0), ("d", 20.0)]


async def test_errors_fail_only_that_caller(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Worker([]))
        with pytest.raises(ActorError) as failed:
            await ref.call(("fail", 1))
        assert (failed.value.code, failed.value.retryable) == (Code.UNAVAILABLE, True)
        with pytest.raises(ActorError) as raised:
            await ref.call(("raise", 1))
        assert raised.value.code is Code.INTERNAL
        assert await ref.call(("ok", 1)) == "ok"
        assert ref.restarts == 0


async def test_stop_waits_for_deferred_work(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Worker(log))
        results: list[Any] = []

        async def call() -> None:
            results.append(await ref.call(("slow", 3), timeout=None))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            await ref.stop()
        assert results == ["slow"]
        assert trio.current_time() == 3.0


async def test_crash_cancels_deferred_work_and_answers_its_callers(
    autojump_clock: MockClock,
) -> None:
    log: list[Any] = []
    errors: list[tuple[Code, bool | None]] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Worker(log), max_restarts=1)

        async def call() -> None:
            try:
                await ref.call(("long", 50), timeout=None)
            except ActorError as err:
                errors.append((err.code, err.delivered))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            await ref.cast("crash")
        assert errors == [(Code.OUTCOME_UNKNOWN, True)]
        assert log == [("cancelled", "long", 0.0)]
        assert await ref.call(("after", 1)) == "after"


async def test_caller_cancel_propagates_to_deferred_work(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Worker(log))
        with trio.move_on_after(2):
            await ref.call(("stream", 100), timeout=None, propagate_cancel=True)
        await trio.testing.wait_all_tasks_blocked()
        assert log == [("cancelled", "stream", 2.0)]


def test_defer_needs_a_bound() -> None:
    class Plain(Actor):
        pass

    with pytest.raises(TypeError, match="max_deferred"):
        Plain().defer(trio.sleep, 1)
