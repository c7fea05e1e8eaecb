"""A node's failure policy: :class:`NodeRetry` (retries of a failed attempt, with
backoff) and :class:`NodeBreaker` (a circuit breaker over a node's attempts, shared by
the runs of one :class:`~supervisors.runs.Runs`). A bad value is ``node_config`` naming
the field, when the value is built."""

from __future__ import annotations

import math
from typing import Any

import attrs

from actors import ActorError, Code
from supervisors.tree.backoff import Backoff


def problem(field: str, text: str) -> ActorError:
    """``node_config``: ``field`` is wrong, as ``text`` says."""
    return ActorError.from_code(Code.NODE_CONFIG, f"{field}: {text}")


def _check_retries(instance: Any, attribute: attrs.Attribute[int], value: Any) -> None:
    if type(value) is not int or value < 0:
        raise problem(f"NodeRetry.{attribute.name}", "an integer >= 0")


def _backoff(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Backoff):
        raise problem("NodeRetry.backoff", "a Backoff")


@attrs.frozen(kw_only=True)
class NodeRetry:
    """A node's failure policy: a failed attempt whose error is ``retryable`` (and not a
    limit) is retried up to ``max_retries`` times, after ``backoff.delay(n)`` seconds
    (an error's ``retry_after``, when longer, is waited instead). Each retry is a
    ``node:retrying`` event with the attempt that failed."""

    max_retries: int = attrs.field(default=2, validator=_check_retries)
    backoff: Backoff = attrs.field(
        factory=lambda: Backoff(initial=1.0, factor=2.0, max=30.0), validator=_backoff
    )


#: No retry at all.
NO_RETRY = NodeRetry(max_retries=0)


def _positive(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) not in (int, float) or not (math.isfinite(value) and value > 0):
        raise problem(f"NodeBreaker.{attribute.name}", "a finite number > 0")


def _count(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int or value < 1:
        raise problem(f"NodeBreaker.{attribute.name}", "an integer >= 1")


@attrs.frozen(kw_only=True)
class NodeBreaker:
    """A node's circuit breaker, shared by the runs of one :class:`~supervisors.runs.Runs`
    (keyed by workflow name and node id): ``failures`` consecutive failed attempts with a
    *retryable* error open it (a deterministic failure — bad input, a denial — says
    nothing about the node's health and is not counted); an open node is skipped
    (``node:skipped``, ``circuit_open``) for ``cooldown`` seconds, then one probe attempt
    is let through (half-open). A cancelled attempt counts neither way."""

    failures: int = attrs.field(default=5, validator=_count)
    cooldown: float = attrs.field(default=30.0, validator=_positive)
