"""A workflow compiled for the engine: nodes by id, edges by source, joins, schemas.

Made once per workflow value and shared by its runs (a :class:`Plan` is read-only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors import ActorError, Code
from actors.tools import Checker, compile_schema
from supervisors.runs.graph import Edge, Llm, Node, Workflow
from supervisors.runs.values import copied_inputs


class Plan:
    """What the engine reads on every node: no graph walk, no attribute chain."""

    __slots__ = (
        "checkers",
        "failure_edges",
        "joins",
        "max_steps",
        "name",
        "nodes",
        "start",
        "success_edges",
        "workflow",
        "writes",
    )

    def __init__(self, workflow: Workflow) -> None:
        self.workflow = workflow
        self.name = workflow.name
        self.max_steps = workflow.max_steps
        self.nodes: dict[str, Node] = {node.id: node for node in workflow.nodes}
        self.start: tuple[str, ...] = workflow.start or (workflow.nodes[0].id,)
        self.writes: dict[str, frozenset[str]] = {
            node.id: frozenset(node.writes) for node in workflow.nodes
        }
        by_source: dict[str, list[Edge]] = {node_id: [] for node_id in self.nodes}
        sources_of: dict[str, set[str]] = {node_id: set() for node_id in self.nodes}
        for edge in workflow.edges:  # one pass: a graph of 10,000 nodes plans in ms
            by_source[edge.source].append(edge)
            sources_of[edge.target].add(edge.source)
        self.success_edges: dict[str, tuple[Edge, ...]] = {
            node_id: tuple(edge for edge in mine if not edge.on)
            for node_id, mine in by_source.items()
        }
        self.failure_edges: dict[str, tuple[Edge, ...]] = {
            node_id: tuple(edge for edge in mine if edge.on) for node_id, mine in by_source.items()
        }
        #: Join node -> the nodes with an edge into it.
        self.joins: dict[str, frozenset[str]] = {
            node.id: frozenset(sources_of[node.id]) for node in workflow.nodes if node.join
        }
        self.checkers: dict[str, Checker] = {
            node.id: _checker(node.id, node.output_schema)
            for node in workflow.nodes
            if isinstance(node, Llm) and node.output_schema is not None
        }

    def handlers(self, node_id: str, code: Code) -> tuple[str, ...]:
        """The targets of the edges from ``node_id`` that handle a failure ``code``."""
        return tuple(e.target for e in self.failure_edges[node_id] if e.handles(code))


def _checker(node_id: str, schema: Mapping[str, Any]) -> Checker:
    try:
        return compile_schema(schema, what=f"node {node_id!r} output_schema")
    except ActorError as error:
        raise ActorError.from_code(
            Code.NODE_CONFIG, error.message, node_id=node_id, cause=error
        ) from error


def inputs_of(value: Any) -> dict[str, Any] | None:
    """A copy of the run's inputs when they are a mapping with string keys (and no
    cycle), else ``None``: changing the caller's dict later changes nothing. A mapping
    that cannot even be read (its ``__iter__`` raises) is ``input_validation``, with the
    mapping's error as the cause."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        return None
    try:
        if not all(type(key) is str for key in value):
            return None
        return copied_inputs(value)
    except Exception as exc:
        raise ActorError.from_code(
            Code.INPUT_VALIDATION,
            f"Runs.start: inputs could not be read ({type(exc).__name__})",
        ) from exc
