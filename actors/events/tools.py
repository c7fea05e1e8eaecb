"""Tool records: retries, final failures, fallbacks and overruns of tool calls
(:mod:`actors.tools`, :class:`supervisors.Tools`)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import attrs

from actors.error_types import ActorError
from actors.events._base import Event


@attrs.frozen(kw_only=True)
class ToolRetried(Event):
    """A tool call's failed attempt will be retried by the tool's retry policy (the
    audit trail of flaky tools: one record per retry, with the attempt count)."""

    name: ClassVar[str] = "tool.retry"
    level: ClassVar[int] = logging.INFO

    tool: str
    #: The attempt that failed, from 1 (the retry is attempt + 1).
    attempt: int
    error: ActorError
    #: Seconds before the retry.
    delay: float
    #: The call's idempotency key.
    key: str

    def fields(self) -> dict[str, Any]:
        """The log fields: ``tool``, ``attempt``, ``code``, ``delay``, ``key``."""
        return {
            "tool": self.tool,
            "attempt": self.attempt,
            "code": str(self.error.code),
            "delay": self.delay,
            "key": self.key,
        }


@attrs.frozen(kw_only=True)
class ToolCallFailed(Event):
    """A tool call ended in an error (after its retries, if any). A cancelled call is
    reported with code ``cancelled`` — never as a tool failure."""

    name: ClassVar[str] = "tool.call_failed"
    level: ClassVar[int] = logging.INFO

    tool: str
    code: str
    #: Attempts made (0: the tool never ran — denied, unknown, invalid input).
    attempts: int
    key: str


@attrs.frozen(kw_only=True)
class ToolFallback(Event):
    """An MCP tool's server could not be reached and the call went to the built-in tool
    of the same name."""

    name: ClassVar[str] = "tool.fallback"
    level: ClassVar[int] = logging.WARNING

    tool: str
    #: The MCP server that failed.
    source: str
    code: str


@attrs.frozen(kw_only=True)
class ToolCleanupOverrun(Event):
    """A tool that timed out took longer than its cleanup budget to end (it shielded
    itself from the cancel, which trio cannot interrupt)."""

    name: ClassVar[str] = "tool.cleanup_overrun"
    level: ClassVar[int] = logging.WARNING

    tool: str
    #: The tool's cleanup budget in seconds.
    budget: float
    #: Seconds it took after its timeout.
    seconds: float
