"""Pins of a node execution's attempts (``supervisors/runs/attempts.py``) that its
mutants showed unpinned: the execution and attempt numbers of every node record of a
node run again, a retryable limit never retried, the texts of a skip, the duration
counted from the first attempt, and which nodes a cancel caught in flight (a node still
queued for a runner never ran) — exact values at exact virtual times, under the
autojump clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors import ActorError, CancelledError, Code, fail
from actors.events import RunErrorDetail
from actors.providers import OpenAIProvider, ProviderConfig
from actors.testing import capture_events
from actors.tools import NONE
from supervisors import (
    Backoff,
    ChildSpec,
    ProviderPool,
    SupervisorSpec,
    Target,
    Tools,
    open_tree,
)
from supervisors.runs import Edge, NodeBreaker, NodeContext, NodeRetry, Workflow, open_runs
from tests.runs_helpers import assert_well_formed, names, of, running, step, writer

pytestmark = pytest.mark.trio

EXACT = Backoff(initial=1.0, factor=2.0, max=30.0, jitter=0.0)


async def test_a_node_run_again_numbers_its_executions_and_attempts(autojump_clock: Any) -> None:
    calls: list[tuple[int, int, float]] = []

    async def flaky_twice(ctx: NodeContext) -> Any:
        calls.append((ctx.execution, ctx.attempt, trio.current_time()))
        if ctx.attempt == 1:
            return fail("unavailable", "flaky", retryable=True)
        return {"n": ctx.state.get("n", 0) + 1}

    def again(state: Any) -> bool:
        return bool(state["n"] < 2)

    def out(state: Any) -> bool:
        return bool(state["n"] >= 2)

    wf = Workflow(
        name="w",
        nodes=[
            step("a", flaky_twice, "n", retry=NodeRetry(max_retries=1, backoff=EXACT)),
            step("z", writer("z"), "z"),
        ],
        edges=[Edge(source="a", target="a", when=again), Edge(source="a", target="z", when=out)],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "completed", outcome
    assert calls == [(1, 1, 0.0), (1, 2, 1.0), (2, 1, 1.0), (2, 2, 2.0)]
    assert [(r.node_id, r.execution, r.attempt) for r in of(run, "node:retrying")] == [
        ("a", 1, 1),
        ("a", 2, 1),
    ]
    assert [(r.execution, r.attempt, r.delay) for r in of(run, "node:retrying")] == [
        (1, 1, 1.0),
        (2, 1, 1.0),
    ]
    done = of(run, "node:completed")
    assert [(r.node_id, r.execution, r.attempt, r.duration) for r in done] == [
        ("a", 1, 2, 1.0),
        ("a", 2, 2, 1.0),
        ("z", 1, 1, 0.0),
    ]
    assert [tuple(r.next) for r in done] == [("a",), ("z",), ()]
    assert_well_formed(run)


async def test_a_failed_execution_numbers_its_record_and_its_handler(autojump_clock: Any) -> None:
    async def broken(ctx: NodeContext) -> Any:
        await trio.sleep(1)
        return fail("unavailable", "down", retryable=True)

    wf = Workflow(
        name="w",
        nodes=[
            step("a", broken, retry=NodeRetry(max_retries=2, backoff=EXACT)),
            step("fb", writer("fb"), "fb"),
        ],
        edges=[Edge(source="a", target="fb", on=["unavailable"])],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "completed" and dict(outcome.state) == {"fb": 1}
    (failed,) = of(run, "node:failed")
    assert (failed.node_id, failed.execution, failed.attempt, failed.handled, failed.next) == (
        "a",
        1,
        3,
        True,
        ("fb",),
    )
    assert (failed.code, failed.at) == ("unavailable", 6.0)
    assert [r.at for r in of(run, "node:retrying")] == [1.0, 3.0]
    assert [r.at for r in of(run, "node:started")] == [0.0, 2.0, 5.0, 6.0]


@pytest.mark.parametrize("code", ["budget_exceeded", "turn_limit", "internal"])
async def test_a_retryable_limit_is_never_retried(autojump_clock: Any, code: str) -> None:
    calls: list[float] = []

    async def over(ctx: NodeContext) -> Any:
        calls.append(trio.current_time())
        raise ActorError.from_code(Code(code), "over", retryable=True)

    wf = Workflow(name="w", nodes=[step("a", over, retry=NodeRetry(max_retries=3))])
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert calls == [0.0]
    assert outcome.code == code
    assert of(run, "node:retrying") == []
    assert names(run) == ["run:started", "node:started", "node:failed", "run:failed"]


async def test_a_skipped_node_says_why_and_a_failed_run_names_it(autojump_clock: Any) -> None:
    async def down(ctx: NodeContext) -> Any:
        return fail("unavailable", "down", retryable=True)

    wf = Workflow(name="w", nodes=[step("a", down, breaker=NodeBreaker(failures=1, cooldown=30))])
    async with running() as (_, runs):
        await (await runs.start(wf)).wait()
        run = await runs.start(wf, run_id="skip")
        outcome = await run.wait()
    (skipped,) = of(run, "node:skipped")
    assert (skipped.node_id, skipped.code, skipped.next) == ("a", "circuit_open", ())
    assert outcome.error is not None
    assert skipped.message == outcome.error.user_message
    assert outcome.error.node_id == "a"
    assert of(run, "run:failed")[0].node_id == "a"


async def test_a_cancel_catches_the_running_node_not_the_queued_one(autojump_clock: Any) -> None:
    started: list[str] = []

    async def slow(ctx: NodeContext) -> None:
        started.append(ctx.node_id)
        await trio.sleep(100)

    wf = Workflow(name="w", nodes=[step("a", slow), step("b", slow)], start=["a", "b"])
    async with running(runners=1) as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(5)
        assert len(started) == 1  # one runner: the other waits for it
        run.cancel("stop")
        await run.wait()
    cancelled = of(run, "run:cancelled")[0]
    assert cancelled.in_flight == tuple(started)
    assert_well_formed(run)


async def test_a_step_gets_no_pool_and_no_tools_whatever_their_names(
    autojump_clock: Any,
) -> None:
    seen: list[tuple[Any, Any]] = []

    async def look(ctx: NodeContext) -> None:
        seen.append((ctx.pool, ctx.tools))

    config = ProviderConfig(name="A", base_url="http://127.0.0.1:9", api_key="sk-test-runs-0000")
    spec = SupervisorSpec(children=[ChildSpec(id="A", actor=OpenAIProvider, args=(config,))])
    async with open_tree(spec, name="runs-test") as tree:
        pool = ProviderPool([Target(ref=tree.ref("A"), provider="A", model="m1")])
        tools = await Tools.from_tree(tree, grants=NONE)
        names_ = {"default": 0, "XXXX": 0}
        async with open_runs(
            tree, pools=dict.fromkeys(names_, pool), tools=dict.fromkeys(names_, tools)
        ) as runs:
            outcome = await (await runs.start(Workflow(name="w", nodes=[step("a", look)]))).wait()
    assert outcome.status == "completed"
    assert seen == [(None, None)]


async def test_node_breakers_are_per_workflow(autojump_clock: Any) -> None:
    calls: list[str] = []

    async def down(ctx: NodeContext) -> Any:
        calls.append(ctx.run_id)
        return fail("unavailable", "down", retryable=True)

    def flow(name: str) -> Workflow:
        return Workflow(
            name=name, nodes=[step("a", down, breaker=NodeBreaker(failures=1, cooldown=30))]
        )

    async with running() as (_, runs):
        first = await runs.start(flow("one"), run_id="one-1")
        assert (await first.wait()).code == "unavailable"
        other = await runs.start(flow("two"), run_id="two-1")
        assert (await other.wait()).code == "unavailable"  # its own breaker: still closed
        again = await runs.start(flow("one"), run_id="one-2")
        assert (await again.wait()).code == "circuit_open"
    assert calls == ["one-1", "two-1"]


async def test_the_error_details_name_the_node(autojump_clock: Any) -> None:
    async def broken(ctx: NodeContext) -> Any:
        return fail("unavailable", "down", retryable=True)

    wf = Workflow(
        name="w", nodes=[step("a", broken, retry=NodeRetry(max_retries=1, backoff=EXACT))]
    )
    with capture_events("run.error") as details:
        async with running() as (_, runs):
            run = await runs.start(wf)
            await run.wait()
    assert [r.node_id for r in of(run, "node:retrying")] == ["a"]
    errors = [d for d in details if isinstance(d, RunErrorDetail)]
    assert [(d.node_id, d.error.code) for d in errors] == [
        ("a", Code.UNAVAILABLE),
        ("a", Code.UNAVAILABLE),
    ]


async def test_a_node_failing_while_the_tree_aborts_is_cancelled_with_its_reason(
    autojump_clock: Any,
) -> None:
    async def stubborn(ctx: NodeContext) -> None:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            raise ValueError("failed on the way out") from None

    wf = Workflow(name="w", nodes=[step("a", stubborn)])
    with pytest.raises(CancelledError, match="operator abort"):
        async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
            run = await runs.start(wf)
            await trio.sleep(2)
            tree.abort("operator abort")
            await trio.sleep_forever()
    assert run.status == "cancelled"
    assert run.history[-1].name == "run:cancelled"
    ended = of(run, "run:cancelled")[0]
    assert (ended.name, ended.reason, ended.in_flight) == (
        "run:cancelled",
        "operator abort",
        ("a",),
    )
    assert of(run, "node:failed") == []
