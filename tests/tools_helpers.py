"""Helpers for the tools tests: tools hosted in a real tree behind the front door, and
tool functions that count their runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs

from actors.tools import ALL, Grants, ToolGroup
from supervisors import Backoff, RetryPolicy, SupervisorSpec, Tools, Tree, open_tree, tool_hosts

#: Two retries, 1 then 2 seconds, no jitter.
TWO_RETRIES = RetryPolicy(max_attempts=2, backoff=Backoff(initial=1, factor=2, max=4, jitter=0))


@attrs.define
class Runs:
    """What a tool function saw: one entry per run (its arguments, context, outcome)."""

    calls: list[dict[str, Any]] = attrs.Factory(list)
    ended: list[str] = attrs.Factory(list)

    @property
    def count(self) -> int:
        return len(self.calls)


@asynccontextmanager
async def hosted(
    *groups: ToolGroup, grants: Grants = ALL, declared: tuple[ToolGroup, ...] = ()
) -> AsyncIterator[tuple[Tree, Tools]]:
    """A tree running one host per group and the front door over them (and over
    ``declared`` groups that no host runs)."""
    spec = SupervisorSpec(max_restarts=20, period=10, children=tool_hosts(*groups))
    async with open_tree(spec, name="tools-test") as tree:
        yield tree, await Tools.from_tree(tree, *groups, *declared, grants=grants)
