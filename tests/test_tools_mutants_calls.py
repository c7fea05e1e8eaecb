"""A call's attempts pinned field by field, with and without a timeout (the two paths of
the front door): each attempt's context, the events (``tool.retry``,
``tool.call_failed``, ``tool.fallback``) with every field, a cancel at each stage, and
what a fallback does and does not do (what the mutation run of supervisors/tools/front.py
showed unpinned)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime
from actors.events import ToolCallFailed, ToolFallback, ToolRetried
from actors.testing import capture_events
from actors.tools import ALL, Grants, ListTools, ToolContext, ToolGroup, ToolHost, ToolInfo, tool
from supervisors import Tools
from tests.tools_helpers import TWO_RETRIES, hosted

#: The two paths of a call: no timeout (the first attempt made apart), and a timeout.
TIMEOUTS = [None, 30.0]


def flaky(seen: list[ToolContext], *, fails: int, name: str = "probe") -> Any:
    """A tool recording each attempt's context, raising on its first ``fails`` attempts."""

    async def run(context: ToolContext) -> str:
        seen.append(context)
        if context.attempt <= fails:
            raise RuntimeError("not yet")
        return f"done at {context.attempt}"

    return tool(run, name=name, retry=TWO_RETRIES)


@pytest.mark.parametrize("timeout", TIMEOUTS)
async def test_every_attempt_gets_its_whole_context(
    autojump_clock: MockClock, timeout: float | None
) -> None:
    seen: list[ToolContext] = []
    async with hosted(ToolGroup("g", [flaky(seen, fails=2)])) as (_, tools):
        by_run = await tools.call("probe", {}, timeout=timeout, run_id="r", node_id="n", index=4)
        by_key = await tools.call("probe", {}, timeout=timeout, key="k-1")
    assert tuple(by_run) == ("probe", "done at 3", (), 3, "r/n/4")
    assert tuple(by_key) == ("probe", "done at 3", (), 3, "k-1")
    assert seen == [
        *(ToolContext("probe", "r/n/4", attempt, "r", "n") for attempt in (1, 2, 3)),
        *(ToolContext("probe", "k-1", attempt, None, None) for attempt in (1, 2, 3)),
    ]
    assert trio.current_time() == 6.0


@pytest.mark.parametrize("timeout", TIMEOUTS)
async def test_a_failed_calls_events_carry_every_field(
    autojump_clock: MockClock, timeout: float | None
) -> None:
    seen: list[ToolContext] = []
    async with hosted(ToolGroup("g", [flaky(seen, fails=5)])) as (_, tools):
        with (
            capture_events(ToolRetried, ToolCallFailed) as events,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("probe", {}, timeout=timeout, run_id="r", node_id="n", index=0)
    assert (caught.value.code, caught.value.tool, caught.value.attempt) == (
        Code.TOOL_FAILED,
        "probe",
        3,
    )
    retried = [e for e in events if isinstance(e, ToolRetried)]
    assert [
        (e.tool, e.attempt, e.error.code, e.error.attempt, e.delay, e.key) for e in retried
    ] == [
        ("probe", 1, Code.TOOL_FAILED, 1, 1.0, "r/n/0"),
        ("probe", 2, Code.TOOL_FAILED, 2, 2.0, "r/n/0"),
    ]
    failed = [e for e in events if isinstance(e, ToolCallFailed)]
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [
        ("probe", "tool_failed", 3, "r/n/0")
    ]
    assert events[-1] is failed[0]


@pytest.mark.parametrize("timeout", TIMEOUTS)
async def test_a_cancel_is_reported_with_the_attempts_made(
    autojump_clock: MockClock, timeout: float | None
) -> None:
    seen: list[ToolContext] = []

    async def slow(context: ToolContext) -> str:
        seen.append(context)
        if context.attempt == 1 and context.key == "k-retry":
            raise RuntimeError("once")
        await trio.sleep(100)
        return "late"

    group = ToolGroup("g", [tool(slow, retry=TWO_RETRIES)])
    async with hosted(group) as (_, tools):
        with capture_events(ToolCallFailed) as failed:
            with trio.move_on_after(1.5):
                await tools.call("slow", {}, timeout=timeout, key="k-first")
            with trio.move_on_after(1.5):  # attempt 1 fails, the retry starts at +1 s
                await tools.call("slow", {}, timeout=timeout, key="k-retry")
            with trio.move_on_after(0.5):  # cancelled in the wait before the retry
                await tools.call("slow", {}, timeout=timeout, key="k-retry")
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [
        ("slow", "cancelled", 1, "k-first"),
        ("slow", "cancelled", 2, "k-retry"),
        ("slow", "cancelled", 1, "k-retry"),
    ]
    assert [(c.key, c.attempt) for c in seen] == [
        ("k-first", 1),
        ("k-retry", 1),
        ("k-retry", 2),
        ("k-retry", 1),
    ]
    assert trio.current_time() == 3.5


async def test_the_calls_timeout_says_so_exactly(autojump_clock: MockClock) -> None:
    async def nap(context: ToolContext) -> str:
        if context.key == "k-2":
            await trio.sleep(100)
        return f"done at {context.attempt}"

    async with hosted(ToolGroup("g", [tool(nap, retry=TWO_RETRIES)])) as (_, tools):
        with capture_events(ToolCallFailed) as failed, pytest.raises(ActorError) as caught:
            await tools.call("nap", {}, timeout=2.0, key="k-2")
        done = await tools.call("nap", {}, timeout=2.0, key="k-3")
    error = caught.value
    assert (error.code, error.message, error.retryable, error.tool, error.attempt) == (
        Code.TOOL_TIMEOUT,
        "the call of 'nap' did not finish within its timeout",
        False,
        "nap",
        1,
    )
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [
        ("nap", "tool_timeout", 1, "k-2")
    ]
    assert tuple(done) == ("nap", "done at 1", (), 1, "k-3")


@tool
async def echo(text: str) -> str:
    return f"builtin {text}"


@pytest.mark.parametrize(
    ("call", "code"),
    [
        ({"grants": Grants.allow("other")}, "tool_denied"),
        ({"arguments": {"text": 5}}, "input_validation"),
        ({"name": "nope"}, "tool_not_found"),
    ],
)
async def test_a_call_refused_before_any_attempt_is_reported_with_its_key(
    autojump_clock: MockClock, call: dict[str, Any], code: str
) -> None:
    options: dict[str, Any] = {"name": "echo", "arguments": {"text": "x"}} | call
    name, arguments = options.pop("name"), options.pop("arguments")
    async with hosted(ToolGroup("g", [echo])) as (_, tools):
        with capture_events(ToolCallFailed) as failed, pytest.raises(ActorError) as caught:
            await tools.call(name, arguments, key="k-5", **options)
    assert (str(caught.value.code), caught.value.tool) == (code, name)
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [(name, code, 0, "k-5")]


class Remote(Actor):
    """An MCP host listing ``echo`` and answering every call with ``code``."""

    def __init__(self, code: Code) -> None:
        self.code = code
        self.calls = 0

    async def handle(self, message: Any) -> Any:
        if isinstance(message, ListTools):
            return (ToolInfo("echo", "remote", {"type": "object"}, None, "remote"),)
        self.calls += 1
        return fail(self.code, "the remote said no", retryable=True)


async def front_door(code: Code, runtime: Any, builtin: Any, **options: Any) -> Tools:
    remote = await runtime.spawn(lambda: Remote(code))
    local = await runtime.spawn(lambda: builtin)
    group = ToolGroup("local", list(builtin.tools.values()))
    tools = Tools([(group, local)], mcp=[("remote", remote)], grants=ALL, **options)
    await tools.refresh()
    return tools


async def test_only_an_unreachable_server_falls_back(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        failing = await front_door(Code.MCP_TOOL_FAILED, runtime, ToolHost([echo]))
        with capture_events(ToolFallback) as fell, pytest.raises(ActorError) as caught:
            await failing.call("echo", {"text": "x"})
        unreachable = await front_door(Code.MCP_GATEWAY, runtime, ToolHost([echo]))
        with capture_events(ToolFallback) as fell_back:
            result = await unreachable.call("echo", {"text": "x"}, timeout=5.0)
        kept = await front_door(Code.MCP_GATEWAY, runtime, ToolHost([echo]), fallback=False)
        with pytest.raises(ActorError) as gateway:
            await kept.call("echo", {"text": "x"})
    assert (caught.value.code, caught.value.tool, caught.value.attempt) == (
        Code.MCP_TOOL_FAILED,
        "echo",
        1,
    )
    assert list(fell) == []
    assert (result.value, result.attempt) == ("builtin x", 1)
    assert [(e.tool, e.source, e.code) for e in fell_back] == [("echo", "remote", "mcp_gateway")]
    assert (gateway.value.code, gateway.value.attempt, kept.fallback) == (
        Code.MCP_GATEWAY,
        1,
        False,
    )


async def test_after_a_fallback_the_builtin_retries_by_its_own_policy(
    autojump_clock: MockClock,
) -> None:
    seen: list[ToolContext] = []
    builtin = flaky(seen, fails=5, name="echo")
    async with open_runtime() as runtime:
        tools = await front_door(Code.MCP_GATEWAY, runtime, ToolHost([builtin]))
        with (
            capture_events(ToolFallback, ToolRetried, ToolCallFailed) as events,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("echo", {}, key="k-7")
    assert (caught.value.code, caught.value.attempt, caught.value.tool) == (
        Code.TOOL_FAILED,
        3,
        "echo",
    )
    assert [(c.key, c.attempt) for c in seen] == [("k-7", 1), ("k-7", 2), ("k-7", 3)]
    assert [
        (e.name, getattr(e, "attempt", None), getattr(e, "attempts", None)) for e in events
    ] == [
        ("tool.fallback", None, None),
        ("tool.retry", 1, None),
        ("tool.retry", 2, None),
        ("tool.call_failed", None, 3),
    ]
    assert trio.current_time() == 3.0


class Naming(Actor):
    """A built-in group's host (not a ``ToolHost``) whose answer names another tool."""

    async def handle(self, message: Any) -> Any:
        return fail(Code.TOOL_FAILED, "failed", retryable=False, tool="other")


async def test_the_front_door_keeps_the_tool_a_hosts_answer_names(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        host = await runtime.spawn(Naming)
        tools = Tools([(ToolGroup("g", [echo]), host)], grants=ALL)
        with capture_events(ToolCallFailed) as failed, pytest.raises(ActorError) as caught:
            await tools.call("echo", {"text": "x"}, key="k-8")
    assert (caught.value.code, caught.value.tool, caught.value.attempt) == (
        Code.TOOL_FAILED,
        "other",
        1,
    )
    # The event names the tool called: it is the front door's own record of the call.
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [
        ("echo", "tool_failed", 1, "k-8")
    ]
