"""Runs under the chaos server's fault mix: 100 at once, and cancels at random points."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actors import fail
from actors.testing import capture_events
from actors.testing.chaos import FaultScript
from actors.tools import Grants, ToolGroup, tool
from supervisors import Backoff
from supervisors.runs import Agent, Edge, Llm, NodeContext, NodeRetry, Run, Workflow
from tests.runs_helpers import assert_well_formed, world

LABEL = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
TERMINAL = ("run:completed", "run:failed", "run:cancelled")
NEVER_ON_CANCEL = {"tool_failed", "internal", "timeout", "execution_failed", "call_timeout"}
running_tools: set[str] = set()


@tool
async def search(query: str) -> dict[str, Any]:
    """A tool that takes a while."""
    running_tools.add(query)
    try:
        await trio.sleep(3)
    finally:
        running_tools.discard(query)
    return {"hits": [query]}


async def flaky_step(ctx: NodeContext) -> Any:
    """Fails its first attempt (retryable), then sleeps and writes."""
    if ctx.attempt == 1:
        return fail("unavailable", "flaky", retryable=True)
    await trio.sleep(2)
    return {"prepared": True}


async def slow_end(ctx: NodeContext) -> Any:
    await trio.sleep(30)
    return {"ended": True}


def workflow() -> Workflow:
    retry = NodeRetry(max_retries=2, backoff=Backoff(initial=2, jitter=0))
    return Workflow(
        name="mix",
        nodes=[
            Llm(
                id="classify",
                model="m1",
                messages=[("user", 'reply: {{"label": "x"}}')],
                output_schema=LABEL,
                retry=retry,
            ),
            Agent(
                id="agent",
                model="m1",
                messages=[("user", "call: {topic}")],
                grants=Grants.allow("search"),
                retry=retry,
            ),
            Llm(id="prepare_llm", model="m1", messages=[("user", "hello {topic}")], retry=retry),
            _step("prepare", flaky_step, retry),
            _step("end", slow_end, retry, join=True),
        ],
        edges=[
            Edge(source="classify", target="end"),
            Edge(source="agent", target="end"),
            Edge(source="prepare", target="end"),
            Edge(source="prepare_llm", target="end"),
        ],
        start=["classify", "agent", "prepare", "prepare_llm"],
    )


def _step(node_id: str, fn: Any, retry: NodeRetry, **options: Any) -> Any:
    from supervisors.runs import Step

    writes = ("prepared",) if node_id == "prepare" else ("ended",)
    return Step(id=node_id, fn=fn, writes=writes, retry=retry, **options)


MIX = {"status": 0.15, "malformed_json": 0.05, "reset_before": 0.05, "hang": 0.03}


def _consistent(run: Run) -> None:
    """The terminal record says what happened."""
    assert_well_formed(run)
    terminal = run.history[-1]
    failures = [r for r in run.history if r.name == "node:failed" and not r.handled]
    if terminal.name == "run:completed":
        assert failures == []
        assert terminal.state.get("ended") is True
    elif terminal.name == "run:failed":
        if failures:
            assert (failures[-1].node_id, failures[-1].code) == (terminal.node_id, terminal.code)
        else:
            assert terminal.code in ("turn_limit", "budget_exceeded", "run_timeout", "internal")
    else:
        raise AssertionError(f"nobody cancelled {run.run_id}")


def test_a_hundred_runs_under_the_fault_mix_each_end_once_and_say_what_happened() -> None:
    async def main() -> None:
        script = FaultScript(probabilities=MIX, seed=7)  # type: ignore[arg-type]
        async with world(script, ToolGroup("g", [search], concurrency=8), runners=4) as w:
            with trio.fail_after(3600):
                runs = [
                    await w.runs.start(workflow(), {"topic": f"t{i}"}, run_id=f"r{i}")
                    for i in range(100)
                ]
                outcomes = [await run.wait() for run in runs]
            for run in runs:
                _consistent(run)
            statuses = {o.status for o in outcomes}
            assert "completed" in statuses  # the mix lets most through
            assert w.tree.root.child("runs").which_children() == []
            assert w.server.count() > 300

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@example(at=8.0, how="api", seed=12)  # the fault mix fails this run before the cancel
@example(at=0.0, how="scope", seed=0)
@given(
    at=st.floats(min_value=0.0, max_value=12.0, allow_nan=False),
    how=st.sampled_from(["api", "scope"]),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_a_cancel_at_any_point_ends_the_run_cancelled_and_nothing_after(
    at: float, how: str, seed: int
) -> None:
    async def main() -> None:
        script = FaultScript(probabilities=MIX, seed=seed)  # type: ignore[arg-type]
        with capture_events("tool.call_failed", "pool.attempt", "retry.scheduled") as events:
            async with world(script, ToolGroup("g", [search]), runners=4) as w:
                with trio.CancelScope() as scope:
                    async with _runs_of(w, how) as runs:
                        run = await runs.start(workflow(), {"topic": "q"})
                        await trio.sleep(at)
                        if run.done:  # the fault mix ended it first: nothing to cancel
                            _consistent(run)
                            return
                        cancelled_at = trio.current_time()
                        if how == "api":
                            run.cancel("user")
                        else:
                            scope.cancel(reason="deploy")
                        await run.wait()
                        await trio.sleep(60)  # anything left would act now
                reason = "user" if how == "api" else "deploy"
                assert run.history[-1].name == "run:cancelled"
                assert run.history[-1].reason == reason
                assert_well_formed(run)
                for record in run.history:
                    assert getattr(record, "code", None) not in NEVER_ON_CANCEL, record
                    if record.name in ("node:retrying", "node:started"):
                        assert record.at <= cancelled_at
                for request in w.server.requests:
                    assert request.at <= cancelled_at
                    if request.fault == "hang":  # in flight at the cancel: closed
                        assert request.disconnected
                assert running_tools == set()
                assert w.tree.root.child("runs").which_children() == []
                assert [c.id for c in w.tree.root.which_children()][-1] == "runs"
        for event in events:
            if event.name == "tool.call_failed":
                assert event.code not in NEVER_ON_CANCEL

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _runs_of(w: Any, how: str) -> Any:
    """The world's runs for an API cancel; runs of their own for a scope cancel (the
    scope is around them)."""
    from contextlib import asynccontextmanager

    from supervisors.runs import open_runs

    if how == "api":

        @asynccontextmanager
        async def same() -> Any:
            yield w.runs

        return same()
    return open_runs(w.tree, pools=w.pool, tools=w.tools, runners=4, name="scoped")
