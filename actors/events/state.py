"""Shared-state records: a fleet's shared state (Redis) lost and found again
(:mod:`supervisors.state.redis`)."""

from __future__ import annotations

import logging
from typing import ClassVar

import attrs

from actors.events._base import Event


@attrs.frozen(kw_only=True, slots=True)
class StateDegraded(Event):
    """The shared state could not be reached (an error, or no answer within ``timeout``
    seconds): this replica goes on with local state, its limits divided by ``replicas``.
    Requests are not failed by it."""

    name: ClassVar[str] = "state.degraded"
    level: ClassVar[int] = logging.WARNING

    #: ``"redis"``.
    backend: str
    #: The replica count the limits are divided by.
    replicas: int
    #: The operation that failed (``"reserve"``, ``"breaker_admit"``, …).
    operation: str
    #: The exception's type and text, or ``"timeout"``.
    error: str


@attrs.frozen(kw_only=True, slots=True)
class StateRecovered(Event):
    """The shared state answers again: this replica went back on it after
    ``degraded_for`` seconds, and the usage counted locally meanwhile has now been added
    to it."""

    name: ClassVar[str] = "state.recovered"
    level: ClassVar[int] = logging.INFO

    backend: str
    degraded_for: float
    #: Runs whose budget usage, counted locally while degraded, was added to the shared
    #: totals on recovery.
    runs_merged: int


@attrs.frozen(kw_only=True, slots=True)
class StateUsageUnmerged(Event):
    """The shared state closed with budget usage counted locally (while degraded) that
    could not be added to it: the shared totals of those runs are short by it. The
    close tried once more first (Redis down or failing: it was not reached)."""

    name: ClassVar[str] = "state.usage_unmerged"
    level: ClassVar[int] = logging.ERROR

    #: ``"redis"``.
    backend: str
    #: Runs with usage not added.
    runs: int
    #: Increments not added (each a ``add_usage`` call).
    increments: int
    #: Their tokens, summed.
    tokens: int
    #: Their cost, summed.
    cost: float
