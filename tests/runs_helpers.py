"""Helpers for the runs tests: runs under a real tree, and what a run published."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs

from actors.events import RunEvent
from actors.providers import AnthropicProvider, OpenAIProvider, ProviderConfig
from actors.testing.chaos import ChaosServer, FaultScript, chaos_server
from actors.tools import NONE, ToolGroup
from supervisors import (
    ChildSpec,
    ProviderPool,
    Resilience,
    SupervisorSpec,
    Target,
    Tools,
    Tree,
    open_tree,
    tool_hosts,
)
from supervisors.runs import NO_RETRY, Run, Runs, Step, open_runs
from supervisors.runs.context import NodeContext
from tests.pool_helpers import RULES


@asynccontextmanager
async def running(**options: Any) -> AsyncIterator[tuple[Tree, Runs]]:
    """A tree with runs under it (``options`` go to :func:`open_runs`)."""
    async with (
        open_tree(SupervisorSpec(), name="runs-test") as tree,
        open_runs(tree, **options) as runs,
    ):
        yield tree, runs


def names(run: Run) -> list[str]:
    """The record names of the run's stream so far, in order."""
    return [record.name for record in run.history]


def of(run: Run, name: str) -> list[Any]:
    """The records of one name."""
    return [record for record in run.history if record.name == name]


def assert_well_formed(run: Run) -> None:
    """seq 0, 1, 2… without gaps, times never going back, one terminal record, last."""
    history: tuple[RunEvent, ...] = run.history
    assert [record.seq for record in history] == list(range(len(history)))
    assert all(a.at <= b.at for a, b in itertools.pairwise(history))
    terminal = [r for r in history if r.name in ("run:completed", "run:failed", "run:cancelled")]
    assert len(terminal) == 1 and terminal[0] is history[-1]
    assert {record.run_id for record in history} == {run.run_id}


def writer(key: str, value: Any = None, **options: Any) -> Callable[..., Any]:
    """An async step function writing ``key`` (``value``, or the count of its calls)."""
    calls: list[NodeContext] = []

    async def fn(ctx: NodeContext) -> dict[str, Any]:
        calls.append(ctx)
        return {key: len(calls) if value is None else value}

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


def step(node_id: str, fn: Callable[..., Any], *writes: str, **options: Any) -> Step:
    """A step node with no retries unless ``retry=`` is given."""
    options.setdefault("retry", NO_RETRY)
    return Step(id=node_id, fn=fn, writes=writes, **options)


@attrs.define
class World:
    """A tree with a chaos-served provider ``A``, tool hosts, a pool, the tools front
    door and runs over them."""

    tree: Tree
    server: ChaosServer
    pool: ProviderPool
    tools: Tools
    runs: Runs


@asynccontextmanager
async def world(
    script: FaultScript | None = None,
    *groups: ToolGroup,
    dialect: Literal["openai", "anthropic"] = "openai",
    runners: int = 2,
    **pool_options: Any,
) -> AsyncIterator[World]:
    """The whole stack on loopback: chaos server → provider actor → pool → runs."""
    actor = OpenAIProvider if dialect == "openai" else AnthropicProvider
    async with chaos_server(script) as server:
        config = ProviderConfig(name="A", base_url=server.url, api_key="sk-test-runs-0000")
        children = [ChildSpec(id="A", actor=actor, args=(config,)), *tool_hosts(*groups)]
        spec = SupervisorSpec(max_restarts=50, period=10, children=children)
        async with open_tree(spec, name="runs-llm") as tree:
            pool_options.setdefault("resilience", Resilience(retry=RULES))
            pool = ProviderPool(
                [Target(ref=tree.ref("A"), provider="A", model="m1")], **pool_options
            )
            tools = await Tools.from_tree(tree, *groups, grants=NONE)
            async with open_runs(tree, pools=pool, tools=tools, runners=runners) as runs:
                yield World(tree, server, pool, tools, runs)
