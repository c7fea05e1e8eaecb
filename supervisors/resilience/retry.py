"""Retry schedules, bounded by a total deadline, honouring Retry-After exactly.

An *attempt* here is a retry: every attempt is preceded by
one step of its schedule, and the first call is not an attempt. So the rate-limit default
(6 attempts, 5 → 10 → 20 → 40 → 80 → 160 s) makes up to 7 calls, sleeping each step once,
and after the sixth attempt fails the error is terminal — **no sleep after the last
attempt**.

Defaults (:data:`DEFAULT_RETRY`):

| codes | attempts | schedule |
|---|---|---|
| ``rate_limited`` | 6 | exponential 5 → 160 s, ±20 % jitter |
| ``timeout``, ``network``, ``unavailable``, | 3 | exponential 1 → 2 → 4 s, ±10 % jitter |
| ``malformed_response`` | | |
| ``persistence_unavailable`` | 3 | linear 2 → 4 → 6 s |

Other codes are not retried. Rules of :func:`retrying`:

* failures are classified with :func:`actors.errors.classify`; only an error whose code
  has a policy *and* that is ``retryable`` (``x-should-retry: false`` makes a 503 final)
  is retried;
* an error's ``retry_after`` replaces the schedule's delay **exactly** (no jitter, no
  cap); the ``retry.scheduled`` event says which (``source``: ``header`` or ``schedule``);
* a delay that would end past the deadline is not slept: the error is raised at once,
  ``retry_after`` kept, so a fallback can act; an attempt still running at the deadline is
  cancelled and fails with ``timeout`` (not retryable), the last error as cause;
* cancellation passes straight through and is never retried; :func:`retrying` is a
  checkpoint — a caller already cancelled gets ``trio.Cancelled`` before any attempt, and
  a failed attempt passes a checkpoint before it is acted on (a cancelled caller gets
  ``trio.Cancelled``, not the error), so a loop of attempts refused at once (open
  breaker, spent budget) lets other tasks run;
* every retry is an event ``retry.scheduled`` (attempt, code, delay, source).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar

import attrs
import trio

from actors import ActorError, Code, classify
from actors.checks import Check, codes_to, instance_of, int_at_least, is_bool, seconds, validator
from actors.events import RetryScheduled
from actors.lowlevel import emit
from supervisors.tree.backoff import Backoff

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """One schedule: up to ``max_attempts`` retries spaced by ``backoff``.

    Checked as it is built (:mod:`actors.checks`): ``config_invalid`` naming the field
    for a ``max_attempts`` that is not an ``int`` >= 0, a ``backoff`` that is not a
    :class:`Backoff`, an ``honour_retry_after`` that is not a bool, a ``deadline`` that is
    not ``None`` or finite seconds > 0."""

    max_attempts: int = attrs.field(validator=validator(int_at_least(0)))
    backoff: Backoff = attrs.field(validator=validator(instance_of(Backoff)))
    honour_retry_after: bool = attrs.field(default=True, validator=validator(is_bool))
    deadline: float | None = attrs.field(default=None, validator=validator(seconds(optional=True)))

    def policy_for(self, error: ActorError) -> RetryPolicy | None:
        """This policy, for any retryable error."""
        return self if error.retryable else None


def _frozen(mapping: Any) -> Any:
    """A read-only copy of a mapping (anything else is kept, for :func:`_policies` to
    refuse)."""
    if not isinstance(mapping, Mapping):
        return mapping
    return MappingProxyType(dict(mapping))


_POLICIES: Final[Check] = codes_to(instance_of(RetryPolicy), "RetryPolicy")


@attrs.frozen(kw_only=True)
class RetryRules:
    """Which policy applies to which code, and the total ``deadline`` (seconds).

    Checked as it is built: ``config_invalid`` naming the field for a ``by_code`` that is
    not a mapping of :class:`~actors.Code` to :class:`RetryPolicy`, a ``deadline`` that
    is not ``None`` or finite seconds > 0."""

    by_code: Mapping[Code, RetryPolicy] = attrs.field(
        converter=_frozen, validator=validator(_POLICIES)
    )
    deadline: float | None = attrs.field(default=None, validator=validator(seconds(optional=True)))

    def policy_for(self, error: ActorError) -> RetryPolicy | None:
        """The policy for ``error``, or ``None`` when it is not to be retried."""
        if not error.retryable:
            return None
        return self.by_code.get(error.code)


RATE_LIMITED_POLICY: Final = RetryPolicy(
    max_attempts=6, backoff=Backoff(initial=5, factor=2, max=160, jitter=0.2)
)
TRANSIENT_POLICY: Final = RetryPolicy(
    max_attempts=3, backoff=Backoff(initial=1, factor=2, max=4, jitter=0.1)
)
STORE_POLICY: Final = RetryPolicy(
    max_attempts=3, backoff=Backoff(kind="linear", initial=2, step=2, max=6)
)

DEFAULT_RETRY: Final = RetryRules(
    by_code={
        Code.RATE_LIMITED: RATE_LIMITED_POLICY,
        Code.TIMEOUT: TRANSIENT_POLICY,
        Code.NETWORK: TRANSIENT_POLICY,
        Code.UNAVAILABLE: TRANSIENT_POLICY,
        Code.MALFORMED_RESPONSE: TRANSIENT_POLICY,
        Code.PERSISTENCE_UNAVAILABLE: STORE_POLICY,
    }
)

Source = Literal["header", "schedule"]


def next_delay(
    policy: RetryPolicy, error: ActorError, retries_so_far: int
) -> tuple[float, Source] | None:
    """The delay before the next retry, or ``None`` when the policy is used up."""
    if retries_so_far >= policy.max_attempts:
        return None
    if policy.honour_retry_after and error.retry_after is not None:
        return error.retry_after, "header"
    return policy.backoff.delay(retries_so_far), "schedule"


async def retrying(
    rules: RetryRules | RetryPolicy,
    fn: Callable[..., Awaitable[T]],
    *args: Any,
    classify_with: Mapping[str, Any] | None = None,
    on_failure: Callable[[ActorError], Awaitable[None]] | None = None,
) -> T:
    """Call ``fn(*args)`` and retry its failures under ``rules`` (see the module docs).

    A bare :class:`RetryPolicy` applies to every retryable error (with its own
    ``deadline``). ``classify_with`` passes context (``provider``, ``model``, …) to
    :func:`classify` for foreign errors and to the deadline's ``timeout``.
    ``on_failure`` is awaited with every failed attempt's error, the last one included,
    before the retry is planned (a budget charges the attempt's usage there); what it
    raises ends the retries.

    A checkpoint, as trio's own functions are: a caller whose scope is already cancelled
    gets ``trio.Cancelled`` before ``fn`` runs, and every failed attempt passes a
    checkpoint before its error is acted on (after ``on_failure``, so its usage is
    charged): a cancelled caller gets ``trio.Cancelled`` rather than the error, and a loop
    of calls that ``fn`` refuses at once — an open breaker, a spent budget — still lets
    other tasks run.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    return await retry_failed(rules, fn, args, None, classify_with, on_failure)


async def retry_failed(
    rules: RetryRules | RetryPolicy,
    fn: Callable[..., Awaitable[T]],
    args: tuple[Any, ...],
    failed: BaseException | None,
    classify_with: Mapping[str, Any] | None,
    on_failure: Callable[[ActorError], Awaitable[None]] | None,
) -> T:
    """:func:`retrying`'s loop without its entry checkpoint; ``failed`` is what a first
    call of ``fn(*args)`` raised when the caller made it itself (``None``: none made yet).

    :class:`~supervisors.Resilience` makes its first attempt inline — no loop machinery on
    the fast path — and hands a failure over here; that is only valid for rules without a
    total ``deadline`` (the deadline starts with the first attempt).
    """
    deadline_after = rules.deadline
    deadline = math.inf if deadline_after is None else trio.current_time() + deadline_after
    retries = 0
    last: ActorError | None = None
    while True:
        if failed is None:
            try:
                if deadline == math.inf:
                    return await fn(*args)
                return await _attempt(fn, args, deadline, deadline_after, classify_with, last)
            except trio.Cancelled:
                raise
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - classified below
                failed = exc
        error = classify(failed, **(classify_with or _NO_CONTEXT))
        if error.code is Code.CANCELLED:
            raise failed  # a group holding a cancellation: never retried
        failed = None
        if on_failure is not None:
            await on_failure(error)  # the failed attempt's usage counts, cancelled or not
        # A refused attempt (breaker, limiter, budget) did not yield: yield now, so a loop
        # of refusals cannot starve the other tasks — and a caller whose scope is
        # cancelled gets ``trio.Cancelled`` here, never the refusal.
        await trio.lowlevel.checkpoint()
        last = error
        retries += 1
        await trio.sleep(plan_retry(rules.policy_for, error, retries, deadline))


_NO_CONTEXT: Mapping[str, Any] = MappingProxyType({})


def plan_retry(
    policy_for: Callable[[ActorError], RetryPolicy | None],
    error: ActorError,
    attempt: int,
    deadline: float,
) -> float:
    """The delay before retry number ``attempt`` (from 1) after ``error``, announced as a
    ``retry.scheduled`` event; raises ``error`` when it is not to be retried, when the
    policy is used up, or when the delay would end past ``deadline`` (trio time)."""
    policy = policy_for(error)
    step = None if policy is None else next_delay(policy, error, attempt - 1)
    if step is None:
        raise error
    delay, source = step
    if trio.current_time() + delay > deadline:
        raise error  # not slept: what is left of the deadline is too short
    emit(RetryScheduled(attempt=attempt, error=error, delay=delay, source=source))
    return delay


async def _attempt(
    fn: Callable[..., Awaitable[T]],
    args: tuple[Any, ...],
    deadline: float,
    deadline_after: float | None,
    context: Mapping[str, Any] | None,
    last: ActorError | None,
) -> T:
    """One call, cancelled at the deadline (then ``timeout``, not retryable, with the
    last attempt's error as its cause)."""
    with trio.CancelScope(deadline=deadline):
        return await fn(*args)
    raise ActorError.from_code(
        Code.TIMEOUT,
        f"retry deadline of {deadline_after} s reached during an attempt",
        retryable=False,
        cause=last,
        **(context or _NO_CONTEXT),
    )
