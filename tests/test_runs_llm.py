"""LLM, agent and router nodes over real loopback HTTP: chaos server → provider actor →
pool → runs, with real tools behind the front door."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from actors.providers import LlmRequest, Message
from actors.testing import capture_events
from actors.testing.chaos import Fault, FaultScript
from actors.tools import Grants, ToolContext, ToolGroup, tool
from supervisors import BudgetLimits
from supervisors.runs import NO_RETRY, Agent, Llm, NodeRetry, Router, Workflow
from tests.runs_helpers import assert_well_formed, names, of, step, world, writer

pytestmark = pytest.mark.trio

LABEL = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
looked_up: list[tuple[str, str | None]] = []


@tool
async def lookup(query: str, context: ToolContext) -> dict[str, Any]:
    """Look something up."""
    looked_up.append((query, context.key))
    return {"found": query.upper()}


@tool
async def broken(query: str) -> str:
    """Always fails."""
    raise RuntimeError("tool is down")


@pytest.fixture(autouse=True)
def _clear() -> None:
    looked_up.clear()


def agent_flow(text: str, grants: Grants | None = None, **fields: Any) -> Workflow:
    """A workflow of one agent node, ``agent``, whose user message is ``text``."""
    agent = Agent(
        id="agent",
        model="m1",
        messages=[("user", text)],
        grants=grants if grants is not None else Grants.allow("lookup"),
        **fields,
    )
    return Workflow(name="w", nodes=[agent])


def ask(text: str, **fields: Any) -> Llm:
    return Llm(id=fields.pop("id", "ask"), model="m1", messages=[("user", text)], **fields)


async def test_an_llm_node_writes_the_answer_and_charges_the_budget(autojump_clock: Any) -> None:
    async with world() as w:
        wf = Workflow(name="w", nodes=[ask("Summarize {doc}", output="summary")])
        run = await w.runs.start(wf, {"doc": "the report"})
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert outcome.state["summary"] == "echo: Summarize the report"
    done = of(run, "run:completed")[0]
    assert done.tokens == w.pool.ledger.entries[0].usage.total_tokens > 0
    assert of(run, "node:completed")[0].updates == {"summary": "echo: Summarize the report"}


async def test_a_request_built_from_the_state(autojump_clock: Any) -> None:
    def build(state: Any) -> LlmRequest:
        return LlmRequest(model="m1", messages=[Message(role="user", content=state["q"])])

    async with world() as w:
        wf = Workflow(name="w", nodes=[Llm(id="a", request=build)])
        outcome = await (await w.runs.start(wf, {"q": "hi"})).wait()
    assert outcome.state["a"] == "echo: hi"


async def test_a_template_naming_a_missing_key_is_validation(autojump_clock: Any) -> None:
    async with world() as w:
        wf = Workflow(name="w", nodes=[ask("Summarize {missing}")])
        outcome = await (await w.runs.start(wf)).wait()
    assert outcome.code == "validation"
    assert outcome.error is not None
    assert (
        outcome.error.message == "node 'ask': the template names 'missing', which the state lacks"
    )
    assert w.server.count() == 0


async def test_an_output_schema_parses_and_checks_the_answer(autojump_clock: Any) -> None:
    async with world() as w:
        good = Workflow(name="g", nodes=[ask('reply: {{"label": "bug"}}', output_schema=LABEL)])
        outcome = await (await w.runs.start(good)).wait()
        assert outcome.state["ask"] == {"label": "bug"}
        not_json = Workflow(name="n", nodes=[ask("plain words", output_schema=LABEL)])
        outcome = await (await w.runs.start(not_json)).wait()
        assert outcome.code == "validation"
        assert outcome.error is not None and outcome.error.retryable is False
        assert outcome.error.message == "node 'ask': the model's answer is not JSON"
        wrong = Workflow(name="o", nodes=[ask('reply: {{"label": 3}}', output_schema=LABEL)])
        run = await w.runs.start(wrong)
        outcome = await run.wait()
        assert outcome.code == "output_validation"
        assert outcome.error is not None and outcome.error.node_id == "ask"
        assert outcome.error.tool is None
        assert "$.label" in outcome.error.message
        assert of(run, "node:retrying") == []


async def test_a_provider_failure_is_retried_by_the_pool_not_again_by_the_node(
    autojump_clock: Any,
) -> None:
    script = FaultScript(faults=[Fault(kind="status", status=503, times=8)])
    async with world(script) as w:
        wf = Workflow(name="w", nodes=[ask("hi", retry=NodeRetry(max_retries=3))])
        run = await w.runs.start(wf)
        outcome = await run.wait()
    # The pool's own retries (3, at 1, 2, 4 s) ran inside the node's one attempt; an
    # exhausted pool is not retryable: the node fails at once.
    assert w.server.count() == 4
    assert outcome.code == "all_providers_failed"
    assert of(run, "node:retrying") == []
    assert of(run, "run:failed")[0].at == 7.0


async def test_a_fatal_provider_error_is_not_retried_by_the_node(autojump_clock: Any) -> None:
    script = FaultScript(faults=[Fault(kind="status", status=400, times=1)])
    async with world(script) as w:
        flaky = Workflow(name="w", nodes=[ask("hi", retry=NodeRetry(max_retries=1))])
        run = await w.runs.start(flaky)
        outcome = await run.wait()
    assert outcome.code == "bad_request"  # fatal: not retried
    assert of(run, "node:retrying") == []


async def test_every_attempt_is_charged_failed_ones_too(autojump_clock: Any) -> None:
    script = FaultScript(faults=[Fault(kind="malformed_json", times=1)])
    async with world(script) as w:
        wf = Workflow(name="w", nodes=[ask("hi")])
        run = await w.runs.start(wf, limits=BudgetLimits(tokens=10_000))
        await run.wait()
    ledger = w.pool.ledger.entries
    assert [e.outcome for e in ledger] == ["failed", "ok"]
    assert of(run, "run:completed")[0].tokens == sum(
        e.usage.total_tokens for e in ledger if e.usage is not None
    )


async def test_an_agent_calls_tools_and_answers(autojump_clock: Any) -> None:
    group = ToolGroup("g", [lookup])
    async with world(None, group) as w:
        wf = agent_flow("call: {topic}", Grants.allow("lookup"))
        run = await w.runs.start(wf, {"topic": "weather"}, run_id="r1")
        outcome = await run.wait()
    assert outcome.status == "completed", outcome
    assert looked_up == [("weather", "r1:agent:1:0")]
    called = of(run, "tool:called")
    assert [(c.tool, c.index, c.key, c.code) for c in called] == [
        ("lookup", 0, "r1:agent:1:0", "ok")
    ]
    answer = json.loads(outcome.state["agent"].removeprefix("echo: "))
    assert answer == {"result": {"found": "WEATHER"}}


async def test_a_tool_error_goes_back_to_the_model(autojump_clock: Any) -> None:
    group = ToolGroup("g", [broken])
    async with world(None, group) as w:
        wf = agent_flow("call: x", Grants.allow("broken"))
        run = await w.runs.start(wf)
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert [c.code for c in of(run, "tool:called")] == ["tool_failed"]
    seen = json.loads(outcome.state["agent"].removeprefix("echo: "))
    assert seen["error"]["code"] == "tool_failed"
    assert "tool is down" not in outcome.state["agent"]


async def test_a_denied_tool_goes_back_to_the_model_as_tool_denied(autojump_clock: Any) -> None:
    group = ToolGroup("g", [lookup])
    async with world(None, group) as w:
        only_ok = Grants.allow(lookup={"properties": {"query": {"const": "ok"}}})
        wf = Workflow(
            name="w",
            nodes=[Agent(id="agent", model="m1", messages=[("user", "call: x")], grants=only_ok)],
        )
        run = await w.runs.start(wf)
        outcome = await run.wait()
    assert looked_up == []
    assert [c.code for c in of(run, "tool:called")] == ["tool_denied"]
    assert outcome.status == "completed"


async def test_an_agent_past_its_turns_fails_with_turn_limit(autojump_clock: Any) -> None:
    group = ToolGroup("g", [lookup])

    async with world(None, group) as w:
        # Every tool result says "call:" again: the model never stops.
        wf = agent_flow("call: call: call:", Grants.allow("lookup"), max_turns=1)
        run = await w.runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "turn_limit"
    assert outcome.error is not None
    assert outcome.error.message == "agent 'agent' still called tools after 1 turns"
    assert of(run, "node:retrying") == []


async def test_the_run_budget_counts_agent_turns(autojump_clock: Any) -> None:
    group = ToolGroup("g", [lookup])
    async with world(None, group) as w:
        wf = agent_flow("call: x", Grants.allow("lookup"))
        run = await w.runs.start(wf, limits=BudgetLimits(turns=1))
        outcome = await run.wait()
    assert outcome.code == "turn_limit"
    assert w.server.count() == 1


async def test_an_llm_router_picks_by_the_models_answer(autojump_clock: Any) -> None:
    async with world() as w:
        wf = Workflow(
            name="w",
            nodes=[
                Router(
                    id="r", managed_nodes=["a", "b"], model="m1", messages=[("user", "reply: b")]
                ),
                step("a", writer("a"), "a"),
                step("b", writer("b"), "b"),
            ],
        )
        outcome = await (await w.runs.start(wf)).wait()
        assert dict(outcome.state) == {"b": 1}
        wf_json = Workflow(
            name="j",
            nodes=[
                Router(
                    id="r",
                    managed_nodes=["a"],
                    model="m1",
                    messages=[("user", 'reply: {{"next": "a"}}')],
                ),
                step("a", writer("a"), "a"),
            ],
        )
        assert dict((await (await w.runs.start(wf_json)).wait()).state) == {"a": 1}
        outside = Workflow(
            name="o",
            nodes=[
                Router(id="r", managed_nodes=["a"], model="m1", messages=[("user", "reply: c")]),
                step("a", writer("a"), "a"),
            ],
        )
        outcome = await (await w.runs.start(outside)).wait()
    assert outcome.code == "supervisor_routing"


async def test_cancelling_a_run_cancels_its_provider_request(autojump_clock: Any) -> None:
    script = FaultScript(faults=[Fault(kind="hang")])
    async with world(script) as w:
        wf = Workflow(name="w", nodes=[ask("hi", retry=NO_RETRY)])
        run = await w.runs.start(wf)
        await trio.sleep(2)
        run.cancel("user")
        outcome = await run.wait()
        await trio.sleep(1)
    assert outcome.status == "cancelled"
    assert [e.outcome for e in w.pool.ledger.entries] == ["cancelled"]
    assert [(r.disconnected, r.disconnected_at) for r in w.server.requests] == [(True, 2.0)]
    assert_well_formed(run)


async def test_cancelling_a_run_cancels_its_tool_call(autojump_clock: Any) -> None:
    ended: list[str] = []

    @tool
    async def slow(query: str) -> str:
        """Takes long."""
        try:
            await trio.sleep(100)
        finally:
            ended.append(query)
        return query

    async with world(None, ToolGroup("g", [slow])) as w:
        wf = Workflow(
            name="w",
            nodes=[
                Agent(
                    id="a", model="m1", messages=[("user", "call: q")], grants=Grants.allow("slow")
                )
            ],
        )
        with capture_events("tool.call_failed") as failed:
            run = await w.runs.start(wf)
            await trio.sleep(5)
            run.cancel("user")
            await run.wait()
    assert ended == ["q"]
    assert [f.code for f in failed] == ["cancelled"]
    assert of(run, "tool:called") == []
    assert names(run)[-1] == "run:cancelled"
