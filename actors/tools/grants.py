"""Grants: which tools a caller (a run, a node, a user's own code) may call, and with
which arguments.

A :class:`Grants` is an allow-list of tool names, each optionally with constraints on
its arguments: a JSON Schema fragment the arguments must also satisfy (e.g. a ``path``
``pattern``, an ``enum`` of hosts), or a predicate over the arguments. A call outside
them is ``tool_denied``: fatal, deterministic, never retried — re-issuing it just
re-denies — and the tool never runs. :data:`ALL` grants every tool without constraint
(a user's own trusted code); there is no implicit grant: a front door called without
grants uses the ones it was built with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs

from actors.codes import Code
from actors.error_types import ActorError

#: A predicate over a call's arguments: ``True`` to allow it.
Constraint = Callable[[Mapping[str, Any]], bool]


@attrs.frozen
class Grants:
    """The tools a caller may use (see the module docstring).

    ``tools`` maps a tool name to ``None`` (any arguments), a JSON Schema fragment the
    arguments must satisfy, or a predicate. ``everything`` grants every tool.
    """

    tools: Mapping[str, Mapping[str, Any] | Constraint | None] = attrs.field(factory=dict)
    everything: bool = False

    @classmethod
    def allow(cls, *names: str, **constrained: Mapping[str, Any] | Constraint) -> Grants:
        """``Grants.allow("search", "fetch", write_file={"properties": {...}})``."""
        tools: dict[str, Mapping[str, Any] | Constraint | None] = dict.fromkeys(names)
        tools.update(constrained)
        return cls(tools)

    @classmethod
    def of(cls, names: Iterable[str]) -> Grants:
        return cls(dict.fromkeys(names))

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.tools, Mapping):
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                f"Grants.tools must be a mapping of tool names, got {type(self.tools).__name__}",
            )
        for name, rule in self.tools.items():
            if not isinstance(name, str):
                raise ActorError.from_code(
                    Code.CONFIG_INVALID, "Grants.tools keys must be tool names (strings)"
                )
            if rule is not None and not isinstance(rule, Mapping) and not callable(rule):
                raise ActorError.from_code(
                    Code.CONFIG_INVALID,
                    f"Grants.tools[{name!r}] must be None, a JSON Schema or a predicate, "
                    f"got {type(rule).__name__}",
                )

    def rule_for(self, tool: str) -> tuple[bool, Mapping[str, Any] | Constraint | None]:
        """Whether ``tool`` is granted at all, and its constraint (``None``: none)."""
        if tool in self.tools:
            return True, self.tools[tool]
        return self.everything, None


#: Every tool, no constraint: for a user's own trusted code.
ALL: Final = Grants(everything=True)
#: No tool.
NONE: Final = Grants()


def denied(tool: str, why: str) -> ActorError:
    """The ``tool_denied`` error for ``tool`` (``why`` names the rule, never a value)."""
    return ActorError.from_code(
        Code.TOOL_DENIED, f"the call of {tool!r} is not granted: {why}", tool=tool
    )
