"""One resilient call: rate limit, circuit breaker and retry schedule around an actor call.

:meth:`Resilience.call` is what a provider pool or a node runner uses to call a provider
actor. Each attempt:

1. reserves one request and ``tokens`` estimated tokens from the provider's buckets
   (a wait past the caller's deadline fails at once with a local ``rate_limited``);
2. is admitted by the provider's breaker (and the model's), or fails fast with
   ``circuit_open`` carrying the time to the next probe;
3. calls the actor and records the outcome on the breaker (a cancellation records
   nothing and frees a probe lease);
4. settles the token reservation with the reply's real usage (``usage_of(reply)``).

A failed attempt is classified and retried per the :class:`RetryRules` (Retry-After
honoured exactly, nothing slept past the deadline, no sleep after the last attempt); a
``budget`` is charged with every attempt's usage — failed ones too, from
``ActorError.usage`` — and checked before each attempt. Cancellation passes straight
through.

In-process state takes a synchronous fast path (no coroutine for the limiter and the
breaker when nothing needs to wait or change), which ``make bench``'s
``resilience_overhead`` measures against the bare call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import ActorRef, Usage
from actors.actor import DEFAULT_CALL_TIMEOUT
from supervisors.breaker import Breaker
from supervisors.budget import Budget
from supervisors.ratelimit import RateLimiter
from supervisors.retry import DEFAULT_RETRY, RetryPolicy, RetryRules, retrying

UsageOf = Callable[[Any], Usage | None]


class Resilience:
    """Retry rules, breaker and limiter shared by the calls of one daemon (or fleet)."""

    def __init__(
        self,
        *,
        retry: RetryRules | RetryPolicy = DEFAULT_RETRY,
        breaker: Breaker | None = None,
        limiter: RateLimiter | None = None,
        usage_of: UsageOf | None = None,
    ) -> None:
        self.retry = retry
        self.breaker = breaker
        self.limiter = limiter
        self.usage_of = usage_of

    async def call(
        self,
        ref: ActorRef,
        message: Any,
        *,
        provider: str,
        model: str | None = None,
        tokens: int = 0,
        timeout: float | None = DEFAULT_CALL_TIMEOUT,
        budget: Budget | None = None,
    ) -> Any:
        """Call ``ref`` with ``message`` under the limits, the breaker and the retry rules."""
        return await retrying(
            self.retry,
            self._attempt,
            ref,
            message,
            provider,
            model,
            tokens,
            timeout,
            budget,
            classify_with={"provider": provider, "model": model},
            on_failure=None if budget is None else budget.charge_error,
        )

    async def _attempt(
        self,
        ref: ActorRef,
        message: Any,
        provider: str,
        model: str | None,
        tokens: int,
        timeout: float | None,
        budget: Budget | None,
    ) -> Any:
        if budget is not None:
            await budget.check()
        limiter, breaker = self.limiter, self.breaker
        permit = None
        if limiter is not None:
            permit = limiter.acquire_fast(provider, tokens=tokens)
            if permit is None:
                permit = await limiter.acquire(provider, tokens=tokens)
        admission = None
        if breaker is not None:
            admission = breaker.admit_fast(provider, model)
            if admission is None:
                admission = await breaker.admit(provider, model)
        try:
            reply = await ref.call(message, timeout=timeout)
        except BaseException as exc:
            if admission is not None:
                await breaker.record(admission, exc)  # type: ignore[union-attr]
            raise
        if admission is not None and not admission.clean:
            await breaker.record(admission, None)  # type: ignore[union-attr]
        usage = self.usage_of(reply) if self.usage_of is not None else None
        if permit is not None and usage is not None and limiter is not None:
            actual = usage.total_tokens
            if not limiter.settle_fast(permit, actual):
                await limiter.settle(permit, actual)
        if budget is not None and usage is not None:
            await budget.charge(usage, provider=provider, model=model)
        return reply
