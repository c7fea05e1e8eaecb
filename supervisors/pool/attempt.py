"""One attempt of a pool on one target: the attempt primitive, and the pool's ledger.

:meth:`Attempter.attempt` is one :func:`supervisors.resilience.attempt.attempt` (budget,
limiter, breaker; the call; the verdict, the reservation, the charge) with the pool's
bookkeeping (:class:`Bookkeeper`: the ledger entry, the stream's partial usage, the cost
charged). It returns the answer, a :class:`~supervisors.resilience.attempt.TurnedAway`
(nothing was sent: the limiter would make the request wait, or the breaker refuses — the
chain moves on without using a retry), a :class:`~supervisors.resilience.attempt.CutOff`
(the request's deadline cut the call), or the classified :class:`~actors.ActorError` of
a sent attempt that failed. It raises only what ends the request whatever the chain
holds: a spent budget (``budget_exceeded`` before or after the attempt) and
cancellation.

Admission never waits: a limiter that has no room *now* refuses with the wait as
``retry_after`` (the pool rotates, and sleeps only when every target waits). The call
runs with ``propagate_cancel``, so a caller that goes away cancels the provider's HTTP
request. An attempt still running at the request's deadline is cancelled and fails with
``timeout`` (not retryable). A reply that is not an :class:`~actors.providers.LlmResponse`
with a :class:`~actors.Usage` is ``internal`` (the target is not a provider actor).

What each ending does (the primitive's table, plus the ledger):

* answered — breaker: success; reservation: settled with the usage; budget: charged;
  ledger: ``ok``;
* failed — breaker: the code's verdict; reservation: settled with the error's usage, else
  kept; budget: charged with the error's usage; ledger: ``failed`` (``partial`` for a
  stream whose events reached the consumer, charged with its estimated usage);
* cut by the deadline — breaker: no verdict; reservation: kept (the request may have
  reached the provider); budget: not charged; ledger: ``failed`` with ``timeout``;
* cancelled — breaker: no verdict, probe lease freed; reservation: kept; budget: not
  charged; ledger: ``cancelled`` — unless the caller was cancelled before the provider
  actor took the message (already cancelled, or while it waited queued): then nothing was
  sent, the reservation is given back whole and there is no ledger entry;
* refused — reservation given back; no ledger entry (nothing was sent).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import trio

from actors import ActorError, Code, Receipt, Usage
from actors.providers import LlmRequest, LlmResponse
from supervisors.pool.chain import Chain, Slot
from supervisors.pool.ledger import Attempt, Ledger, Outcome
from supervisors.pool.target import Target, request_for
from supervisors.resilience.attempt import (
    CutOff,
    Ended,
    Faulted,
    Replied,
    TurnedAway,
    UsageOf,
    attempt_unchecked,
)
from supervisors.resilience.breaker import Breaker
from supervisors.resilience.budget import Budget
from supervisors.resilience.ratelimit import RateLimiter

#: What an attempt that did not answer gives the chain.
Failure = TurnedAway | CutOff | ActorError


def apply(chain: Chain, slot: Slot, failure: Failure) -> bool:
    """Put a failed attempt on the chain: a refusal blocks ``slot``, a failure moves the
    chain (a stop raises it). ``True`` for a cut by the deadline — the caller ends the
    chain (the one decision that is the pool's, not the chain's)."""
    now = trio.current_time()
    if isinstance(failure, TurnedAway):
        chain.refused(slot, failure.error, now)
        return False
    if isinstance(failure, CutOff):
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


def request_id_of(request: LlmRequest) -> str:
    """The request's id: its ``metadata["request_id"]``, else a new ``pool-N``."""
    given = request.metadata.get("request_id")
    return str(given) if given else f"pool-{next(request_ids)}"


class PooledRequest:
    """One request's state in a pool: its deadline, budget and attempts, and its chain —
    made on the first failure (a request its first target answers never needs one)."""

    __slots__ = (
        "_by_model",
        "_chain",
        "_make_chain",
        "attempts",
        "budget",
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
        self.deadline_at = math.inf if deadline is None else trio.current_time() + deadline
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
        by_model = self._by_model  # pragma: no mutate: a cache of equal requests
        if by_model is None:
            by_model = self._by_model = {}
        made = by_model.get(model)  # pragma: no mutate: a cache of equal requests
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
        self._usage_checks: dict[tuple[str, str], UsageOf] = {}

    def usage_check(self, target: Target) -> UsageOf:
        """The ``usage_of`` of the attempts on ``target`` (:func:`usage_check`), made once
        per ``(provider, model)``."""
        key = (target.provider, target.model)
        check = self._usage_checks.get(key)  # pragma: no mutate: a cache of equal checks
        if check is None:
            check = self._usage_checks[key] = usage_check(target.provider, target.model)
        return check

    async def attempt(
        self,
        run: PooledRequest,
        target: Target,
        message: Any,
        *,
        tap: Tap | None = None,
        hedge: bool = False,
    ) -> LlmResponse | Failure:
        """One attempt of ``run`` on ``target`` (see the module docstring)."""
        limiter = self.limiter
        tokens = 0  # pragma: no mutate: read only with a limiter, which sets it below
        if limiter is not None:
            tokens = run.tokens
            if tokens < 0:  # pragma: no mutate: an estimate is never 0 (max_tokens >= 1)
                request = run.request
                tokens = run.tokens = request.estimated_prompt_tokens() + request.max_tokens
        # The arguments were checked when the pool was built (its targets, resilience and
        # budget) or are made here: the primitive's unchecked form.
        receipt = Receipt()
        outcome = await attempt_unchecked(
            target.ref.call(message, timeout=self.timeout, propagate_cancel=True, receipt=receipt),
            target.provider,
            target.model,
            self.breaker,
            limiter,
            run.budget,
            tokens,
            run.deadline_at,
            False,  # no wait: the chain rotates instead
            self.usage_check(target),
            Bookkeeper(self, target, run.request, run, tap, hedge, run.request_id),
            receipt,
        )
        return failure_of(outcome)


def usage_check(provider: str, model: str) -> UsageOf:
    """The usage of a reply of the target ``provider``/``model``: an
    :class:`~actors.providers.LlmResponse`'s :class:`~actors.Usage`; ``internal`` when the
    target answered anything else (it is not a provider actor, or a broken one: a bug, not
    a retry)."""

    def usage_of(reply: Any) -> Usage:
        if type(reply) is LlmResponse and type(usage := reply.usage) is Usage:
            return usage
        if isinstance(reply, LlmResponse) and isinstance(reply.usage, Usage):
            return reply.usage
        what = (
            f"a {type(reply).__name__}, not an LlmResponse"
            if not isinstance(reply, LlmResponse)
            else f"an LlmResponse whose usage is a {type(reply.usage).__name__}"
        )
        raise ActorError.from_code(
            Code.INTERNAL,
            f"target {provider}/{model} answered {what}",
            provider=provider,
            model=model,
        )

    return usage_of


def failure_of(outcome: Replied | Faulted | TurnedAway | CutOff) -> LlmResponse | Failure:
    """What the chain makes of an outcome: the answer, the failure's error, a refusal or
    a cut as they are; a refusal by the budget is raised (it ends the request)."""
    if type(outcome) is Replied:
        return outcome.value  # type: ignore[no-any-return]
    if type(outcome) is Faulted:
        return outcome.error
    if type(outcome) is TurnedAway and outcome.by == "budget":
        raise outcome.error
    return outcome  # type: ignore[return-value]


class Bookkeeper:
    """The pool's side of one attempt (a :class:`~supervisors.resilience.attempt.Bookkeeping`):
    its number and start when sent, its ledger entry when it ends, and the usage the
    budget is charged with — at the ledger's cost, a stream's partial usage estimated.

    ``run`` is ``None`` on the fast path (no per-request state yet): the request's id is
    made when the entry is written, and :attr:`entry` is what the walk's run takes over."""

    __slots__ = (
        "attempter",
        "entry",
        "hedge",
        "number",
        "request",
        "request_id",
        "run",
        "started",
        "tap",
        "target",
    )

    def __init__(
        self,
        attempter: Attempter,
        target: Target,
        request: LlmRequest,
        run: PooledRequest | None = None,
        tap: Tap | None = None,
        hedge: bool = False,
        request_id: str | None = None,
    ) -> None:
        self.attempter = attempter
        self.run = run
        self.target = target
        self.tap = tap
        self.hedge = hedge
        self.request = request
        self.request_id = request_id  # None: made when the first entry is written
        self.number = 0
        self.started = 0.0  # pragma: no mutate: sent() sets it before any entry is written
        self.entry: Attempt | None = None

    def sent(self, now: float) -> None:
        run = self.run
        if run is None:
            self.number = 1
        else:
            run.number = self.number = run.number + 1
        self.started = now

    def withdrawn(self) -> None:
        # Never sent: no entry (its number is not reused: its request is being cancelled).
        # Its probe lease, if it held one, was freed: wake the requests waiting for one.
        progress = self.attempter.progress
        if progress is not None:
            self.attempter.progress = None
            progress.set()

    def ended(self, outcome: Ended | None, now: float) -> Usage | None:
        if type(outcome) is Replied:
            if self.run is None:  # the fast path: no run keeps the entry, no budget
                self._write(now, "ok", None, outcome.usage)
                return None
            return self._charged(self._keep(self._write(now, "ok", None, outcome.usage)))
        if outcome is None:
            self._keep(self._write(now, "cancelled", None, None))
            return None
        if type(outcome) is CutOff:
            self._keep(self._write(now, "failed", outcome.error.code, None))
            return None
        error = outcome.error  # type: ignore[union-attr]
        result: Outcome = "failed"
        usage, estimated = error.usage, False
        tap = self.tap
        if tap is not None and tap.events:
            result = "partial"
            partial = error.partial_text if error.partial_text is not None else tap.text
            if usage is None or (partial and not usage.output_tokens):
                # Not reported, or reported before any output (Anthropic's message_start):
                # the text the consumer received was generated, and is billed.
                usage = Usage(
                    input_tokens=self.request.estimated_prompt_tokens()
                    if usage is None
                    else usage.input_tokens,
                    output_tokens=len(partial) // 4 + 1 if partial else 0,
                )
                estimated = True
            tap.usage = usage
        return self._charged(self._keep(self._write(now, result, error.code, usage, estimated)))

    def _charged(self, entry: Attempt) -> Usage | None:
        """The usage to charge for ``entry``: priced at the ledger's cost (reported or
        from the price table); ``None`` when there is no budget or no usage."""
        run, usage = self.run, entry.usage
        if run is None or run.budget is None or usage is None:
            return None
        if usage.cost is not entry.cost:
            usage = Usage(
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=entry.cost
            )
        return usage

    def _write(
        self,
        now: float,
        outcome: Outcome,
        code: Code | None,
        usage: Usage | None,
        estimated: bool = False,
    ) -> tuple[Any, ...]:
        """Record the attempt's ledger entry, ended at ``now`` and priced — a plain tuple
        in :class:`~supervisors.pool.ledger.Attempt`'s field order, made into one only
        when read — and wake the requests that wait for any attempt of the pool to end."""
        request_id = self.request_id
        if request_id is None:  # request_id_of(self.request), inlined: once per request
            given = self.request.metadata.get("request_id")
            request_id = self.request_id = str(given) if given else f"pool-{next(request_ids)}"
        attempter, target, started = self.attempter, self.target, self.started
        ledger = attempter.ledger
        provider, model = target.provider, target.model
        entry = (
            request_id,
            self.number,
            provider,
            model,
            outcome,
            code,
            started,
            now - started,
            usage,
            None
            if usage is None or (usage.cost is None and not ledger.prices)
            else ledger.cost(usage, provider, model),
            estimated,
            self.hedge,
        )
        progress = attempter.progress
        if progress is not None:
            attempter.progress = None
            progress.set()
        ledger.record(entry)
        return entry

    def _keep(self, written: tuple[Any, ...]) -> Attempt:
        """The entry ``written``, as the attempt's :attr:`entry` and its run's (if any)."""
        entry = self.entry = Attempt(*written)
        if self.run is not None:
            self.run.attempts.append(entry)
        return entry
