"""Grants: which tools a caller (a run, a node, a user's own code) may call, and with
which arguments.

A :class:`Grants` is an allow-list of tool names, each optionally with a constraint on
its arguments: a JSON Schema the arguments must also satisfy (e.g. a ``path``
``pattern``, an ``enum`` of hosts), or a predicate over the arguments. A call outside
them is ``tool_denied``: fatal, deterministic, never retried — re-issuing it just
re-denies — and the tool never runs. :data:`ALL` grants every tool without constraint
(a user's own trusted code); :data:`NONE` grants nothing.

A ``Grants`` is immutable and takes what it is given as it is *then*: its table is a
read-only copy and its schema constraints are copied and compiled when it is built, so
changing the dicts it was made from changes nothing (and a bad schema is
``config_invalid`` at once). A predicate must be a plain function (an ``async`` one is
refused: it would never be awaited); one that raises denies — it fails closed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs
import trio

from actors.codes import Code
from actors.error_types import ActorError
from actors.tools.checker import Checker, compile_schema

#: A predicate over a call's arguments: ``True`` (exactly) to allow it.
Constraint = Callable[[Mapping[str, Any]], bool]
Rule = Mapping[str, Any] | Constraint | None


def _frozen_rules(tools: object) -> Mapping[str, Rule]:
    if not isinstance(tools, Mapping):
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"Grants.tools must be a mapping of tool names, got {type(tools).__name__}",
        )
    return MappingProxyType(dict(tools))


@attrs.frozen
class Grants:
    """The tools a caller may use (see the module docstring).

    ``tools`` maps a tool name to ``None`` (any arguments), a JSON Schema the arguments
    must satisfy, or a predicate. ``everything`` grants every tool.
    """

    tools: Mapping[str, Rule] = attrs.field(factory=dict, converter=_frozen_rules)
    everything: bool = False
    _checkers: Mapping[str, Checker] = attrs.field(init=False, repr=False, eq=False)

    @classmethod
    def allow(cls, *names: str, **constrained: Mapping[str, Any] | Constraint) -> Grants:
        """``Grants.allow("search", "fetch", write_file={"properties": {...}})``."""
        tools: dict[str, Rule] = dict.fromkeys(names)
        tools.update(constrained)
        return cls(tools)

    @classmethod
    def of(cls, names: Iterable[str]) -> Grants:
        """Grants for these tool names, each without argument constraints."""
        return cls(dict.fromkeys(names))

    def __attrs_post_init__(self) -> None:
        checkers: dict[str, Checker] = {}
        for name, rule in self.tools.items():
            if not isinstance(name, str):
                raise ActorError.from_code(
                    Code.CONFIG_INVALID, "Grants.tools keys must be tool names (strings)"
                )
            if isinstance(rule, Mapping):
                checkers[name] = compile_schema(rule, what=f"the grant of {name!r}")
            elif rule is not None and (not callable(rule) or _is_async(rule)):
                raise ActorError.from_code(
                    Code.CONFIG_INVALID,
                    f"Grants.tools[{name!r}] must be None, a JSON Schema or a plain "
                    f"predicate, got {type(rule).__name__}",
                )
        if not isinstance(self.everything, bool):
            raise ActorError.from_code(Code.CONFIG_INVALID, "Grants.everything must be a bool")
        object.__setattr__(self, "_checkers", MappingProxyType(checkers))

    def rule_for(self, tool: str) -> tuple[bool, Mapping[str, Any] | Constraint | None]:
        """Whether ``tool`` is granted at all, and its constraint (``None``: none)."""
        if tool in self.tools:
            return True, self.tools[tool]
        return self.everything, None

    def check(self, tool: str, arguments: Mapping[str, Any]) -> None:
        """Raise ``tool_denied`` unless ``tool`` is granted with these ``arguments``."""
        rules = self.tools
        if tool not in rules:
            if self.everything:
                return
            raise denied(tool, "no grant for this tool")
        rule = rules[tool]
        if rule is None:
            return
        checker = self._checkers.get(tool)
        if checker is not None:
            if not checker.is_valid(arguments):
                raise denied(tool, "the arguments are outside the grant's constraint")
            return
        try:
            allowed = rule(arguments)  # type: ignore[operator]
        except (trio.Cancelled, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raise denied(tool, "the grant's constraint raised") from exc
        if allowed is not True:
            raise denied(tool, "the grant's constraint refused the arguments")


def _is_async(rule: Any) -> bool:
    call = getattr(rule, "__call__", None)  # noqa: B004 - the method itself is inspected
    return inspect.iscoroutinefunction(rule) or (
        call is not None and inspect.iscoroutinefunction(call)
    )


#: Every tool, no constraint: for a user's own trusted code.
ALL: Final = Grants(everything=True)
#: No tool.
NONE: Final = Grants()


def denied(tool: str, why: str) -> ActorError:
    """The ``tool_denied`` error for ``tool`` (``why`` names the rule, never a value)."""
    return ActorError.from_code(
        Code.TOOL_DENIED, f"the call of {tool!r} is not granted: {why}", tool=tool
    )
