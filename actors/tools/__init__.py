"""Tools: typed, schema-checked functions run in supervised host actors.

* :func:`tool` / :class:`Tool` — a name, a description, an async function, its input
  and output JSON Schemas (derived from annotations unless given), its timeout and retry
  policy; :class:`ToolGroup` — tools hosted by one :class:`ToolHost` actor.
* :class:`ToolContext` — what a tool function may take (``context``): the call's
  idempotency key and attempt; :func:`partial` / :class:`Partial` — a payload plus typed
  per-item errors; :class:`ToolResult` — what a call answers.
* :class:`Grants` — who may call which tool with which arguments (``tool_denied``).
* :func:`for_model` — the model-facing shape of a tool error (no internals).
* MCP servers as tool sources: :mod:`actors.tools.mcp`.

The front door that checks grants and schemas, retries and audits is
:class:`supervisors.Tools` (docs/tools.md).
"""

from actors.tools.checker import Checker, compile_schema
from actors.tools.define import (
    ItemError,
    Partial,
    Tool,
    ToolContext,
    ToolGroup,
    ToolResult,
    partial,
    tool,
)
from actors.tools.facing import for_model
from actors.tools.grants import ALL, NONE, Grants, denied
from actors.tools.host import ListTools, RunTool, ToolHost, ToolInfo, info_of
from actors.tools.mcp import McpHost, McpServer
from actors.tools.schema import schema_from_function, schema_from_type

__all__ = [
    "ALL",
    "NONE",
    "Checker",
    "Grants",
    "ItemError",
    "ListTools",
    "McpHost",
    "McpServer",
    "Partial",
    "RunTool",
    "Tool",
    "ToolContext",
    "ToolGroup",
    "ToolHost",
    "ToolInfo",
    "ToolResult",
    "compile_schema",
    "denied",
    "for_model",
    "info_of",
    "partial",
    "schema_from_function",
    "schema_from_type",
    "tool",
]
