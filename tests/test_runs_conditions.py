"""Expression conditions: safe evaluation, `sandbox_error` split on determinism, nothing
of the expression or the state in a message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import ActorError, Code
from supervisors.runs import Condition, Edge, NodeRetry, Workflow
from supervisors.runs.conditions import CONSTANTS, FUNCTIONS, MAX_EXPONENT
from tests.runs_helpers import of, running, step, writer

STATE = {
    "score": 0.7,
    "status": "ok",
    "items": [1, 2, 3],
    "tags": ["urgent"],
    "doc": {"title": "x"},
    "secret_value": "sk-live-123456",
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("score > 0.5 and status == 'ok'", True),
        ("score > 0.9 or status != 'ok'", False),
        ("len(items) >= 3", True),
        ("'urgent' in tags", True),
        ("doc['title'] == 'x'", True),
        ("items[0] + items[2] == 4", True),
        ("not (score < 0)", True),
        ("true and not false", True),
        ("null is None", True),
        ("max(items) == 3 and min(items) == 1 and abs(-2) == 2", True),
        ("any([score > 1, status == 'ok']) and not all([false])", True),
        ("round(score) == 1 and int('3') == 3 and float('1.5') > 1", True),
        ("str(len(tags)) == '1' and bool(items)", True),
        ("'x' if score > 1 else 'y'", None),  # a str: not a boolean
        ("2 ** 10 == 1024", True),
    ],
)
def test_expressions_evaluate_over_the_state(source: str, expected: bool | None) -> None:
    condition = Condition(source)
    if expected is None:
        with pytest.raises(ActorError, match=r"not a boolean \(got str\)"):
            condition(STATE)
    else:
        assert condition(STATE) is expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("nobody > 1", "unknown name"),
        ("'a' + 1", "type error"),
        ("status < 1", "type error"),
        ("status.upper() == 'OK'", "not allowed"),
        ("doc.title == 'x'", "not allowed"),
        ("__import__('os')", "unknown function"),
        ("sum(items) > 1", "unknown function"),
        ("(lambda: True)()", "not allowed"),
        ("'a' * 10**9 == ''", "size overflow"),
        ("2 ** 10**9 > 1", "size overflow"),
        (f"2 ** {MAX_EXPONENT + 1} > 1", "size overflow"),
        ("1 / 0 > 1", "arithmetic error"),
        ("doc['nope'] == 1", "missing key or index"),
        ("items[10] == 1", "missing key or index"),
        ("score", r"not a boolean \(got float\)"),
        ("items", r"not a boolean \(got list\)"),
        ("null", r"not a boolean \(got NoneType\)"),
        ("1", r"not a boolean \(got int\)"),
    ],
)
def test_deterministic_failures_are_fatal_sandbox_errors(source: str, message: str) -> None:
    condition = Condition(source)
    with pytest.raises(
        ActorError, match=f"^\\[sandbox_error\\] condition failed: {message}"
    ) as info:
        condition(STATE)
    assert info.value.code is Code.SANDBOX_ERROR
    assert info.value.retryable is False
    assert info.value.__cause__ is None  # its text would quote the expression
    assert info.value.__context__ is None or info.value.__suppress_context__


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("a >", "syntax error"),
        ("x = 1", "syntax error"),
        ("a; b", "syntax error"),
        ("import os", "syntax error"),
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("x" * 1001, r"too long \(1001 > 1000 characters\)"),
        (b"true", "a condition must be a string expression"),
        (None, "a condition must be a string expression"),
    ],
)
def test_bad_sources_are_refused_when_the_condition_is_made(source: Any, message: str) -> None:
    with pytest.raises(
        ActorError, match=f"^\\[sandbox_error\\] condition failed: {message}"
    ) as info:
        Condition(source)
    assert info.value.code is Code.SANDBOX_ERROR
    assert info.value.retryable is False


def test_a_runaway_evaluation_is_the_one_retryable_failure() -> None:
    heavy = "max([i * j for i in [1] * 80 for j in [1] * 80]) > 0"
    # A time limit no loaded machine reaches where the operations are what is tested.
    with pytest.raises(ActorError, match=r"time limit \(over 10000 operations\)") as info:
        Condition(heavy, time_limit=60.0)(STATE)
    assert (info.value.code, info.value.retryable) == (Code.SANDBOX_ERROR, True)
    with pytest.raises(ActorError, match=r"time limit \(over 0 s\)") as timed:
        Condition(heavy, time_limit=0.0, max_operations=10**9)(STATE)
    assert timed.value.retryable is True
    assert Condition(heavy, max_operations=10**6, time_limit=60.0)(STATE) is True


def test_messages_never_hold_the_expression_or_a_value() -> None:
    for source in ("secret_value == 1 + 'sk'", "secret_value.strip()", "weird_name_42 > 1"):
        with pytest.raises(ActorError) as info:
            Condition(source)(STATE)
        error = info.value
        for text in (str(error), repr(error), error.message, error.user_message):
            assert "sk-live" not in text and "weird_name_42" not in text
            assert source not in text
    assert repr(Condition("secret_value == 'x'")) == "Condition(<19 chars>)"


def test_the_state_shadows_the_constants_and_the_tables_are_pinned() -> None:
    assert Condition("true")({"true": False}) is False
    assert dict(CONSTANTS) == {"true": True, "false": False, "null": None}
    assert sorted(FUNCTIONS) == [
        "abs",
        "all",
        "any",
        "bool",
        "float",
        "int",
        "len",
        "max",
        "min",
        "round",
        "str",
    ]


def test_one_condition_serves_interleaved_states() -> None:
    condition = Condition("score > 0.5")
    answers = [condition({"score": s / 10}) for s in range(10)]
    assert answers == [False] * 6 + [True] * 4


@given(st.text(max_size=60))
def test_any_text_is_a_condition_or_a_sandbox_error(source: str) -> None:
    try:
        condition = Condition(source)
    except ActorError as error:
        assert error.code is Code.SANDBOX_ERROR
        return
    try:
        assert condition(STATE) in (True, False)
    except ActorError as error:
        assert error.code is Code.SANDBOX_ERROR


@pytest.mark.trio
async def test_an_expression_edge_steers_the_run(autojump_clock: Any) -> None:
    wf = Workflow(
        name="w",
        nodes=[
            step("a", writer("n", 5), "n"),
            step("big", writer("b"), "b"),
            step("small", writer("s"), "s"),
        ],
        edges=[
            Edge(source="a", target="big", when="n > 3"),
            Edge(source="a", target="small", when="n <= 3"),
        ],
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert dict(outcome.state) == {"n": 5, "b": 1}


@pytest.mark.trio
async def test_a_fatal_condition_fails_its_source_node_unretried(autojump_clock: Any) -> None:
    calls = writer("n", 5)
    wf = Workflow(
        name="w",
        nodes=[step("a", calls, "n", retry=NodeRetry(max_retries=3)), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b", when="missing > 1")],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "sandbox_error"
    assert outcome.error is not None and outcome.error.node_id == "a"
    assert dict(outcome.state) == {}  # the node's write was not applied
    assert len(calls.calls) == 1
    assert of(run, "node:failed")[0].message == "An expression failed to evaluate in the sandbox."


@pytest.mark.trio
async def test_a_runaway_condition_retries_its_source_node(autojump_clock: Any) -> None:
    calls = writer("n", 5)
    runaway = Condition("max([i * j for i in [1] * 80 for j in [1] * 80]) > 0")
    wf = Workflow(
        name="w",
        nodes=[step("a", calls, "n", retry=NodeRetry(max_retries=2)), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b", when=runaway)],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "sandbox_error"
    assert [r.code for r in of(run, "node:retrying")] == ["sandbox_error", "sandbox_error"]
    assert len(calls.calls) == 3


@pytest.mark.trio
async def test_a_python_predicate_that_raises_fails_its_source_node_internal(
    autojump_clock: Any,
) -> None:
    def broken(state: Any) -> bool:
        raise KeyError("nope")

    wf = Workflow(
        name="w",
        nodes=[step("a", writer("n", 5), "n"), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b", when=broken)],
    )
    async with running() as (_, runs):
        run = await runs.start(wf)
        outcome = await run.wait()
    assert outcome.code == "internal"
    assert outcome.error is not None and outcome.error.node_id == "a"
    assert outcome.error.message == "unclassified KeyError: 'nope'"
    assert isinstance(outcome.error.__cause__, KeyError)
    assert dict(outcome.state) == {}
    assert of(run, "node:failed")[0].node_id == "a"


@pytest.mark.trio
async def test_a_python_predicate_answers_by_truthiness(autojump_clock: Any) -> None:
    wf = Workflow(
        name="w",
        nodes=[
            step("a", writer("n", 5), "n"),
            step("b", writer("b"), "b"),
            step("c", writer("c"), "c"),
        ],
        edges=[
            Edge(source="a", target="b", when=lambda state: [state["n"]]),
            Edge(source="a", target="c", when=lambda state: ""),
        ],
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert dict(outcome.state) == {"n": 5, "b": 1}


@pytest.mark.trio
async def test_a_predicate_that_returns_an_awaitable_is_node_config(autojump_clock: Any) -> None:
    async def later() -> bool:
        return True

    wf = Workflow(
        name="w",
        nodes=[step("a", writer("n", 5), "n"), step("b", writer("b"), "b")],
        edges=[Edge(source="a", target="b", when=lambda state: later())],
    )
    async with running() as (_, runs):
        outcome = await (await runs.start(wf)).wait()
    assert outcome.code == "node_config"
    assert outcome.error is not None and outcome.error.node_id == "a"
    assert outcome.error.message == "node 'a': an edge's when is async; it must answer at once"
    assert dict(outcome.state) == {}
