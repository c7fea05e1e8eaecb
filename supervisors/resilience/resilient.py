"""One resilient call: rate limit, circuit breaker and retry schedule around an actor call.

:meth:`Resilience.call` is what a provider pool or a node runner uses to call a provider
actor. Each attempt is one :func:`supervisors.resilience.attempt.attempt` (the one place
the sequence below is written):

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

from collections.abc import Coroutine
from typing import Any

import trio

from actors import ActorError, ActorRef, Code, Receipt
from actors.lowlevel import DEFAULT_CALL_TIMEOUT
from supervisors.resilience.attempt import (
    Outcome,
    Replied,
    UsageOf,
    attempt_unchecked,
    bad_arguments,
)
from supervisors.resilience.breaker import Breaker
from supervisors.resilience.budget import Budget
from supervisors.resilience.ratelimit import RateLimiter
from supervisors.resilience.retry import DEFAULT_RETRY, RetryPolicy, RetryRules, retry_failed


class Resilience:
    """Retry rules, breaker and limiter shared by the calls of one daemon (or fleet).

    ``breaker`` (a :class:`Breaker`), ``limiter`` (a :class:`RateLimiter`) and
    ``usage_of`` (a callable) are checked here, once — a wrong one is ``config_invalid``
    naming it; each call checks only its own arguments."""

    def __init__(
        self,
        *,
        retry: RetryRules | RetryPolicy = DEFAULT_RETRY,
        breaker: Breaker | None = None,
        limiter: RateLimiter | None = None,
        usage_of: UsageOf | None = None,
    ) -> None:
        for field, value, wanted, ok in (
            ("breaker", breaker, "None or a Breaker", isinstance(breaker, Breaker)),
            ("limiter", limiter, "None or a RateLimiter", isinstance(limiter, RateLimiter)),
            ("usage_of", usage_of, "None or a callable", callable(usage_of)),
        ):
            if value is not None and not ok:
                raise ActorError.from_code(
                    Code.CONFIG_INVALID,
                    f"Resilience: {field} must be {wanted}, got {type(value).__name__}",
                )
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
        first attempt runs without the retry loop, which takes over only when it fails;
        both make the attempt through one method.

        ``provider``, ``model``, ``tokens`` and ``budget`` wrong (the checks of
        :func:`~supervisors.resilience.attempt.attempt`) are ``input_validation``, raised
        before anything is taken.
        """
        if (
            type(tokens) is not int
            or tokens < 0
            or type(provider) is not str
            or (model is not None and type(model) is not str)
            or (budget is not None and not isinstance(budget, Budget))
        ):
            raise bad_arguments("Resilience.call()", provider, model, tokens, budget)
        retry = self.retry
        if retry.deadline is None:
            # The first attempt inline: no retry machinery unless it fails.
            failed: BaseException | None
            try:
                outcome = await self._send(
                    ref, message, provider, model, tokens, timeout, budget, propagate_cancel
                )
            except trio.Cancelled:
                raise
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - classified there
                failed = exc
            else:
                if type(outcome) is Replied:
                    return outcome.value
                failed = outcome.error  # type: ignore[union-attr]
        else:
            failed = None  # the deadline starts with the first attempt: retry_failed makes it
        return await retry_failed(
            retry,
            self._attempt,
            (ref, message, provider, model, tokens, timeout, budget, propagate_cancel),
            failed,
            {"provider": provider, "model": model},
            None,  # every attempt charged its own usage, failed ones too
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
        """One attempt (:func:`~supervisors.resilience.attempt.attempt`): the reply, or
        the refusal or failure raised. Refusals are raised without a checkpoint of their
        own: the retry loop passes one after every failure, before the error is acted on.
        The arguments were checked by :meth:`call`."""
        outcome = await self._send(
            ref, message, provider, model, tokens, timeout, budget, propagate_cancel
        )
        if type(outcome) is Replied:
            return outcome.value
        raise outcome.error  # type: ignore[union-attr]

    def _send(
        self,
        ref: ActorRef,
        message: Any,
        provider: str,
        model: str | None,
        tokens: int,
        timeout: float | None,
        budget: Budget | None,
        propagate_cancel: bool,
    ) -> Coroutine[Any, Any, Outcome]:
        """The one attempt of both :meth:`call`'s first try and the retry loop's: the
        attempt's coroutine (not awaited here, so no frame is added), with a
        :class:`~actors.Receipt` that tells it whether a cancelled call was delivered —
        when there is a limiter, whose reservation that decides (without one, nothing
        taken depends on it, and the receipt is not made)."""
        receipt = None if self.limiter is None else Receipt()
        return attempt_unchecked(
            ref.call(message, timeout=timeout, propagate_cancel=propagate_cancel, receipt=receipt),
            provider,
            model,
            self.breaker,
            self.limiter,
            budget,
            tokens,
            None,
            True,
            self.usage_of,
            None,
            receipt,
        )
