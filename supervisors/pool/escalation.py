"""When every target failed: the ``all_providers_failed`` error and human escalation.

:class:`AllProvidersFailed` carries the whole story: ``request_id``, ``attempts`` (the
request's ledger entries, in order), ``category`` (the last failure's code), the earliest
``retry_after`` across targets, and the last failure as ``__cause__``.

A pool's optional ``on_exhausted`` hook (human escalation) is awaited with that error
before it is raised, and answers with a decision:

* :class:`RetryLater` — wait ``seconds``, then walk the chain again: every target that
  was used up or skipped gets a fresh start (retries, delays, and the pool's deadline);
  targets that are out for good (a model that does not exist, a permanently open breaker,
  a request refused on its content or size) stay out;
* :class:`UseTarget` — try ``target`` next (one the pool was not built with, too), under
  the same rules;
* :class:`Abort` — end the request now: the error is raised with the decision on it;
* ``None`` — no decision: the error is raised as it is.

Every decision, and who made it (``by``), is an audited event ``pool.escalated``. The
hook is asked again each time the chain is exhausted: a hook that always answers
:class:`RetryLater` retries for ever, by its own choice. An exception the hook raises
ends the request: an :class:`~actors.ActorError` as it is, anything else as
``internal`` with the hook's exception as cause.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from actors import ActorError, Code, ProviderError
from supervisors.pool.config import invalid, name, seconds_or_none
from supervisors.pool.ledger import Attempt
from supervisors.pool.target import Target


def _by(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    name(f"{type(instance).__name__}.{attribute.name}", value)


@attrs.frozen(kw_only=True)
class RetryLater:
    """Wait ``seconds`` (finite, >= 0), then walk the chain again."""

    seconds: float = attrs.field()
    by: str = attrs.field(default="on_exhausted", validator=_by)

    @seconds.validator
    def _seconds(self, attribute: attrs.Attribute[float], value: object) -> None:
        if seconds_or_none("RetryLater.seconds", value) is None:
            raise invalid("RetryLater.seconds", "a finite number of seconds >= 0", value)


@attrs.frozen(kw_only=True)
class UseTarget:
    """Try ``target`` next."""

    target: Target = attrs.field()
    by: str = attrs.field(default="on_exhausted", validator=_by)

    @target.validator
    def _target(self, attribute: attrs.Attribute[Target], value: object) -> None:
        if not isinstance(value, Target):
            raise invalid("UseTarget.target", "a Target", value)


@attrs.frozen(kw_only=True)
class Abort:
    """End the request with ``reason`` (on the raised error's ``decision``)."""

    reason: str = attrs.field(validator=_by)
    by: str = attrs.field(default="on_exhausted", validator=_by)


Decision = RetryLater | UseTarget | Abort


@attrs.define(kw_only=True, eq=False)
class AllProvidersFailed(ProviderError):
    """``all_providers_failed``: every target of a pool failed for one request (see the
    module docstring). ``decision`` is the escalation's :class:`Abort`, if one ended it."""

    #: The request that failed (its ``metadata["request_id"]``, else the pool's id).
    request_id: str | None = None
    category: Code | None = None
    attempts: tuple[Attempt, ...] = ()
    decision: Decision | None = None


def exhausted(
    request_id: str,
    attempts: tuple[Attempt, ...],
    last: ActorError | None,
    retry_after: float | None,
) -> AllProvidersFailed:
    """The error a pool raises when its chain is exhausted."""
    error = AllProvidersFailed(
        code=Code.ALL_PROVIDERS_FAILED,
        message=f"request {request_id}: every target failed ({len(attempts)} attempts)",
        request_id=request_id,
        category=None if last is None else last.code,
        attempts=attempts,
        retry_after=retry_after,
        provider=None if last is None else last.provider,
        model=None if last is None else last.model,
    )
    error.__cause__ = last
    return error


OnExhausted = Callable[[AllProvidersFailed], Awaitable[Decision | None]]
