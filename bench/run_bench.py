"""Workflow run benchmarks: engine cost per node, memory per paused run.

* ``run_node``: a 200-node chain of trivial step nodes, the default event pipeline on
  (every record built, appended to the run's stream and emitted; logging at ``info``
  into a null sink, as a daemon runs). The cost per node (run time / 200) against one
  bare actor call (``ref.call`` to an echo actor) measured in the same run: target
  ``<= 6`` bare calls per node.
* ``run_memory``: 10,000 runs each paused on an approval node (its run supervisor, its
  node runner, its engine task, its stream): traced memory per run, target ``<= 50 KB``
  (reported against a raw trio task blocked on an event, for scale).
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import trio
import trio.testing

from actors import Actor, open_runtime
from bench.common import Row, logs_to_null, paired_median
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import NO_RETRY, Approval, Edge, NodeContext, Step, Workflow, open_runs

NODES = 200
ROUNDS = 20
PAUSED = 10_000
CALLS = 5_000


class _Echo(Actor):
    async def handle(self, message: Any) -> Any:
        return message


async def _trivial(ctx: NodeContext) -> None:
    return None


_CHAIN = Workflow(
    name="chain",
    nodes=[Step(id=f"n{i}", fn=_trivial, retry=NO_RETRY) for i in range(NODES)],
    edges=[Edge(source=f"n{i}", target=f"n{i + 1}") for i in range(NODES - 1)],
)


async def _bare_calls() -> float:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(_Echo)
        await ref.call(0)
        start = time.perf_counter()
        for i in range(CALLS):
            await ref.call(i)
        return (time.perf_counter() - start) / CALLS


async def _chain_runs() -> float:
    async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
        await (await runs.start(_CHAIN)).wait()  # warm up
        start = time.perf_counter()
        for _ in range(ROUNDS):
            outcome = await (await runs.start(_CHAIN)).wait()
            assert outcome.status == "completed", outcome
        return (time.perf_counter() - start) / (ROUNDS * NODES)


def run_node() -> list[Row]:
    with logs_to_null():
        bare, per_node, speed = paired_median(
            9, lambda: trio.run(_bare_calls), lambda: trio.run(_chain_runs)
        )
    return [Row("run_node", per_node * 1e6, "us/node", bare * 1e6, 1 / speed, "<= 2.6")]


_PAUSED = Workflow(name="paused", nodes=[Approval(id="wait")])


async def _raw_tasks() -> float:
    events = [trio.Event() for _ in range(PAUSED)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    async with trio.open_nursery() as nursery:
        for event in events:
            nursery.start_soon(event.wait)
        await trio.lowlevel.checkpoint()
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        for event in events:
            event.set()
    return used / PAUSED


async def _paused_runs() -> float:
    async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        started = [await runs.start(_PAUSED, {"task": i}) for i in range(PAUSED)]
        await trio.testing.wait_all_tasks_blocked()
        assert all(run.pending == ("wait",) for run in started)
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        runs.close("bench over")
        return used / PAUSED


def run_memory() -> list[Row]:
    with logs_to_null():
        raw = trio.run(_raw_tasks)
        ours = trio.run(_paused_runs)
    return [Row("run_memory", ours / 1024, "KB/run", raw / 1024, ours / raw, "<= 50 KB/run")]
