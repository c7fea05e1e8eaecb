"""One resilient call: rate limit, circuit breaker and retry schedule around an actor call.

:meth:`Resilience.call` is what a provider pool or a node runner uses to call a provider
actor. Each attempt:

1. reserves one request and ``tokens`` estimated tokens from the provider's buckets
   (a wait past the caller's deadline fails at once with a local ``rate_limited``);
2. is admitted by the provider's breaker (and the model's), or fails fast with
   ``circuit_open`` carrying the time to the next probe;
3. calls the actor — with ``propagate_cancel``, so a caller that goes away (cancelled,
   past its deadline, or the attempt's ``timeout`` expired) cancels the actor's work
   too — and records the outcome on the breaker (a cancellation records nothing and
   frees a probe lease);
4. settles the token reservation with the reply's real usage (``usage_of(reply)``).

A failed attempt is classified and retried per the :class:`RetryRules` (Retry-After
honoured exactly, nothing slept past the deadline, no sleep after the last attempt); a
``budget`` is charged with every attempt's usage — failed ones too, from
``ActorError.usage`` — and checked before each attempt. Cancellation passes straight
through.

The call is a checkpoint, as trio's own functions are: the actor call is one, and every
failed attempt passes one before its error is retried or raised — so a cancelled caller
gets ``trio.Cancelled``, never a refusal, and a loop of refused calls cannot starve other
tasks.

A rate-limit reservation is settled on every path: with the reply's usage; with the
usage a failed attempt reports; given back whole when the attempt was never sent
(refused by the breaker, cancelled before the call, not delivered to the actor).

In-process state takes a synchronous fast path (no coroutine for the limiter and the
breaker when nothing needs to wait or change), and the first attempt runs without the
retry loop (which takes over only when it fails); ``make bench``'s
``resilience_overhead`` measures the whole against the bare call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from actors import ActorError, ActorRef, Usage
from actors.lowlevel import DEFAULT_CALL_TIMEOUT
from supervisors.breaker import Breaker
from supervisors.budget import Budget
from supervisors.ratelimit import Permit, RateLimiter
from supervisors.retry import DEFAULT_RETRY, RetryPolicy, RetryRules, retry_failed

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
        propagate_cancel: bool = True,
    ) -> Any:
        """Call ``ref`` with ``message`` under the limits, the breaker and the retry rules.

        ``timeout`` bounds each attempt (``ref.call``'s ``timeout``); the retry rules'
        ``deadline`` bounds them all. With ``propagate_cancel`` (the default) a caller
        that goes away — cancelled, past its deadline, or the attempt's ``timeout``
        expired — cancels the actor's work on that attempt too: a provider actor closes
        the HTTP request at once instead of finishing it for nobody. Pass ``False`` for
        an actor whose work must finish whoever waits for it.

        A checkpoint, as trio's own functions are: a caller whose scope is already
        cancelled gets ``trio.Cancelled`` — never ``circuit_open``, ``rate_limited`` or
        ``budget_exceeded`` — and a call refused at once still yields to the scheduler
        (once per failed attempt), so a loop of refused calls lets other tasks run. The
        fast path has no checkpoint of its own: the actor call is one, and every failed
        attempt passes one before its error is retried or raised.
        """
        retry = self.retry
        if retry.deadline is None:
            # The first attempt inline: no retry machinery unless it fails.
            try:
                return await self._attempt(
                    ref, message, provider, model, tokens, timeout, budget, propagate_cancel
                )
            except trio.Cancelled:
                raise
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - classified there
                failed: BaseException | None = exc
        else:
            failed = None  # the deadline starts with the first attempt: retry_failed makes it
        return await retry_failed(
            retry,
            self._attempt,
            (ref, message, provider, model, tokens, timeout, budget, propagate_cancel),
            failed,
            {"provider": provider, "model": model},
            None if budget is None else budget.charge_error,
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
        propagate_cancel: bool,
    ) -> Any:
        """One attempt. Refusals are raised without a checkpoint of their own: the retry
        loop passes one after every failure, before the error is acted on."""
        if budget is not None:
            refusal = await budget.check_or_refuse()
            if refusal is not None:
                raise refusal
        limiter = self.limiter
        permit = None
        if limiter is not None:
            permit = limiter.acquire_fast(provider, tokens=tokens)
            if permit is None:
                acquired = await limiter.acquire_or_refuse(provider, tokens=tokens)
                if isinstance(acquired, ActorError):
                    raise acquired
                permit = acquired
        breaker = self.breaker
        admission = None
        sent = False
        try:
            if breaker is not None:
                admission = breaker.admit_fast(provider, model)
                if admission is None:
                    decision = await breaker.admit_or_refuse(provider, model)
                    if isinstance(decision, ActorError):
                        raise decision
                    admission = decision
            sent = True
            reply = await ref.call(message, timeout=timeout, propagate_cancel=propagate_cancel)
        except BaseException as exc:
            if admission is not None:
                await breaker.record(admission, exc)  # type: ignore[union-attr]
            if permit is not None:
                await return_permit(limiter, permit, exc, sent)  # type: ignore[arg-type]
            raise
        if admission is not None and not breaker.unchanged_by_success(admission):  # type: ignore[union-attr]
            await breaker.record(admission, None)  # type: ignore[union-attr]
        usage_of = self.usage_of
        if usage_of is None:
            return reply
        usage = usage_of(reply)
        if usage is None:
            return reply
        if permit is not None:
            actual = usage.total_tokens
            if not limiter.settle_fast(permit, actual):  # type: ignore[union-attr]
                await limiter.settle(permit, actual)  # type: ignore[union-attr]
        if budget is not None:
            refusal = await budget.charge_or_refuse(usage, provider=provider, model=model)
            if refusal is not None:
                raise refusal
        return reply


async def return_permit(
    limiter: RateLimiter, permit: Permit, exc: BaseException, sent: bool
) -> None:
    """Settle the rate-limit reservation of an attempt that failed, on every path:
    never sent (refused by the breaker, cancelled before the call, not delivered to
    the actor) — all of it goes back; sent and failed with the usage it reports —
    settled with that usage; sent otherwise (a cancel, no usage) — kept, as the
    request may have reached the provider."""
    if not sent or (isinstance(exc, ActorError) and exc.delivered is False):
        await limiter.release(permit)
    elif isinstance(exc, ActorError) and exc.usage is not None:
        actual = exc.usage.total_tokens
        if not limiter.settle_fast(permit, actual):
            with trio.CancelScope(shield=True):
                await limiter.settle(permit, actual)
