"""Actor runtime benchmarks: call round trips, spawn cost, shutdown cost.

Baselines (same run, same process):

* ``actor_call``: two trio memory channels — requests of capacity 0, replies of capacity 1
  — the client awaiting ``send`` then ``receive``, the server looping ``receive`` →
  ``send``. Ours: sequential ``ref.call`` with the default 5 s timeout in force.
* ``actor_spawn``: 10,000 raw tasks each blocked on its own memory channel.
* ``actor_shutdown``: cancelling those raw tasks vs stopping the actors gracefully.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.testing

from actors import Actor, open_runtime
from bench.common import Row, paired_median

CALLS = 20_000
SPAWN = 10_000


class Echo(Actor):
    async def handle(self, message: Any) -> Any:
        return message


def _run(fn: Callable[[], Awaitable[float]]) -> float:
    return trio.run(fn)


# --- actor_call -------------------------------------------------------------------------


async def _raw_call_loop() -> float:
    req_send, req_recv = trio.open_memory_channel[Any](0)
    rep_send, rep_recv = trio.open_memory_channel[Any](1)

    async def server() -> None:
        async for message in req_recv:
            await rep_send.send(message)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        start = time.perf_counter()
        for i in range(CALLS):
            await req_send.send(i)
            await rep_recv.receive()
        elapsed = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    return elapsed


async def _actor_call_loop() -> float:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo)
        await ref.call(0)
        start = time.perf_counter()
        for i in range(CALLS):
            await ref.call(i)
        return time.perf_counter() - start


def actor_call() -> list[Row]:
    raw, ours, ratio = paired_median(
        7, lambda: _run(_raw_call_loop), lambda: _run(_actor_call_loop)
    )
    return [Row("actor_call", CALLS / ours, "calls/s", CALLS / raw, ratio, ">= 0.8")]


# --- actor_spawn --------------------------------------------------------------------------

OnAlive = Callable[[], None]


def _nothing() -> None:
    return None


async def _raw_spawn(count: int, on_alive: OnAlive = _nothing) -> float:
    async def blocked(receive: trio.MemoryReceiveChannel[Any]) -> None:
        await receive.receive()

    hold = []
    async with trio.open_nursery() as nursery:
        start = time.perf_counter()
        for _ in range(count):
            send, receive = trio.open_memory_channel[Any](0)
            hold.append(send)
            nursery.start_soon(blocked, receive)
        await trio.testing.wait_all_tasks_blocked()
        elapsed = time.perf_counter() - start
        on_alive()
        nursery.cancel_scope.cancel()
    return elapsed


async def _actor_spawn(count: int, on_alive: OnAlive = _nothing) -> float:
    async with open_runtime() as runtime:
        start = time.perf_counter()
        for _ in range(count):
            await runtime.spawn(Echo)
        await trio.testing.wait_all_tasks_blocked()
        elapsed = time.perf_counter() - start
        on_alive()
        return elapsed


def _memory_per_task(spawn: Callable[[int, OnAlive], Awaitable[float]]) -> float:
    """Bytes traced (tracemalloc) while ``SPAWN`` tasks are alive and blocked, per task."""
    sampled: list[int] = []

    def sample() -> None:
        gc.collect()
        sampled.append(tracemalloc.get_traced_memory()[0])

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        trio.run(spawn, SPAWN, sample)
    finally:
        tracemalloc.stop()
    return (sampled[0] - base) / SPAWN


def actor_spawn() -> list[Row]:
    raw_time, our_time, speed = paired_median(
        5, lambda: trio.run(_raw_spawn, SPAWN), lambda: trio.run(_actor_spawn, SPAWN)
    )
    raw_mem = _memory_per_task(_raw_spawn)
    our_mem = _memory_per_task(_actor_spawn)
    return [
        Row(
            "actor_spawn_time",
            our_time * 1e3,
            "ms/10k",
            raw_time * 1e3,
            1 / speed,
            "<= 3.0",
        ),
        Row("actor_spawn_memory", our_mem, "bytes/actor", raw_mem, our_mem / raw_mem, "<= 2.5"),
    ]


# --- actor_shutdown -----------------------------------------------------------------------


async def _raw_shutdown(count: int) -> float:
    async def blocked(receive: trio.MemoryReceiveChannel[Any]) -> None:
        await receive.receive()

    hold = []
    start = 0.0
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            send, receive = trio.open_memory_channel[Any](0)
            hold.append(send)
            nursery.start_soon(blocked, receive)
        await trio.testing.wait_all_tasks_blocked()
        start = time.perf_counter()
        nursery.cancel_scope.cancel()
    return time.perf_counter() - start


async def _actor_shutdown(count: int) -> float:
    async with open_runtime() as runtime:
        for _ in range(count):
            await runtime.spawn(Echo)
        await trio.testing.wait_all_tasks_blocked()
        start = time.perf_counter()
        await runtime.shutdown()
        return time.perf_counter() - start


def actor_shutdown() -> list[Row]:
    rows = []
    per_actor: dict[int, float] = {}
    for count in (1_000, 10_000):
        raw, ours, speed = paired_median(
            5,
            lambda n=count: trio.run(_raw_shutdown, n),
            lambda n=count: trio.run(_actor_shutdown, n),
        )
        per_actor[count] = ours / count
        rows.append(
            Row(f"actor_shutdown_{count}", ours * 1e3, "ms", raw * 1e3, 1 / speed, "<= 1.5")
        )
    growth = per_actor[10_000] / per_actor[1_000]
    rows.append(Row("actor_shutdown_linearity", growth, "x per-actor", 1.0, growth, "~1 (linear)"))
    return rows
