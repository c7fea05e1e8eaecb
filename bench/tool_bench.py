"""Tool call overhead: a trivial tool through the front door vs a bare actor call.

``tool_call`` — ``add(a: int, b: int)`` defined with ``@tool`` (its input schema derived
from the annotations), hosted in a :class:`~actors.tools.ToolGroup` of one worker under
a supervisor tree, called as ``await tools.call("add", {"a": 1, "b": 2})``: the grants
checked, the arguments validated against the schema, the call made on the host with
``propagate_cancel``, the result wrapped. Baseline: an actor whose ``handle`` awaits the
same function with the message as its arguments, called with ``ref.call(arguments)``.
Target: throughput ratio >= 0.7. The ratio is the median of paired rounds
(:func:`bench.common.paired_median`).
"""

from __future__ import annotations

import time
from typing import Any

import trio

from actors import Actor
from actors.tools import ALL, ToolGroup, tool
from bench.common import Row, paired_median
from supervisors import ChildSpec, SupervisorSpec, Tools, open_tree, tool_hosts

CALLS = 5_000
ROUNDS = 15
ARGUMENTS = {"a": 1, "b": 2}


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Bare(Actor):
    """The same function behind a plain actor."""

    async def handle(self, message: Any) -> Any:
        return await add.fn(**message)


GROUP = ToolGroup("bench", [add], concurrency=1)


async def _loop(through_tools: bool) -> float:
    spec = SupervisorSpec(children=[*tool_hosts(GROUP), ChildSpec(id="bare", actor=Bare)])
    async with open_tree(spec, name="bench") as tree:
        tools = await Tools.from_tree(tree, GROUP, grants=ALL)
        bare = tree.ref("bare")
        assert (await tools.call("add", ARGUMENTS)).value == await bare.call(ARGUMENTS) == 3
        start = time.perf_counter()
        if through_tools:
            call = tools.call
            for _ in range(CALLS):
                await call("add", ARGUMENTS)
        else:
            for _ in range(CALLS):
                await bare.call(ARGUMENTS)
        elapsed = time.perf_counter() - start
        tree.root.close()
        return elapsed


def tool_call() -> list[Row]:
    bare, ours, ratio = paired_median(
        ROUNDS, lambda: trio.run(_loop, False), lambda: trio.run(_loop, True)
    )
    return [Row("tool_call", CALLS / ours, "calls/s", CALLS / bare, ratio, ">= 0.75")]
