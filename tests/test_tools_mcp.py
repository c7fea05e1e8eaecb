"""MCP servers as tool sources, against a real server (tests/mcp_server.py) over stdio and
streamable HTTP, through the public front door (``supervisors.Tools``, ``tool_hosts``,
``open_tree``).

The HTTP server runs as a subprocess on a free 127.0.0.1 port, waited for with a bounded
poll and killed at teardown. Real time throughout (subprocesses), every wait bounded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

if os.environ.get("CI"):
    import mcp  # noqa: F401 - in CI a missing SDK must fail loudly, never skip
else:
    pytest.importorskip("mcp", reason="the mcp extra is not installed (CI requires it)")

from actors import ActorError, Code, open_runtime
from actors.events import ToolFallback
from actors.lowlevel import CellState
from actors.testing import capture_events
from actors.tools import ALL, McpHost, McpServer, RunTool, ToolContext, ToolGroup, tool
from actors.tools.mcp import McpToolReport
from supervisors import Backoff, SupervisorSpec, Tools, Tree, open_tree, tool_hosts

# The SDK's HTTP transport leaves httpx2 / httpcore2 SSE generators to the garbage
# collector when a stream ends early (as pyproject ignores for httpx / httpcore).
pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2\\.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2\\.:ResourceWarning"),
]

SERVER = Path(__file__).with_name("mcp_server.py")
TOOL_NAMES = ["add", "count", "die", "echo_key", "fail", "slow"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Remote:
    """The test server over one transport, with its files (counts, log, refusal)."""

    def __init__(self, transport: str, tmp_path: Path) -> None:
        self.transport = transport
        self.count_file = tmp_path / "count"
        self.log_file = tmp_path / "log"
        self.refuse_file = tmp_path / "refuse"
        self.env = {
            "MCP_TEST_COUNT_FILE": str(self.count_file),
            "MCP_TEST_LOG": str(self.log_file),
            "MCP_TEST_REFUSE_FILE": str(self.refuse_file),
        }
        self.port = free_port()
        self.process: trio.Process | None = None

    def config(self, name: str = "remote", **options: Any) -> McpServer:
        if self.transport == "stdio":
            return McpServer(name, command=[sys.executable, str(SERVER)], env=self.env, **options)
        return McpServer(name, url=f"http://127.0.0.1:{self.port}/mcp", **options)

    def counted(self) -> int:
        return len(self.count_file.read_text().splitlines()) if self.count_file.exists() else 0

    def logged(self) -> list[str]:
        return self.log_file.read_text().splitlines() if self.log_file.exists() else []

    async def start_http(self) -> None:
        self.process = process = await trio.lowlevel.open_process(
            [sys.executable, str(SERVER), "--http", str(self.port)],
            env={**os.environ, **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with trio.fail_after(20):
            while True:
                assert process.returncode is None, "the HTTP test server exited"
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", self.port)
                except OSError:
                    await trio.sleep(0.05)
                    continue
                await stream.aclose()
                return

    async def stop_http(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            if process.returncode is None:
                process.kill()
            with trio.move_on_after(10):
                await process.wait()


@pytest.fixture(params=["stdio", "http"])
async def remote(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Remote]:
    remote = Remote(request.param, tmp_path)
    try:
        if remote.transport == "http":
            await remote.start_http()
        yield remote
    finally:
        with trio.CancelScope(shield=True):
            await remote.stop_http()


@asynccontextmanager
async def front_door(*sources: Any) -> AsyncIterator[tuple[Tree, Tools]]:
    """A tree of the sources' hosts (restarts quick and many: a server may be down for a
    while) and the front door over it."""
    spec = SupervisorSpec(
        children=tuple(tool_hosts(*sources)),
        max_restarts=100,
        period=5.0,
        backoff=Backoff(initial=0.05, max=0.5),
    )
    async with open_tree(spec) as tree:
        yield tree, await Tools.from_tree(tree, *sources, grants=ALL)


async def wait_for(condition: Callable[[], bool], seconds: float = 15.0) -> None:
    with trio.fail_after(seconds):
        while not condition():
            await trio.sleep(0.02)


def stdio_servers() -> list[int]:
    """Live (not zombie) child processes of this one running the stdio test server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        args = [part.decode() for part in cmdline if part]
        ours = int(ppid) == os.getpid() and state != "Z"
        if ours and str(SERVER) in args and "--http" not in args:
            found.append(int(entry.name))
    return found


@tool
async def add(a: int, b: int) -> dict[str, Any]:
    """The built-in add (marked: it says where it ran)."""
    return {"result": a + b, "source": "builtin"}


BUILTIN = ToolGroup("local", (add,))


# --- the config ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "McpServer needs exactly one of command"),
        ({"command": ["x"], "url": "http://h/mcp"}, "McpServer needs exactly one of command"),
        ({"name": "no spaces", "command": ["x"]}, r"McpServer\.name must be"),
        ({"command": []}, r"McpServer\.command must be a non-empty sequence"),
        ({"command": "server"}, r"McpServer\.command must be .* got str"),
        ({"command": ["x", 3]}, r"McpServer\.command\[1\] must be a non-empty string"),
        ({"url": "ftp://secret@h/mcp"}, r"McpServer\.url must be an http:// or https:// URL"),
        ({"url": "http://h/mcp", "env": {"A": "b"}}, r"McpServer\.env applies to a command"),
        ({"command": ["x"], "env": {"A": 1}}, r"McpServer\.env must be a mapping of strings"),
        ({"command": ["x"], "list_timeout": 0}, r"McpServer\.list_timeout must be a finite"),
        ({"command": ["x"], "call_timeout": "5"}, r"McpServer\.call_timeout must be a number"),
        ({"command": ["x"], "concurrency": 0}, r"McpServer\.concurrency must be an integer"),
    ],
)
def test_config_errors_name_the_field(fields: dict[str, Any], message: str) -> None:
    fields = {"name": "srv", **fields}
    with pytest.raises(ActorError, match=message) as info:
        McpServer(fields.pop("name"), **fields)
    assert info.value.code is Code.CONFIG_INVALID
    assert "secret" not in info.value.message


def test_config_makes_a_supervised_host() -> None:
    config = McpServer("fs", command=("server", "--root", "/data"), env={"TOKEN": "t0ken"})
    assert config.command == ("server", "--root", "/data")
    assert config.host_actor is McpHost
    assert "t0ken" not in repr(config)
    [spec] = tool_hosts(config)
    assert (spec.id, spec.actor, spec.args) == ("mcp.fs", McpHost, (config,))


def test_actors_tools_imports_without_the_sdk() -> None:
    script = (
        "import sys; sys.modules['mcp'] = None\n"
        "from actors.tools import McpServer, McpHost\n"
        "print(McpServer('x', url='https://h/mcp').name, McpHost.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "x McpHost\n"), done.stderr


async def test_a_host_without_the_sdk_fails_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    config = McpServer("fs", command=["server"])
    async with open_runtime() as runtime:
        with pytest.raises(ActorError, match="need the 'mcp' package") as info:
            await runtime.spawn(lambda: McpHost(config), name="mcp.fs")
    assert info.value.code is Code.CONFIG_INVALID
    assert isinstance(info.value.__cause__, ImportError)


# --- against a real server -------------------------------------------------------------


async def test_lists_and_calls(remote: Remote) -> None:
    async with front_door(remote.config(call_timeout=2.0)) as (tree, tools):
        assert tools.names() == TOOL_NAMES
        specs = {spec.name: spec for spec in tools.specs()}
        assert specs["add"].description == "Add two integers."
        assert specs["add"].parameters == {
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"title": "B", "type": "integer"},
            },
            "required": ["a", "b"],
            "type": "object",
            "title": "addArguments",
        }
        result = await tools.call("add", {"a": 2, "b": 3})
        assert (result.tool, result.value, result.attempt) == ("add", {"result": 5}, 1)
        # The server's own schema is checked by the front door before anything runs.
        with pytest.raises(ActorError, match=r"\$\.a") as info:
            await tools.call("add", {"a": "two", "b": 3})
        assert info.value.code is Code.INPUT_VALIDATION
        echoed = await tools.call("echo_key", key="run-7/node-2/0")
        assert echoed.value == {"result": "run-7/node-2/0"}
        with pytest.raises(
            ActorError, match=r"MCP tool 'slow' of server 'remote' did not answer within"
        ) as info:
            await tools.call("slow", {"seconds": 30})
        assert (info.value.code, info.value.retryable, info.value.attempt) == (
            Code.TOOL_TIMEOUT,
            True,
            1,
        )
        assert (await tools.call("add", {"a": 1, "b": 1})).value == {"result": 2}
        assert tree.ref("mcp.remote").restarts == 0


async def test_a_tool_error_is_mcp_tool_failed_and_not_retried(remote: Remote) -> None:
    async with front_door(remote.config()) as (tree, tools):
        with (
            capture_events("tool.retry", "tool.call_failed") as events,
            pytest.raises(
                ActorError, match=r"^\[mcp_tool_failed\] MCP tool 'fail' of server 'remote' "
            ) as info,
        ):
            await tools.call("fail", {"reason": "db password is hunter2"})
        error = info.value
        assert error.code is Code.MCP_TOOL_FAILED
        assert (error.retryable, error.tool, error.attempt) == (True, "fail", 1)
        assert "hunter2" not in error.message
        assert [(e.name, e.attempts, e.code) for e in events] == [  # type: ignore[attr-defined]
            ("tool.call_failed", 1, "mcp_tool_failed")
        ]
        assert remote.counted() == 1  # ran once: MCP tools have no retry policy
        # The server's text is the cause (for logs), asked of the host itself.
        ref = tree.ref("mcp.remote")
        run = RunTool("fail", {"reason": "hunter2"}, ToolContext("fail", "k-1"))
        with pytest.raises(ActorError, match="reported a failure") as info:
            await ref.call(run, timeout=10)
        assert info.value.code is Code.MCP_TOOL_FAILED
        assert isinstance(info.value.__cause__, McpToolReport)
        assert "internal detail: hunter2" in str(info.value.__cause__)
        assert remote.counted() == 2
        assert (await tools.call("add", {"a": 1, "b": 1})).value == {"result": 2}
        assert ref.restarts == 0


async def test_a_killed_server_fails_its_call_and_the_host_restarts(remote: Remote) -> None:
    async with front_door(remote.config()) as (tree, tools):
        ref = tree.ref("mcp.remote")
        assert (await tools.call("count")).value == {"result": 1}
        with capture_events("task.failed", "supervisor.decision") as events:
            with pytest.raises(
                ActorError, match=r"^\[mcp_gateway\] the MCP server 'remote' closed the connection$"
            ) as info:
                await tools.call("die")
            assert info.value.code is Code.MCP_GATEWAY
            assert (info.value.tool, info.value.attempt) == ("die", 1)
            if remote.transport == "http":
                await remote.stop_http()
                await remote.start_http()  # the same port: the restarted host reconnects
            await wait_for(lambda: ref.restarts >= 1 and ref.state is CellState.RUNNING)
            with trio.fail_after(15):
                while True:  # an HTTP host may still be between two failed connects
                    try:
                        result = await tools.call("add", {"a": 2, "b": 3})
                        break
                    except ActorError as error:
                        assert remote.transport == "http"
                        assert error.code is Code.MCP_GATEWAY
                        await trio.sleep(0.05)
        assert (result.value, result.attempt) == ({"result": 5}, 1)
        assert (await tools.call("count")).value == {"result": 2}
        crashes = [e for e in events if e.name == "supervisor.decision"]
        assert crashes, "the host's crash reached its supervisor"
        assert len(crashes) == len(events)  # no connection task failed unseen
        assert {str(e.error.code) for e in crashes} == {"mcp_gateway"}  # type: ignore[attr-defined]


async def test_a_cancelled_call_cancels_only_that_request(remote: Remote) -> None:
    async with front_door(remote.config()) as (tree, tools):
        if remote.transport == "stdio":
            assert len(stdio_servers()) == 1
        started = trio.current_time()
        with trio.move_on_after(0.5) as scope:
            await tools.call("slow", {"seconds": 30})
        elapsed = trio.current_time() - started
        assert scope.cancelled_caught
        assert 0.5 <= elapsed < 0.5 + 10  # cut, not the 30 s (room for a loaded machine)
        assert (await tools.call("add", {"a": 1, "b": 2})).value == {"result": 3}
        await wait_for(lambda: remote.logged() == ["slow start", "slow cancelled"], 10)
        assert tree.ref("mcp.remote").restarts == 0
    assert stdio_servers() == []


async def test_an_unreachable_server_falls_back_to_the_builtin(
    remote: Remote, tmp_path: Path
) -> None:
    if remote.transport == "stdio":
        config = McpServer("remote", command=[str(tmp_path / "no-such-server")])
    else:
        config = McpServer("remote", url=f"http://127.0.0.1:{free_port()}/mcp")
    async with front_door(BUILTIN, config) as (tree, tools):
        # Never listed: its tools are unknown, the built-in serves the name.
        assert tools.names() == ["add"]
        result = await tools.call("add", {"a": 2, "b": 3})
        assert (result.value, result.attempt) == ({"result": 5, "source": "builtin"}, 1)
        await wait_for(lambda: tree.ref("mcp.remote").restarts >= 1)


async def test_a_server_killed_between_calls_falls_back_to_the_builtin(remote: Remote) -> None:
    async with front_door(BUILTIN, remote.config()) as (_, tools):
        assert tools.names() == TOOL_NAMES
        remote.refuse_file.touch()  # a restarted stdio server exits at once
        if remote.transport == "stdio":
            [pid] = stdio_servers()
            os.kill(pid, signal.SIGKILL)
        else:
            await remote.stop_http()  # and nobody restarts it
        with capture_events(ToolFallback) as events:
            result = await tools.call("add", {"a": 2, "b": 3})
        assert (result.value, result.attempt) == ({"result": 5, "source": "builtin"}, 1)
        assert [(e.tool, e.source, e.code) for e in events] == [("add", "remote", "mcp_gateway")]
