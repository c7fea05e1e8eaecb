"""Workflows: nodes and edges, built in code (or loaded from TOML by
:mod:`supervisors.runs.load`), checked before anything runs.

A :class:`Workflow` is a graph of nodes — :class:`Step`, :class:`Llm`, :class:`Agent`,
:class:`Router`, :class:`Approval` — and :class:`Edge` values. Building the values
checks their types; :meth:`Workflow.problems` checks the graph, and a run refuses to
start on the first problem:

* a node of a kind the engine does not run → ``unsupported_node_type``;
* a node missing what its kind needs (a step's ``fn``, an llm node's ``model`` or
  ``request``, a router's ``managed_nodes`` and its ``pick`` or ``model``…), two nodes
  with one id, an edge, ``start`` or ``managed_nodes`` naming an unknown node, a pool or
  tools name the runs do not know → ``node_config`` naming the node and the field.

Edges: after a node **succeeds**, every edge from it whose ``on`` is empty and whose
``when`` holds (or has no ``when``) is followed — several edges fan out, none ends that
branch. After a node **fails for good**, the edges whose ``on`` names the code (or
``"*"``: any code but a limit's) are followed instead, and the run goes on; without one,
the run fails. An open breaker skips the node along the edges that handle
``circuit_open`` (its fallback edges). Limit codes (``budget_exceeded``, ``run_timeout``,
``turn_limit``) and ``cancelled`` are never handled by an edge. A router's successor is
its pick; it has no edges of its own. A node with ``join=True`` runs once every node
with an edge into it has finished (or can no longer run) and at least one such edge was
followed; other nodes run once per edge followed into them, so graphs may loop, bounded
by ``max_steps`` and the run's limits.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal, cast

import attrs

from actors import ActorError, Code
from actors.providers import LlmRequest
from actors.tools import NONE, Grants
from supervisors.runs.conditions import Condition
from supervisors.runs.node_policy import NodeBreaker, NodeRetry, problem

State = Mapping[str, Any]
Predicate = Callable[[State], bool]
#: Templated messages: ``(role, text)`` pairs; ``{key}`` is replaced by ``str(state[key])``.
Template = tuple[tuple[str, str], ...]

_CODES = frozenset(str(code) for code in Code)
#: Codes no edge handles: they end the run (limits) or it was cancelled.
UNHANDLED = frozenset(
    {Code.BUDGET_EXCEEDED, Code.RUN_TIMEOUT, Code.TURN_LIMIT, Code.CANCELLED, Code.INTERNAL}
)


def _node_id(instance: Any, attribute: attrs.Attribute[str], value: Any) -> None:
    if type(value) is not str or not value or not value.isprintable() or "/" in value:
        raise problem("node id", f"a non-empty printable string without '/', got {value!r}")


def _keys(value: Any) -> tuple[str, ...]:
    """One key or an iterable of them, as a tuple (the items are checked by
    ``problems``); anything else is ``node_config`` at once."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        return tuple(value)
    raise problem("keys", f"a string or a list of strings, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class Node:
    """What every node has: ``id``, the state keys it may ``writes`` (a write outside them
    is ``permission_denied``, fatal, the state unchanged), its failure policy ``retry``,
    an optional ``breaker``, a per-attempt ``timeout`` in seconds (``timeout``,
    retryable) and ``join`` (see the module docstring)."""

    kind: ClassVar[str] = "node"

    id: str = attrs.field(validator=_node_id)
    writes: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    retry: NodeRetry = attrs.field(factory=NodeRetry)
    breaker: NodeBreaker | None = None
    timeout: float | None = None
    join: bool = False

    def uses_model(self) -> bool:
        """Whether the node asks a model (then its ``pool`` must exist)."""
        return False

    def problems(self) -> list[tuple[str, str]]:
        """``(field, what is wrong)`` for what this node's kind needs."""
        found = []
        if self.timeout is not None and (
            type(self.timeout) not in (int, float) or not self.timeout > 0
        ):
            found.append(("timeout", "a number of seconds > 0, or None"))
        if not all(type(key) is str and key for key in self.writes):
            found.append(("writes", "state keys (non-empty strings)"))
        if not isinstance(cast(object, self.retry), NodeRetry):
            found.append(("retry", "a NodeRetry"))
        if self.breaker is not None and not isinstance(cast(object, self.breaker), NodeBreaker):
            found.append(("breaker", "a NodeBreaker or None"))
        if type(cast(object, self.join)) is not bool:
            found.append(("join", "a bool"))
        return found


@attrs.frozen(kw_only=True)
class Step(Node):
    """``await fn(ctx)`` (:class:`~supervisors.runs.NodeContext`): returns a mapping of
    state updates, ``None`` (nothing written), ``fail(...)``, or — when ``output`` names
    a key — any value, written to that key. A returned failure and a raised exception
    become the same node error (a raised error is classified; one nothing classifies is
    ``internal``)."""

    kind: ClassVar[str] = "step"

    fn: Callable[[Any], Awaitable[Any]] | None = None
    output: str | None = None

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if self.fn is None or not inspect.iscoroutinefunction(self.fn):
            found.append(("fn", "an async function of the node context"))
        if self.output is not None and self.output not in self.writes:
            found.append(("output", "a key the node writes"))
        return found


def _pairs(value: Any) -> Template:
    """``(role, text)`` pairs as a tuple (roles and texts are checked by ``problems``)."""
    try:
        pairs = tuple(tuple(pair) for pair in value)
    except TypeError:
        raise problem("messages", "(role, text) pairs") from None
    if isinstance(value, str | bytes) or any(len(pair) != 2 for pair in pairs):
        raise problem("messages", "(role, text) pairs")
    return cast(Template, pairs)


#: The roles a templated message may have.
ROLES = ("system", "user", "assistant", "tool")


def _own_id(node: Any) -> str:
    return str(node.id)


@attrs.frozen(kw_only=True)
class _Model(Node):
    """What nodes that ask a model share."""

    pool: str = "default"
    model: str | None = None
    #: ``(role, template)`` pairs.
    messages: Template = attrs.field(default=(), converter=_pairs)
    max_tokens: int = 1024

    def uses_model(self) -> bool:
        return True

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if type(self.pool) is not str or not self.pool:
            found.append(("pool", "a pool name"))
        if self.model is not None and (type(self.model) is not str or not self.model):
            found.append(("model", "a model name or None"))
        if not all(role in ROLES and type(text) is str for role, text in self.messages):
            found.append(("messages", f"(role, text) pairs, a role one of {', '.join(ROLES)}"))
        if type(self.max_tokens) is not int or self.max_tokens < 1:
            found.append(("max_tokens", "an integer >= 1"))
        return found


def _writes_output(node: Any) -> tuple[str, ...]:
    return (node.output,) if node.output else ()


@attrs.frozen(kw_only=True)
class Llm(_Model):
    """One request through the provider pool ``pool``: ``request`` (an
    :class:`~actors.providers.LlmRequest`, or a function of the state returning one), or
    ``model`` and templated ``messages``. The answer's text is written to ``output``
    (default: the node id). With ``output_schema`` the text must be JSON (else
    ``validation``, not retried) that satisfies the schema (else ``output_validation``),
    and the parsed value is written."""

    kind: ClassVar[str] = "llm"

    request: LlmRequest | Callable[[State], LlmRequest] | None = None
    output_schema: Mapping[str, Any] | None = None
    output: str = attrs.field(default=attrs.Factory(_own_id, takes_self=True))
    writes: tuple[str, ...] = attrs.field(
        default=attrs.Factory(_writes_output, takes_self=True), converter=_keys
    )

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if self.request is None and (not self.model or not self.messages):
            found.append(("model", "a request, or a model and messages"))
        if self.request is not None and not (
            isinstance(self.request, LlmRequest) or callable(cast(object, self.request))
        ):
            found.append(("request", "an LlmRequest or a function of the state"))
        if self.output_schema is not None and not isinstance(
            cast(object, self.output_schema), Mapping
        ):
            found.append(("output_schema", "a JSON Schema (a mapping) or None"))
        if self.output not in self.writes:
            found.append(("output", "a key the node writes"))
        return found


@attrs.frozen(kw_only=True)
class Agent(_Model):
    """The model ↔ tools loop: the model's tool calls go through the tools front door
    ``tools`` with this node's ``grants`` (default: none); a tool's error goes back to
    the model as its model-facing shape and the model decides; ``cancelled`` ends the
    node. Each round (one model answer) is a turn: past ``max_turns`` of this node, or the
    run budget's turns, the node fails with ``turn_limit``. The last answer's text is
    written to ``output`` (default: the node id)."""

    kind: ClassVar[str] = "agent"

    tools: str = "default"
    grants: Grants = NONE
    max_turns: int = 10
    output: str = attrs.field(default=attrs.Factory(_own_id, takes_self=True))
    writes: tuple[str, ...] = attrs.field(
        default=attrs.Factory(_writes_output, takes_self=True), converter=_keys
    )

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if not self.model or not self.messages:
            found.append(("model", "a model and messages"))
        if not isinstance(cast(object, self.grants), Grants):
            found.append(("grants", "a Grants"))
        if type(self.max_turns) is not int or self.max_turns < 1:
            found.append(("max_turns", "an integer >= 1"))
        if self.output not in self.writes:
            found.append(("output", "a key the node writes"))
        return found


@attrs.frozen(kw_only=True)
class Router(_Model):
    """Picks the next node among ``managed_nodes``: ``pick(state)`` (sync or async,
    returns a node id), or the model's answer (``model`` and ``messages``; the answer's
    text, stripped, or the ``"next"`` of a JSON object). A pick outside
    ``managed_nodes`` is ``supervisor_routing`` (fatal). Writes nothing."""

    kind: ClassVar[str] = "router"

    managed_nodes: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    pick: Callable[[State], Any] | None = None

    def uses_model(self) -> bool:
        return self.pick is None

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if not self.managed_nodes:
            found.append(("managed_nodes", "at least one node id"))
        if self.pick is None and (not self.model or not self.messages):
            found.append(("pick", "a function of the state, or a model and messages"))
        elif self.pick is not None and not callable(cast(object, self.pick)):
            found.append(("pick", "a function of the state"))
        if self.writes:
            found.append(("writes", "nothing: a router writes no state"))
        return found


@attrs.frozen(kw_only=True)
class Approval(Node):
    """Pauses the run until ``run.decide(node, "approve" | "deny", by=...)``: approved,
    the node completes; denied, it fails with ``permission_denied`` (an edge may handle
    it). ``prompt`` is shown in ``approval:requested``."""

    kind: ClassVar[str] = "approval"

    prompt: str = ""

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if type(self.prompt) is not str:
            found.append(("prompt", "a string"))
        return found


#: The node kinds the engine runs.
KINDS: Mapping[str, type[Node]] = {cls.kind: cls for cls in (Step, Llm, Agent, Router, Approval)}


def _condition(value: Any) -> Any:
    return Condition(value) if isinstance(value, str) else value


@attrs.frozen(kw_only=True)
class Edge:
    """``source`` → ``target``; ``when``: a predicate of the state (a Python callable, or
    an expression string compiled to a :class:`~supervisors.runs.conditions.Condition`),
    checked after ``source`` succeeds; ``on``: codes of a failure this edge handles
    (``"*"``: any but a limit's or a cancel)."""

    source: str
    target: str
    when: Predicate | None = attrs.field(default=None, converter=_condition)
    on: tuple[str, ...] = attrs.field(default=(), converter=_keys)

    def handles(self, code: Code) -> bool:
        """Whether this edge catches a failure of ``code`` (never ``cancelled`` or a
        run-level limit)."""
        return code not in UNHANDLED and (code in self.on or "*" in self.on)


def _nodes(value: Iterable[Node]) -> tuple[Node, ...]:
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        return tuple(value)
    raise problem("nodes", f"a list of nodes, got {type(value).__name__}")


def _edges(value: Iterable[Edge]) -> tuple[Edge, ...]:
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        return tuple(value)
    raise problem("edges", f"a list of edges, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class Workflow:
    """A named graph of nodes and edges; runs start at ``start`` (default: the first
    node). ``max_steps`` bounds the node executions of one run (loops included): past it
    the run fails with ``turn_limit``."""

    name: str
    nodes: tuple[Node, ...] = attrs.field(converter=_nodes)
    edges: tuple[Edge, ...] = attrs.field(default=(), converter=_edges)
    start: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    max_steps: int = 1000

    def problems(
        self, *, pools: frozenset[str] | None = None, tools: frozenset[str] | None = None
    ) -> list[ActorError]:
        """Every problem of the graph (see the module docstring), in node order."""
        found: list[ActorError] = []
        ids: set[str] = set()
        for node in self.nodes:
            if not isinstance(node, Node) or type(node).kind not in KINDS:
                kind = getattr(type(node), "kind", type(node).__name__)
                found.append(
                    ActorError.from_code(
                        Code.UNSUPPORTED_NODE_TYPE,
                        f"node {getattr(node, 'id', '?')!r}: unsupported node type {kind!r}",
                        node_id=getattr(node, "id", None),
                    )
                )
                continue
            if node.id in ids:
                found.append(_nodeproblem(node.id, "id", "another node has this id"))
            ids.add(node.id)
            found.extend(_nodeproblem(node.id, f, t) for f, t in node.problems())
            pool = getattr(node, "pool", None)
            if node.uses_model() and pools is not None and pool not in pools:
                found.append(_nodeproblem(node.id, "pool", f"no pool named {pool!r}"))
            if isinstance(node, Agent) and tools is not None and node.tools not in tools:
                found.append(_nodeproblem(node.id, "tools", f"no tools named {node.tools!r}"))
        for node in self.nodes:
            if isinstance(node, Router):
                for target in node.managed_nodes:
                    if target not in ids:
                        found.append(
                            _nodeproblem(node.id, "managed_nodes", f"unknown node {target!r}")
                        )
        for index, edge in enumerate(self.edges):
            if not isinstance(cast(object, edge), Edge):
                found.append(
                    ActorError.from_code(
                        Code.NODE_CONFIG, f"edges[{index}]: an Edge, got {type(edge).__name__}"
                    )
                )
                continue
            if inspect.iscoroutinefunction(edge.when):
                found.append(
                    ActorError.from_code(
                        Code.NODE_CONFIG, f"edges[{index}].when: a plain predicate, not async"
                    )
                )
            for end in ("source", "target"):
                if getattr(edge, end) not in ids:
                    found.append(
                        ActorError.from_code(
                            Code.NODE_CONFIG,
                            f"edges[{index}].{end}: unknown node {getattr(edge, end)!r}",
                        )
                    )
            unknown = [code for code in edge.on if code != "*" and code not in _CODES]
            if unknown:
                found.append(
                    ActorError.from_code(
                        Code.NODE_CONFIG, f"edges[{index}].on: unknown code {unknown[0]!r}"
                    )
                )
            if edge.when is not None and not callable(cast(object, edge.when)):
                found.append(
                    ActorError.from_code(
                        Code.NODE_CONFIG, f"edges[{index}].when: a predicate or an expression"
                    )
                )
        first = getattr(self.nodes[0], "id", None) if self.nodes else None
        for node_id in self.start or ((first,) if first is not None else ()):
            if node_id not in ids:
                found.append(
                    ActorError.from_code(Code.NODE_CONFIG, f"start: unknown node {node_id!r}")
                )
        if not self.nodes:
            found.append(ActorError.from_code(Code.NODE_CONFIG, "nodes: a workflow needs a node"))
        if type(self.name) is not str or not self.name:
            found.append(ActorError.from_code(Code.NODE_CONFIG, "name: a non-empty string"))
        if type(self.max_steps) is not int or self.max_steps < 1:
            found.append(ActorError.from_code(Code.NODE_CONFIG, "max_steps: an integer >= 1"))
        return found


def _nodeproblem(node_id: str, field: str, text: str) -> ActorError:
    return ActorError.from_code(
        Code.NODE_CONFIG, f"node {node_id!r}: {field}: {text}", node_id=node_id
    )


JoinMode = Literal["any", "all"]
