"""What a successful attempt means for the run: its updates checked and copied in, the
conditions of its edges evaluated on the new state (:func:`outcome_of`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from actors import ActorError, Code, normalize
from supervisors.runs.conditions import Condition
from supervisors.runs.graph import Node
from supervisors.runs.kinds import Pick
from supervisors.runs.plan import Plan
from supervisors.runs.values import copied_updates, view


def outcome_of(
    plan: Plan, state: Mapping[str, Any], node: Node, outcome: Any
) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """The updates and the next nodes of a successful attempt of ``node`` (raises the
    attempt's failure: a write outside ``writes`` is ``permission_denied``, a value
    that cannot be copied in ``output_validation``, a condition that failed its error)."""
    if type(outcome) is Pick:
        return {}, (outcome.target,)
    node_id = node.id
    if not outcome:
        updates: Mapping[str, Any] = outcome
    else:
        updates = dict(outcome)  # once: what is checked is what is written
        allowed = plan.writes[node_id]
        for key in updates:
            if key not in allowed:
                raise ActorError.from_code(
                    Code.PERMISSION_DENIED,
                    f"node {node_id!r} may not write {str(key)[:64]!r}",
                    node_id=node_id,
                )
        updates = copied_updates(updates, node_id)
        state = {**state, **updates}
    targets = []
    for edge in plan.success_edges[node_id]:
        when = edge.when
        if when is None or _holds(when, state, node_id):
            targets.append(edge.target)
    return updates, tuple(targets)


def _holds(
    when: Callable[[Mapping[str, Any]], Any], state: Mapping[str, Any], node_id: str
) -> bool:
    try:
        # An expression reads the state as it is (it cannot change anything); a Python
        # predicate gets the read-only view a node gets.
        result = when(state if type(when) is Condition else view(state))
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise ActorError.from_code(
                Code.NODE_CONFIG,
                f"node {node_id!r}: an edge's when is async; it must answer at once",
                node_id=node_id,
            )
        return bool(result)
    except ActorError as error:
        error.node_id = node_id
        raise
    except Exception as exc:
        failure = normalize(exc)
        failure.node_id = node_id
        raise failure from exc
