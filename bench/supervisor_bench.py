"""Supervisor benchmark: restarts per second of a child that crashes at once.

Ours: a one_for_one tree (no backoff, intensity high enough never to trip) whose only
child casts itself a message in ``on_start`` and raises a typed error on it; every
decision is rendered as a JSON line (structlog, redaction on) into a null sink.

Raw floor, same run: a hand-written loop that opens a nursery, starts a task that raises
at once with ``start_soon``, and catches the error.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from actors import Actor, ActorError, Code
from bench.common import Row, logs_to_null, paired_median
from supervisors import Backoff, ChildSpec, SupervisorSpec, open_tree

RESTARTS = 3_000


class CrashAtOnce(Actor):
    count = 0
    done: trio.Event | None = None

    async def on_start(self) -> None:
        CrashAtOnce.count += 1
        if CrashAtOnce.count > RESTARTS:
            assert CrashAtOnce.done is not None
            CrashAtOnce.done.set()
            return
        self.ref.try_cast("boom")

    async def handle(self, message: Any) -> Any:
        raise ActorError.from_code(Code.TOOL_FAILED, "crash at once")


async def _ours() -> float:
    CrashAtOnce.count = 0
    CrashAtOnce.done = trio.Event()
    spec = SupervisorSpec(
        children=[ChildSpec(id="crasher", actor=CrashAtOnce)],
        max_restarts=RESTARTS * 2,
        period=3600,
        backoff=Backoff(kind="fixed", initial=0.0, max=0.0),
    )
    start = time.perf_counter()
    async with open_tree(spec):
        await CrashAtOnce.done.wait()
        elapsed = time.perf_counter() - start
    return elapsed


async def _raw() -> float:
    async def crash() -> None:
        raise ValueError("crash at once")

    start = time.perf_counter()
    for _ in range(RESTARTS):
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(crash)
        except ExceptionGroup:
            pass  # the floor: catch and go on
    return time.perf_counter() - start


def supervisor_restart() -> list[Row]:
    with logs_to_null():
        raw, ours, ratio = paired_median(7, lambda: trio.run(_raw), lambda: trio.run(_ours))
    raw_rate, our_rate = RESTARTS / raw, RESTARTS / ours
    return [
        Row(
            "supervisor_restart",
            our_rate,
            "restarts/s",
            raw_rate,
            ratio,
            ">= 0.5",
        )
    ]
