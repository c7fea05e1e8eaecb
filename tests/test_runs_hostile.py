"""What a hostile pass broke in the runs, pinned: each test is one probe that failed."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import trio

from actors import ActorError, Code, fail
from supervisors import BudgetLimits, SupervisorSpec, open_tree
from supervisors.runs import (
    Approval,
    Edge,
    Llm,
    NodeBreaker,
    NodeContext,
    NodeRetry,
    Step,
    Workflow,
    load_workflow,
    open_runs,
)
from tests.runs_helpers import assert_well_formed, names, of, running, step, writer

pytestmark = pytest.mark.trio


async def test_a_value_the_log_cannot_render_fails_that_node_only(autojump_clock: Any) -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic

    async def loop(ctx: NodeContext) -> dict[str, Any]:
        return {"x": cyclic}

    async def slow(ctx: NodeContext) -> None:
        await trio.sleep(5)

    async with running() as (_, runs):
        other = await runs.start(Workflow(name="slow", nodes=[step("a", slow)]))
        run = await runs.start(Workflow(name="w", nodes=[step("a", loop, "x")]))
        outcome = await run.wait()
        assert outcome.code == "output_validation"
        assert outcome.error is not None
        assert (
            outcome.error.message == "node 'a': 'x' nests deeper than 100 levels (or has a cycle)"
        )
        assert (await other.wait()).status == "completed"


async def test_a_value_whose_repr_raises_is_logged_as_a_summary(
    autojump_clock: Any, log_stream: io.StringIO
) -> None:
    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    async def odd(ctx: NodeContext) -> dict[str, Any]:
        return {"x": Unprintable(), "n": 7}

    async with running() as (_, runs):
        run = await runs.start(Workflow(name="w", nodes=[step("a", odd, "x", "n")]))
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert_well_formed(run)
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert not [line for line in lines if line["event"] == "event_hook.failed"]
    (completed,) = [line for line in lines if line["event"] == "node:completed"]
    assert completed["updates"]["n"] == "7"
    assert completed["updates"]["x"].startswith("<Unprintable instance at 0x")
    (done,) = [line for line in lines if line["event"] == "run:completed"]
    assert set(done["state"]) == {"x", "n"}


async def test_an_approval_reached_twice_at_once_waits_for_two_decisions(
    autojump_clock: Any,
) -> None:
    wf = Workflow(
        name="w",
        nodes=[step("a", writer("a"), "a"), step("b", writer("b"), "b"), Approval(id="ok")],
        edges=[Edge(source="a", target="ok"), Edge(source="b", target="ok")],
        start=["a", "b"],
    )
    async with running(runners=2) as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(1)
        assert run.pending == ("ok", "ok")
        run.decide("ok", "approve", by="x")
        assert run.pending == ("ok",)
        run.decide("ok", "approve", by="y")
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert [d.by for d in of(run, "approval:decided")] == ["x", "y"]


async def test_a_budget_paused_in_two_branches_is_one_decision(autojump_clock: Any) -> None:
    async def charge(ctx: NodeContext) -> None:
        from actors import Usage

        await ctx.budget.charge(Usage(input_tokens=60))

    wf = Workflow(name="w", nodes=[step("a", charge), step("b", charge)], start=["a", "b"])
    async with running(runners=2) as (_, runs):
        run = await runs.start(wf, limits=BudgetLimits(tokens=100, on_exceed="pause"))
        await trio.sleep(1)
        assert run.pending == (None,)
        run.decide_budget("approve", by="ops", limits=BudgetLimits(tokens=1000))
        assert (await run.wait()).status == "completed"


async def test_a_failure_in_the_instant_of_the_cancel_is_not_reported(
    autojump_clock: Any,
) -> None:
    async def fails_at_5(ctx: NodeContext) -> Any:
        await trio.sleep(5)
        return fail("tool_failed", "x", retryable=True)

    wf = Workflow(
        name="w",
        nodes=[step("a", fails_at_5), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b", on="*")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(5)
        run.cancel("now")
        await run.wait()
    assert names(run) == ["run:started", "node:started", "run:cancelled"]
    assert run.history[-1].in_flight == ("a",)


async def test_a_cancel_right_after_start_runs_nothing(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.lowlevel.checkpoint()
        run.cancel("never mind")
        await run.wait()
    assert names(run)[-1] == "run:cancelled"
    assert "node:completed" not in names(run)


async def test_a_crashing_runner_is_internal_even_with_a_catch_all_edge(
    autojump_clock: Any,
) -> None:
    class Boom(BaseException):
        pass

    async def crash(ctx: NodeContext) -> None:
        raise Boom

    wf = Workflow(
        name="w",
        nodes=[step("a", crash), step("rescue", writer("r"), "r")],
        edges=[Edge(source="a", target="rescue", on="*")],
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.code == "internal"
    assert "r" not in outcome.state


async def test_runners_crashing_past_their_intensity_fail_the_run_not_cancel_it(
    autojump_clock: Any,
) -> None:
    class Boom(BaseException):
        pass

    async def crash(ctx: NodeContext) -> None:
        raise Boom

    wf = Workflow(
        name="w", nodes=[step(f"n{i}", crash) for i in range(8)], start=[f"n{i}" for i in range(8)]
    )
    async with running(runners=8) as (tree, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
        assert tree.root.child("runs").which_children() == []
    assert outcome.status == "failed"
    assert outcome.code == "internal"


async def test_leaving_the_block_after_the_runs_supervisor_was_terminated(
    autojump_clock: Any,
) -> None:
    async with open_tree(SupervisorSpec()) as tree:
        async with open_runs(tree):
            await tree.root.terminate_child("runs")
        assert tree.root.which_children() == []


async def test_nested_state_cannot_be_changed_in_place(autojump_clock: Any) -> None:
    inputs = {"doc": {"owner": "alice"}, "tags": ["a"]}

    async def tamper(ctx: NodeContext) -> None:
        ctx.state["doc"]["owner"] = "mallory"

    async def append(ctx: NodeContext) -> None:
        ctx.state["tags"].append("b")

    async with running() as (_, runs):
        first = await runs.start(Workflow(name="w", nodes=[step("a", tamper)]), inputs)
        second = await runs.start(Workflow(name="v", nodes=[step("a", append)]), inputs)
        assert (await first.wait()).code == "internal"  # TypeError: read-only
        assert (await second.wait()).code == "internal"  # tuples have no append
        inputs["doc"]["owner"] = "changed by the caller"
        assert first.history[0].inputs["doc"]["owner"] == "alice"
        assert first.state["doc"] == {"owner": "alice"}


async def test_a_node_raising_while_its_timeout_cancels_it_is_a_timeout(
    autojump_clock: Any,
) -> None:
    async def messy(ctx: NodeContext) -> None:
        try:
            await trio.sleep(10)
        finally:
            raise ValueError("cleanup failed")

    wf = Workflow(name="w", nodes=[step("a", messy, timeout=2.0)])
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.code == "timeout"
    assert outcome.error is not None and isinstance(outcome.error.__cause__, ValueError)


async def test_an_approval_with_a_timeout_times_out(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[Approval(id="ok", timeout=5.0, retry=NodeRetry(max_retries=0))])
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "timeout"
    assert outcome.error is not None and outcome.error.message == "no decision within 5.0 s"
    assert of(run, "run:failed")[0].at == 5.0


async def test_a_cancelled_half_open_probe_frees_the_node(autojump_clock: Any) -> None:
    calls: list[float] = []

    async def down_then_slow(ctx: NodeContext) -> Any:
        calls.append(trio.current_time())
        if len(calls) == 1:
            return fail("unavailable", "down", retryable=True)
        await trio.sleep(100)
        return None

    wf = Workflow(
        name="w",
        nodes=[step("a", down_then_slow, breaker=NodeBreaker(failures=1, cooldown=10))],
    )
    async with running() as (_, runs):
        await (await runs.start(wf)).wait()
        await trio.sleep(10)
        probe = await runs.start(wf)
        await trio.sleep(1)
        probe.cancel("stop the probe")
        await probe.wait()
        again = await runs.start(wf)
        await trio.sleep(1)
        assert names(again)[:2] == ["run:started", "node:started"]  # not skipped
        again.cancel("done")
    assert len(calls) == 3


async def test_a_cancelled_error_from_a_node_never_shows_its_text(autojump_clock: Any) -> None:
    async def forged(ctx: NodeContext) -> None:
        raise ActorError.from_code(Code.CANCELLED, "sk-secret-123 in /etc/passwd")

    async with running() as (_, runs):
        run = await runs.start(Workflow(name="w", nodes=[step("a", forged)]))
        await run.wait()
    assert run.history[-1].reason == "node 'a' was cancelled"


async def test_an_abort_during_an_approval_keeps_its_reason(autojump_clock: Any) -> None:
    from actors import CancelledError

    with pytest.raises(CancelledError):
        async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
            run = await runs.start(Workflow(name="w", nodes=[Approval(id="ok")]))
            await trio.sleep(1)
            tree.abort("abort during approval")
            await trio.sleep_forever()
    assert run.history[-1].reason == "abort during approval"


@pytest.mark.parametrize(
    ("workflow", "code", "message"),
    [
        (Workflow(name="w", nodes=["x"]), "unsupported_node_type", "unsupported node type 'str'"),
        (Workflow(name="w", nodes=[None]), "unsupported_node_type", "unsupported node type"),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), writes="a")], edges=[5]),
            "node_config",
            "edges[0]: an Edge, got int",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), retry=5)]),
            "node_config",
            "node 'a': retry: a NodeRetry",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), breaker="x")]),
            "node_config",
            "node 'a': breaker: a NodeBreaker or None",
        ),
        (
            Workflow(name="w", nodes=[Step(id="a", fn=writer("a"), join="yes")]),
            "node_config",
            "node 'a': join: a bool",
        ),
        (
            Workflow(name="w", nodes=[Approval(id="a", prompt=5)]),
            "node_config",
            "node 'a': prompt: a string",
        ),
        (
            Workflow(
                name="w", nodes=[Llm(id="a", model="m", messages=[("user", "x")], max_tokens=-5)]
            ),
            "node_config",
            "node 'a': max_tokens: an integer >= 1",
        ),
        (
            Workflow(name="w", nodes=[Llm(id="a", model="m", messages=[("wizard", "x")])]),
            "node_config",
            "node 'a': messages: (role, text) pairs, a role one of",
        ),
        (
            Workflow(name="w", nodes=[Llm(id="a", request=5)]),
            "node_config",
            "node 'a': request: an LlmRequest or a function of the state",
        ),
        (
            Workflow(
                name="w",
                nodes=[Llm(id="a", model="m", messages=[("user", "x")], output_schema="x")],
            ),
            "node_config",
            "node 'a': output_schema: a JSON Schema (a mapping) or None",
        ),
        (
            Workflow(name=None, nodes=[Step(id="a", fn=writer("a"), writes="a")]),
            "node_config",
            "name: a non-empty string",
        ),
    ],
)
async def test_bad_configuration_never_starts_a_run(
    autojump_clock: Any, workflow: Workflow, code: str, message: str
) -> None:
    from supervisors.pool import ProviderPool

    async with running(pools={"default": ProviderPool.__new__(ProviderPool)}) as (_, runs):
        run = await runs.start(workflow)
        outcome = await run.wait()
    assert names(run) == ["run:failed"]
    assert outcome.code == code
    assert outcome.error is not None and message in outcome.error.message


async def test_an_async_when_is_refused(autojump_clock: Any) -> None:
    async def maybe(state: Any) -> bool:
        return False

    wf = Workflow(
        name="w",
        nodes=[step("a", writer("a"), "a"), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b", when=maybe)],
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.code == "node_config"
    assert outcome.error is not None
    assert outcome.error.message == "edges[0].when: a plain predicate, not async"


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            lambda: BudgetLimits(seconds=float("nan")),
            "BudgetLimits.seconds must be None or a number >= 0",
        ),
        (lambda: BudgetLimits(tokens=-1), "BudgetLimits.tokens must be None or a number >= 0"),
        (lambda: BudgetLimits(turns="x"), "BudgetLimits.turns must be None or a number >= 0"),
        (lambda: BudgetLimits(cost=True), "BudgetLimits.cost must be None or a number >= 0"),
        (lambda: BudgetLimits(on_exceed="explode"), "on_exceed"),
    ],
)
async def test_bad_budget_limits_are_refused_when_made(limits: Any, message: str) -> None:
    with pytest.raises((ActorError, ValueError), match=message):
        limits()


async def test_bad_arguments_to_open_runs_leave_nothing_behind(autojump_clock: Any) -> None:
    async with open_tree(SupervisorSpec()) as tree:
        for kwargs, message in [
            ({"pools": 5}, "ProviderPool values must be a ProviderPool or a mapping"),
            ({"tools": {"x": 1}}, "Tools values must be a Tools or a mapping"),
            ({"prices": 5}, "prices must be a mapping of \\(provider, model\\) to Price"),
            ({"prices": {"a": 1}}, "prices must be a mapping"),
            ({"runners": 0}, "runners must be an int from 1 to 64"),
            ({"runners": 10**6}, "runners must be an int from 1 to 64"),
        ]:
            with pytest.raises(ActorError, match=message) as info:
                async with open_runs(tree, **kwargs):
                    pass
            assert info.value.code is Code.CONFIG_INVALID
        with pytest.raises(ActorError, match="tree must be a Tree or a Supervisor"):
            async with open_runs("x"):  # type: ignore[arg-type]
                pass
        assert tree.root.which_children() == []
        async with open_runs(tree) as runs:
            assert not runs.closed


async def test_a_start_that_races_the_end_of_the_block_is_refused(autojump_clock: Any) -> None:
    wf = Workflow(name="w", nodes=[step("a", writer("a"), "a")])
    refused: list[ActorError] = []
    async with open_tree(SupervisorSpec()) as tree:
        async with open_runs(tree) as runs:

            async def late() -> None:
                try:
                    await runs.start(wf)
                except ActorError as error:
                    refused.append(error)

            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(late)
                runs.close("closing")
        assert tree.root.which_children() == []
    assert [e.code for e in refused] == [Code.ACTOR_STOPPED] * 3


async def test_bad_decide_arguments_are_typed_errors(autojump_clock: Any) -> None:
    async with running() as (_, runs):
        run = await runs.start(Workflow(name="w", nodes=[Approval(id="ok")]))
        await trio.sleep(1)
        with pytest.raises(ActorError, match="node must be a node id") as info:
            run.decide(["ok"], "approve", by="x")  # type: ignore[arg-type]
        assert info.value.code is Code.INPUT_VALIDATION
        run.cancel("done")


async def test_load_workflow_with_bad_functions_is_config_invalid() -> None:
    with pytest.raises(ActorError, match="functions must map names to functions") as info:
        load_workflow('name = "w"', functions=5)  # type: ignore[arg-type]
    assert info.value.code is Code.CONFIG_INVALID


# -- the second hostile pass ------------------------------------------------------------


async def test_the_deadline_after_a_budget_approval_without_seconds_is_run_timeout(
    autojump_clock: Any,
) -> None:
    from actors import Usage

    async def charge_then_wait(ctx: NodeContext) -> None:
        await ctx.budget.charge(Usage(input_tokens=200))
        await trio.sleep(100)

    wf = Workflow(name="w", nodes=[step("a", charge_then_wait)])
    limits = BudgetLimits(tokens=100, seconds=30, on_exceed="pause")
    async with running() as (_, runs):
        run = await runs.start(wf, limits=limits)
        await trio.sleep(1)
        run.decide_budget("approve", by="ops", limits=BudgetLimits(tokens=1000))
        outcome = await run.wait()
    assert outcome.code == "run_timeout"
    assert outcome.error is not None and outcome.error.message == "run over its 30 s wall clock"
    assert of(run, "run:failed")[0].at == 30.0


async def test_a_decision_accepted_in_the_instant_of_the_timeout_counts(
    autojump_clock: Any,
) -> None:
    wf = Workflow(
        name="w",
        nodes=[
            Approval(id="ok", timeout=5.0, retry=NodeRetry(max_retries=0)),
            step("b", writer("b"), "b"),
        ],
        edges=[Edge(source="ok", target="b")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(5)
        try:  # either the timeout took the wait away first, or the decision counts
            run.decide("ok", "approve", by="x")
        except ActorError as refused:
            assert refused.message == f"run {run.run_id}: node 'ok' waits for no decision"
            accepted = False
        else:
            accepted = True
        outcome = await run.wait()
    if accepted:
        assert outcome.status == "completed"
        assert [d.at for d in of(run, "approval:decided")] == [5.0]
    else:
        assert outcome.code == "timeout"
        assert of(run, "approval:decided") == []


async def test_branches_queued_for_a_runner_start_when_one_takes_them(
    autojump_clock: Any,
) -> None:
    async def work(ctx: NodeContext) -> None:
        await trio.sleep(4)

    wf = Workflow(
        name="w",
        nodes=[step(f"b{i}", work) for i in range(4)],
        start=[f"b{i}" for i in range(4)],
    )
    async with running(runners=2) as (_, runs):
        run = await runs.start(wf)
        await trio.sleep(3)
        started = sorted(r.node_id for r in of(run, "node:started"))
        assert len(started) == 2  # two runners: two branches began, two wait
        run.cancel("enough")
        await run.wait()
    assert sorted(run.history[-1].in_flight) == started
    assert len(of(run, "node:started")) == 2


async def test_a_queued_branch_reports_its_own_duration(autojump_clock: Any) -> None:
    async def work(ctx: NodeContext) -> None:
        await trio.sleep(4)

    wf = Workflow(name="w", nodes=[step(f"b{i}", work) for i in range(2)], start=["b0", "b1"])
    async with running(runners=1) as (_, runs):
        run = await runs.start(wf)
        await run.wait()
    done = of(run, "node:completed")
    assert sorted((r.at, r.duration) for r in done) == [(4.0, 4.0), (8.0, 4.0)]
