"""The journal's store thread: one dedicated thread, calls in order, results and errors
delivered to the caller, a call never abandoned half-way, and after close a worker
thread instead."""

from __future__ import annotations

import threading
import time

import pytest
import trio

from actors.journal.thread import StoreThread


async def test_calls_run_in_one_thread_in_order_with_their_results() -> None:
    store_thread = StoreThread()
    seen: list[tuple[int, str]] = []

    def call(n: int) -> int:
        seen.append((n, threading.current_thread().name))
        return n * 10

    try:
        results: list[int] = []

        async def one(n: int) -> None:
            results.append(await store_thread.run(call, n))

        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(one, n)
                await trio.testing.wait_all_tasks_blocked()
        assert [n for n, _ in seen] == [0, 1, 2, 3, 4]
        assert {name for _, name in seen} == {"journal-store"}
        assert sorted(results) == [0, 10, 20, 30, 40]
    finally:
        store_thread.close()


async def test_an_error_of_the_call_is_raised_to_the_caller() -> None:
    store_thread = StoreThread()

    def broken() -> None:
        raise KeyError("disk")

    try:
        with pytest.raises(KeyError, match="disk"):
            await store_thread.run(broken)
        assert await store_thread.run(lambda: 7) == 7  # the thread goes on
    finally:
        store_thread.close()


async def test_a_cancelled_caller_waits_for_its_call_to_end() -> None:
    store_thread = StoreThread()
    done = threading.Event()

    def slow() -> str:
        time.sleep(0.2)
        done.set()
        return "written"

    try:
        with trio.move_on_after(0.05) as scope:
            result = await store_thread.run(slow)
        assert done.is_set()  # not abandoned half-way
        assert result == "written"  # and its result was delivered
        assert not scope.cancelled_caught  # the cancel found no checkpoint after it
    finally:
        store_thread.close()


async def test_after_close_calls_run_in_a_worker_thread() -> None:
    store_thread = StoreThread()
    thread = await store_thread.run(threading.current_thread)
    assert thread.name == "journal-store"
    assert thread.daemon  # never keeps a process alive
    store_thread.close()
    thread.join(timeout=5)
    assert not thread.is_alive()  # close ended it
    store_thread.close()  # idempotent
    name = await store_thread.run(lambda: threading.current_thread().name)
    assert name != "journal-store"
    assert await store_thread.run(divmod, 7, 2) == (3, 1)  # with its arguments
