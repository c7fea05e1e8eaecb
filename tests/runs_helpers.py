"""Helpers for the runs tests: runs under a real tree, and what a run published."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from actors.events import RunEvent
from supervisors import SupervisorSpec, Tree, open_tree
from supervisors.runs import NO_RETRY, Run, Runs, Step, open_runs
from supervisors.runs.context import NodeContext


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
    assert all(a.at <= b.at for a, b in zip(history, history[1:], strict=False))
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
