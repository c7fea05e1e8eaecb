"""The error model: codes, classes, the typed error, failures as values, classification.

This is the public face of the taxonomy; the pieces live in :mod:`actors.codes`,
:mod:`actors.error_types`, :mod:`actors.classify` (one foreign failure → one error) and
:mod:`actors.http_status` (what a provider's HTTP answer means). They are leaves: none
imports this module.

:func:`classify` is :func:`actors.classify.classify` that also takes an exception group
(reduced by :func:`normalize`, the context arguments unused).

:func:`normalize` is the single funnel the runners use to turn *any* outcome of user code
into one :class:`ActorError`:

* a returned :class:`Failure` → its error; an omitted ``retryable`` becomes ``False``;
* a raised :class:`ActorError` → itself;
* a foreign exception → :func:`classify` (httpx errors keep their meaning; anything else
  becomes ``internal``, or ``execution_failed`` when ``step=True``), the exception chained
  as ``__cause__``;
* ``trio.Cancelled`` → ``cancelled`` (reporting a cancellation is allowed; *retrying* one
  is not, which is why :func:`classify` refuses it);
* an exception group → flattened; if any member is a cancellation the result is
  ``cancelled`` (the reason of the first ``trio.Cancelled``, as :func:`cancellation_reason`
  gives it); otherwise a fatal (non-retryable) member wins over a retryable one; ties go
  to the first member. The result is a copy of the winner with ``errors`` holding every
  normalized member (in order) and the group as ``__cause__``.

**One cancellation check.** :func:`cancellation_reason` is the only place that decides
whether an exception *is* a cancellation: ``trio.Cancelled``, or an exception group
holding at least one at any depth — whatever else it holds (a failure raised alongside a
cancel is superseded by it and kept: in ``errors`` and the ``__cause__`` of the
``cancelled`` error). :func:`cancel_supersedes` is the one decision built on it, "a
failure while cancelled is the cancel", which the actor layer's hosts and the tools
front door share.

``KeyboardInterrupt`` and ``SystemExit`` (alone or in a group) are never normalized:
``TypeError`` — they must propagate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import trio

from actors.classify import classify as classify_one
from actors.codes import CODE_TABLE, Code, CodeInfo, ErrorClass, info, parse_code
from actors.error_types import (
    FAMILY_BY_CLASS,
    ActorError,
    CancelledError,
    Failure,
    InternalError,
    LimitError,
    ProviderError,
    SecurityError,
    StoreError,
    SupervisionError,
    ToolError,
    ValidationError,
    fail,
    new_correlation_id,
)
from actors.http_status import retry_after_from

__all__ = [
    "CODE_TABLE",
    "FAMILY_BY_CLASS",
    "ActorError",
    "CancelledError",
    "Code",
    "CodeInfo",
    "ErrorClass",
    "Failure",
    "InternalError",
    "LimitError",
    "ProviderError",
    "SecurityError",
    "StoreError",
    "SupervisionError",
    "ToolError",
    "ValidationError",
    "cancel_in_effect",
    "cancel_supersedes",
    "cancellation_reason",
    "classify",
    "current_cancel_reason",
    "fail",
    "info",
    "new_correlation_id",
    "normalize",
    "parse_code",
    "retry_after_from",
]


def classify(
    obj: object,
    *,
    provider: str | None = None,
    dialect: str | None = None,
    **context: Any,
) -> ActorError:
    """The typed error for ``obj`` (:func:`actors.classify.classify`); an exception group
    is reduced by :func:`normalize` instead (``provider``, ``dialect`` and ``context`` are
    not applied to it: its members keep their own)."""
    if isinstance(obj, BaseExceptionGroup):
        return normalize(obj)
    return classify_one(obj, provider=provider, dialect=dialect, **context)


def normalize(outcome: object, *, step: bool = False) -> ActorError:
    """Turn a returned failure, a raised error, or a group into one :class:`ActorError`."""
    if isinstance(outcome, Failure):
        return outcome.to_error()
    if isinstance(outcome, BaseExceptionGroup):
        return _reduce_group(outcome, step=step)
    return _normalize_one(outcome, step=step)


def _normalize_one(outcome: object, *, step: bool) -> ActorError:
    if isinstance(outcome, ActorError):
        return outcome
    if isinstance(outcome, trio.Cancelled):  # a leaf: groups are cancellation_reason's
        return ActorError.from_code(Code.CANCELLED, _cancel_reason(outcome), cause=outcome)
    if isinstance(outcome, KeyboardInterrupt | SystemExit):
        raise TypeError(f"{type(outcome).__name__} must propagate; it is never normalized")
    err = classify_one(outcome)
    if step and err.code is Code.INTERNAL:
        err = ActorError.from_code(
            Code.EXECUTION_FAILED,
            err.message,
            cause=err.__cause__,
            correlation_id=err.correlation_id,
        )
    return err


def _cancel_reason(cancelled: trio.Cancelled) -> str:
    """``reason`` as given to ``CancelScope.cancel`` (trio >= 0.31), else the source."""
    if cancelled.reason:
        return cancelled.reason
    return f"cancelled ({cancelled.source})"


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for member in group.exceptions:
        if isinstance(member, BaseExceptionGroup):
            yield from _leaves(member)
        else:
            yield member


def _reduce_group(group: BaseExceptionGroup[BaseException], *, step: bool) -> ActorError:
    members = [_normalize_one(leaf, step=step) for leaf in _leaves(group)]
    if not members:  # pragma: no cover - exception groups cannot be empty
        raise ValueError("empty exception group")
    winner = _most_severe(members)
    reduced = attrs.evolve(winner, errors=tuple(members))
    reduced.__cause__ = group
    return reduced


def _most_severe(members: list[ActorError]) -> ActorError:
    for member in members:
        if member.code is Code.CANCELLED:
            return member
    for member in members:
        if not member.retryable:
            return member
    return members[0]


async def current_cancel_reason(exc: BaseException) -> str | None:
    """If ``exc`` is a cancellation and the current task is inside a cancelled scope,
    the reason of *that* cancel; ``None`` when ``exc`` is not a cancellation.

    A ``Cancelled`` carries the reason of the innermost cancelled scope it was raised
    in — a ``move_on_after`` that expired in the same instant, say — not necessarily the
    scope it is escaping to. Called where the exception arrives, this asks trio for the
    cancel in effect here (a probe checkpoint; no schedule point when not cancelled) and
    falls back to the exception's own reason.
    """
    if cancellation_reason(exc) is None:
        return None
    return await cancel_supersedes(exc)  # the one rule, for a cancellation


async def cancel_in_effect() -> str | None:
    """The reason of the cancel in effect for the current task where this is called
    (inside a cancelled scope), else ``None``. No schedule point when not cancelled; when
    cancelled, a probe ``Cancelled`` is raised and caught here — the scope stays
    cancelled, so the next checkpoint raises again."""
    try:
        await trio.lowlevel.checkpoint_if_cancelled()
    except trio.Cancelled as probe:
        return _cancel_reason(probe)
    return None


def cancelled_around(scope: trio.CancelScope) -> str | None:
    """The reason of a cancel already in effect at ``scope`` — it, or a scope around it
    not behind a shield, was cancelled — read without a checkpoint and from any task,
    else ``None`` (also for a scope not entered yet).

    For "the first cancel wins" when another task's cancel is still pending: a cancel of
    a scope around a run, made in the same instant before ``run.cancel("later")``, has
    not reached the run's task yet, and trio offers no public way to see it from
    outside. This reads trio's cancel status (``CancelScope._cancel_status``, its
    ``_scope``/``_parent`` chain and ``_cancel_reason``: trio 0.31 to 0.35 at least);
    when those internals are not there, it answers ``None`` — the later reason then
    wins, as before (tests/test_runs_first_cancel.py fails on such a trio)."""
    status = getattr(scope, "_cancel_status", None)
    while status is not None:
        owner = getattr(status, "_scope", None)
        if owner is None:
            return None
        if owner.cancel_called:
            why = getattr(owner, "_cancel_reason", None)
            reason = getattr(why, "reason", None)
            if reason:
                return str(reason)
            return f"cancelled ({getattr(why, 'source', 'explicit')})"
        if owner.shield:
            return None
        status = getattr(status, "_parent", None)
    return None


async def cancel_supersedes(failure: BaseException) -> str | None:
    """The rule "a failure while cancelled is the cancel": the reason of the cancel that
    ``failure`` is to be reported as, or ``None`` when it is a failure in its own right.

    * A cancel in effect for the current task (where this is called: a probe, no schedule
      point when there is none) → its reason. ``failure`` was raised while cancelled — a
      ``ValueError`` from an ``except trio.Cancelled:`` block, a cleanup that broke, an
      answer that arrived in the instant the caller was cancelled — and the cancel wins.
    * Else ``failure`` is itself a cancellation (:func:`cancellation_reason`: a
      ``trio.Cancelled``, or a group holding one next to other errors) → its reason.
    * Else ``None``.

    What to do with an answer is the caller's: an actor's handler re-raises ``failure``,
    so the actor layer answers ``cancelled`` with ``failure`` as the cause (logged as
    ``error.suppressed``); a caller whose own scope is cancelled lets ``trio.Cancelled``
    out (its next checkpoint raises it). It never swallows ``failure`` itself.
    """
    return await cancel_in_effect() or cancellation_reason(failure)


def cancellation_reason(exc: BaseException) -> str | None:
    """The one check of whether ``exc`` is a trio cancellation: the reason text of the
    cancel it stands for, else ``None``.

    ``exc`` is a cancellation when it is ``trio.Cancelled`` or an exception group holding
    at least one ``trio.Cancelled`` at any depth, whatever else it holds: an error raised
    alongside a cancel (a task's cleanup that broke while its nursery was cancelled) is
    superseded by it — :func:`normalize` keeps it in ``errors`` and as the ``__cause__``
    of the ``cancelled`` error, an actor logs it as ``error.suppressed``. The reason is
    the first ``trio.Cancelled``'s (depth first, in order), as given to
    ``CancelScope.cancel(reason=...)``, else ``"cancelled (<source>)"`` (``deadline``,
    ``explicit``, ``nursery``, …). ``KeyboardInterrupt`` and ``SystemExit`` are not
    cancellations (they must propagate; a group holding one *and* a ``Cancelled`` is both,
    and whoever checks interrupts checks them first). An ``ActorError`` with the
    ``cancelled`` code is not a trio cancellation either: it is the typed *report* of one.
    """
    if isinstance(exc, trio.Cancelled):
        return _cancel_reason(exc)
    if isinstance(exc, BaseExceptionGroup):
        for leaf in _leaves(exc):
            if isinstance(leaf, trio.Cancelled):
                return _cancel_reason(leaf)
    return None
