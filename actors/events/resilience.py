"""Resilience records: retries, circuit-breaker transitions, budget warnings and pauses
(``retry``, ``breaker`` and ``budget`` of :mod:`supervisors.resilience`)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

import attrs

from actors.error_types import ActorError
from actors.events._base import Event


@attrs.frozen(kw_only=True)
class RetryScheduled(Event):
    """A failed attempt will be retried after ``delay`` seconds (announced before the
    sleep). The log line carries ``code`` and ``provider`` of ``error``."""

    name: ClassVar[str] = "retry.scheduled"
    level: ClassVar[int] = logging.INFO

    #: Which retry this is, from 1.
    attempt: int
    #: The failure being retried.
    error: ActorError
    #: Seconds to wait before the retry.
    delay: float
    #: ``"header"`` (the error's ``retry_after``, honoured exactly) or ``"schedule"``
    #: (the policy's backoff).
    source: Literal["header", "schedule"]

    def fields(self) -> dict[str, Any]:
        """The log fields: ``attempt``, ``code``, ``delay``, ``source``, ``provider``."""
        return {
            "attempt": self.attempt,
            "code": str(self.error.code),
            "delay": self.delay,
            "source": self.source,
            "provider": self.error.provider,
        }


@attrs.frozen(kw_only=True)
class BreakerTransition(Event):
    """A circuit breaker (of a provider, or of one model of it) changed state."""

    name: ClassVar[str] = "breaker.transition"
    level: ClassVar[int] = logging.INFO

    provider: str
    #: The model whose breaker it is; ``None`` for the provider's own.
    model: str | None
    #: ``"closed"``, ``"open"`` or ``"half_open"``.
    before: str = attrs.field(converter=str)
    after: str = attrs.field(converter=str)
    #: The code of the failure that opened it; ``None`` when it closes.
    code: str | None
    #: The cooldown in seconds; ``None`` when closing or when permanent.
    cooldown: float | None
    #: Open until reset by hand (``auth``-like failures).
    permanent: bool


@attrs.frozen(kw_only=True)
class BudgetWarning(Event):
    """A run's usage reached the warning fraction of a cap (``exceeded=False``, once
    per cap), or passed the cap under ``on_exceed="warn"`` (``exceeded=True``)."""

    name: ClassVar[str] = "budget.warning"
    level: ClassVar[int] = logging.WARNING

    run_id: str
    #: ``"tokens"``, ``"cost"``, ``"turns"`` or ``"seconds"``.
    dimension: str = attrs.field(converter=str)
    #: Usage so far, in the dimension's unit.
    used: float
    #: The cap.
    limit: float
    exceeded: bool


@attrs.frozen(kw_only=True)
class BudgetPaused(Event):
    """A run passed a cap under ``on_exceed="pause"``: the ``approve`` hook is asked."""

    name: ClassVar[str] = "budget.paused"
    level: ClassVar[int] = logging.WARNING

    run_id: str
    #: ``"tokens"``, ``"cost"``, ``"turns"`` or ``"seconds"``.
    dimension: str = attrs.field(converter=str)
    used: float
    limit: float


@attrs.frozen(kw_only=True)
class AttemptRecord(Event):
    """The facts of one provider-pool attempt (its ledger entry, :mod:`supervisors.pool.ledger`):
    the base of :class:`PoolAttempt` (answered) and :class:`PoolAttemptFailed` (not)."""

    request_id: str
    #: The attempt's number within its request, from 1.
    number: int
    provider: str
    model: str
    #: ``"ok"``, ``"failed"``, ``"partial"`` or ``"cancelled"``.
    outcome: str
    #: The failure's code; ``None`` when answered.
    code: str | None
    #: Seconds from sending to the end of the attempt.
    latency: float
    #: Tokens, when known (reported, or estimated for a cut stream).
    input_tokens: int | None
    output_tokens: int | None
    #: Dollars, when known.
    cost: float | None
    #: The usage was estimated (a stream cut before the provider reported it).
    usage_estimated: bool
    #: Started by hedging, in parallel with a slower attempt.
    hedge: bool


@attrs.frozen(kw_only=True)
class PoolAttempt(AttemptRecord):
    """A provider pool's attempt was answered (debug: the ledger keeps every one; built
    only when a hook or a debug log would see it)."""

    name: ClassVar[str] = "pool.attempt"
    level: ClassVar[int] = logging.DEBUG


@attrs.frozen(kw_only=True)
class PoolAttemptFailed(AttemptRecord):
    """A provider pool's attempt failed, or was cut short (``partial``)."""

    name: ClassVar[str] = "pool.attempt_failed"
    level: ClassVar[int] = logging.INFO


@attrs.frozen(kw_only=True)
class PoolAttemptCancelled(AttemptRecord):
    """A provider pool's attempt was cancelled: its caller left, or it lost a hedge
    (``outcome`` ``cancelled``, no code) — not a failure."""

    name: ClassVar[str] = "pool.attempt_cancelled"
    level: ClassVar[int] = logging.INFO


@attrs.frozen(kw_only=True)
class PoolEscalated(Event):
    """Every target of a pool failed and its ``on_exhausted`` hook decided what next
    (an audited decision: what, and who made it)."""

    name: ClassVar[str] = "pool.escalated"
    level: ClassVar[int] = logging.WARNING

    request_id: str
    #: ``"retry"``, ``"use_target"``, ``"abort"`` or ``"none"`` (the hook returned nothing).
    decision: str
    #: Who decided (the decision's ``by``).
    by: str | None
    #: ``retry``: seconds to wait; ``use_target``: the provider and model; ``abort``: why.
    seconds: float | None
    provider: str | None
    model: str | None
    reason: str | None
    #: The last failure's code (the exhausted error's ``category``), and attempts made.
    category: str | None
    attempts: int
