"""One attempt of a pool on one target: admission, the call, the verdict, the ledger.

:meth:`Attempter.attempt` returns the answer, a :class:`Refused` (nothing was sent: the
limiter would make the request wait, or the breaker refuses — the chain moves on without
using a retry), or the classified :class:`~actors.ActorError` of a sent attempt that
failed. It raises only what ends the request whatever the chain holds: a spent budget
(``budget_exceeded`` before or after the attempt) and cancellation.

Admission never waits: a limiter that has no room *now* refuses with the wait as
``retry_after`` (the pool rotates, and sleeps only when every target waits). The call
runs with ``propagate_cancel``, so a caller that goes away cancels the provider's HTTP
request. An attempt still running at the request's deadline is cancelled and fails with
``timeout`` (not retryable).

What each ending does:

* answered — breaker: success; reservation: settled with the usage; budget: charged;
  ledger: ``ok``;
* failed — breaker: the code's verdict; reservation: settled with the error's usage, else
  kept; budget: charged with the error's usage; ledger: ``failed`` (``partial`` for a
  stream whose events reached the consumer);
* cut by the deadline — breaker: no verdict; reservation: kept (the request may have
  reached the provider); budget: not charged; ledger: ``failed`` with ``timeout``;
* cancelled — breaker: no verdict, probe lease freed; reservation: kept, or given back
  if never delivered; budget: not charged; ledger: ``cancelled``;
* refused — reservation given back; no ledger entry (nothing was sent).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, Final

import trio

from actors import ActorError, Code, Usage, classify
from actors.providers import LlmRequest, LlmResponse
from supervisors.breaker import Admission, Breaker
from supervisors.budget import Budget
from supervisors.pool.chain import Chain, Slot
from supervisors.pool.ledger import Attempt, Ledger, Outcome
from supervisors.pool.target import Target, request_for
from supervisors.ratelimit import Permit, RateLimiter
from supervisors.resilient import return_permit

_CUT: Final = object()  # the call was cut by the request's deadline


class Refused:
    """An attempt refused before anything was sent (breaker, limiter): ``error`` is the
    refusal (``circuit_open``, ``rate_limited``) with its ``retry_after``."""

    __slots__ = ("error",)

    def __init__(self, error: ActorError) -> None:
        self.error = error


class Cut:
    """An attempt cut by the request's deadline: ``error`` is its ``timeout``."""

    __slots__ = ("error",)

    def __init__(self, error: ActorError) -> None:
        self.error = error


def apply(chain: Chain, slot: Slot, failure: Refused | Cut | ActorError) -> bool:
    """Put a failed attempt on the chain: a refusal blocks ``slot``, a failure moves the
    chain (a stop raises it). ``True`` for a cut by the deadline — the caller ends the
    chain (the one decision that is the pool's, not the chain's)."""
    now = trio.current_time()
    if isinstance(failure, Refused):
        chain.refused(slot, failure.error, now)
        return False
    if isinstance(failure, Cut):
        chain.last = failure.error
        return True
    chain.failed(slot, failure, now)
    return False


class Tap:
    """How many events of a streamed attempt reached the consumer."""

    __slots__ = ("events", "text", "usage")

    def __init__(self) -> None:
        self.events = 0
        self.text = ""
        self.usage: Usage | None = None  # a partial attempt's usage, as in its ledger entry


#: Numbers for the ids of requests that bring none (``pool-N``).
request_ids = itertools.count(1)
_new_tuple = tuple.__new__


def request_id_of(request: LlmRequest) -> str:
    """The request's id: its ``metadata["request_id"]``, else a new ``pool-N``."""
    given = request.metadata.get("request_id")
    return str(given) if given else f"pool-{next(request_ids)}"


class Run:
    """One request's state in a pool: its deadline, budget and attempts, and its chain —
    made on the first failure (a request its first target answers never needs one)."""

    __slots__ = (
        "_by_model",
        "_chain",
        "_make_chain",
        "attempts",
        "budget",
        "clock",
        "deadline_at",
        "number",
        "request",
        "request_id",
        "tokens",
    )

    def __init__(
        self,
        request: LlmRequest,
        make_chain: Callable[[], Chain],
        budget: Budget | None,
        deadline: float | None,
        request_id: str | None = None,
    ) -> None:
        self.request = request
        self.request_id = request_id_of(request) if request_id is None else request_id
        self._make_chain = make_chain
        self._chain: Chain | None = None
        self.budget = budget
        # The run's clock, read directly for the ledger's times (trio.current_time() is
        # the same clock through three calls; this runs for every attempt).
        self.clock = trio.lowlevel.current_clock()
        self.deadline_at = math.inf if deadline is None else self.clock.current_time() + deadline
        self.tokens = -1  # the limiter's estimate, made when first needed
        self.attempts: list[Attempt] = []
        self.number = 0  # attempts started so far
        self._by_model: dict[str, LlmRequest] | None = None

    @property
    def chain(self) -> Chain:
        chain = self._chain
        if chain is None:
            chain = self._chain = self._make_chain()
        return chain

    def request_for(self, model: str) -> LlmRequest:
        """The request a target serving ``model`` receives
        (:func:`~supervisors.pool.target.request_for`), made once per model."""
        by_model = self._by_model
        if by_model is None:
            by_model = self._by_model = {}
        made = by_model.get(model)
        if made is None:
            made = by_model[model] = request_for(self.request, model)
        return made


class Attempter:
    """Makes attempts for one pool (see the module docstring)."""

    def __init__(
        self,
        breaker: Breaker | None,
        limiter: RateLimiter | None,
        ledger: Ledger,
        timeout: float | None,
    ) -> None:
        self.breaker = breaker
        self.limiter = limiter
        self.ledger = ledger
        self.timeout = timeout
        # Set when any attempt ends, for requests waiting on a target whose probe is in
        # flight (made only while someone waits: see ProviderPool._wait).
        self.progress: trio.Event | None = None

    async def attempt(
        self,
        run: Run,
        target: Target,
        message: Any,
        *,
        tap: Tap | None = None,
        hedge: bool = False,
    ) -> LlmResponse | Refused | Cut | ActorError:
        provider, model = target.provider, target.model
        budget = run.budget
        if budget is not None:
            refusal = await budget.check_or_refuse()
            if refusal is not None:
                raise refusal
        limiter = self.limiter
        permit: Permit | None = None
        if limiter is not None:
            tokens = run.tokens
            if tokens < 0:
                request = run.request
                tokens = run.tokens = request.estimated_prompt_tokens() + request.max_tokens
            permit = limiter.acquire_fast(provider, tokens=tokens)
            if permit is None:
                acquired = await limiter.acquire_or_refuse(
                    provider, tokens=tokens, deadline=trio.current_time()
                )
                if isinstance(acquired, ActorError):
                    return Refused(acquired)
                permit = acquired
        breaker = self.breaker
        admission: Admission | None = None
        if breaker is not None:
            admission = breaker.admit_fast(provider, model)
            if admission is None:
                decision = await breaker.admit_or_refuse(provider, model)
                if isinstance(decision, ActorError):
                    if permit is not None:
                        await limiter.release(permit)  # type: ignore[union-attr]
                    return Refused(decision)
                admission = decision
        run.number = number = run.number + 1
        started = run.clock.current_time()
        try:
            if run.deadline_at == math.inf:
                reply = await target.ref.call(message, timeout=self.timeout, propagate_cancel=True)
            else:
                reply = _CUT
                with trio.move_on_at(run.deadline_at):
                    reply = await target.ref.call(
                        message, timeout=self.timeout, propagate_cancel=True
                    )
        except BaseException as exc:  # noqa: BLE001 - a cancellation is re-raised by ended()
            return await self.ended(
                run, target, number, started, admission, permit, None, exc, tap, hedge
            )
        return await self.ended(
            run, target, number, started, admission, permit, reply, None, tap, hedge
        )

    async def ended(
        self,
        run: Run,
        target: Target,
        number: int,
        started: float,
        admission: Admission | None,
        permit: Permit | None,
        reply: Any,
        exc: BaseException | None = None,
        tap: Tap | None = None,
        hedge: bool = False,
    ) -> LlmResponse | Cut | ActorError:
        """The call of attempt ``number`` returned ``reply`` (:data:`_CUT`: the deadline
        cut it) or raised ``exc``: its verdict, reservation, ledger entry and charge.
        Returns the answer or the failure; a cancellation is re-raised (its entry says
        ``cancelled``)."""
        provider, model = target.provider, target.model
        breaker, limiter = self.breaker, self.limiter
        if exc is not None:
            if admission is not None:
                await breaker.record(admission, exc)  # type: ignore[union-attr]
            if permit is not None:
                await return_permit(limiter, permit, exc, True)  # type: ignore[arg-type]
            if not isinstance(exc, Exception):
                self._enter(run, target, number, started, "cancelled", None, None, hedge=hedge)
                raise exc
            error = classify(exc, provider=provider, model=model)
            return await self._failed(run, target, number, started, error, tap, hedge)
        if reply is _CUT:
            cut = ActorError.from_code(
                Code.TIMEOUT,
                "the pool's deadline passed during the attempt",
                retryable=False,
                provider=provider,
                model=model,
            )
            if admission is not None:  # the deadline is the caller's, not a verdict
                await breaker.record(admission, _cancelled(provider, model))  # type: ignore[union-attr]
            self._enter(run, target, number, started, "failed", cut.code, None, hedge=hedge)
            return Cut(cut)
        if not isinstance(reply, LlmResponse) or not isinstance(reply.usage, Usage):
            # The target is not a provider actor (or a broken one): a bug, not a retry.
            what = (
                f"a {type(reply).__name__}, not an LlmResponse"
                if not isinstance(reply, LlmResponse)
                else f"an LlmResponse whose usage is a {type(reply.usage).__name__}"
            )
            error = ActorError.from_code(
                Code.INTERNAL,
                f"target {provider}/{model} answered {what}",
                provider=provider,
                model=model,
            )
            if admission is not None:
                await breaker.record(admission, error)  # type: ignore[union-attr]
            if permit is not None:
                await return_permit(limiter, permit, error, True)  # type: ignore[arg-type]
            return await self._failed(run, target, number, started, error, tap, hedge)
        if admission is not None and not breaker.unchanged_by_success(admission):  # type: ignore[union-attr]
            await breaker.record(admission, None)  # type: ignore[union-attr]
        usage = reply.usage
        if permit is not None:
            actual = usage.total_tokens
            if not limiter.settle_fast(permit, actual):  # type: ignore[union-attr]
                await limiter.settle(permit, actual)  # type: ignore[union-attr]
        entry = self._enter(run, target, number, started, "ok", None, usage, hedge=hedge)
        if run.budget is not None:
            await self._charge(run, entry)
        return reply

    async def _failed(
        self,
        run: Run,
        target: Target,
        number: int,
        started: float,
        error: ActorError,
        tap: Tap | None,
        hedge: bool,
    ) -> ActorError:
        outcome: Outcome = "failed"
        usage, estimated = error.usage, False
        if tap is not None and tap.events:
            outcome = "partial"
            partial = error.partial_text if error.partial_text is not None else tap.text
            if usage is None or (partial and not usage.output_tokens):
                # Not reported, or reported before any output (Anthropic's message_start):
                # the text the consumer received was generated, and is billed.
                usage = Usage(
                    input_tokens=run.request.estimated_prompt_tokens()
                    if usage is None
                    else usage.input_tokens,
                    output_tokens=len(partial) // 4 + 1 if partial else 0,
                )
                estimated = True
            tap.usage = usage
        entry = self._enter(
            run, target, number, started, outcome, error.code, usage, estimated, hedge=hedge
        )
        await self._charge(run, entry)
        return error

    def _enter(
        self,
        run: Run,
        target: Target,
        number: int,
        started: float,
        outcome: Outcome,
        code: Code | None,
        usage: Usage | None,
        estimated: bool = False,
        *,
        hedge: bool,
    ) -> Attempt:
        entry: Attempt = _new_tuple(
            Attempt,
            self.enter(
                run.request_id,
                number,
                target,
                started,
                run.clock.current_time() - started,
                outcome,
                code,
                usage,
                estimated,
                hedge,
            ),
        )
        run.attempts.append(entry)
        return entry

    def enter(
        self,
        request_id: str,
        number: int,
        target: Target,
        started: float,
        latency: float,
        outcome: Outcome,
        code: Code | None,
        usage: Usage | None,
        estimated: bool,
        hedge: bool,
    ) -> tuple[Any, ...]:
        """Record an attempt's ledger entry (priced) — a plain tuple in
        :class:`~supervisors.pool.ledger.Attempt`'s field order, made into one only when
        read — and wake the requests that wait for any attempt to end."""
        ledger = self.ledger
        provider, model = target.provider, target.model
        entry = (
            request_id,
            number,
            provider,
            model,
            outcome,
            code,
            started,
            latency,
            usage,
            None
            if usage is None or (usage.cost is None and not ledger.prices)
            else ledger.cost(usage, provider, model),
            estimated,
            hedge,
        )
        progress = self.progress
        if progress is not None:
            self.progress = None
            progress.set()
        ledger.record(entry)
        return entry

    @staticmethod
    async def _charge(run: Run, entry: Attempt) -> None:
        """Charge the run's budget with the attempt's usage, priced as in the ledger;
        a cap passed raises (it ends the request)."""
        budget, usage = run.budget, entry.usage
        if budget is None or usage is None:
            return
        if usage.cost is not entry.cost:  # charged at the ledger's cost, reported or priced
            usage = Usage(
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=entry.cost
            )
        refusal = await budget.charge_or_refuse(usage, provider=entry.provider, model=entry.model)
        if refusal is not None:
            raise refusal


def _cancelled(provider: str, model: str) -> ActorError:
    return ActorError.from_code(
        Code.CANCELLED, "cut by the deadline", provider=provider, model=model
    )
