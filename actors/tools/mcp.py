"""MCP servers as tool sources: :class:`McpServer` (what to connect to) and
:class:`McpHost` (the actor holding one connection to it).

``McpServer("fs", command=["npx", "server-fs", "/data"])`` runs a server over stdio;
``McpServer("search", url="https://mcp.example/mcp")`` reaches one over streamable HTTP.
:func:`supervisors.tool_hosts` makes its host a supervised child (id ``mcp.<name>``) and
:class:`supervisors.Tools` lists and calls its tools. The ``mcp`` package (the ``mcp``
extra) is imported only when a host starts: this module imports without it, and a host
started without it fails to start with ``config_invalid``.

A host holds **one connection** for its whole life (:mod:`actors.tools.mcp_connection`):
``on_start`` begins connecting and returns at once (a server that is down never fails
the tree's start); ``on_stop`` / ``on_restart`` close it (a stdio server is never left
running). A connection that fails or ends — the server cannot be reached, does not
initialise within ``connect_timeout``, dies, or closes the session — **crashes the
host** (``mcp_gateway``): its supervisor restarts it per policy, with backoff, and the new
instance connects afresh. An unreachable server therefore crash-loops its host until the
supervisor's intensity gives up: put MCP hosts under a supervisor whose intensity and
backoff fit. Until the crash the host answers every request ``mcp_gateway`` at once.

It answers two messages, each as deferred work (``concurrency`` at once):

* :class:`~actors.tools.host.ListTools` — every tool of the server (all pages) as a
  :class:`~actors.tools.host.ToolInfo` (``source`` = the server's name); waiting for
  the connection and listing take at most ``list_timeout`` seconds, past it
  ``mcp_gateway``;
* :class:`~actors.tools.host.RunTool` — one ``tools/call``, the call's idempotency key
  sent in the request's ``_meta`` as ``idempotency_key``. Its output is the result's
  structured content when there is some, else its text (the text blocks joined by
  newlines), else its content blocks as dicts (when not all are text). A result flagged
  ``is_error`` — or a JSON-RPC error answer — is ``mcp_tool_failed`` (retryable), its
  message naming the tool and the server only: the server's text may carry internals and
  is kept as the error's cause (:class:`McpToolReport`, redacted). ``call_timeout`` bounds
  the attempt (waiting for the connection included): a call not answered in time is
  ``tool_timeout``, one whose connection is not up in time ``mcp_gateway``. A closed
  session, a dead server or any transport failure is ``mcp_gateway`` — never an exception
  group: groups are unwrapped (one holding a cancellation while the caller is cancelled
  is that cancellation). The caller's cancel cancels that request only (the SDK sends
  ``notifications/cancelled``; the session stays usable) and is never reported as a
  failure.
"""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import attrs
import trio

from actors.actor import Actor
from actors.codes import Code
from actors.error_types import ActorError, fail
from actors.errors import cancellation_reason, normalize
from actors.exits import must_propagate
from actors.redact import redact_text
from actors.tools.define import NAME_PATTERN
from actors.tools.host import ListTools, RunTool, ToolInfo
from actors.tools.mcp_connection import McpConnection, gateway, leaf

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult

#: The ``_meta`` key a call's idempotency key is sent under.
IDEMPOTENCY_META_KEY: Final = "idempotency_key"
#: Pages of ``tools/list`` read at most (a server paging forever is not followed).
MAX_LIST_PAGES: Final = 100
#: Characters of a failed tool's text kept on :class:`McpToolReport`.
REPORT_CHARS: Final = 2000


def _bad(field: str, expected: str, value: object) -> ActorError:
    return ActorError.from_code(
        Code.CONFIG_INVALID, f"McpServer.{field} must be {expected}, got {type(value).__name__}"
    )


def _command(value: Any) -> Any:
    """A sequence of strings as a tuple; anything else as it is (refused later)."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return tuple(value)
    return value


def _seconds(field: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(field, "a number of seconds > 0 or None", value)
    if not (math.isfinite(value) and value > 0):
        raise ActorError.from_code(
            Code.CONFIG_INVALID, f"McpServer.{field} must be a finite number of seconds > 0"
        )


@attrs.frozen
class McpServer:
    """An MCP server to take tools from: exactly one of ``command`` (stdio: the program
    and its arguments, with ``env`` added to a minimal default environment and ``cwd``)
    or ``url`` (streamable HTTP, the endpoint's full URL).

    ``name`` (letters, digits, ``_``, ``-``) names the server in errors, in
    ``ToolInfo.source`` and in its host's child id ``mcp.<name>``. ``connect_timeout``:
    seconds to start and initialise the connection; ``list_timeout``: seconds a
    ``ListTools`` may take; ``call_timeout``: seconds one tool call may take (``None``:
    no limit of the host's own). ``concurrency``: requests the host serves at once.
    A bad field raises ``config_invalid`` naming it (never its value: ``env`` and
    ``url`` may hold secrets, and are left out of the repr).
    """

    name: str
    command: tuple[str, ...] | None = attrs.field(default=None, kw_only=True, converter=_command)
    env: Mapping[str, str] | None = attrs.field(default=None, kw_only=True, repr=False)
    cwd: str | os.PathLike[str] | None = attrs.field(default=None, kw_only=True)
    url: str | None = attrs.field(default=None, kw_only=True, repr=False)
    connect_timeout: float | None = attrs.field(default=10.0, kw_only=True)
    list_timeout: float | None = attrs.field(default=10.0, kw_only=True)
    call_timeout: float | None = attrs.field(default=None, kw_only=True)
    concurrency: int = attrs.field(default=16, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            raise ActorError.from_code(
                Code.CONFIG_INVALID, "McpServer.name must be 1-64 letters, digits, '_' or '-'"
            )
        if (self.command is None) == (self.url is None):
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                "McpServer needs exactly one of command (stdio) or url (streamable HTTP)",
            )
        if self.command is not None:
            if not isinstance(self.command, tuple) or not self.command:
                raise _bad("command", "a non-empty sequence of strings", self.command)
            for index, part in enumerate(self.command):
                if not isinstance(part, str) or not part or "\0" in part:
                    raise _bad(f"command[{index}]", "a non-empty string", part)
        elif self.env is not None or self.cwd is not None:
            field = "env" if self.env is not None else "cwd"
            raise ActorError.from_code(
                Code.CONFIG_INVALID, f"McpServer.{field} applies to a command (stdio) only"
            )
        if self.env is not None and not (
            isinstance(self.env, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in self.env.items())
        ):
            raise _bad("env", "a mapping of strings to strings", self.env)
        if self.cwd is not None and not isinstance(self.cwd, str | os.PathLike):
            raise _bad("cwd", "a path", self.cwd)
        if self.url is not None and not (
            isinstance(self.url, str) and self.url.startswith(("http://", "https://"))
        ):
            raise _bad("url", "an http:// or https:// URL", self.url)
        for field in ("connect_timeout", "list_timeout", "call_timeout"):
            _seconds(field, getattr(self, field))
        concurrency = self.concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise _bad("concurrency", "an integer >= 1", concurrency)

    @property
    def host_actor(self) -> type[McpHost]:
        """The actor class :func:`supervisors.tool_hosts` runs for this server."""
        return McpHost


class McpToolReport(Exception):
    """What an MCP server said about a failed tool call (its text, redacted and cut to
    :data:`REPORT_CHARS`): the cause of ``mcp_tool_failed``, for logs — never shown to
    a model, never in the error's message."""


@attrs.frozen
class _Lost:
    """Cast by a connection that failed to its own host: crash with ``error``."""

    connection: McpConnection
    error: ActorError


class McpHost(Actor):
    """The host of one MCP server (see the module docstring): ``ChildSpec(id="mcp.fs",
    actor=McpHost, args=(McpServer(...),))`` — :func:`supervisors.tool_hosts` builds it."""

    def __init__(self, config: McpServer) -> None:
        if not isinstance(config, McpServer):
            raise ActorError.from_code(
                Code.CONFIG_INVALID, f"McpHost takes an McpServer, not {type(config).__name__}"
            )
        self.config = config
        self.max_deferred = config.concurrency
        self._connection: McpConnection | None = None

    async def on_start(self) -> None:
        try:
            import mcp  # noqa: F401 - the optional extra must be there before connecting
        except ImportError as exc:
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                "MCP servers need the 'mcp' package (install resilient-actors[mcp])",
                cause=exc,
            ) from exc
        connection = self._connection = McpConnection(self.config, self._lost)
        connection.start(f"{self.ref.path}:connection")

    async def on_stop(self, reason: str) -> None:
        await self._close()

    async def on_restart(self, error: ActorError) -> None:
        await self._close()

    async def _close(self) -> None:
        if self._connection is not None:
            await self._connection.close()

    async def _lost(self, error: ActorError) -> None:
        assert self._connection is not None
        await self.ref.cast(_Lost(self._connection, error))

    async def handle(self, message: Any) -> Any:
        if isinstance(message, RunTool):
            return self.defer(self._run, message)
        if isinstance(message, ListTools):
            return self.defer(self._list)
        if isinstance(message, _Lost):
            if message.connection is not self._connection:
                return None  # a previous instance's: already dealt with
            raise gateway(
                self.config.name, "is unreachable: its connection ended", cause=message.error
            )
        return fail(
            Code.INPUT_VALIDATION,
            f"an MCP host takes RunTool or ListTools, not {type(message).__name__}",
            retryable=False,
        )

    # --- deferred work ------------------------------------------------------------------

    async def _list(self) -> tuple[ToolInfo, ...]:
        config = self.config
        deadline = _deadline(config.list_timeout)
        session = await self._connected().session_by(deadline)
        tools, timed_out = await self._request(deadline, None, lambda: _list_all(session))
        if timed_out:
            raise gateway(config.name, "did not list its tools within list_timeout")
        return tuple(
            ToolInfo(
                name=tool.name,
                description=tool.description or "",
                input_schema=dict(tool.input_schema),
                output_schema=None if tool.output_schema is None else dict(tool.output_schema),
                source=config.name,
            )
            for tool in tools
        )

    async def _run(self, message: RunTool) -> Any:
        config, name = self.config, message.tool
        deadline = _deadline(config.call_timeout)
        session = await self._connected().session_by(deadline, tool=name)
        meta = {IDEMPOTENCY_META_KEY: message.context.key}
        result, timed_out = await self._request(
            deadline,
            name,
            lambda: session.call_tool(name, dict(message.arguments), meta=cast(Any, meta)),
        )
        if timed_out:
            raise ActorError.from_code(
                Code.TOOL_TIMEOUT,
                f"MCP tool {name!r} of server {config.name!r} did not answer within call_timeout",
                tool=name,
            )
        return _output(result, name, config.name)

    async def _request(
        self, deadline: float, tool: str | None, send: Callable[[], Awaitable[Any]]
    ) -> tuple[Any, bool]:
        """``send()`` on the connection until ``deadline``: its answer and whether the
        deadline cut it; a failure is raised as :meth:`_failed` classifies it (``tool``:
        ``None`` for a listing)."""
        with self._connected().request():
            try:
                with trio.move_on_at(deadline) as timer:
                    answer = await send()
            except trio.Cancelled:
                raise
            except BaseException as exc:
                failure = await self._failed(exc, tool)
                if failure is exc:
                    raise
                raise failure from failure.__cause__
        return (None, True) if timer.cancelled_caught else (answer, False)

    def _connected(self) -> McpConnection:
        connection = self._connection
        assert connection is not None  # set by on_start, before any message
        return connection

    async def _failed(self, exc: BaseException, tool: str | None) -> BaseException:
        """What a request's failure ``exc`` becomes (``tool`` is ``None`` for a listing):
        a closed session ``mcp_gateway`` (and the connection ends), a JSON-RPC error
        answer or an unusable result ``mcp_tool_failed``, anything else ``mcp_gateway``.
        A cancellation (:func:`~actors.errors.cancellation_reason`: a group holding a
        ``trio.Cancelled``, whatever else it holds) raises ``trio.Cancelled`` while this
        task is cancelled, and is ``cancelled`` (the other errors kept) when it is not; an
        exit (``KeyboardInterrupt``…) is returned as it is."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        cancellation = cancellation_reason(exc) is not None
        if cancellation:
            await trio.lowlevel.checkpoint_if_cancelled()  # the caller's cancel wins
        if must_propagate(exc):
            return exc
        if cancellation:
            return normalize(exc)  # no cancel in effect here: still one, the rest kept
        cause, server = leaf(exc), self.config.name
        context: dict[str, Any] = {} if tool is None else {"tool": tool}
        if isinstance(cause, MCPError) and cause.code == CONNECTION_CLOSED:
            self._connected().lost(cause)
            return gateway(server, "closed the connection", cause=cause, **context)
        if tool is None:
            return gateway(server, "could not list its tools", cause=cause)
        if isinstance(cause, MCPError) and cause.code == REQUEST_TIMEOUT:
            return ActorError.from_code(
                Code.TOOL_TIMEOUT,
                f"MCP tool {tool!r} of server {server!r} timed out",
                cause=cause,
                tool=tool,
            )
        if isinstance(cause, MCPError | RuntimeError):
            report = McpToolReport(redact_text(str(cause))[:REPORT_CHARS])
            report.__cause__ = cause
            return _tool_failed(tool, server, report)
        return gateway(server, "could not be reached", cause=cause, tool=tool)


def _deadline(timeout: float | None) -> float:
    return math.inf if timeout is None else trio.current_time() + timeout


async def _list_all(session: ClientSession) -> list[Any]:
    """Every tool of the server, following ``next_cursor`` (at most
    :data:`MAX_LIST_PAGES` pages)."""
    from mcp.types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _tool_failed(tool: str, server: str, report: McpToolReport) -> ActorError:
    return ActorError.from_code(
        Code.MCP_TOOL_FAILED,
        f"MCP tool {tool!r} of server {server!r} reported a failure",
        cause=report,
        tool=tool,
    )


def _output(result: CallToolResult, tool: str, server: str) -> Any:
    """A call's output (see the module docstring), or ``mcp_tool_failed``."""
    from mcp.types import TextContent

    blocks = list(result.content)
    if result.is_error:
        text = "\n".join(block.text for block in blocks if isinstance(block, TextContent))
        raise _tool_failed(tool, server, McpToolReport(redact_text(text)[:REPORT_CHARS]))
    if result.structured_content is not None:
        return result.structured_content
    if all(isinstance(block, TextContent) for block in blocks):
        return "\n".join(cast(TextContent, block).text for block in blocks)
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]
