"""One connection to one MCP server, held by one long-lived task (used by :class:`~actors.
tools.mcp.McpHost`; the SDK is imported only once a connection starts).

The SDK's transports and ``ClientSession`` are async context managers that own task
groups: they must be entered and left by the same task, and that task must live as long
as the connection. An actor has no nursery of its own that outlives ``on_start`` and
closes before ``on_stop`` (its deferred work runs in a nursery that a stop waits for), so
the connection lives in a **trio system task** (:func:`trio.lowlevel.spawn_system_task`,
started by :meth:`McpConnection.start` from ``on_start``, with the actor's context
variables). It is the least bad place the runtime offers: nothing cancels it but
:meth:`McpConnection.close` (the actor's ``on_stop`` / ``on_restart``) and the end of the
trio run; it never raises (a system task that raises would crash the run: an unexpected
failure is logged as ``task.failed``).

How it ends:

* :meth:`close` — graceful: the session and the transport are left normally (stdio: the
  server's stdin is closed, then it is terminated and killed if it lingers — the SDK
  bounds that, shielded, to about 6.5 s for a server that ignores all of it, so no
  subprocess is left behind; HTTP: the session is deleted, which ends the server's work
  for it). After :data:`CLOSE_GRACE` seconds the task is cancelled instead. A close
  that outlasts the actor's cleanup budget goes on in the task after the hook gave up.
* the server went away (stdio: its stdout ended; HTTP: the transport's task group crashed
  — its exception group is unwrapped here and never leaks), initialising failed or took
  longer than ``connect_timeout``, or a request saw the session closed (:meth:`lost`):
  :attr:`McpConnection.error` is set (``mcp_gateway``, the failure its cause), waiters
  are answered, the requests still running get ``Connection closed`` from the SDK, and
  once they have finished (at most :data:`DRAIN_GRACE` seconds) ``on_lost(error)`` is
  awaited — the host crashes itself with it, so its supervisor restarts it per policy.

Requests use :attr:`session` from other tasks (the actor's deferred work): the SDK
correlates requests over memory streams, so a request cancelled in its own task sends
``notifications/cancelled`` and leaves the session usable.
"""

from __future__ import annotations

import contextvars
import math
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final, Protocol, TextIO, cast

import trio

from actors.codes import Code
from actors.error_types import ActorError
from actors.events import TaskFailed
from actors.exits import must_propagate
from actors.observe import emit

if TYPE_CHECKING:
    from mcp import ClientSession

#: Seconds a graceful close may take before the connection's task is cancelled.
CLOSE_GRACE: Final = 3.0
#: Seconds the requests still running may take to finish after the connection ended.
DRAIN_GRACE: Final = 1.0


class ServerConfig(Protocol):
    """What a connection reads of its :class:`~actors.tools.mcp.McpServer`."""

    @property
    def name(self) -> str: ...
    @property
    def command(self) -> tuple[str, ...] | None: ...
    @property
    def env(self) -> Mapping[str, str] | None: ...
    @property
    def cwd(self) -> str | os.PathLike[str] | None: ...
    @property
    def url(self) -> str | None: ...
    @property
    def connect_timeout(self) -> float | None: ...


def gateway(
    server: str, what: str, cause: BaseException | None = None, **fields: Any
) -> ActorError:
    """``mcp_gateway``: the MCP server ``server`` ``what`` (the failure as its cause)."""
    return ActorError.from_code(
        Code.MCP_GATEWAY, f"the MCP server {server!r} {what}", cause=cause, **fields
    )


def leaf(exc: BaseException) -> BaseException:
    """The first failure in ``exc`` that is not a cancellation, groups unwrapped (a
    group of cancellations only: its first)."""
    while isinstance(exc, BaseExceptionGroup):
        rest = exc.split(trio.Cancelled)[1]
        exc = (rest if rest is not None else exc).exceptions[0]
    return exc


class _Watched:
    """The transport's read stream, as the session reads it; its end (the server went
    away, or the session left) wakes the connection's task."""

    def __init__(self, inner: Any, ended: trio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        return await self._inner.receive()

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._ended.set()
            raise

    async def __aenter__(self) -> _Watched:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self._ended.set()
        return cast("bool | None", await self._inner.__aexit__(*exc_info))


class McpConnection:
    """The connection of one host instance (see the module docstring)."""

    def __init__(
        self, config: ServerConfig, on_lost: Callable[[ActorError], Awaitable[None]]
    ) -> None:
        self.config = config
        #: The initialised session while connected, else ``None``.
        self.session: ClientSession | None = None
        #: Why the connection ended when it was not closed (``mcp_gateway``).
        self.error: ActorError | None = None
        self._on_lost = on_lost
        self._ready = trio.Event()  # connected, or ended
        self._wake = trio.Event()  # end now: the stream ended, a request saw it closed, close()
        self._done = trio.Event()
        self._scope = trio.CancelScope()
        self._started = self._closing = False
        self._in_flight = 0
        self._idle = trio.Event()
        self._idle.set()

    def start(self, name: str) -> None:
        """Start the connection's task (from the actor's ``on_start``)."""
        self._started = True
        trio.lowlevel.spawn_system_task(self._hold, name=name, context=contextvars.copy_context())

    async def session_by(self, deadline: float, **fields: Any) -> ClientSession:
        """The session once connected; ``mcp_gateway`` (with ``fields``) if the connection
        ended or failed, or is not up by ``deadline``."""
        if not self._ready.is_set():
            with trio.move_on_at(deadline):
                await self._ready.wait()
        session, name = self.session, self.config.name
        if session is not None and not self._wake.is_set():
            return session
        if self._closing:
            raise gateway(name, "connection is closing", **fields)
        if self.error is not None:
            raise gateway(name, "could not be reached", cause=self.error, **fields)
        if self._wake.is_set():
            raise gateway(name, "closed the connection", **fields)
        raise gateway(name, "was not connected in time", **fields)

    @contextmanager
    def request(self) -> Iterator[None]:
        """Count a request as running (the connection's end waits for it, a little)."""
        self._in_flight += 1
        if self._in_flight == 1:
            self._idle = trio.Event()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    def lost(self, cause: BaseException) -> None:
        """A request saw the session closed: end the connection (the host crashes)."""
        if self.error is None and not self._closing:
            self.error = gateway(self.config.name, "closed the connection", cause=cause)
        self._wake.set()

    async def close(self) -> None:
        """End the connection and wait until its task has finished (see the module
        docstring); a no-op if it never started."""
        if not self._started:
            return
        self._closing = True
        self._wake.set()
        if self.session is None:
            self._scope.cancel()  # not connected: nothing to leave gracefully
        with trio.move_on_after(CLOSE_GRACE):
            await self._done.wait()
        if not self._done.is_set():
            self._scope.cancel()
            await self._done.wait()

    # --- the connection's task ---------------------------------------------------------

    async def _hold(self) -> None:
        try:
            await self._connection()
        except BaseException as exc:
            if must_propagate(exc):
                raise  # the trio run is ending (or exiting)
            # A system task must not raise: a failure of ours is logged, never lost.
            emit(TaskFailed(task=f"mcp connection {self.config.name!r}", error=repr(leaf(exc))))

    async def _connection(self) -> None:
        try:
            with self._scope:
                try:
                    await self._serve()
                except trio.Cancelled:
                    raise
                except BaseException as exc:
                    if not isinstance(leaf(exc), Exception):
                        raise  # cancellations only (ours or the run's), or an exit
                    # The transport's failure, or one while closing (then moot).
                    self._ended(exc)
                else:
                    self._ended(None)
        finally:
            self.session = None
            self._ready.set()
            self._done.set()
        if self.error is not None and not self._closing:
            with trio.move_on_after(DRAIN_GRACE):
                await self._idle.wait()
            await self._on_lost(self.error)

    def _ended(self, exc: BaseException | None) -> None:
        if self._closing or self.error is not None:
            return
        name = self.config.name
        if exc is None:
            self.error = gateway(name, "closed the connection")
        else:
            self.error = gateway(name, "could not be reached", cause=leaf(exc))

    async def _serve(self) -> None:
        from mcp import ClientSession

        timeout = self.config.connect_timeout
        async with (
            self._transport() as (read, write),
            ClientSession(_Watched(read, self._wake), write) as session,
        ):
            with trio.fail_at(math.inf if timeout is None else trio.current_time() + timeout):
                await session.initialize()
            if not self._wake.is_set():
                self.session = session
                self._ready.set()
                await self._wake.wait()
            if not self._closing and self.error is None:
                self.error = gateway(self.config.name, "closed the connection")

    def _transport(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        config = self.config
        if config.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(config.url)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        assert config.command is not None  # McpServer: one of command or url
        params = StdioServerParameters(
            command=config.command[0],
            args=list(config.command[1:]),
            env=None if config.env is None else dict(config.env),
            cwd=None if config.cwd is None else os.fspath(config.cwd),
        )
        return stdio_client(params, errlog=_errlog())


def _errlog() -> TextIO:
    """Where the server's stderr goes: ours when it is a real file, else nowhere (the
    SDK needs a file descriptor; a captured ``sys.stderr`` has none)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return cast(TextIO, subprocess.DEVNULL)
    return sys.stderr
