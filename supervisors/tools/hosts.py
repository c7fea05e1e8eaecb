"""The host actors of tool sources, as children of a supervisor."""

from __future__ import annotations

from typing import Any, Final

from actors.tools import ToolGroup, ToolHost
from supervisors.tools.entry import config_error
from supervisors.tree.policy import RESTART_ON_ANY_CRASH, Policy
from supervisors.tree.spec import ChildSpec


def host_ids(source: Any) -> list[str]:
    """The child ids of a source's hosts: ``tools.<group>.<i>`` for each of a group's
    ``concurrency`` workers, ``mcp.<server>`` for an MCP server."""
    if isinstance(source, ToolGroup):
        return [f"tools.{source.name}.{index}" for index in range(source.concurrency)]
    return [f"mcp.{source.name}"]


#: A tool worker's crash restarts it, whatever its class: the worker is an isolation
#: boundary — a tool's own bug (``internal``) must not escalate and take the tree down.
TOOL_HOST_POLICY: Final = RESTART_ON_ANY_CRASH


def tool_hosts(
    *sources: Any, restart: str = "permanent", policy: Policy | None = TOOL_HOST_POLICY
) -> list[ChildSpec]:
    """Child specs of the host actors for ``sources``: ``concurrency``
    :class:`~actors.tools.ToolHost` workers per :class:`~actors.tools.ToolGroup`, one
    MCP host per MCP server config (the config names its actor class as
    ``host_actor``). Put them in a supervisor's children (each worker restarts on its
    own: ``one_for_one`` keeps a crash from touching the others); :meth:`Tools.from_tree`
    finds them by their ids (:func:`host_ids`). ``policy``: the workers' directives
    (default :data:`TOOL_HOST_POLICY`: restart on any crash)."""
    specs: list[ChildSpec] = []
    for index, source in enumerate(sources):
        if isinstance(source, ToolGroup):
            specs.extend(
                ChildSpec(
                    id=child_id,
                    actor=ToolHost,
                    args=(source.tools,),
                    restart=restart,  # type: ignore[arg-type]
                    policy=policy,
                )
                for child_id in host_ids(source)
            )
        elif hasattr(source, "host_actor") and isinstance(getattr(source, "name", None), str):
            specs.append(
                ChildSpec(
                    id=host_ids(source)[0],
                    actor=source.host_actor,
                    args=(source,),
                    restart=restart,  # type: ignore[arg-type]
                    policy=policy,
                )
            )
        else:
            raise config_error(f"sources[{index}]", "a ToolGroup or an MCP server config", source)
    return specs
