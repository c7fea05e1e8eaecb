"""The front door's set-up pinned: its configuration errors word for word, hosts found
in a tree (also under nested supervisors), MCP servers listed (and asked again), and a
call of a name no listed server has yet (what the mutation run of
supervisors/tools/front.py showed unpinned)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime
from actors.events import ToolCallFailed
from actors.testing import capture_events
from actors.tools import ALL, Grants, ListTools, RunTool, ToolContext, ToolGroup, ToolInfo, tool
from supervisors import ChildSpec, SupervisorSpec, Tools, open_tree, tool_hosts
from tests.tools_helpers import TWO_RETRIES

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


@tool
async def echo(text: str) -> str:
    return f"builtin {text}"


@tool
async def add(a: int, b: int) -> int:
    return a + b


class Scripted(Actor):
    """A host whose listing and answers a test scripts: the first ``down`` listings fail,
    ``hang`` makes a listing never answer; each ``RunTool`` takes the next of ``answers``
    (a ``Code``: that failure, retryable; a float: sleep that long; else the value)."""

    def __init__(
        self,
        names: Sequence[str] = ("echo",),
        *,
        answers: Sequence[Any] = (),
        down: int = 0,
        hang: bool = False,
    ) -> None:
        self.infos = tuple(ToolInfo(name, f"remote {name}", SCHEMA, None, "x") for name in names)
        self.answers = list(answers)
        self.down = down
        self.hang = hang
        self.listed = 0
        self.seen: list[RunTool] = []
        self.log: list[str] = []

    async def handle(self, message: Any) -> Any:
        if isinstance(message, ListTools):
            self.listed += 1
            if self.listed <= self.down:
                return fail(Code.MCP_GATEWAY, "not up yet", retryable=True)
            if self.hang:
                try:
                    await trio.sleep(1000)
                except trio.Cancelled:
                    self.log.append("listing cancelled")
                    raise
                self.log.append("listed late")
            return self.infos
        assert isinstance(message, RunTool)
        self.seen.append(message)
        answer = self.answers.pop(0) if self.answers else "ok"
        if isinstance(answer, Code):
            return fail(answer, "scripted", retryable=True)
        if isinstance(answer, float):
            await trio.sleep(answer)
            return "slept"
        return answer


def itself(host: Scripted) -> Callable[[], Scripted]:
    return lambda: host


def test_configuration_errors_read_exactly() -> None:
    bad = tool(echo.fn, name="e2", retry=3)
    cases: list[tuple[Any, str]] = [
        (
            lambda: Tools(grants="all"),  # type: ignore[arg-type]
            "Tools grants must be a Grants, got str",
        ),
        (
            lambda: Tools([("g", None)]),  # type: ignore[list-item]
            "Tools groups must be (ToolGroup, refs) pairs, got str",
        ),
        (
            lambda: Tools([(ToolGroup("a", [echo]), None), (ToolGroup("b", [echo]), None)]),
            "two built-in tools are named 'echo'",
        ),
        (
            lambda: Tools([(ToolGroup("a", [bad]), None)]),
            "Tools tool 'e2' retry must be a RetryPolicy or None, got int",
        ),
        (
            lambda: Tools(mcp_retry=3),  # type: ignore[arg-type]
            "Tools mcp_retry must be a RetryPolicy or None, got int",
        ),
    ]
    for build, message in cases:
        with pytest.raises(ActorError) as caught:
            build()
        assert (caught.value.code, caught.value.message) == (Code.CONFIG_INVALID, message)
    tools = Tools([(ToolGroup("a", [echo], concurrency=1), None)])
    assert (tools.grants, tools.fallback, tools.mcp_retry, tools.names()) == (
        Grants(),
        True,
        None,
        ["echo"],
    )


def test_specs_refuse_what_is_not_grants() -> None:
    tools = Tools([(ToolGroup("a", [echo, add]), None)], grants=Grants.allow("add"))
    with pytest.raises(ActorError) as caught:
        tools.specs(["echo"])  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.message, caught.value.retryable) == (
        Code.INPUT_VALIDATION,
        "grants must be a Grants, got list",
        False,
    )
    assert [spec.name for spec in tools.specs()] == ["add"]
    assert [spec.name for spec in tools.specs(ALL)] == ["add", "echo"]


@pytest.mark.parametrize("refs", [None, []])
async def test_a_group_given_no_refs_is_declared_only(
    autojump_clock: MockClock, refs: list[Any] | None
) -> None:
    tools = Tools([(ToolGroup("g", [echo]), refs)], grants=ALL)
    with capture_events(ToolCallFailed) as failed, pytest.raises(ActorError) as caught:
        await tools.call("echo", {"text": "x"}, key="k-1")
    error = caught.value
    assert (error.code, error.message, error.retryable, error.tool) == (
        Code.INTERNAL,
        "tool 'echo' is declared but no host runs it",
        False,
        "echo",
    )
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [("echo", "internal", 1, "k-1")]


class FakeServer:
    """An MCP server config as ``tool_hosts`` reads one: a name and its host's class."""

    name = "remote"

    @staticmethod
    def host_actor(config: FakeServer) -> Actor:
        return Scripted(answers=[Code.MCP_GATEWAY] * 9)


BUILTIN = ToolGroup("local", [echo, add], concurrency=1)


async def test_from_tree_finds_hosts_under_nested_supervisors_and_passes_its_options(
    autojump_clock: MockClock,
) -> None:
    inner = SupervisorSpec(children=tool_hosts(BUILTIN, FakeServer()))
    spec = SupervisorSpec(children=[ChildSpec(id="hosts", supervisor=inner)])
    async with open_tree(spec, name="nested") as tree:
        strict = await Tools.from_tree(
            tree,
            BUILTIN,
            FakeServer(),
            under=("hosts",),
            grants=Grants.allow("echo"),
            fallback=False,
            mcp_retry=TWO_RETRIES,
        )
        with (
            capture_events("tool.retry", "tool.fallback") as events,
            pytest.raises(ActorError) as gateway,
        ):
            await strict.call("echo", {"text": "hi"})
        assert (gateway.value.code, gateway.value.attempt) == (Code.MCP_GATEWAY, 3)
        assert [e.name for e in events] == ["tool.retry", "tool.retry"]
        assert trio.current_time() == 3.0
        with pytest.raises(ActorError) as denied:
            await strict.call("add", {"a": 1, "b": 2})
        assert denied.value.code is Code.TOOL_DENIED
        loose = await Tools.from_tree(tree, BUILTIN, FakeServer(), under=("hosts",), grants=ALL)
        assert (loose.grants, loose.fallback, loose.mcp_retry) == (ALL, True, None)
        with capture_events("tool.fallback") as fell:
            result = await loose.call("echo", {"text": "hi"})
        assert (result.value, result.attempt) == ("builtin hi", 1)
        assert [(e.tool, e.source, e.code) for e in fell] == [  # type: ignore[attr-defined]
            ("echo", "remote", "mcp_gateway")
        ]
        assert (await loose.call("add", {"a": 1, "b": 2})).value == 3
        # Not under "hosts": the group is declared only, the MCP server is an error.
        declared = await Tools.from_tree(tree, BUILTIN, grants=ALL)
        with pytest.raises(ActorError, match="declared but no host runs it"):
            await declared.call("add", {"a": 1, "b": 2})
        with pytest.raises(ActorError) as missing:
            await Tools.from_tree(tree, FakeServer())
        assert missing.value.code is Code.CHILD_NOT_FOUND


async def test_refresh_lists_each_server_once_and_asks_a_down_one_again(
    autojump_clock: MockClock,
) -> None:
    a, b, c = Scripted(["a1", "dup"]), Scripted(["b1"], down=1), Scripted(["c1", "dup"])
    async with open_runtime() as runtime:
        refs = [await runtime.spawn(itself(host)) for host in (a, b, c)]
        tools = Tools(mcp=list(zip("abc", refs, strict=True)), grants=ALL)
        assert tools.names() == []
        await tools.refresh()
        assert tools.names() == ["a1", "c1", "dup"]
        await tools.refresh()
        assert tools.names() == ["a1", "b1", "c1", "dup"]
        await tools.refresh()
        assert (a.listed, b.listed, c.listed) == (1, 2, 1)
        assert (await tools.call("dup", {"text": "x"})).value == "ok"
    assert (len(a.seen), len(c.seen)) == (1, 0)  # the first server listing a name has it


async def test_a_listing_that_never_answers_is_given_up_after_thirty_seconds(
    autojump_clock: MockClock,
) -> None:
    host = Scripted(hang=True)
    async with open_runtime() as runtime:
        tools = Tools(mcp=[("slow", await runtime.spawn(lambda: host))], grants=ALL)
        with trio.fail_after(100):
            await tools.refresh()
        assert (trio.current_time(), tools.names()) == (30.0, [])


async def test_a_cancelled_refresh_cancels_the_listing(autojump_clock: MockClock) -> None:
    host = Scripted(hang=True)
    async with open_runtime() as runtime:
        tools = Tools(mcp=[("slow", await runtime.spawn(lambda: host))], grants=ALL)
        with trio.move_on_after(1):
            await tools.refresh()
        await trio.sleep(20)
        assert host.log == ["listing cancelled"]  # at once, not when the runtime ends
        assert (tools.names(), trio.current_time()) == ([], 21.0)


async def after_a_failed_listing(host: Scripted, **options: Any) -> tuple[Tools, Any]:
    """A front door whose only MCP server failed its first listing (``host`` is down
    once): its tools are unknown until a call asks for one."""
    runtime = options.pop("runtime")
    tools = Tools(mcp=[("remote", await runtime.spawn(lambda: host))], **options)
    await tools.refresh()
    assert (tools.names(), host.listed) == ([], 1)
    return tools, runtime


async def test_a_name_not_listed_yet_is_looked_up_then_called_as_given(
    autojump_clock: MockClock,
) -> None:
    host = Scripted(down=1, answers=[Code.MCP_TOOL_FAILED, Code.MCP_TOOL_FAILED, "done"])
    async with open_runtime() as runtime:
        tools, _ = await after_a_failed_listing(
            host, runtime=runtime, grants=Grants.allow("echo"), mcp_retry=TWO_RETRIES
        )
        mine = {"text": "hi", "list": [1]}
        result = await tools.call("echo", mine, run_id="r", node_id="n", index=2)
    assert tuple(result) == ("echo", "done", (), 3, "r/n/2")
    assert [run.context for run in host.seen] == [
        ToolContext("echo", "r/n/2", attempt, "r", "n") for attempt in (1, 2, 3)
    ]
    assert [run.arguments for run in host.seen] == [mine] * 3
    first, second, third = (run.arguments for run in host.seen)
    assert first is not second and second is not third and first["list"] is not second["list"]
    assert trio.current_time() == 3.0


async def test_a_name_not_listed_yet_keeps_the_calls_timeout(autojump_clock: MockClock) -> None:
    host = Scripted(down=1, answers=[10.0])
    async with open_runtime() as runtime:
        tools, _ = await after_a_failed_listing(host, runtime=runtime, grants=ALL)
        with pytest.raises(ActorError) as caught:
            await tools.call("echo", {"text": "hi"}, timeout=2.5)
    assert (caught.value.code, caught.value.attempt, caught.value.tool) == (
        Code.TOOL_TIMEOUT,
        1,
        "echo",
    )
    assert trio.current_time() == 2.5


@pytest.mark.parametrize(
    ("name", "arguments", "grants", "code", "message"),
    [
        ("nope", {}, ALL, Code.TOOL_NOT_FOUND, "no tool named 'nope'"),
        ("echo", {"text": "hi"}, Grants.allow("other"), Code.TOOL_DENIED, "no grant for this"),
        (
            "echo",
            {"text": "bye"},
            Grants.allow(echo={"properties": {"text": {"const": "hi"}}}),
            Code.TOOL_DENIED,
            "the arguments are outside the grant's constraint",
        ),
        ("echo", {"text": 5}, ALL, Code.INPUT_VALIDATION, "$.text: type: expected string"),
    ],
)
async def test_a_name_not_listed_yet_is_checked_like_any_other(
    autojump_clock: MockClock,
    name: str,
    arguments: dict[str, Any],
    grants: Grants,
    code: Code,
    message: str,
) -> None:
    host = Scripted(down=1)
    async with open_runtime() as runtime:
        tools, _ = await after_a_failed_listing(host, runtime=runtime, grants=ALL)
        with capture_events(ToolCallFailed) as failed, pytest.raises(ActorError) as caught:
            await tools.call(name, arguments, grants=grants, key="k-9")
        allowed = await tools.call("echo", {"text": "hi"}, key="k-10")
    error = caught.value
    assert (error.code, error.tool) == (code, name)
    assert message in error.message
    assert [(e.tool, e.code, e.attempts, e.key) for e in failed] == [(name, str(code), 0, "k-9")]
    assert (host.listed, len(host.seen)) == (2, 1)
    assert (allowed.value, allowed.key) == ("ok", "k-10")


@pytest.mark.parametrize(("value", "nested"), [("flat", False), ([1], True)])
async def test_with_a_timeout_flat_arguments_are_shared_and_nested_ones_copied_per_attempt(
    autojump_clock: MockClock, value: Any, nested: bool
) -> None:
    host = Scripted(answers=[Code.TOOL_FAILED, Code.TOOL_FAILED, "done"])
    mine = {"text": "x", "value": value}
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: host)
        loose = tool(echo.fn, name="echo", retry=TWO_RETRIES, input_schema={"type": "object"})
        group = ToolGroup("g", [loose])
        tools = Tools([(group, ref)], grants=ALL)
        result = await tools.call("echo", mine, timeout=30.0)
    assert (result.value, result.attempt) == ("done", 3)
    first, second, third = (run.arguments for run in host.seen)
    assert first == second == third == mine and first is not mine
    assert (first is second, second is third) == (not nested, not nested)
