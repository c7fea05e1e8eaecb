"""Runs of step nodes: chains, fan-out and joins, loops, state writes, the event stream."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors import ActorError, Code, fail
from supervisors.runs import Edge, NodeContext, Workflow
from tests.runs_helpers import assert_well_formed, names, of, running, step, writer

pytestmark = pytest.mark.trio


async def test_a_chain_runs_in_order_and_completes_with_its_state(autojump_clock: Any) -> None:
    wf = Workflow(
        name="chain",
        nodes=[step("a", writer("a"), "a"), step("b", writer("b", 7), "b")],
        edges=[Edge(source="a", target="b")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf, {"x": 1}, run_id="r1")
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert outcome.code is None and outcome.error is None
    assert dict(outcome.state) == {"x": 1, "a": 1, "b": 7}
    assert names(run) == [
        "run:started",
        "node:started",
        "node:completed",
        "node:started",
        "node:completed",
        "run:completed",
    ]
    started = of(run, "run:started")[0]
    assert started.workflow == "chain" and dict(started.inputs) == {"x": 1}
    first, second = of(run, "node:completed")
    assert (first.node_id, dict(first.updates), first.next) == ("a", {"a": 1}, ("b",))
    assert (second.node_id, dict(second.updates), second.next) == ("b", {"b": 7}, ())
    assert of(run, "node:started")[0].kind == "step"
    done = of(run, "run:completed")[0]
    assert dict(done.state) == {"x": 1, "a": 1, "b": 7}
    assert (done.tokens, done.cost) == (0, 0.0)
    assert_well_formed(run)


async def test_the_stream_iterates_from_the_start_and_ends_after_the_terminal_record(
    autojump_clock: Any,
) -> None:
    gate = trio.Event()

    async def wait_gate(ctx: NodeContext) -> None:
        await gate.wait()

    wf = Workflow(name="w", nodes=[step("a", wait_gate)])
    seen: list[str] = []
    async with running() as (_, runs):
        run = await runs.start(wf)

        async def read() -> None:
            async for record in run.events():
                seen.append(record.name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.sleep(1)
            assert seen == ["run:started", "node:started"]
            gate.set()
        late = [record.name async for record in run.events()]
    assert seen == ["run:started", "node:started", "node:completed", "run:completed"]
    assert late == seen


async def test_a_fan_out_runs_branches_at_once_and_the_join_waits_for_all(
    autojump_clock: Any,
) -> None:
    async def slow(ctx: NodeContext) -> dict[str, Any]:
        await trio.sleep(2 if ctx.node_id == "b" else 1)
        return {ctx.node_id: trio.current_time()}

    joined: list[dict[str, Any]] = []

    async def join(ctx: NodeContext) -> None:
        joined.append(dict(ctx.state))

    wf = Workflow(
        name="fan",
        nodes=[
            step("a", writer("a"), "a"),
            step("b", slow, "b"),
            step("c", slow, "c"),
            step("j", join, join=True),
        ],
        edges=[
            Edge(source="a", target="b"),
            Edge(source="a", target="c"),
            Edge(source="b", target="j"),
            Edge(source="c", target="j"),
        ],
    )
    async with running(runners=2) as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.status == "completed"
    # b and c ran side by side (both from t=0), the join once, after both.
    assert dict(outcome.state) == {"a": 1, "b": 2.0, "c": 1.0}
    assert joined == [{"a": 1, "b": 2.0, "c": 1.0}]


async def test_a_join_runs_with_the_branches_that_were_taken(autojump_clock: Any) -> None:
    wf = Workflow(
        name="fan",
        nodes=[
            step("a", writer("go", False), "go"),
            step("b", writer("b"), "b"),
            step("c", writer("c"), "c"),
            step("j", writer("j"), "j", join=True),
        ],
        edges=[
            Edge(source="a", target="b", when=lambda s: s["go"]),
            Edge(source="a", target="c"),
            Edge(source="b", target="j"),
            Edge(source="c", target="j"),
        ],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert dict(outcome.state) == {"go": False, "c": 1, "j": 1}
    assert [r.node_id for r in of(run, "node:completed")] == ["a", "c", "j"]


async def test_a_loop_runs_until_its_condition_fails(autojump_clock: Any) -> None:
    async def count(ctx: NodeContext) -> dict[str, Any]:
        return {"n": ctx.state["n"] + 1}

    wf = Workflow(
        name="loop",
        nodes=[step("inc", count, "n"), step("done", writer("done"), "done")],
        edges=[
            Edge(source="inc", target="inc", when=lambda s: s["n"] < 5),
            Edge(source="inc", target="done", when=lambda s: s["n"] >= 5),
        ],
    )
    async with running() as (_, runs):
        run = await runs.start(wf, {"n": 0})
        outcome = await run.wait()
    assert dict(outcome.state) == {"n": 5, "done": 1}
    assert [r.execution for r in of(run, "node:started") if r.node_id == "inc"] == [1, 2, 3, 4, 5]


async def test_an_endless_loop_ends_at_max_steps_with_turn_limit(autojump_clock: Any) -> None:
    wf = Workflow(
        name="forever",
        nodes=[step("inc", writer("n"), "n")],
        edges=[Edge(source="inc", target="inc")],
        max_steps=3,
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "failed" and outcome.code == "turn_limit"
    assert outcome.error is not None
    assert outcome.error.message == "run over its 3 node executions"
    assert len(of(run, "node:completed")) == 3
    failed = of(run, "run:failed")[0]
    assert (failed.code, failed.node_id) == ("turn_limit", "inc")
    assert failed.message == "The agent reached its turn limit."
    assert_well_formed(run)


async def test_a_write_outside_the_declared_keys_is_permission_denied_and_changes_nothing(
    autojump_clock: Any,
) -> None:
    async def sneaky(ctx: NodeContext) -> dict[str, Any]:
        return {"mine": 1, "theirs": 2}

    wf = Workflow(name="w", nodes=[step("a", sneaky, "mine")])
    async with running() as (_, runs):
        run = await runs.start(wf, {"theirs": 0})
        outcome = await run.wait()
    assert outcome.code == "permission_denied"
    assert dict(outcome.state) == {"theirs": 0}
    assert outcome.error is not None and outcome.error.node_id == "a"
    assert "'theirs'" in outcome.error.message
    assert of(run, "node:completed") == []
    failed = of(run, "node:failed")[0]
    assert (failed.code, failed.handled, failed.attempt) == ("permission_denied", False, 1)


async def test_a_step_with_an_output_key_writes_what_it_returns(autojump_clock: Any) -> None:
    async def answer(ctx: NodeContext) -> int:
        return 42

    wf = Workflow(name="w", nodes=[step("a", answer, "out", output="out")])
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert dict(outcome.state) == {"out": 42}


async def test_a_step_returning_neither_mapping_nor_none_is_output_validation(
    autojump_clock: Any,
) -> None:
    async def answer(ctx: NodeContext) -> int:
        return 42

    wf = Workflow(name="w", nodes=[step("a", answer)])
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.code == "output_validation"
    assert outcome.error is not None
    assert outcome.error.message.startswith("step 'a' returned int")


async def test_an_error_that_names_its_node_keeps_it(autojump_clock: Any) -> None:
    async def failing(ctx: NodeContext) -> Any:
        raise fail("bad_request", "inner", node_id="inner").to_error()

    wf = Workflow(name="w", nodes=[step("a", failing)])
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.error is not None and outcome.error.node_id == "inner"


@pytest.mark.parametrize("how", ["returned", "raised"])
async def test_returned_and_raised_failures_are_the_same_node_error(
    autojump_clock: Any, how: str
) -> None:
    async def failing(ctx: NodeContext) -> Any:
        failure = fail("bad_request", "no such thing")
        if how == "raised":
            raise failure.to_error()
        return failure

    wf = Workflow(name="w", nodes=[step("a", failing)])
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.error is not None
    assert (outcome.code, outcome.error.retryable, outcome.error.node_id) == (
        "bad_request",
        False,
        "a",
    )
    assert outcome.error.message == "no such thing"


async def test_an_unclassified_exception_from_a_step_is_internal(
    autojump_clock: Any,
) -> None:
    async def broken(ctx: NodeContext) -> None:
        raise ValueError("secret detail")

    wf = Workflow(name="w", nodes=[step("a", broken)])
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "internal"
    assert outcome.error is not None and isinstance(outcome.error.__cause__, ValueError)
    assert len(of(run, "run:failed")) == 1
    assert of(run, "run:failed")[0].correlation_id == outcome.error.correlation_id
    for record in run.history:
        assert "secret detail" not in repr(record)


async def test_an_edge_that_handles_the_code_carries_the_run_on(autojump_clock: Any) -> None:
    async def failing(ctx: NodeContext) -> Any:
        return fail("bad_request", "nope")

    wf = Workflow(
        name="w",
        nodes=[step("a", failing), step("plan_b", writer("b"), "b"), step("c", writer("c"), "c")],
        edges=[
            Edge(source="a", target="c"),
            Edge(source="a", target="plan_b", on=["bad_request"]),
        ],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert dict(outcome.state) == {"b": 1}
    failed = of(run, "node:failed")[0]
    assert (failed.handled, failed.next) == (True, ("plan_b",))


async def test_a_wildcard_edge_never_handles_a_limit(autojump_clock: Any) -> None:
    wf = Workflow(
        name="w",
        nodes=[step("a", writer("n"), "n"), step("rescue", writer("r"), "r")],
        edges=[Edge(source="a", target="a"), Edge(source="a", target="rescue", on="*")],
        max_steps=2,
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.code == "turn_limit"
    assert "r" not in outcome.state


async def test_the_start_node_can_be_named_and_several_start_at_once(autojump_clock: Any) -> None:
    wf = Workflow(
        name="w",
        nodes=[
            step("a", writer("a"), "a"),
            step("b", writer("b"), "b"),
            step("c", writer("c"), "c"),
        ],
        start=["b", "c"],
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert dict(outcome.state) == {"b": 1, "c": 1}


async def test_nodes_see_a_read_only_snapshot_of_the_state(autojump_clock: Any) -> None:
    async def mutate(ctx: NodeContext) -> None:
        ctx.state["x"] = 2  # type: ignore[index]

    wf = Workflow(name="w", nodes=[step("a", mutate)])
    async with running() as (_, runs):
        outcome = await (await runs.start(wf, {"x": 1})).wait()
    assert outcome.code == "internal"  # TypeError: mappingproxy is read-only
    assert dict(outcome.state) == {"x": 1}


async def test_the_idempotency_key_is_stable_across_attempts_and_new_per_execution(
    autojump_clock: Any,
) -> None:
    keys: list[tuple[str, int]] = []

    async def flaky(ctx: NodeContext) -> Any:
        keys.append((ctx.key, ctx.attempt))
        if ctx.attempt == 1:
            return fail("unavailable", "try again", retryable=True)
        return {"n": ctx.state.get("n", 0) + 1}

    from supervisors import Backoff
    from supervisors.runs import NodeRetry

    wf = Workflow(
        name="w",
        nodes=[
            step(
                "a",
                flaky,
                "n",
                retry=NodeRetry(max_retries=1, backoff=Backoff(initial=1, jitter=0)),
            )
        ],
        edges=[Edge(source="a", target="a", when=lambda s: s["n"] < 2)],
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf, run_id="k")).wait()
    assert outcome.status == "completed"
    assert keys == [("k:a:1", 1), ("k:a:1", 2), ("k:a:2", 1), ("k:a:2", 2)]


async def test_bad_arguments_to_start_raise_before_anything_starts(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    async with running() as (tree, runs):
        with pytest.raises(ActorError, match=r"inputs must be a mapping") as info:
            await runs.start(wf, [1, 2])  # type: ignore[arg-type]
        assert info.value.code is Code.INPUT_VALIDATION
        with pytest.raises(ActorError, match=r"inputs must be a mapping"):
            await runs.start(wf, {1: 2})  # type: ignore[dict-item]
        with pytest.raises(ActorError, match=r"workflow must be a Workflow"):
            await runs.start("w")  # type: ignore[arg-type]
        with pytest.raises(ActorError, match=r"run_id must be a non-empty"):
            await runs.start(wf, run_id="a/b")
        with pytest.raises(ActorError, match=r"run_id must be a non-empty"):
            await runs.start(wf, run_id="")
        with pytest.raises(ActorError, match=r"limits must be a BudgetLimits"):
            await runs.start(wf, limits={"tokens": 1})  # type: ignore[arg-type]
        gate = trio.Event()

        async def wait(ctx: NodeContext) -> None:
            await gate.wait()

        await runs.start(Workflow(name="w", nodes=[step("a", wait)]), run_id="same")
        with pytest.raises(ActorError, match=r"run 'same' is running") as taken:
            await runs.start(wf, run_id="same")
        assert taken.value.code is Code.NAME_TAKEN
        gate.set()
        assert [c.id for c in tree.root.child("runs").which_children()] == ["same"]


async def test_an_ended_run_leaves_no_supervisor_behind(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    async with running() as (tree, runs):
        runs_supervisor = tree.root.child("runs")
        for index in range(5):
            outcome = await (await runs.start(wf, run_id=f"r{index}")).wait()
            assert outcome.status == "completed"
        assert runs_supervisor.which_children() == []
        assert runs.live == {}
    assert [c.id for c in tree.root.which_children()] == []
