"""Pinned defaults and tables of the runs: a change here is a change users see."""

from __future__ import annotations

import logging

import pytest

from actors import ActorError, Code
from actors.events import (
    ApprovalDecided,
    ApprovalRequested,
    NodeCompleted,
    NodeFailed,
    NodeRetrying,
    NodeSkipped,
    NodeStarted,
    RunBudgetPaused,
    RunBudgetWarning,
    RunCancelled,
    RunCompleted,
    RunErrorDetail,
    RunFailed,
    RunStarted,
    ToolCalled,
)
from actors.tools import NONE
from supervisors.runs import (
    NO_RETRY,
    Agent,
    Approval,
    Edge,
    Llm,
    NodeBreaker,
    NodeRetry,
    Router,
    Step,
    Workflow,
)
from supervisors.runs.graph import KINDS, UNHANDLED


def test_node_defaults() -> None:
    step = Step(id="s")
    assert (step.writes, step.breaker, step.timeout, step.join, step.output) == (
        (),
        None,
        None,
        False,
        None,
    )
    assert step.retry == NodeRetry(max_retries=2)
    assert NO_RETRY.max_retries == 0
    llm = Llm(id="l", model="m", messages=[("user", "hi")])
    assert (llm.pool, llm.output, llm.writes, llm.max_tokens, llm.output_schema) == (
        "default",
        "l",
        ("l",),
        1024,
        None,
    )
    agent = Agent(id="a", model="m", messages=[("user", "hi")])
    assert (agent.tools, agent.grants, agent.max_turns, agent.output, agent.writes) == (
        "default",
        NONE,
        10,
        "a",
        ("a",),
    )
    assert Approval(id="p").prompt == ""
    assert Router(id="r").managed_nodes == ()
    breaker = NodeBreaker()
    assert (breaker.failures, breaker.cooldown) == (5, 30.0)
    backoff = NodeRetry().backoff
    assert (backoff.kind, backoff.initial, backoff.factor, backoff.max) == (
        "exponential",
        1.0,
        2.0,
        30.0,
    )
    wf = Workflow(name="w", nodes=[step])
    assert (wf.edges, wf.start, wf.max_steps) == ((), (), 1000)
    edge = Edge(source="a", target="b")
    assert (edge.when, edge.on) == (None, ())


def test_the_kinds_and_the_codes_no_edge_handles() -> None:
    assert {kind: cls.__name__ for kind, cls in KINDS.items()} == {
        "step": "Step",
        "llm": "Llm",
        "agent": "Agent",
        "router": "Router",
        "approval": "Approval",
    }
    assert (
        frozenset({"budget_exceeded", "run_timeout", "turn_limit", "cancelled", "internal"})
        == UNHANDLED
    )
    star = Edge(source="a", target="b", on="*")
    assert [code for code in Code if star.handles(code)] == [
        code for code in Code if code not in UNHANDLED
    ]
    only = Edge(source="a", target="b", on=["tool_failed", "circuit_open"])
    assert [code for code in Code if only.handles(code)] == [
        Code.TOOL_FAILED,
        Code.CIRCUIT_OPEN,
    ]


def test_record_names_and_levels() -> None:
    table = {
        RunStarted: ("run:started", logging.INFO),
        NodeStarted: ("node:started", logging.DEBUG),
        NodeRetrying: ("node:retrying", logging.INFO),
        NodeCompleted: ("node:completed", logging.DEBUG),
        NodeFailed: ("node:failed", logging.INFO),
        NodeSkipped: ("node:skipped", logging.WARNING),
        ToolCalled: ("tool:called", logging.INFO),
        RunBudgetWarning: ("budget:warning", logging.WARNING),
        RunBudgetPaused: ("budget:paused", logging.WARNING),
        ApprovalRequested: ("approval:requested", logging.INFO),
        ApprovalDecided: ("approval:decided", logging.INFO),
        RunCompleted: ("run:completed", logging.INFO),
        RunFailed: ("run:failed", logging.WARNING),
        RunCancelled: ("run:cancelled", logging.INFO),
        RunErrorDetail: ("run.error", logging.WARNING),
    }
    assert {cls: (cls.name, cls.level) for cls in table} == table


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: NodeRetry(max_retries=-1), "NodeRetry.max_retries: an integer >= 0"),
        (lambda: NodeRetry(max_retries=True), "NodeRetry.max_retries: an integer >= 0"),
        (lambda: NodeBreaker(failures=0), "NodeBreaker.failures: an integer >= 1"),
        (lambda: NodeBreaker(failures=0.5), "NodeBreaker.failures: an integer >= 1"),
        (lambda: NodeRetry(backoff=None), "NodeRetry.backoff: a Backoff"),
        (lambda: Step(id="a", writes=5), "keys: a string or a list of strings, got int"),
        (lambda: Llm(id="a", messages=5), "messages: \\(role, text\\) pairs"),
        (lambda: Llm(id="a", messages=[("user",)]), "messages: \\(role, text\\) pairs"),
        (lambda: Workflow(name="w", nodes=5), "nodes: a list of nodes, got int"),
        (lambda: Workflow(name="w", nodes=[], edges=None), "edges: a list of edges, got NoneType"),
        (lambda: NodeBreaker(cooldown=float("nan")), "NodeBreaker.cooldown: a finite number"),
        (lambda: Step(id=""), "node id: a non-empty printable string without '/'"),
        (lambda: Step(id="a/b"), "node id: a non-empty printable string without '/'"),
        (lambda: Step(id=3), "node id: a non-empty printable string"),
    ],
)
def test_bad_node_values_are_node_config_at_once(build: object, message: str) -> None:
    with pytest.raises(ActorError, match=message) as info:
        build()  # type: ignore[operator]
    assert info.value.code is Code.NODE_CONFIG
