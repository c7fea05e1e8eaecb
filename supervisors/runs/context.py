"""What a node's work gets: :class:`NodeContext`, the one callback through which an attempt
reports its progress (:class:`Reporter`, a closed set of records), and the templates of
model nodes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

import attrs

from actors import ActorError, Code
from actors.providers import Message

if TYPE_CHECKING:
    from actors.tools import Checker
    from supervisors.pool import ProviderPool
    from supervisors.resilience.budget import Budget
    from supervisors.runs.graph import Node
    from supervisors.tools import Tools

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


@attrs.define
class AttemptBegan:
    """A runner took the attempt (or an approval began to wait): ``node:started`` is
    published and the answer is ``True`` — ``False`` when the run is ending (the attempt
    must not start)."""

    ctx: NodeContext


@attrs.define
class WorkStarting:
    """The attempt's work is about to start: answered once what the run published so far
    is durable (at once without a journal), so a crash can never leave work done under an
    execution number the journal lacks. ``False`` when the run began to end meanwhile (a
    halt): the work must not start."""

    ctx: NodeContext


@attrs.define
class ToolEnded:
    """A tool call of the attempt ended with ``code`` (``"ok"`` or the error's); the answer
    is ``True``."""

    ctx: NodeContext
    tool: str
    index: int
    key: str
    code: str


#: What an attempt reports to its run (a closed set).
AttemptProgress: TypeAlias = AttemptBegan | WorkStarting | ToolEnded


class Reporter(Protocol):
    """What an attempt tells its run, through one callback (the engine implements it)."""

    async def progress(self, event: AttemptProgress) -> bool:
        """Report ``event``; the answer says whether the attempt may go on (see each
        record)."""


class NodeContext:
    """One attempt of one node, as its work sees it.

    ``state`` is the run state when the attempt started, read-only (concurrent branches
    each see their own snapshot; what a node writes is what it returns). ``key`` is the
    node execution's idempotency key — the same for every attempt of one execution and
    on a resumed run, different for each execution of a node in a loop: hand it to
    anything with side effects. ``attempt`` counts from 1.
    """

    __slots__ = (
        "attempt",
        "budget",
        "checker",
        "execution",
        "key",
        "node",
        "node_id",
        "pool",
        "reporter",
        "run_id",
        "started_at",
        "state",
        "tools",
    )

    def __init__(
        self,
        *,
        run_id: str,
        node: Node,
        execution: int,
        attempt: int,
        state: Mapping[str, Any],
        budget: Budget,
        pool: ProviderPool | None,
        tools: Tools | None,
        reporter: Reporter,
        checker: Checker | None = None,
    ) -> None:
        self.run_id = run_id
        self.node = node
        self.node_id = node.id
        self.execution = execution
        self.attempt = attempt
        self.state = state
        self.key = f"{run_id}:{node.id}:{execution}"
        self.budget = budget
        self.pool = pool
        self.tools = tools
        self.reporter = reporter
        self.checker = checker
        #: When the attempt began (``None``: it has not, e.g. still queued for a runner).
        self.started_at: float | None = None

    def __repr__(self) -> str:
        return f"NodeContext({self.run_id!r}, {self.node_id!r}, attempt={self.attempt})"


def render(template: str, state: Mapping[str, Any], node_id: str) -> str:
    """``template`` with each ``{key}`` replaced by ``str(state[key])`` (``{{`` and ``}}``
    are braces). Only plain names: no attribute access, no indexing, no format spec. A
    key the state lacks is ``validation`` naming the node and the key (never a value)."""

    def field(match: re.Match[str]) -> str:
        key = match.group(1)
        if key is None:
            return match.group(0)[0]
        try:
            return str(state[key])
        except KeyError:
            raise ActorError.from_code(
                Code.VALIDATION,
                f"node {node_id!r}: the template names {key!r}, which the state lacks",
                node_id=node_id,
            ) from None

    return _FIELD.sub(field, template)


def messages_of(
    template: tuple[tuple[str, str], ...], state: Mapping[str, Any], node_id: str
) -> tuple[Message, ...]:
    """The templated ``(role, text)`` pairs as messages."""
    return tuple(
        Message(role=cast(Any, role), content=render(text, state, node_id))
        for role, text in template
    )
