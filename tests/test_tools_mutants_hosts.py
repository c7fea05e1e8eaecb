"""``tool_hosts`` pinned field by field: the ids, actors, arguments, restart type and
policy of every spec it makes, and the exact error of a source it cannot host (what the
mutation run of supervisors/tools/hosts.py showed unpinned)."""

from __future__ import annotations

from typing import Any

import pytest

from actors import ActorError, Code
from actors.tools import McpHost, McpServer, ToolGroup, ToolHost, tool
from supervisors import RESTART_ON_ANY_CRASH, STOP_ON_ANY_CRASH, Policy, tool_hosts
from supervisors.tools import host_ids


@tool
async def echo(text: str) -> str:
    return text


@tool
async def shout(text: str) -> str:
    return text.upper()


GROUP = ToolGroup("g", [echo, shout], concurrency=2)
SERVER = McpServer("fs", command=["server"])


def fields(specs: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.id, s.actor, s.args, s.restart, s.policy) for s in specs]


def test_the_defaults_restart_every_host_permanently_on_any_crash() -> None:
    assert fields(tool_hosts(GROUP, SERVER)) == [
        ("tools.g.0", ToolHost, ((echo, shout),), "permanent", RESTART_ON_ANY_CRASH),
        ("tools.g.1", ToolHost, ((echo, shout),), "permanent", RESTART_ON_ANY_CRASH),
        ("mcp.fs", McpHost, (SERVER,), "permanent", RESTART_ON_ANY_CRASH),
    ]


def test_restart_and_policy_reach_every_spec_of_both_kinds() -> None:
    specs = tool_hosts(SERVER, GROUP, restart="transient", policy=STOP_ON_ANY_CRASH)
    assert fields(specs) == [
        ("mcp.fs", McpHost, (SERVER,), "transient", STOP_ON_ANY_CRASH),
        ("tools.g.0", ToolHost, ((echo, shout),), "transient", STOP_ON_ANY_CRASH),
        ("tools.g.1", ToolHost, ((echo, shout),), "transient", STOP_ON_ANY_CRASH),
    ]
    temporary = tool_hosts(SERVER, GROUP, restart="temporary", policy=None)
    assert [(s.restart, s.policy) for s in temporary] == [("temporary", None)] * 3
    own = Policy()
    assert [s.policy for s in tool_hosts(GROUP, SERVER, policy=own)] == [own, own, own]


def test_host_ids_name_each_worker_and_each_server() -> None:
    assert host_ids(GROUP) == ["tools.g.0", "tools.g.1"]
    assert host_ids(ToolGroup("one", [echo], concurrency=1)) == ["tools.one.0"]
    assert host_ids(ToolGroup("four", [echo])) == [f"tools.four.{i}" for i in range(4)]
    assert host_ids(SERVER) == ["mcp.fs"]
    assert tool_hosts() == []


class NamedOnly:
    """Has a string name but no ``host_actor``: not an MCP server config."""

    name = "fs"


class UnnamedHost:
    """Has a ``host_actor`` but its name is not a string: not an MCP server config."""

    host_actor = McpHost
    name = 5


class NamelessHost:
    """Has a ``host_actor`` and no name at all."""

    host_actor = McpHost


@pytest.mark.parametrize(
    ("source", "type_name"),
    [
        ("tools", "str"),
        (NamedOnly(), "NamedOnly"),
        (UnnamedHost(), "UnnamedHost"),
        (NamelessHost(), "NamelessHost"),
        (None, "NoneType"),
    ],
)
def test_a_source_that_is_neither_kind_is_config_invalid_naming_its_index(
    source: Any, type_name: str
) -> None:
    with pytest.raises(ActorError) as caught:
        tool_hosts(GROUP, SERVER, source)
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == (
        f"Tools sources[2] must be a ToolGroup or an MCP server config, got {type_name}"
    )
    with pytest.raises(ActorError) as first:
        tool_hosts(source)
    assert first.value.message.startswith("Tools sources[0] must be a ToolGroup or an MCP ")
