"""Workflows from TOML: every kind, the errors naming node and field, and a loaded
workflow with expression edges running to its end."""

from __future__ import annotations

from typing import Any

import pytest

from actors import ActorError, Code
from actors.tools import ALL, NONE
from supervisors.runs import (
    Agent,
    Approval,
    Condition,
    Llm,
    NodeContext,
    Router,
    Step,
    load_workflow,
)
from tests.runs_helpers import of, running


async def fetch(ctx: NodeContext) -> dict[str, Any]:
    return {"doc": "some text here", "n": ctx.state.get("n", 0) + 1}


async def count(ctx: NodeContext) -> dict[str, Any]:
    return {"words": len(ctx.state["doc"].split())}


def choose(state: Any) -> str:
    return "work"


def blocking(ctx: NodeContext) -> None:
    return None


FUNCTIONS = {"fetch": fetch, "count": count, "choose": choose, "blocking": blocking}

COMPLETE = """
name = "triage"
start = "fetch"
max_steps = 100

[[nodes]]
id = "fetch"
kind = "step"
fn = "fetch"
writes = ["doc", "n"]
timeout = 5.0
retry = { max_retries = 3, backoff = { initial = 0.5, factor = 3.0, max = 9.0 } }
breaker = { failures = 2, cooldown = 10.0 }

[[nodes]]
id = "classify"
kind = "llm"
model = "m1"
pool = "cheap"
messages = [["system", "You classify."], ["user", "Classify: {doc}"]]
max_tokens = 256
output_schema = { type = "object", properties = { label = { type = "string" } } }
output = "label"

[[nodes]]
id = "work"
kind = "agent"
tools = "support"
grants = ["lookup", "search"]
model = "m1"
messages = [["user", "Do: {doc}"]]
max_turns = 5

[[nodes]]
id = "route"
kind = "router"
managed_nodes = ["work", "classify"]
pick = "choose"

[[nodes]]
id = "ok"
kind = "approval"
prompt = "Ship it?"
join = true

[[edges]]
source = "fetch"
target = "classify"
when = "len(doc) > 0"

[[edges]]
source = "classify"
target = "ok"
on = ["output_validation", "*"]
"""


def test_a_complete_file_loads_every_kind_with_its_fields() -> None:
    wf = load_workflow(COMPLETE, functions=FUNCTIONS)
    assert (wf.name, wf.start, wf.max_steps) == ("triage", ("fetch",), 100)
    fetch_node, classify, work, route, ok = wf.nodes
    assert isinstance(fetch_node, Step)
    assert (fetch_node.fn, fetch_node.writes, fetch_node.timeout) == (fetch, ("doc", "n"), 5.0)
    assert fetch_node.retry.max_retries == 3
    backoff = fetch_node.retry.backoff
    assert (backoff.initial, backoff.factor, backoff.max, backoff.jitter) == (0.5, 3.0, 9.0, 0.0)
    assert fetch_node.breaker is not None
    assert (fetch_node.breaker.failures, fetch_node.breaker.cooldown) == (2, 10.0)
    assert isinstance(classify, Llm)
    assert (classify.pool, classify.model, classify.max_tokens, classify.output) == (
        "cheap",
        "m1",
        256,
        "label",
    )
    assert classify.messages == (("system", "You classify."), ("user", "Classify: {doc}"))
    assert classify.writes == ("label",)
    assert classify.output_schema == {"type": "object", "properties": {"label": {"type": "string"}}}
    assert isinstance(work, Agent)
    assert (work.tools, work.max_turns, work.output) == ("support", 5, "work")
    assert sorted(work.grants.tools) == ["lookup", "search"] and not work.grants.everything
    assert isinstance(route, Router)
    assert (route.managed_nodes, route.pick) == (("work", "classify"), choose)
    assert isinstance(ok, Approval)
    assert (ok.prompt, ok.join) == ("Ship it?", True)
    first, second = wf.edges
    assert isinstance(first.when, Condition) and first.on == ()
    assert (second.when, second.on) == (None, ("output_validation", "*"))


def test_grants_star_is_every_tool_and_absent_is_none() -> None:
    text = """
name = "w"
[[nodes]]
id = "a"
kind = "agent"
model = "m"
messages = [["user", "x"]]
grants = ["*"]
[[nodes]]
id = "b"
kind = "agent"
model = "m"
messages = [["user", "x"]]
"""
    a, b = load_workflow(text).nodes
    assert isinstance(a, Agent) and isinstance(b, Agent)
    assert (a.grants, b.grants) == (ALL, NONE)


def node(body: str) -> str:
    return f'name = "w"\n[[nodes]]\n{body}\n'


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("name = ", Code.CONFIG_INVALID, r"^workflow: not valid TOML: .*\(at "),
        (
            'name = "w"\nx = ' + "[" * 5000 + "]" * 5000,
            Code.CONFIG_INVALID,
            r"^workflow: not valid TOML: nested too deep$",
        ),
        ('[[nodes]]\nid = "a"', Code.NODE_CONFIG, r"^workflow: name: required field missing$"),
        ('name = "w"\nbogus = 1', Code.NODE_CONFIG, r"^workflow: unknown field 'bogus'$"),
        (
            node('id = "x"\nkind = "foo"'),
            Code.UNSUPPORTED_NODE_TYPE,
            r"^nodes\[0\] \('x'\): unsupported node type 'foo'$",
        ),
        (node('kind = "step"\nfn = "fetch"'), Code.NODE_CONFIG, r"^nodes\[0\]: id: required"),
        (node('id = "a"\nfn = "fetch"'), Code.NODE_CONFIG, r"^nodes\[0\] \('a'\): kind: required"),
        (
            node('id = 3\nkind = "step"'),
            Code.NODE_CONFIG,
            r"^nodes\[0\]: id: expected str, got int$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "fetch"\nwrtes = ["x"]'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): unknown field 'wrtes'$",
        ),
        (
            node(
                'id = "a"\nkind = "llm"\nmodel = "m"\nmessages = [["user", "x"]]\nmax_tokens = "5"'
            ),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): max_tokens: expected int, got str$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "fetch"\nretry = { max_retries = "x" }'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): retry.max_retries: expected int, got str$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "fetch"\njoin = 1'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): join: expected bool, got int$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "missing"'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): fn: no function named 'missing'$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "blocking"'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): fn: an async function$",
        ),
        (
            node('id = "a"\nkind = "router"\nmanaged_nodes = ["a"]\npick = "nope"'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): pick: no function named 'nope'$",
        ),
        (
            node('id = "a"\nkind = "llm"\nmodel = "m"\nmessages = [["user"]]'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): messages: \(role, text\) pairs$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "fetch"') + '[[edges]]\nsource = "a"\ntarget = "b"',
            Code.NODE_CONFIG,
            r"^edges\[0\].target: unknown node 'b'$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "fetch"') + "[[edges]]\nsource = 1\ntarget = 'a'",
            Code.NODE_CONFIG,
            r"^edges\[0\]: source: expected str, got int$",
        ),
        (
            node('id = "a"\nkind = "step"\nfn = "fetch"') + "start = 5",
            Code.NODE_CONFIG,
            r"unknown field 'start'",  # after [[nodes]], `start` belongs to the node
        ),
        (
            'name = "w"\nstart = 5\n' + '[[nodes]]\nid = "a"\nkind = "step"\nfn = "fetch"',
            Code.NODE_CONFIG,
            r"^workflow: start: expected a node id or a list of them, got int$",
        ),
        (
            node('id = "a"\nkind = "llm"\nmodel = "m"\nmessages = [["robot", "x"]]'),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): messages: a role is one of system, user, assistant, tool$",
        ),
        (
            node(
                'id = "a"\nkind = "agent"\nmodel = "m"\nmessages = [["user", "x"]]\ngrants = ["*", "x"]'
            ),
            Code.NODE_CONFIG,
            r"^nodes\[0\] \('a'\): grants: '\*' stands alone$",
        ),
        (
            node('id = "a"\nkind = "llm"\nmodel = "m"'),
            Code.NODE_CONFIG,
            r"^node 'a': model: a request, or a model and messages$",
        ),
    ],
)
def test_errors_name_the_node_and_the_field(text: str, code: Code, message: str) -> None:
    pattern = message.replace("^", r"^\[\w+\] ", 1)  # str(error) starts with the code
    with pytest.raises(ActorError, match=pattern) as info:
        load_workflow(text, functions=FUNCTIONS)
    assert info.value.code is code


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ("doc >", "syntax error"),
        ("", "empty expression"),
        ("x" * 1001, "too long"),
    ],
)
def test_a_when_that_does_not_parse_is_a_sandbox_error_naming_the_edge(
    when: str, message: str
) -> None:
    text = node('id = "a"\nkind = "step"\nfn = "fetch"\nwrites = ["doc", "n"]')
    text += f'[[edges]]\nsource = "a"\ntarget = "a"\nwhen = "{when}"\n'
    with pytest.raises(
        ActorError, match=f"^\\[sandbox_error\\] edges\\[0\\]: when: condition failed: {message}"
    ) as info:
        load_workflow(text, functions=FUNCTIONS)
    assert (info.value.code, info.value.retryable) == (Code.SANDBOX_ERROR, False)
    assert "doc >" not in str(info.value) or when != "doc >"


def test_text_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(ActorError, match="text must be a str") as info:
        load_workflow(b'name = "w"')  # type: ignore[arg-type]
    assert info.value.code is Code.CONFIG_INVALID


LOOP = """
name = "loop"

[[nodes]]
id = "fetch"
kind = "step"
fn = "fetch"
writes = ["doc", "n"]

[[nodes]]
id = "count"
kind = "step"
fn = "count"
writes = ["words"]

[[edges]]
source = "fetch"
target = "fetch"
when = "n < 3"

[[edges]]
source = "fetch"
target = "count"
when = "n >= 3 and len(doc) > 0"
"""


@pytest.mark.trio
async def test_a_loaded_workflow_with_expression_edges_runs(autojump_clock: Any) -> None:
    wf = load_workflow(LOOP, functions=FUNCTIONS)
    async with running() as (_, runs):
        run = await runs.start(wf, {"n": 0})
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert dict(outcome.state) == {"n": 3, "doc": "some text here", "words": 3}
    assert [r.node_id for r in of(run, "node:completed")] == ["fetch", "fetch", "fetch", "count"]


@pytest.mark.trio
async def test_a_loaded_condition_that_fails_at_run_time_fails_the_run(
    autojump_clock: Any,
) -> None:
    wf = load_workflow(LOOP.replace("n < 3", "n < 'three'"), functions=FUNCTIONS)
    async with running() as (_, runs):
        run = await runs.start(wf, {"n": 0})
        outcome = await run.wait()
    assert outcome.code == "sandbox_error"
    assert outcome.error is not None
    assert outcome.error.message == "condition failed: type error (TypeError)"
    assert of(run, "node:retrying") == []  # fatal: a retry would repeat it
