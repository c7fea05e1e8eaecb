"""The first attempt of a tool call is made by one of two methods of the front door — the
common call (no ``timeout=``, a host running the tool) without the retry loop's
scaffolding, any other in the retry loop — and both must behave as one: the retry
policy's ``deadline`` counts from the first attempt's start, and an attempt whose copy
of the arguments fails names its tool and is reported once. Each case runs both ways
and asserts the same outcome (the first version counted the deadline from the end of
the first attempt on the common path, and left ``tool`` unset with no event when its
copy failed)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
from actors.events import ToolCallFailed, ToolRetried
from actors.testing import capture_events
from actors.tools import ToolContext, ToolGroup, tool
from supervisors import Backoff, RetryPolicy
from tests.test_tools_mutants_copies import Fragile
from tests.tools_helpers import hosted

#: Up to 5 attempts, 1 s apart, within 2.5 s of the first attempt's start.
POLICY = RetryPolicy(
    max_attempts=5, backoff=Backoff(initial=1.0, factor=1.0, max=1.0, jitter=0.0), deadline=2.5
)


def slow_failing(started: list[float], *, seconds: float) -> Any:
    async def run(context: ToolContext) -> str:
        started.append(trio.current_time())
        await trio.sleep(seconds)
        raise RuntimeError("down")

    return tool(run, name="slow", retry=POLICY)


@pytest.mark.parametrize("timeout", [None, 100.0], ids=["common-call", "with-timeout"])
@pytest.mark.parametrize(
    ("seconds", "attempts"),
    [(2.0, 1), (0.5, 2), (0.0, 3), (1.5, 1), (1.2, 2)],
    ids=["2s", "0.5s", "instant", "1.5s", "1.2s"],
)
async def test_the_retry_deadline_counts_from_the_first_attempts_start(
    autojump_clock: MockClock, timeout: float | None, seconds: float, attempts: int
) -> None:
    started: list[float] = []
    async with hosted(ToolGroup("g", [slow_failing(started, seconds=seconds)])) as (_, tools):
        with (
            capture_events(ToolRetried, ToolCallFailed) as events,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("slow", {}, timeout=timeout, key="k")
    # An attempt starts only when it can start before the deadline: 2.5 s after the first.
    assert len(started) == attempts
    assert all(at - started[0] < 2.5 for at in started)
    assert caught.value.code is Code.TOOL_FAILED
    assert caught.value.tool == "slow"
    assert [type(e) for e in events] == [ToolRetried] * (attempts - 1) + [ToolCallFailed]
    assert events[-1].attempts == attempts  # type: ignore[attr-defined]


def taking(seen: list[int]) -> Any:
    async def run(context: ToolContext, **arguments: Any) -> str:
        seen.append(context.attempt)
        return "done"

    return tool(run, name="take", input_schema={"type": "object"})


@pytest.mark.parametrize("timeout", [None, 30.0], ids=["common-call", "with-timeout"])
async def test_a_first_attempt_whose_copy_fails_names_its_tool_and_is_reported_once(
    autojump_clock: MockClock, timeout: float | None
) -> None:
    seen: list[int] = []
    value = Fragile(1)  # the call's own snapshot only: the attempt's copy fails
    async with hosted(ToolGroup("g", [taking(seen)])) as (_, tools):
        with (
            capture_events(ToolRetried, ToolCallFailed) as events,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("take", {"v": value}, timeout=timeout, key="k-1")
    error = caught.value
    assert (error.code, error.message, error.retryable, error.tool) == (
        Code.INPUT_VALIDATION,
        "$: the arguments are nested too deeply",
        False,
        "take",
    )
    assert [(type(e), e.tool, e.code, e.attempts, e.key) for e in events] == [  # type: ignore[attr-defined]
        (ToolCallFailed, "take", "input_validation", 1, "k-1")
    ]
    assert seen == []  # the tool never ran
    assert trio.current_time() == 0.0


@pytest.mark.parametrize("timeout", [None, 30.0], ids=["common-call", "with-timeout"])
async def test_a_failed_copy_under_a_retry_deadline_names_its_tool_and_is_reported_once(
    autojump_clock: MockClock, timeout: float | None
) -> None:
    seen: list[int] = []

    async def run(context: ToolContext, **arguments: Any) -> str:
        seen.append(context.attempt)
        return "done"

    deadlined = tool(run, name="take", retry=POLICY, input_schema={"type": "object"})
    async with hosted(ToolGroup("g", [deadlined])) as (_, tools):
        with (
            capture_events(ToolRetried, ToolCallFailed) as events,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("take", {"v": Fragile(1)}, timeout=timeout, key="k-2")
    assert (caught.value.code, caught.value.tool) == (Code.INPUT_VALIDATION, "take")
    assert [(type(e), e.attempts, e.key) for e in events] == [  # type: ignore[attr-defined]
        (ToolCallFailed, 1, "k-2")
    ]
    assert seen == []
