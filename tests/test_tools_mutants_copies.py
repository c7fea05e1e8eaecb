"""An attempt whose own copy of the arguments cannot be made: the call ends as
``input_validation`` that still names its tool and is reported as one
``tool.call_failed`` event (the retry loop's own error path, which the mutation run of
supervisors/tools/front.py showed unpinned: ``error.tool = name`` in ``_attempts``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
from actors.events import ToolCallFailed, ToolRetried
from actors.testing import capture_events
from actors.tools import ToolContext, ToolGroup, tool
from tests.tools_helpers import TWO_RETRIES, hosted


class Fragile:
    """An argument value that can be deep-copied ``copies`` times; the next copy raises
    ``RecursionError`` (as a structure nested too deeply does). A copy is the value
    itself, so every copy counts on the one object."""

    def __init__(self, copies: int) -> None:
        self.left = copies
        self.copied = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> Fragile:
        if self.copied >= self.left:
            raise RecursionError("maximum recursion depth exceeded")
        self.copied += 1
        return self


def recording(seen: list[int], *, fails: int) -> Any:
    """A tool taking any object, recording each attempt, raising on its first ``fails``."""

    async def run(context: ToolContext, **arguments: Any) -> str:
        seen.append(context.attempt)
        if context.attempt <= fails:
            raise RuntimeError("not yet")
        return "done"

    return tool(run, name="take", retry=TWO_RETRIES, input_schema={"type": "object"})


def test_fragile_copies_as_documented() -> None:
    value = Fragile(1)
    assert copy.deepcopy({"v": value})["v"] is value
    with pytest.raises(RecursionError):
        copy.deepcopy(value)
    assert value.copied == 1


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_copy_failing_at_a_retry_ends_the_call_naming_the_tool(
    autojump_clock: MockClock, timeout: float | None
) -> None:
    seen: list[int] = []
    value = Fragile(2)  # the call's snapshot and the first attempt's copy
    async with hosted(ToolGroup("g", [recording(seen, fails=1)])) as (_, tools):
        with (
            capture_events(ToolRetried, ToolCallFailed) as events,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("take", {"v": value}, timeout=timeout, key="k-2")
    error = caught.value
    assert (error.code, error.message, error.tool) == (
        Code.INPUT_VALIDATION,
        "$: the arguments are nested too deeply",
        "take",
    )
    retried = [(e.tool, e.attempt, e.delay, e.key) for e in events if isinstance(e, ToolRetried)]
    failed = [(e.tool, e.code, e.attempts, e.key) for e in events if isinstance(e, ToolCallFailed)]
    assert retried == [("take", 1, 1.0, "k-2")]
    assert failed == [("take", "input_validation", 2, "k-2")]
    assert (seen, value.copied, trio.current_time()) == ([1], 2, 1.0)
