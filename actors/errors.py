"""The error model: codes, classes, the typed error, failures as values, classification.

This is the public face of the taxonomy; the pieces live in :mod:`actors.codes`,
:mod:`actors.error_types` and :mod:`actors.classify`.

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
  ``cancelled``; otherwise a fatal (non-retryable) member wins over a retryable one; ties
  go to the first member. The result is a copy of the winner with ``errors`` holding every
  normalized member (in order) and the group as ``__cause__``.

``KeyboardInterrupt`` and ``SystemExit`` (alone or in a group) are never normalized:
``TypeError`` — they must propagate.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import trio

from actors.classify import classify, retry_after_from
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
    "classify",
    "fail",
    "info",
    "new_correlation_id",
    "normalize",
    "parse_code",
    "retry_after_from",
]


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
    if isinstance(outcome, trio.Cancelled):
        return ActorError.from_code(Code.CANCELLED, _cancel_reason(outcome), cause=outcome)
    if isinstance(outcome, KeyboardInterrupt | SystemExit):
        raise TypeError(f"{type(outcome).__name__} must propagate; it is never normalized")
    err = classify(outcome)
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
