"""Every error row of the tools front door: exact code, retryable, attempts, the tool's
execution count (0 when it must never run), and the events."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
from actors.events import ToolCallFailed
from actors.testing import capture_events
from actors.tools import Grants, Tool, ToolContext, ToolGroup, tool
from supervisors import Backoff, RetryPolicy
from tests.tools_helpers import TWO_RETRIES, Runs, hosted

CANARY = "sk-CANARY-7f3a9"


def causes(error: BaseException) -> list[type[BaseException]]:
    """The types along ``error``'s cause chain (the actor call adds a link)."""
    chain, seen = [], error.__cause__
    while seen is not None:
        chain.append(type(seen))
        seen = seen.__cause__
    return chain


def counting(runs: Runs, *, name: str = "work", retry: Any = None, **options: Any) -> Tool:
    """A tool that records each run and does what its ``mode`` argument says."""

    async def work(mode: str, context: ToolContext) -> str:
        runs.calls.append({"mode": mode, "key": context.key, "attempt": context.attempt})
        if mode == "ok":
            return "done"
        if mode == "raise":
            raise RuntimeError(f"boom with {CANARY} in /home/secret/path")
        if mode == "busy":
            raise ActorError.from_code(Code.RESOURCE_BUSY, "the lock is held")
        if mode == "bad_request":
            raise ActorError.from_code(Code.BAD_REQUEST, "nope", retryable=False)
        if mode == "sleep":
            await trio.sleep(100)
        if mode == "number":
            return 42  # type: ignore[return-value]  # the output schema says string
        return "done"

    return tool(work, name=name, retry=retry, **options)


async def test_an_unknown_tool_is_tool_not_found(autojump_clock: MockClock) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs)])) as (_, tools):
        with (
            capture_events("tool.call_failed") as failed,
            pytest.raises(ActorError, match=r"no tool named 'nope'") as caught,
        ):
            await tools.call("nope", {})
    assert caught.value.code is Code.TOOL_NOT_FOUND
    assert caught.value.retryable is False
    assert caught.value.tool == "nope"
    assert [(e.tool, e.code, e.attempts) for e in failed] == [("nope", "tool_not_found", 0)]


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"mode": 7}, "$.mode"),
        ({}, "$"),
        ({"mode": "ok", "extra": CANARY}, "$"),
    ],
)
async def test_arguments_failing_the_schema_never_run_the_tool(
    autojump_clock: MockClock, arguments: dict[str, Any], path: str
) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs, retry=TWO_RETRIES)])) as (_, tools):
        with pytest.raises(ActorError) as caught:
            await tools.call("work", arguments)
    error = caught.value
    assert error.code is Code.INPUT_VALIDATION
    assert error.retryable is False
    assert error.message.startswith(path)
    assert CANARY not in str(error) and CANARY not in repr(error)
    assert runs.count == 0


@pytest.mark.parametrize(
    ("grants", "why"),
    [
        (Grants(), "no grant for this tool"),
        (Grants.allow("other"), "no grant for this tool"),
        (
            Grants.allow(work={"properties": {"mode": {"enum": ["ok"]}}}),
            "outside the grant's constraint",
        ),
        (Grants.allow(work=lambda arguments: arguments["mode"] == "ok"), "refused the arguments"),
        (Grants.allow(work=lambda arguments: 1 / 0 > 0), "constraint raised"),
    ],
)
async def test_a_denied_call_is_fatal_never_retried_and_never_runs(
    autojump_clock: MockClock, grants: Grants, why: str
) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs, retry=TWO_RETRIES)])) as (_, tools):
        with (
            capture_events("tool.retry", "tool.call_failed") as events,
            pytest.raises(ActorError, match=why) as caught,
        ):
            await tools.call("work", {"mode": "raise"}, grants=grants)
    error = caught.value
    assert error.code is Code.TOOL_DENIED
    assert error.retryable is False
    assert error.tool == "work"
    assert runs.count == 0
    assert [(e.name, e.code, e.attempts) for e in events] == [
        ("tool.call_failed", "tool_denied", 0)
    ]
    assert trio.current_time() == 0.0


async def test_a_granted_constraint_lets_the_call_through(autojump_clock: MockClock) -> None:
    runs = Runs()
    grants = Grants.allow(work={"properties": {"mode": {"enum": ["ok"]}}})
    async with hosted(ToolGroup("g", [counting(runs)]), grants=grants) as (_, tools):
        assert (await tools.call("work", {"mode": "ok"})).value == "done"
        with pytest.raises(ActorError, match="outside the grant") as caught:
            await tools.call("work", {"mode": "raise"})  # the front door's own grants
    assert caught.value.code is Code.TOOL_DENIED
    assert runs.count == 1


async def test_a_raising_tool_is_tool_failed_retried_by_its_own_policy(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs, retry=TWO_RETRIES)])) as (_, tools):
        with (
            capture_events("tool.retry", "tool.call_failed") as events,
            pytest.raises(ActorError, match=r"tool 'work' raised") as caught,
        ):
            await tools.call("work", {"mode": "raise"}, key="k-1")
    error = caught.value
    assert error.code is Code.TOOL_FAILED
    assert error.retryable is True
    assert error.attempt == 3
    assert error.tool == "work"
    assert RuntimeError in causes(error)
    assert runs.count == 3
    assert [(c["key"], c["attempt"]) for c in runs.calls] == [("k-1", 1), ("k-1", 2), ("k-1", 3)]
    assert [(e.name, getattr(e, "attempt", None), getattr(e, "delay", None)) for e in events] == [
        ("tool.retry", 1, 1.0),
        ("tool.retry", 2, 2.0),
        ("tool.call_failed", None, None),
    ]
    assert events[-1].attempts == 3
    assert trio.current_time() == 3.0


async def test_a_tool_without_a_policy_is_never_retried(autojump_clock: MockClock) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs)])) as (_, tools):
        with pytest.raises(ActorError) as caught:
            await tools.call("work", {"mode": "raise"})
    assert (caught.value.code, caught.value.attempt, runs.count) == (Code.TOOL_FAILED, 1, 1)


async def test_a_raised_actor_error_keeps_its_code(autojump_clock: MockClock) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs, retry=TWO_RETRIES)])) as (_, tools):
        with pytest.raises(ActorError, match="the lock is held") as busy:
            await tools.call("work", {"mode": "busy"})
        assert (busy.value.code, busy.value.retryable, busy.value.attempt) == (
            Code.RESOURCE_BUSY,
            True,
            3,
        )
        with pytest.raises(ActorError, match="nope") as fatal:
            await tools.call("work", {"mode": "bad_request"})
    assert (fatal.value.code, fatal.value.attempt) == (Code.BAD_REQUEST, 1)
    assert runs.count == 4


async def test_its_own_timeout_is_tool_timeout_at_exactly_the_timeout(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs, timeout=1.5, retry=TWO_RETRIES)])) as (
        _,
        tools,
    ):
        with capture_events("tool.retry") as retries, pytest.raises(ActorError) as caught:
            await tools.call("work", {"mode": "sleep"})
    assert (caught.value.code, caught.value.retryable, caught.value.attempt) == (
        Code.TOOL_TIMEOUT,
        True,
        3,
    )
    assert [(e.attempt, e.delay) for e in retries] == [(1, 1.0), (2, 2.0)]
    assert trio.current_time() == 1.5 * 3 + 1.0 + 2.0


async def test_a_tool_raising_while_its_timeout_cancels_it_is_still_tool_timeout(
    autojump_clock: MockClock,
) -> None:
    async def stubborn() -> str:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            raise ValueError(f"cleanup failed at /home/secret {CANARY}") from None
        return "never"

    async with hosted(ToolGroup("g", [tool(stubborn, timeout=2)])) as (_, tools):
        with pytest.raises(ActorError, match="did not finish within its timeout") as caught:
            await tools.call("stubborn", {})
    assert caught.value.code is Code.TOOL_TIMEOUT
    assert ValueError in causes(caught.value)
    assert trio.current_time() == 2.0


async def test_the_callers_timeout_bounds_every_attempt_and_is_not_retried(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs, retry=TWO_RETRIES)])) as (_, tools):
        with pytest.raises(ActorError, match="did not finish within its timeout") as caught:
            await tools.call("work", {"mode": "sleep"}, timeout=2.5)
        assert (caught.value.code, caught.value.retryable, caught.value.attempt) == (
            Code.TOOL_TIMEOUT,
            False,
            1,
        )
        assert trio.current_time() == 2.5
        with pytest.raises(ActorError) as retried:  # 1 s, then 1 s wait: the retry fits
            await tools.call("work", {"mode": "raise"}, timeout=1.5)
    assert (retried.value.code, retried.value.attempt) == (Code.TOOL_FAILED, 2)
    assert runs.count == 3  # the sleep once; the raise twice (no third: 2 s would pass 1.5)


async def test_output_failing_its_schema_is_output_validation_not_retried(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    work = counting(runs, retry=TWO_RETRIES, output_schema={"type": "string"})
    async with hosted(ToolGroup("g", [work])) as (_, tools):
        assert (await tools.call("work", {"mode": "ok"})).value == "done"
        with pytest.raises(ActorError) as caught:
            await tools.call("work", {"mode": "number"})
    assert (caught.value.code, caught.value.retryable) == (Code.OUTPUT_VALIDATION, False)
    assert caught.value.message.startswith("$")
    assert "42" not in caught.value.message
    assert runs.count == 2


async def test_a_declared_tool_no_host_runs_is_internal(autojump_clock: MockClock) -> None:
    runs, idle = Runs(), Runs()
    hosted_group = ToolGroup("g", [counting(runs)])
    missing = ToolGroup("missing", [counting(idle, name="orphan")])
    async with hosted(hosted_group, declared=(missing,)) as (_, tools):
        with pytest.raises(ActorError, match="declared but no host runs it") as caught:
            await tools.call("orphan", {"mode": "ok"})
        assert (await tools.call("work", {"mode": "ok"})).value == "done"
    assert (caught.value.code, caught.value.retryable) == (Code.INTERNAL, False)
    assert idle.count == 0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        ({"name": 7}, "name must be a non-empty string, got int"),
        ({"name": ""}, "name must be a non-empty string, got str"),
        ({"arguments": [1]}, "arguments must be a mapping"),
        ({"timeout": float("nan")}, "timeout must be a finite number of seconds > 0"),
        ({"timeout": -1}, "timeout must be a finite number of seconds > 0"),
        ({"timeout": 0}, "timeout must be a finite number of seconds > 0"),
        ({"timeout": float("inf")}, "timeout must be a finite number of seconds > 0"),
        ({"timeout": True}, "timeout must be a number of seconds > 0 or None, got bool"),
        ({"timeout": "5"}, "timeout must be a number of seconds > 0 or None, got str"),
        ({"grants": ["work"]}, "grants must be a Grants, got list"),
        ({"key": ""}, "key must be a non-empty string"),
    ],
)
async def test_bad_call_arguments_are_input_validation_and_run_nothing(
    autojump_clock: MockClock, call: dict[str, Any], match: str
) -> None:
    runs = Runs()
    options: dict[str, Any] = {"name": "work", "arguments": {"mode": "ok"}} | call
    name, arguments = options.pop("name"), options.pop("arguments")
    async with hosted(ToolGroup("g", [counting(runs)])) as (_, tools):
        with pytest.raises(ActorError, match=match) as caught:
            await tools.call(name, arguments, **options)
    assert caught.value.code is Code.INPUT_VALIDATION
    assert runs.count == 0


async def test_a_huge_finite_timeout_is_accepted(autojump_clock: MockClock) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs)])) as (_, tools):
        result = await tools.call("work", {"mode": "ok"}, timeout=1e300)
        largest = await tools.call("work", {"mode": "ok"}, timeout=sys.float_info.max)
    assert (result.value, result.attempt) == ("done", 1)
    assert (largest.value, largest.attempt) == ("done", 1)  # the largest float is finite


async def test_a_policy_deadline_bounds_the_retries(autojump_clock: MockClock) -> None:
    runs = Runs()
    policy = RetryPolicy(
        max_attempts=5, backoff=Backoff(initial=1, factor=1, max=1, jitter=0), deadline=2.5
    )
    async with hosted(ToolGroup("g", [counting(runs, retry=policy)])) as (_, tools):
        with pytest.raises(ActorError) as caught:
            await tools.call("work", {"mode": "raise"})
    assert (caught.value.code, caught.value.attempt, runs.count) == (Code.TOOL_FAILED, 3, 3)
    assert trio.current_time() == 2.0


# --- pins of the entry's edges (what the mutation runs showed unpinned) -----------------


async def test_a_retry_that_would_start_at_the_timeout_is_not_made(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs, retry=TWO_RETRIES)])) as (_, tools):
        with (
            capture_events("tool.retry") as retries,
            pytest.raises(ActorError, match=r"tool 'work' raised") as caught,
        ):
            await tools.call("work", {"mode": "raise"}, timeout=1.0)  # the 1 s wait ends at 1.0
    assert (caught.value.code, caught.value.attempt, caught.value.tool) == (
        Code.TOOL_FAILED,
        1,
        "work",
    )
    assert (runs.count, list(retries), trio.current_time()) == (1, [], 0.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"name": 7}, "name must be a non-empty string, got int"),
        (
            {"arguments": [1]},
            "arguments must be a mapping (a JSON object), got list",
        ),
        ({"grants": ["work"]}, "grants must be a Grants, got list"),
        ({"timeout": 0.0}, "timeout must be a finite number of seconds > 0"),
        ({"timeout": "1"}, "timeout must be a number of seconds > 0 or None, got str"),
        ({"key": b"k"}, "key must be a non-empty string, got bytes"),
        (
            {"run_id": 5, "node_id": "n", "index": 0},
            "run_id must be a non-empty string without '/' (with run_id, node_id and index), "
            "got int",
        ),
        (
            {"run_id": "r", "node_id": "a/b", "index": 0},
            "node_id must be a non-empty string without '/' (with run_id, node_id and index), "
            "got str",
        ),
        (
            {"run_id": "r", "node_id": "n", "index": "0"},
            "index must be an integer >= 0 (with run_id and node_id), got str",
        ),
        (
            {"run_id": "r", "node_id": "n", "index": 1.0},
            "index must be an integer >= 0 (with run_id and node_id), got float",
        ),
    ],
)
async def test_a_bad_call_says_exactly_what_is_wrong_and_is_never_retryable(
    autojump_clock: MockClock, call: dict[str, Any], message: str
) -> None:
    runs = Runs()
    options: dict[str, Any] = {"name": "work", "arguments": {"mode": "ok"}} | call
    name, arguments = options.pop("name"), options.pop("arguments")
    async with hosted(ToolGroup("g", [counting(runs)])) as (_, tools):
        with capture_events(ToolCallFailed) as events, pytest.raises(ActorError) as caught:
            await tools.call(name, arguments, **options)
    error = caught.value
    assert (error.code, error.message, error.retryable) == (Code.INPUT_VALIDATION, message, False)
    # Every check of the call's own arguments names the tool once the name is known, and
    # the failed call is reported once (issue 28: the timeout and key checks did neither).
    named = None if "name" in call else "work"
    assert error.tool == named
    expected = [] if named is None else [("work", "input_validation", 0)]
    assert [(e.tool, e.code, e.attempts) for e in events] == expected
    assert runs.count == 0


async def test_a_timeout_under_one_second_is_a_timeout_like_any_other(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    async with hosted(ToolGroup("g", [counting(runs)])) as (_, tools):
        done = await tools.call("work", {"mode": "ok"}, timeout=0.5)
        with pytest.raises(ActorError, match="did not finish within its timeout") as caught:
            await tools.call("work", {"mode": "sleep"}, timeout=0.25)
    assert (done.tool, done.value, done.attempt) == ("work", "done", 1)
    assert (caught.value.code, caught.value.attempt) == (Code.TOOL_TIMEOUT, 1)
    assert trio.current_time() == 0.25


async def test_a_result_and_its_output_error_name_the_tool_on_the_first_attempt(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    work = counting(runs, output_schema={"type": "string"})
    async with hosted(ToolGroup("g", [work])) as (_, tools):
        done = await tools.call("work", {"mode": "ok"}, key="k-7")
        with (
            capture_events(ToolCallFailed) as failed,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("work", {"mode": "number"}, key="k-8")
    assert tuple(done) == ("work", "done", (), 1, "k-7")
    error = caught.value
    assert (error.code, error.tool, error.message) == (
        Code.OUTPUT_VALIDATION,
        "work",
        "$: type: expected string, got integer",
    )
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [
        ("work", "output_validation", 1, "k-8")
    ]


async def test_arguments_nested_too_deeply_name_the_tool_and_are_reported_once(
    autojump_clock: MockClock,
) -> None:
    runs = Runs()
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    async with hosted(ToolGroup("g", [counting(runs)])) as (_, tools):
        with capture_events(ToolCallFailed) as events, pytest.raises(ActorError) as caught:
            await tools.call("work", {"mode": "ok", "deep": deep}, key="k-deep")
    error = caught.value
    assert (error.code, error.message, error.tool) == (
        Code.INPUT_VALIDATION,
        "$: the arguments are nested too deeply",
        "work",
    )
    assert [(e.tool, e.code, e.attempts, e.key) for e in events] == [
        ("work", "input_validation", 0, "k-deep")
    ]
    assert runs.count == 0
