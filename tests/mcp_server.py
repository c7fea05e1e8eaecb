"""A small MCP server for tests/test_tools_mcp.py (the official SDK's ``MCPServer``).

Run it as a script: ``python tests/mcp_server.py`` speaks MCP over stdio;
``python tests/mcp_server.py --http PORT`` serves streamable HTTP on
``http://127.0.0.1:PORT/mcp``. Its tools:

* ``add(a, b)`` — ``a + b`` (structured: ``{"result": a + b}``);
* ``fail(reason)`` — raises ``ToolError`` (the client sees ``is_error``), after counting
  the call like ``count``;
* ``slow(seconds)`` — sleeps, appending ``slow start`` / ``slow cancelled`` / ``slow done``
  lines to the file named by ``MCP_TEST_LOG`` (when set);
* ``die()`` — ends the process at once (``os._exit(1)``), mid-call;
* ``echo_key()`` — the ``idempotency_key`` of the request's ``_meta`` (``""`` if absent);
* ``count()`` — appends a line to the file named by ``MCP_TEST_COUNT_FILE`` and returns
  the number of lines: calls counted across server restarts.

When the file named by ``MCP_TEST_REFUSE_FILE`` exists at startup the process exits at
once (status 3) without speaking MCP: a server that cannot be reached.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("resilient-actors-test")


def _append(variable: str, line: str) -> int:
    """Append ``line`` to the file named by ``variable``; the file's line count after."""
    name = os.environ.get(variable)
    if not name:
        return 0
    path = Path(name)
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")
    return len(path.read_text(encoding="utf-8").splitlines())


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails (counted like ``count``)."""
    _append("MCP_TEST_COUNT_FILE", "fail")
    raise ToolError(f"internal detail: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for ``seconds``."""
    _append("MCP_TEST_LOG", "slow start")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _append("MCP_TEST_LOG", "slow cancelled")
        raise
    _append("MCP_TEST_LOG", "slow done")
    return f"slept {seconds}"


@server.tool()
def die() -> str:
    """End the server process mid-call."""
    sys.stderr.flush()
    os._exit(1)


@server.tool()
def echo_key(ctx: Context) -> str:
    """The idempotency key the request carried in its ``_meta`` (``""`` if none)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("idempotency_key", ""))


@server.tool()
def count() -> int:
    """Count this call in the count file; the calls counted so far."""
    return _append("MCP_TEST_COUNT_FILE", "count")


def main(argv: list[str]) -> None:
    refuse = os.environ.get("MCP_TEST_REFUSE_FILE")
    if refuse and Path(refuse).exists():
        os._exit(3)
    if len(argv) == 2 and argv[0] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
