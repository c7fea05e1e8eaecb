"""The front door's parts: grants built and read, keys, the worker pool, a host that
lacks a registered tool, and what a bad configuration says."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime
from actors.testing import capture_events
from actors.tools import ALL, NONE, Grants, ListTools, ToolGroup, ToolHost, ToolInfo, tool
from supervisors import Tools
from tests.tools_helpers import TWO_RETRIES, hosted


@tool
async def nap(seconds: float) -> float:
    await trio.sleep(seconds)
    return trio.current_time()


@tool
async def echo(text: str) -> str:
    return text


def test_grants_read_as_documented() -> None:
    grants = Grants.allow("a", b={"type": "object"})
    assert grants.rule_for("a") == (True, None)
    assert grants.rule_for("b") == (True, {"type": "object"})
    assert grants.rule_for("c") == (False, None)
    assert Grants.of(["x", "y"]).tools == {"x": None, "y": None}
    assert ALL.rule_for("anything") == (True, None)
    assert NONE.rule_for("anything") == (False, None)
    assert Grants.allow().tools == {}


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Grants(["a"]), "Grants.tools must be a mapping of tool names, got list"),
        (lambda: Grants({1: None}), "Grants.tools keys must be tool names"),
        (
            lambda: Grants({"a": 5}),
            r"Grants.tools\['a'\] must be None, a JSON Schema or a plain predicate, got int",
        ),
    ],
)
def test_a_bad_grant_is_config_invalid(build: Any, match: str) -> None:
    with pytest.raises(ActorError, match=match) as caught:
        build()
    assert caught.value.code is Code.CONFIG_INVALID


def test_an_invalid_constraint_schema_is_config_invalid_when_the_grants_are_made() -> None:
    with pytest.raises(ActorError, match="the grant of 'echo'") as caught:
        Grants.allow(echo={"type": "no-such-type"})
    assert caught.value.code is Code.CONFIG_INVALID


async def noop(arguments: Any) -> bool:
    return True


def test_an_async_predicate_is_refused() -> None:
    with pytest.raises(ActorError, match="a plain predicate, got function") as caught:
        Grants.allow(echo=noop)
    assert caught.value.code is Code.CONFIG_INVALID


async def test_grants_take_what_they_are_given_as_it_is_then(autojump_clock: MockClock) -> None:
    table: dict[str, Any] = {"echo": {"properties": {"text": {"enum": ["hi"]}}}}
    grants = Grants(table)
    table["echo"]["properties"]["text"]["enum"].append("bye")  # changes nothing
    table["other"] = None
    with pytest.raises(TypeError):
        grants.tools["sneaky"] = None  # type: ignore[index]
    assert grants.rule_for("other") == (False, None)
    async with hosted(ToolGroup("g", [echo])) as (_, tools):
        assert (await tools.call("echo", {"text": "hi"}, grants=grants)).value == "hi"
        with pytest.raises(ActorError, match="outside the grant's constraint"):
            await tools.call("echo", {"text": "bye"}, grants=grants)


async def test_a_predicate_raising_a_base_exception_denies(autojump_clock: MockClock) -> None:
    class Odd(BaseException):
        pass

    def predicate(arguments: Any) -> bool:
        raise Odd("nope")

    async with hosted(ToolGroup("g", [echo])) as (_, tools):
        with pytest.raises(ActorError, match="constraint raised") as caught:
            await tools.call("echo", {"text": "hi"}, grants=Grants.allow(echo=predicate))
    assert caught.value.code is Code.TOOL_DENIED


async def test_a_truthy_constraint_answer_that_is_not_true_denies(
    autojump_clock: MockClock,
) -> None:
    async with hosted(ToolGroup("g", [echo])) as (_, tools):
        with pytest.raises(ActorError, match="refused the arguments") as caught:
            await tools.call("echo", {"text": "hi"}, grants=Grants.allow(echo=lambda _: 1))
    assert caught.value.code is Code.TOOL_DENIED


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"run_id": "r"}, "node_id must be a non-empty string"),
        ({"run_id": "r", "node_id": "n"}, "index must be an integer >= 0"),
        ({"run_id": "r", "node_id": "n", "index": -1}, "index must be an integer >= 0"),
        ({"run_id": "r", "node_id": "n", "index": True}, "index must be an integer >= 0"),
        ({"run_id": "", "node_id": "n", "index": 0}, "run_id must be a non-empty string"),
        ({"node_id": "n", "index": 0}, "run_id must be a non-empty string"),
        ({"key": 7}, "key must be a non-empty string, got int"),
    ],
)
async def test_a_partial_or_bad_key_is_input_validation(
    autojump_clock: MockClock, options: dict[str, Any], match: str
) -> None:
    async with hosted(ToolGroup("g", [echo])) as (_, tools):
        with pytest.raises(ActorError, match=match) as caught:
            await tools.call("echo", {"text": "hi"}, **options)
    assert caught.value.code is Code.INPUT_VALIDATION


async def test_the_key_of_a_run_index_zero(autojump_clock: MockClock) -> None:
    async with hosted(ToolGroup("g", [echo])) as (_, tools):
        result = await tools.call("echo", {"text": "hi"}, run_id="r", node_id="n", index=0)
    assert result.key == "r/n/0"


async def test_calls_spread_over_the_least_busy_workers(autojump_clock: MockClock) -> None:
    ends: list[float] = []
    async with hosted(ToolGroup("g", [nap], concurrency=3)) as (_, tools):

        async def one(seconds: float) -> None:
            ends.append((await tools.call("nap", {"seconds": seconds})).value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, 1.0)
            await trio.lowlevel.checkpoint()
            nursery.start_soon(one, 3.0)
            await trio.lowlevel.checkpoint()
            nursery.start_soon(one, 2.0)
            await trio.sleep(0.5)
            nursery.start_soon(one, 1.0)  # the least busy: the first worker, free at 1.0
        assert sorted(ends) == [1.0, 2.0, 2.0, 3.0]
        # Nothing left busy: four more at once take the three workers, then the first.
        ends.clear()
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(one, 1.0)
        assert sorted(end - started for end in ends) == [1.0, 1.0, 1.0, 2.0]


async def test_a_host_without_a_registered_tool_is_internal(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        host = await runtime.spawn(lambda: ToolHost([nap]))
        tools = Tools([(ToolGroup("g", [echo]), host)], grants=ALL)
        with pytest.raises(ActorError, match="registered but its host does not have it") as caught:
            await tools.call("echo", {"text": "hi"})
    assert (caught.value.code, caught.value.retryable, caught.value.tool) == (
        Code.INTERNAL,
        False,
        "echo",
    )


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Tools(grants="all"), "Tools grants must be a Grants, got str"),
        (lambda: Tools([("g", None)]), r"Tools groups must be \(ToolGroup, refs\) pairs"),
        (
            lambda: Tools([(ToolGroup("a", [echo]), None), (ToolGroup("b", [echo]), None)]),
            "two built-in tools are named 'echo'",
        ),
        (
            lambda: Tools([(ToolGroup("a", [tool(echo.fn, name="e2", retry=3)]), None)]),
            "Tools tool 'e2' retry must be a RetryPolicy or None, got int",
        ),
        (lambda: ToolGroup("g", []), "ToolGroup.tools must not be empty"),
        (lambda: ToolGroup("g", [echo], concurrency=0), "from 1 to 1024"),
        (lambda: ToolGroup("g", [echo], concurrency=True), "got bool"),
        (lambda: ToolGroup("g", ["echo"]), r"ToolGroup.tools\[0\] must be a Tool, got str"),
        (lambda: ToolHost([echo, echo]), "two tools named 'echo'"),
        (lambda: ToolGroup("g", [echo, echo]), "ToolGroup 'g' has two tools named 'echo'"),
        (lambda: ToolHost(["x"]), r"ToolHost tools\[0\] must be a Tool, got str"),
        (lambda: tool(echo.fn, name="bad name"), "Tool.name must be 1-64 letters"),
        (lambda: tool(echo.fn, timeout=0), "Tool.timeout must be a finite number"),
        (lambda: tool(echo.fn, timeout="1"), "Tool.timeout must be a number of seconds"),
        (lambda: tool(echo.fn, output_schema=[]), "Tool.output_schema must be a JSON Schema"),
    ],
)
def test_a_bad_configuration_is_config_invalid_naming_the_field(build: Any, match: str) -> None:
    with pytest.raises(ActorError, match=match) as caught:
        build()
    assert caught.value.code is Code.CONFIG_INVALID


async def test_a_bad_message_to_a_host_is_input_validation(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        host = await runtime.spawn(lambda: ToolHost([echo]))
        with pytest.raises(ActorError, match="a tool host takes RunTool or ListTools") as caught:
            await host.call("hello")
        assert caught.value.code is Code.INPUT_VALIDATION
        assert host.restarts == 0


class DownMcp(Actor):
    """An MCP host whose server is never reachable once listed."""

    calls = 0

    async def handle(self, message: Any) -> Any:
        if isinstance(message, ListTools):
            schema = {"type": "object", "properties": {"text": {"type": "string"}}}
            return (ToolInfo("echo", "remote echo", schema, None, "remote"),)
        DownMcp.calls += 1
        return fail(
            Code.MCP_GATEWAY, "the MCP server 'remote' could not be reached", retryable=True
        )


async def test_an_mcp_tool_is_retried_then_falls_back_to_the_builtin(
    autojump_clock: MockClock,
) -> None:
    DownMcp.calls = 0
    builtin = ToolGroup("local", [echo])
    async with open_runtime() as runtime:
        remote = await runtime.spawn(DownMcp)
        local = await runtime.spawn(lambda: ToolHost([echo]))
        tools = Tools(
            [(builtin, local)], mcp=[("remote", remote)], grants=ALL, mcp_retry=TWO_RETRIES
        )
        await tools.refresh()
        with capture_events("tool.retry", "tool.fallback") as events:
            result = await tools.call("echo", {"text": "hi"})
    assert (result.value, result.attempt) == ("hi", 1)
    assert DownMcp.calls == 3
    assert [(e.name, getattr(e, "attempt", None)) for e in events] == [
        ("tool.retry", 1),
        ("tool.retry", 2),
        ("tool.fallback", None),
    ]
    assert trio.current_time() == 3.0


async def test_without_a_builtin_the_mcp_gateway_error_is_raised(
    autojump_clock: MockClock,
) -> None:
    DownMcp.calls = 0
    async with open_runtime() as runtime:
        remote = await runtime.spawn(DownMcp)
        tools = Tools(mcp=[("remote", remote)], grants=ALL)
        await tools.refresh()
        with pytest.raises(ActorError, match="could not be reached") as caught:
            await tools.call("echo", {"text": "hi"})
    assert (caught.value.code, caught.value.retryable, caught.value.attempt) == (
        Code.MCP_GATEWAY,
        True,
        1,
    )
    assert DownMcp.calls == 1
    with pytest.raises(ActorError, match="mcp_retry must be a RetryPolicy or None"):
        Tools(mcp_retry=3)  # type: ignore[arg-type]


class AsyncCallable:
    """A callable object whose ``__call__`` is async (would never be awaited)."""

    async def __call__(self, arguments: Any) -> bool:
        return True


def test_grants_refuse_what_cannot_be_a_constraint() -> None:
    with pytest.raises(ActorError, match="a plain predicate, got AsyncCallable") as awaited:
        Grants.allow(echo=AsyncCallable())
    with pytest.raises(ActorError, match=r"Grants\.everything must be a bool") as flag:
        Grants(everything="yes")  # type: ignore[arg-type]
    assert {awaited.value.code, flag.value.code} == {Code.CONFIG_INVALID}
    assert Grants.allow(echo=lambda arguments: True).rule_for("echo")[0] is True


# --- pins of the front door's parts (what the mutation runs showed unpinned) ------------


async def test_two_workers_take_turns_and_a_tie_goes_to_the_first(
    autojump_clock: MockClock,
) -> None:
    ends: dict[str, float] = {}
    async with hosted(ToolGroup("g", [nap], concurrency=2)) as (_, tools):

        async def one(label: str, seconds: float) -> None:
            ends[label] = (await tools.call("nap", {"seconds": seconds})).value

        async with trio.open_nursery() as nursery:
            for label, seconds in (("a", 3.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)):
                nursery.start_soon(one, label, seconds)
                await trio.lowlevel.checkpoint()
    # a and b take a worker each; c ties (1, 1): the first, after a; d: the second, after b.
    assert ends == {"a": 3.0, "b": 1.0, "c": 4.0, "d": 2.0}


async def test_a_call_goes_to_the_worker_with_the_fewest_calls_not_the_first_fewer(
    autojump_clock: MockClock,
) -> None:
    ends: dict[str, float] = {}
    async with hosted(ToolGroup("g", [nap], concurrency=3)) as (_, tools):

        async def one(label: str, seconds: float) -> None:
            ends[label] = (await tools.call("nap", {"seconds": seconds})).value

        async with trio.open_nursery() as nursery:
            for label, seconds in (("a", 10.0), ("b", 10.0), ("c", 1.0), ("d", 1.0)):
                nursery.start_soon(one, label, seconds)
                await trio.lowlevel.checkpoint()
            await trio.sleep(1.5)  # c is done: the workers hold 2, 1 and 0 calls
            nursery.start_soon(one, "e", 1.0)
    assert ends == {"a": 10.0, "b": 10.0, "c": 1.0, "d": 11.0, "e": 2.5}


class Meltdown(BaseException):
    """Not an Exception: a tool raising it takes its worker down (its restart shows
    which worker ran the call)."""


@tool
async def melt() -> str:
    raise Meltdown("down")


async def test_a_worker_whose_calls_ended_counts_as_idle_again(autojump_clock: MockClock) -> None:
    async with hosted(ToolGroup("g", [echo, melt], concurrency=2)) as (tree, tools):
        for _ in range(3):
            assert (await tools.call("echo", {"text": "x"})).value == "x"
        with pytest.raises(ActorError, match="crashed its worker"):
            await tools.call("melt", {})
        with trio.fail_after(5):
            while tree.ref("tools.g.0").restarts == 0:
                await trio.sleep(0.01)
        assert [tree.ref(f"tools.g.{i}").restarts for i in range(2)] == [1, 0]


async def test_a_call_without_any_timeout_waits_as_long_as_its_tool_runs(
    autojump_clock: MockClock,
) -> None:
    async with hosted(ToolGroup("g", [nap])) as (_, tools):
        result = await tools.call("nap", {"seconds": 600.0})
    assert (result.tool, result.value, result.attempt) == ("nap", 600.0, 1)
