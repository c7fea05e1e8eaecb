"""What a hostile pass found, pinned: tools and arguments that misbehave get a typed
answer, and nothing they do reaches past their own call."""

from __future__ import annotations

import collections.abc
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime
from actors.testing import capture_events
from actors.tools import ALL, Grants, Partial, RunTool, ToolGroup, tool
from supervisors import Tools
from tests.tools_helpers import TWO_RETRIES, hosted


async def test_a_tool_calling_sys_exit_fails_its_call_not_the_daemon(
    autojump_clock: MockClock,
) -> None:
    @tool
    async def leave() -> str:
        raise SystemExit(3)

    @tool
    async def stay() -> str:
        return "here"

    async with hosted(ToolGroup("g", [leave, stay], concurrency=1)) as (tree, tools):
        with pytest.raises(ActorError, match="tool 'leave' raised") as caught:
            await tools.call("leave", {})
        assert caught.value.code is Code.TOOL_FAILED
        assert (await tools.call("stay", {})).value == "here"
        assert tree.ref("tools.g.0").restarts == 0


class Arguments(collections.abc.Mapping[str, Any]):
    """A read-only mapping that is not a dict."""

    def __init__(self, **values: Any) -> None:
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@tool
async def echo(text: str) -> str:
    return text


@tool
async def anything(value: Any) -> Any:
    return value


async def test_non_json_arguments_and_outputs_are_typed(autojump_clock: MockClock) -> None:
    @tool(output_schema={"type": "object", "additionalProperties": {"type": "integer"}})
    async def keyed() -> Any:
        return {1: 2}

    async with hosted(ToolGroup("g", [echo, keyed])) as (_, tools):
        assert (await tools.call("echo", Arguments(text="a mapping"))).value == "a mapping"
        with pytest.raises(ActorError, match=r"\$: not a JSON value") as caught:
            await tools.call("echo", {1: "x"})  # type: ignore[dict-item]
        assert caught.value.code is Code.INPUT_VALIDATION
        with pytest.raises(ActorError, match=r"\$: not a JSON value") as output:
            await tools.call("keyed", {})
        assert output.value.code is Code.OUTPUT_VALIDATION


async def test_a_nonsense_retry_after_from_a_tool_falls_back_to_the_schedule(
    autojump_clock: MockClock,
) -> None:
    @tool(retry=TWO_RETRIES)
    async def hinted() -> str:
        raise ActorError.from_code(Code.RESOURCE_BUSY, "busy", retry_after=float("nan"))

    async with hosted(ToolGroup("g", [hinted])) as (_, tools):
        with capture_events("tool.retry") as retries, pytest.raises(ActorError):
            await tools.call("hinted", {})
    assert [e.delay for e in retries] == [1.0, 2.0]  # the schedule, not NaN
    assert ActorError.from_code(Code.TOOL_FAILED, retry_after=-1).retry_after is None
    assert ActorError.from_code(Code.TOOL_FAILED, retry_after="3").retry_after is None
    assert ActorError.from_code(Code.TOOL_FAILED, retry_after=10**400).retry_after == float("inf")
    assert ActorError.from_code(Code.TOOL_FAILED, retry_after=0).retry_after == 0.0


def test_what_cannot_be_a_tool_is_refused_when_defined() -> None:
    def plain(x: int) -> int:
        return x

    with pytest.raises(ActorError, match=r"Tool\.fn must be an async function") as sync:
        tool(plain)
    with pytest.raises(ActorError, match=r"Tool\.name must be 1-64") as newline:
        tool(echo.fn, name="echo\n")
    with pytest.raises(ActorError, match="finite number of seconds") as huge:
        tool(echo.fn, timeout=10**400)
    assert {sync.value.code, newline.value.code, huge.value.code} == {Code.CONFIG_INVALID}


async def test_what_a_tool_puts_in_its_own_error_is_its_own_failure(
    autojump_clock: MockClock,
) -> None:
    @tool
    async def forger() -> str:
        raise ActorError.from_code(Code.RESOURCE_BUSY, "busy", tool="someone-else")

    @tool
    async def fake_cancel() -> str:
        raise ActorError.from_code(Code.CANCELLED, "not really")

    @tool
    async def untyped() -> Any:
        return Partial({"ok": 1}, ["a string is not a typed error"])

    async with hosted(ToolGroup("g", [forger, fake_cancel, untyped])) as (_, tools):
        with pytest.raises(ActorError) as forged:
            await tools.call("forger", {})
        with pytest.raises(ActorError) as cancelled:
            await tools.call("fake_cancel", {})
        with pytest.raises(ActorError) as bad_partial:
            await tools.call("untyped", {})
    assert (forged.value.code, forged.value.tool) == (Code.RESOURCE_BUSY, "forger")
    assert (cancelled.value.code, cancelled.value.tool) == (Code.TOOL_FAILED, "fake_cancel")
    assert (bad_partial.value.code, bad_partial.value.tool) == (Code.TOOL_FAILED, "untyped")


async def test_a_result_after_its_own_timeout_is_too_late(autojump_clock: MockClock) -> None:
    @tool(timeout=1)
    async def swallow() -> str:
        try:
            await trio.sleep(10)
        except trio.Cancelled:
            return "made it anyway"
        return "in time"

    async with hosted(ToolGroup("g", [swallow])) as (_, tools):
        with pytest.raises(ActorError, match="did not finish within its timeout") as caught:
            await tools.call("swallow", {})
    assert caught.value.code is Code.TOOL_TIMEOUT
    assert trio.current_time() == 1.0


async def test_arguments_that_do_not_fit_the_function_are_not_a_tool_failure(
    autojump_clock: MockClock,
) -> None:
    runs: list[int] = []

    async def strict(a: int) -> int:
        runs.append(a)
        return a

    loose = tool(strict, input_schema={"type": "object"}, retry=TWO_RETRIES)
    async with hosted(ToolGroup("g", [loose])) as (_, tools):
        with pytest.raises(
            ActorError, match="do not fit the parameters of tool 'strict'"
        ) as caught:
            await tools.call("strict", {"a": 1, "b": 2})
    assert (caught.value.code, caught.value.retryable, caught.value.attempt) == (
        Code.INPUT_VALIDATION,
        False,
        1,
    )
    assert runs == []


async def test_each_attempt_and_the_caller_keep_their_own_arguments(
    autojump_clock: MockClock,
) -> None:
    seen: list[list[Any]] = []

    @tool(retry=TWO_RETRIES)
    async def meddle(items: list[int]) -> int:
        seen.append(list(items))
        items.append(99)
        raise RuntimeError("and fail")

    mine = {"items": [1, 2]}
    async with hosted(ToolGroup("g", [meddle])) as (_, tools):
        with pytest.raises(ActorError):
            await tools.call("meddle", mine)
    assert seen == [[1, 2], [1, 2], [1, 2]]
    assert mine == {"items": [1, 2]}


async def test_arguments_changed_after_the_check_are_not_what_runs(
    autojump_clock: MockClock,
) -> None:
    @tool
    async def write(path: str) -> str:
        return path

    grants = Grants.allow(write={"properties": {"path": {"pattern": "^/tmp/"}}})
    async with hosted(ToolGroup("g", [write])) as (_, tools):
        mine = {"path": "/tmp/ok"}
        pending = tools.call("write", mine, grants=grants)  # checked here
        mine["path"] = "/etc/shadow"  # after the check, before the run
        assert (await pending).value == "/tmp/ok"
        with pytest.raises(ActorError) as caught:
            await tools.call("write", mine, grants=grants)
    assert caught.value.code is Code.TOOL_DENIED


async def test_arguments_nested_too_deep_are_input_validation(autojump_clock: MockClock) -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    async with hosted(ToolGroup("g", [anything])) as (_, tools):
        with pytest.raises(ActorError, match=r"\$: the arguments are nested too deeply") as caught:
            await tools.call("anything", {"value": deep}, grants=ALL)
    assert caught.value.code is Code.INPUT_VALIDATION


async def test_huge_numbers_and_slashes_are_refused_before_anything_runs(
    autojump_clock: MockClock,
) -> None:
    async with hosted(ToolGroup("g", [echo])) as (_, tools):
        with pytest.raises(ActorError, match="finite number of seconds") as huge:
            await tools.call("echo", {"text": "x"}, timeout=10**400)
        with pytest.raises(ActorError, match=r"without '/'") as slash:
            await tools.call("echo", {"text": "x"}, run_id="a/b", node_id="c", index=0)
    assert {huge.value.code, slash.value.code} == {Code.INPUT_VALIDATION}


async def test_an_already_cancelled_caller_sends_nothing(autojump_clock: MockClock) -> None:
    runs: list[int] = []

    @tool
    async def never() -> str:
        runs.append(1)
        return "x"

    async with hosted(ToolGroup("g", [never])) as (_, tools):
        with capture_events("tool.call_failed") as failed, trio.CancelScope() as scope:
            scope.cancel()
            await tools.call("never", {})
        await trio.sleep(1)
    assert scope.cancelled_caught
    assert runs == []  # the attempt began, and was cancelled before any host ran it
    assert [(e.code, e.attempts) for e in failed] == [("cancelled", 1)]


# --- pins of the argument copies (what the mutation runs showed unpinned) ---------------


async def test_arguments_nested_too_deep_say_so_exactly_and_are_fatal(
    autojump_clock: MockClock,
) -> None:
    deep: Any = {}
    for _ in range(5000):
        deep = {"d": deep}
    async with hosted(ToolGroup("g", [anything])) as (_, tools):
        with pytest.raises(ActorError) as caught:
            await tools.call("anything", {"value": deep})
    error = caught.value
    assert (error.code, error.message, error.retryable) == (
        Code.INPUT_VALIDATION,
        "$: the arguments are nested too deeply",
        False,
    )


class Recorder(Actor):
    """A host that keeps the arguments object of each attempt it is sent, failing (retryably)
    all but the third."""

    seen: list[Mapping[str, Any]] = []

    async def handle(self, message: Any) -> Any:
        assert isinstance(message, RunTool)
        Recorder.seen.append(message.arguments)
        if message.context.attempt < 3:
            return fail(Code.TOOL_FAILED, "again", retryable=True)
        return "ok"


async def never_run(value: Any) -> str:
    return "never run: its host is the Recorder"


probe = tool(never_run, name="probe", retry=TWO_RETRIES)


@pytest.mark.parametrize(("value", "nested"), [("flat", False), (5, False), ([1], True)])
async def test_flat_arguments_are_copied_once_a_call_nested_ones_once_an_attempt(
    autojump_clock: MockClock, value: Any, nested: bool
) -> None:
    Recorder.seen = []
    mine = {"value": value}
    async with open_runtime() as runtime:
        host = await runtime.spawn(Recorder)
        tools = Tools([(ToolGroup("g", [probe]), host)], grants=ALL)
        result = await tools.call("probe", mine)
    assert (result.value, result.attempt) == ("ok", 3)
    first, second, third = Recorder.seen
    assert first == second == third == mine
    assert all(seen is not mine for seen in Recorder.seen)
    assert (first is second, second is third) == (not nested, not nested)
    assert (first["value"] is second["value"]) is (not nested)
