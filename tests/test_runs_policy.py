"""The run's failure policy: retries with audit events, per-node breakers, validation,
routers, approvals, limits."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors import ActorError, Code, Usage, fail
from supervisors import Backoff, BudgetLimits
from supervisors.runs import (
    Agent,
    Approval,
    Edge,
    Llm,
    Node,
    NodeBreaker,
    NodeContext,
    NodeRetry,
    Router,
    Step,
    Workflow,
)
from tests.runs_helpers import assert_well_formed, names, of, running, step, writer

pytestmark = pytest.mark.trio

EXACT = Backoff(initial=1.0, factor=2.0, max=30.0, jitter=0.0)


def flaky(failures: int, code: str = "unavailable", **context: Any) -> Any:
    """A step that fails ``failures`` times (retryable), then writes ``done``."""
    seen: list[float] = []

    async def fn(ctx: NodeContext) -> Any:
        seen.append(trio.current_time())
        if len(seen) <= failures:
            return fail(code, "flaky", retryable=True, **context)
        return {"done": len(seen)}

    fn.seen = seen  # type: ignore[attr-defined]
    return fn


async def test_retries_follow_the_backoff_exactly_and_are_audited(autojump_clock: Any) -> None:
    fn = flaky(3)
    wf = Workflow(
        name="w",
        nodes=[step("a", fn, "done", retry=NodeRetry(max_retries=3, backoff=EXACT))],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "completed" and outcome.state["done"] == 4
    assert fn.seen == [0.0, 1.0, 3.0, 7.0]
    retries = of(run, "node:retrying")
    assert [(r.attempt, r.delay, r.at, r.code) for r in retries] == [
        (1, 1.0, 0.0, "unavailable"),
        (2, 2.0, 1.0, "unavailable"),
        (3, 4.0, 3.0, "unavailable"),
    ]
    assert retries[0].message == "The model provider is temporarily unavailable."
    assert [r.attempt for r in of(run, "node:started")] == [1, 2, 3, 4]
    assert of(run, "node:completed")[0].attempt == 4
    assert of(run, "node:completed")[0].duration == 7.0


async def test_retries_exhausted_fail_the_node_and_the_run(autojump_clock: Any) -> None:
    fn = flaky(5)
    wf = Workflow(
        name="w", nodes=[step("a", fn, "done", retry=NodeRetry(max_retries=2, backoff=EXACT))]
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert fn.seen == [0.0, 1.0, 3.0]
    assert outcome.code == "unavailable"
    failed = of(run, "node:failed")[0]
    assert (failed.attempt, failed.handled) == (3, False)
    assert of(run, "run:failed")[0].at == 3.0


async def test_the_default_node_retry_is_two_retries_one_then_two_seconds() -> None:
    default = NodeRetry()
    assert default.max_retries == 2
    assert (default.backoff.initial, default.backoff.factor, default.backoff.max) == (
        1.0,
        2.0,
        30.0,
    )
    assert Step(id="a").retry == default


async def test_a_retry_after_longer_than_the_backoff_is_waited(autojump_clock: Any) -> None:
    fn = flaky(1, retry_after=9.5)
    wf = Workflow(name="w", nodes=[step("a", fn, "done", retry=NodeRetry(backoff=EXACT))])
    async with running() as (_, runs):
        run = await runs.start(wf)
        await run.wait()
    assert fn.seen == [0.0, 9.5]
    assert of(run, "node:retrying")[0].delay == 9.5


async def test_a_fatal_error_is_never_retried(autojump_clock: Any) -> None:
    calls: list[int] = []

    async def fatal(ctx: NodeContext) -> Any:
        calls.append(1)
        return fail("auth", "bad key")

    wf = Workflow(name="w", nodes=[step("a", fatal, retry=NodeRetry(max_retries=5))])
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert calls == [1] and outcome.code == "auth"
    assert of(run, "node:retrying") == []


async def test_a_node_timeout_is_a_retryable_timeout_naming_the_node(
    autojump_clock: Any,
) -> None:
    async def slow(ctx: NodeContext) -> None:
        await trio.sleep(10)

    wf = Workflow(
        name="w",
        nodes=[step("a", slow, timeout=2.0, retry=NodeRetry(max_retries=1, backoff=EXACT))],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "timeout"
    assert outcome.error is not None
    assert (outcome.error.message, outcome.error.node_id) == ("node attempt took over 2.0 s", "a")
    assert [r.at for r in of(run, "node:started")] == [0.0, 3.0]
    assert of(run, "run:failed")[0].at == 5.0


async def test_an_open_breaker_skips_the_node_along_its_fallback_edge(
    autojump_clock: Any,
) -> None:
    calls: list[str] = []

    async def down(ctx: NodeContext) -> Any:
        calls.append(ctx.run_id)
        return fail("unavailable", "down", retryable=True)

    wf = Workflow(
        name="w",
        nodes=[
            step("a", down, breaker=NodeBreaker(failures=2, cooldown=30)),
            step("fallback", writer("fb"), "fb"),
        ],
        edges=[Edge(source="a", target="fallback", on=["circuit_open", "unavailable"])],
    )
    async with running() as (_, runs):
        outcomes = []
        for index in range(3):
            run = await runs.start(wf, run_id=f"r{index}")
            outcomes.append((await run.wait(), run))
        # Two failed attempts opened it: the third run skips the node.
        assert calls == ["r0", "r1"]
        third = outcomes[2][1]
        assert names(third) == [
            "run:started",
            "node:skipped",
            "node:started",
            "node:completed",
            "run:completed",
        ]
        skipped = of(third, "node:skipped")[0]
        assert (skipped.node_id, skipped.code, skipped.next) == ("a", "circuit_open", ("fallback",))
        assert all(outcome.status == "completed" for outcome, _ in outcomes)
        # After the cooldown one probe goes through (and fails: open again).
        await trio.sleep(30)
        run = await runs.start(wf, run_id="probe")
        await run.wait()
        assert calls == ["r0", "r1", "probe"]
        run = await runs.start(wf, run_id="after")
        await run.wait()
        assert calls == ["r0", "r1", "probe"]
        assert of(run, "node:skipped")[0].code == "circuit_open"


async def test_an_open_breaker_without_a_fallback_fails_the_run_circuit_open(
    autojump_clock: Any,
) -> None:
    async def down(ctx: NodeContext) -> Any:
        return fail("unavailable", "down", retryable=True)

    wf = Workflow(name="w", nodes=[step("a", down, breaker=NodeBreaker(failures=1))])
    async with running() as (_, runs):
        await (await runs.start(wf)).wait()
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "circuit_open"
    assert names(run) == ["run:started", "node:skipped", "run:failed"]
    assert of(run, "run:failed")[0].node_id == "a"


class Odd(Node):
    kind = "odd"


@pytest.mark.parametrize(
    ("wf", "code", "message"),
    [
        (
            Workflow(name="w", nodes=[Odd(id="x")]),
            "unsupported_node_type",
            "node 'x': unsupported node type 'odd'",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a")]),
            "node_config",
            "node 'a': fn: an async function of the node context",
        ),
        (
            Workflow(name="w", nodes=[Llm(id="l", model="m")]),
            "node_config",
            "node 'l': model: a request, or a model and messages",
        ),
        (
            Workflow(name="w", nodes=[Router(id="r", pick=lambda s: "a")]),
            "node_config",
            "node 'r': managed_nodes: at least one node id",
        ),
        (
            Workflow(name="w", nodes=[Router(id="r", managed_nodes=["nope"], pick=lambda s: "x")]),
            "node_config",
            "node 'r': managed_nodes: unknown node 'nope'",
        ),
        (
            Workflow(
                name="w",
                nodes=[Step(id="a", fn=writer("a"), writes="a")],
                edges=[Edge(source="a", target="ghost")],
            ),
            "node_config",
            "edges[0].target: unknown node 'ghost'",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), writes="a")], start="zz"),
            "node_config",
            "start: unknown node 'zz'",
        ),
        (
            Workflow(
                name="w",
                nodes=[Step(id="a", fn=writer("a"), writes="a"), Approval(id="a")],
            ),
            "node_config",
            "node 'a': id: another node has this id",
        ),
        (
            Workflow(name="w", nodes=[Llm(id="l", model="m", messages=[("user", "hi")], pool="x")]),
            "node_config",
            "node 'l': pool: no pool named 'x'",
        ),
        (Workflow(name="w", nodes=[]), "node_config", "nodes: a workflow needs a node"),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), timeout=0)]),
            "node_config",
            "node 'a': timeout: a number of seconds > 0, or None",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), timeout=float("nan"))]),
            "node_config",
            "node 'a': timeout: a number of seconds > 0, or None",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), writes=["", "b"])]),
            "node_config",
            "node 'a': writes: state keys (non-empty strings)",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), output="out")]),
            "node_config",
            "node 'a': output: a key the node writes",
        ),
        (
            Workflow(name="w", nodes=[Llm(id="l", model="m", messages=[("user", "x")], writes=[])]),
            "node_config",
            "node 'l': output: a key the node writes",
        ),
        (
            Workflow(
                name="w", nodes=[Agent(id="g", model="m", messages=[("user", "x")], max_turns=0)]
            ),
            "node_config",
            "node 'g': max_turns: an integer >= 1",
        ),
        (
            Workflow(
                name="w", nodes=[Agent(id="g", model="m", messages=[("user", "x")], grants=["x"])]
            ),
            "node_config",
            "node 'g': grants: a Grants",
        ),
        (
            Workflow(name="w", nodes=[Agent(id="g")]),
            "node_config",
            "node 'g': model: a model and messages",
        ),
        (
            Workflow(
                name="w", nodes=[Agent(id="g", model="m", messages=[("user", "x")], tools="x")]
            ),
            "node_config",
            "node 'g': tools: no tools named 'x'",
        ),
        (
            Workflow(name="w", nodes=[Router(id="r", managed_nodes=["r"])]),
            "node_config",
            "node 'r': pick: a function of the state, or a model and messages",
        ),
        (
            Workflow(name="w", nodes=[Router(id="r", managed_nodes=["r"], pick=5)]),  # type: ignore[arg-type]
            "node_config",
            "node 'r': pick: a function of the state",
        ),
        (
            Workflow(name="w", nodes=[Router(id="r", managed_nodes=["r"], pick=str, writes=["x"])]),
            "node_config",
            "node 'r': writes: nothing: a router writes no state",
        ),
        (
            Workflow(
                name="w",
                nodes=[Step(id="a", fn=writer("a"), writes="a")],
                edges=[Edge(source="a", target="a", on=["tool_faild"])],
            ),
            "node_config",
            "edges[0].on: unknown code 'tool_faild'",
        ),
        (
            Workflow(
                name="w",
                nodes=[Step(id="a", fn=writer("a"), writes="a")],
                edges=[Edge(source="a", target="a", when=5)],  # type: ignore[arg-type]
            ),
            "node_config",
            "edges[0].when: a predicate or an expression",
        ),
        (
            Workflow(
                name="w",
                nodes=[Step(id="a", fn=writer("a"), writes="a")],
                edges=[Edge(source="nope", target="a")],
            ),
            "node_config",
            "edges[0].source: unknown node 'nope'",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), writes="a")], max_steps=0),
            "node_config",
            "max_steps: an integer >= 1",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=lambda ctx: None)]),
            "node_config",
            "node 'a': fn: an async function of the node context",
        ),
        (
            Workflow(
                name="w",
                nodes=[
                    Llm(
                        id="l",
                        model="m",
                        messages=[("user", "hi")],
                        output_schema={"type": "nonsense"},
                    )
                ],
            ),
            "node_config",
            "node 'l' output_schema",
        ),
    ],
)
async def test_a_workflow_that_fails_validation_never_starts(
    autojump_clock: Any, wf: Workflow, code: str, message: str
) -> None:
    from supervisors.pool import ProviderPool

    uses_model = any(isinstance(n, Node) and n.uses_model() for n in wf.nodes)
    pools = {"default": ProviderPool.__new__(ProviderPool)} if uses_model else None
    async with running(pools=pools) as (tree, runs):
        run = await runs.start(wf)
        assert run.done
        outcome = await run.wait()
        assert tree.root.child("runs").which_children() == []
    assert names(run) == ["run:failed"]
    assert outcome.code == code
    assert outcome.error is not None and message in outcome.error.message
    if message.startswith("node '"):
        assert outcome.error.node_id == message.split("'")[1]
    assert of(run, "run:failed")[0].code == code
    assert_well_formed(run)


async def test_a_router_picks_the_next_node(autojump_clock: Any) -> None:
    async def pick(state: Any) -> str:
        return "b" if state["x"] > 0 else "a"

    wf = Workflow(
        name="w",
        nodes=[
            Router(id="r", managed_nodes=["a", "b"], pick=pick),
            step("a", writer("a"), "a"),
            step("b", writer("b"), "b"),
        ],
    )
    async with running() as (_, runs):
        run = await runs.start(wf, {"x": 1})
        outcome = await run.wait()
    assert dict(outcome.state) == {"x": 1, "b": 1}
    assert of(run, "node:completed")[0].next == ("b",)


async def test_a_pick_outside_the_managed_nodes_is_supervisor_routing(
    autojump_clock: Any,
) -> None:
    wf = Workflow(
        name="w",
        nodes=[
            Router(id="r", managed_nodes=["a"], pick=lambda state: "b"),
            step("a", writer("a"), "a"),
            step("b", writer("b"), "b"),
        ],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "supervisor_routing"
    assert outcome.error is not None and outcome.error.retryable is False
    assert "b" not in outcome.state
    assert of(run, "node:retrying") == []


async def test_an_approval_pauses_the_run_until_approved(autojump_clock: Any) -> None:
    wf = Workflow(
        name="w",
        nodes=[Approval(id="ok", prompt="Ship it?"), step("ship", writer("shipped"), "shipped")],
        edges=[Edge(source="ok", target="ship")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(100)
        assert run.pending == ("ok",) and not run.done
        run.decide("ok", "approve", by="alice", reason="looks good")
        outcome = await run.wait()
    assert outcome.state["shipped"] == 1
    requested = of(run, "approval:requested")[0]
    assert (requested.node_id, requested.prompt, requested.at) == ("ok", "Ship it?", 0.0)
    decided = of(run, "approval:decided")[0]
    assert (decided.node_id, decided.decision, decided.by, decided.reason, decided.at) == (
        "ok",
        "approve",
        "alice",
        "looks good",
        100.0,
    )


async def test_a_denied_approval_fails_the_node_with_permission_denied(
    autojump_clock: Any,
) -> None:
    wf = Workflow(
        name="w",
        nodes=[Approval(id="ok"), step("ship", writer("shipped"), "shipped")],
        edges=[Edge(source="ok", target="ship")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(1)
        run.decide("ok", "deny", by="bob", reason="too risky")
        outcome = await run.wait()
    assert outcome.code == "permission_denied"
    assert outcome.error is not None and outcome.error.message == "node 'ok' denied by bob"
    assert "shipped" not in outcome.state
    assert of(run, "approval:decided")[0].reason == "too risky"


async def test_bad_decisions_are_refused(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[Approval(id="ok")])
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(1)
        with pytest.raises(ActorError, match=r"node 'nope' waits for no decision") as info:
            run.decide("nope", "approve", by="a")
        assert info.value.code is Code.INPUT_VALIDATION
        with pytest.raises(ActorError, match=r"decision must be 'approve' or 'deny'"):
            run.decide("ok", "maybe", by="a")  # type: ignore[arg-type]
        with pytest.raises(ActorError, match=r"by must be a non-empty string"):
            run.decide("ok", "approve", by="")
        with pytest.raises(ActorError, match=r"the budget waits for no decision"):
            run.decide_budget("approve", by="a")
        run.decide("ok", "approve", by="a")
        with pytest.raises(ActorError, match=r"node 'ok' waits for no decision"):
            run.decide("ok", "approve", by="a")
        assert (await run.wait()).status == "completed"


def charging(tokens: int, times: int = 1) -> Any:
    async def fn(ctx: NodeContext) -> None:
        for _ in range(times):
            await ctx.budget.charge(Usage(input_tokens=tokens))

    return fn


async def test_the_token_budget_ends_the_run_with_budget_exceeded(autojump_clock: Any) -> None:
    wf = Workflow(
        name="w",
        nodes=[
            step("a", charging(45, times=2)),
            step("b", charging(20), retry=NodeRetry(max_retries=3)),
            step("rescue", writer("r"), "r"),
        ],
        edges=[Edge(source="a", target="b"), Edge(source="b", target="rescue", on="*")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf, limits=BudgetLimits(tokens=100))
        outcome = await run.wait()
    assert outcome.code == "budget_exceeded"
    assert of(run, "node:retrying") == []
    failed = of(run, "run:failed")[0]
    assert (failed.node_id, failed.tokens) == ("b", 110)
    assert "r" not in outcome.state
    warning = of(run, "budget:warning")[0]
    assert (warning.dimension, warning.used, warning.limit, warning.exceeded) == (
        "tokens",
        90.0,
        100.0,
        False,
    )
    assert names(run).index("budget:warning") < names(run).index("node:completed")


async def test_the_warn_branch_emits_budget_warning_and_goes_on(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", charging(60, times=2))])
    async with running() as (_, runs):
        run = await runs.start(wf, limits=BudgetLimits(tokens=100, on_exceed="warn"))
        outcome = await run.wait()
    assert outcome.status == "completed"
    warnings = of(run, "budget:warning")
    assert [(w.used, w.exceeded) for w in warnings] == [(120.0, True)]
    assert of(run, "run:completed")[0].tokens == 120


async def test_the_pause_branch_waits_for_a_budget_decision(autojump_clock: Any) -> None:
    wf = Workflow(
        name="w",
        nodes=[step("a", charging(60, times=2)), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf, limits=BudgetLimits(tokens=100, on_exceed="pause"))
        await trio.sleep(5)
        assert run.pending == (None,)
        paused = of(run, "budget:paused")[0]
        assert (paused.dimension, paused.used, paused.limit) == ("tokens", 120.0, 100.0)
        assert of(run, "approval:requested")[0].node_id is None
        run.decide_budget("approve", by="ops", limits=BudgetLimits(tokens=1000))
        outcome = await run.wait()
        assert outcome.status == "completed"
        assert of(run, "approval:decided")[0].at == 5.0
        denied = await runs.start(wf, limits=BudgetLimits(tokens=100, on_exceed="pause"))
        await trio.sleep(1)
        denied.decide_budget("deny", by="ops")
        assert (await denied.wait()).code == "budget_exceeded"


async def test_the_wall_clock_ends_the_run_with_run_timeout(autojump_clock: Any) -> None:
    async def slow(ctx: NodeContext) -> None:
        await trio.sleep(100)

    wf = Workflow(name="w", nodes=[step("a", slow)])
    async with running() as (_, runs):
        run = await runs.start(wf, limits=BudgetLimits(seconds=10))
        outcome = await run.wait()
    assert outcome.code == "run_timeout"
    failed = of(run, "run:failed")[0]
    assert (failed.at, failed.duration, failed.message) == (
        10.0,
        10.0,
        "The run exceeded its time limit.",
    )
    assert_well_formed(run)


@pytest.mark.parametrize(
    ("how", "code"),
    [("returns", None), ("fails", "bad_request"), ("raises", "internal")],
)
async def test_a_node_with_a_timeout_answers_as_one_without(
    autojump_clock: Any, how: str, code: str | None
) -> None:
    async def quick(ctx: NodeContext) -> Any:
        await trio.sleep(1)
        if how == "fails":
            return fail("bad_request", "no")
        if how == "raises":
            raise ValueError("boom")
        return {"done": True}

    wf = Workflow(name="w", nodes=[step("a", quick, "done", timeout=5.0)])
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.code == code
    if code is None:
        assert outcome.state["done"] is True
    else:
        assert outcome.error is not None and outcome.error.node_id == "a"
        assert isinstance(outcome.error.__cause__, ValueError) == (how == "raises")
