"""The provider pool: one object that gets an :class:`~actors.providers.LlmRequest`
answered across providers and models, or fails with the whole story.

Order of strategies (the classic five — retry, backoff, rotation, downgrade,
escalation — reordered):

1. **Rotation first.** A retryable failure moves to the next *admissible* target at
   once — no backoff sleep while any healthy target remains. The failed target waits its
   retry delay (the retry rules' schedule; a ``retry_after`` honoured exactly) and comes
   back into the rotation, so retries of one target interleave with the others.
2. **Sleep only when everyone waits**, until the earliest target is admissible again (a
   retry delay, a ``retry_after``, a breaker's probe time, a limiter's refill) — never
   past the deadline, and never after the last attempt. With one target, an open breaker
   whose probe comes within the deadline is waited for, not failed.
3. **Fatal stops the chain** (:mod:`supervisors.pool.routing` tables every code):
   ``auth``/``payment`` end the request (and open the provider's breaker permanently);
   ``model_not_found`` moves to the same provider's next model (the downgrade map);
   ``context_window_exceeded`` and ``content_filter`` move only to a target that opted in;
   ``bad_request`` and other non-retryable errors end the request as they are.
4. **Exhausted** — every target out or waiting past the deadline: ``all_providers_failed``
   (:class:`~supervisors.pool.escalation.AllProvidersFailed`) with the attempts, the
   last failure's code as ``category`` and the earliest ``retry_after``; the optional
   ``on_exhausted`` hook may decide to retry later, use another target, or abort.

Every attempt has a ledger entry (:mod:`supervisors.pool.ledger`) and a ``pool.attempt``
event, and is charged to the budget. Streams fall back only before their first event
reaches the consumer; hedging starts a second target beside a slow first one
(:mod:`supervisors.pool.race`). Cancelling ``complete()`` or leaving ``stream()`` cancels
every attempt in flight (their provider requests are closed) and is never a failure.
"""

from __future__ import annotations

import math
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import trio

from actors import ActorError, Code, Receipt
from actors.events import PoolEscalated
from actors.lowlevel import emit, open_nursery_unwrapped
from actors.providers import Complete, LlmProvider, LlmRequest, LlmResponse
from supervisors.pool.attempt import Attempter, Failure, PooledRequest, apply, failure_of
from supervisors.pool.chain import Blocked, Chain, Slot
from supervisors.pool.config import invalid, seconds_or_none
from supervisors.pool.config import name as check_name
from supervisors.pool.escalation import (
    Abort,
    AllProvidersFailed,
    Decision,
    OnExhausted,
    RetryLater,
    UseTarget,
    exhausted,
)
from supervisors.pool.fast import FastPath
from supervisors.pool.ledger import Ledger
from supervisors.pool.race import Race
from supervisors.pool.stream import PoolStream, streaming
from supervisors.pool.target import Target, expand, request_for
from supervisors.resilience.attempt import Replied, attempt_unchecked
from supervisors.resilience.budget import Budget, Price
from supervisors.resilience.resilient import Resilience


class _PoolDefault:
    """The pool's own setting (a budget, the rules' deadline)."""

    def __repr__(self) -> str:
        return "POOL_DEFAULT"


POOL_DEFAULT: Final = _PoolDefault()


class ProviderPool:
    """Targets in preference order over one :class:`~supervisors.Resilience`.

    ``targets``: :class:`Target` values (a provider actor, its name, a model); each is
    sent the request with its own model, on every path
    (:func:`~supervisors.pool.target.request_for`).
    ``downgrades``: per provider, the models to try after its targets' (see
    :func:`~supervisors.pool.target.expand`). ``resilience`` gives the retry rules, the
    breaker and the limiter (default: ``Resilience()`` — the default retry rules, no
    breaker, no limiter). ``budget``: charged with every attempt (a call may pass its
    own). ``prices``: dollars per million tokens by ``(provider, model)`` or
    ``(provider, "*")``, for the ledger's cost. ``deadline``: seconds for one request,
    all attempts and waits included (default: the retry rules' ``deadline``; ``None``:
    bounded by the retries alone). ``attempt_timeout``: seconds for one attempt (the
    actor call's ``timeout``; default ``None``: the adapter's own read timeout bounds
    it). ``hedge_after``: seconds without an answer (a first event, for a stream) before
    the next target is started beside the first. ``on_exhausted``: the escalation hook.
    ``keep``: ledger entries kept.

    Every argument is checked when the pool is built: a bad one is ``config_invalid``
    naming it.
    """

    def __init__(
        self,
        targets: Sequence[Target],
        *,
        downgrades: Mapping[str, Sequence[str]] | None = None,
        resilience: Resilience | None = None,
        budget: Budget | None = None,
        prices: Mapping[tuple[str, str], Price] | None = None,
        deadline: float | _PoolDefault | None = POOL_DEFAULT,
        attempt_timeout: float | None = None,
        hedge_after: float | None = None,
        on_exhausted: OnExhausted | None = None,
        keep: int = 1000,
        name: str = "pool",
    ) -> None:
        given: object = targets
        if isinstance(given, str | bytes) or not isinstance(given, Sequence) or not given:
            raise invalid("targets", "a non-empty list of Target", targets)
        first_at: dict[tuple[str, str], int] = {}
        for index, target in enumerate(targets):
            if not isinstance(target, Target):
                raise invalid(f"targets[{index}]", "a Target", target)
            if target.key in first_at:  # one (provider, model), one slot: one retry budget
                raise ActorError.from_code(
                    Code.CONFIG_INVALID,
                    f"targets[{index}] repeats the provider and model of "
                    f"targets[{first_at[target.key]}]",
                )
            first_at[target.key] = index
        if downgrades is not None and not isinstance(downgrades, Mapping):
            raise invalid("downgrades", "a mapping of provider to model names", downgrades)
        if resilience is not None and not isinstance(resilience, Resilience):
            raise invalid("resilience", "a Resilience", resilience)
        if budget is not None and not isinstance(budget, Budget):
            raise invalid("budget", "a Budget", budget)
        if on_exhausted is not None and not callable(on_exhausted):
            raise invalid("on_exhausted", "an async callable", on_exhausted)
        if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= sys.maxsize:
            raise invalid("keep", "an integer >= 0", keep)
        self.name = check_name("name", name)
        self.targets = tuple(targets)
        self.chain = tuple(expand(self.targets, downgrades or {}))
        self.resilience = resilience if resilience is not None else Resilience()
        self.budget = budget
        self.ledger = Ledger(keep=keep, prices=_prices(prices))
        rules_deadline = self.resilience.retry.deadline
        self.deadline = seconds_or_none(
            "deadline",
            rules_deadline if isinstance(deadline, _PoolDefault) else deadline,
            positive=True,  # a zero deadline would cut every attempt before it left
        )
        self.attempt_timeout = seconds_or_none("attempt_timeout", attempt_timeout)
        self.hedge_after = seconds_or_none("hedge_after", hedge_after, positive=True)
        self.on_exhausted = on_exhausted
        breaker = self.resilience.breaker
        self._blocked: Blocked | None = (
            None
            if breaker is None
            else lambda target: breaker.blocked_fast(target.provider, target.model)
        )
        # No deadline, no hedging: a request without a budget takes the fast path.
        self._plain = self.deadline is None and self.hedge_after is None
        self._attempter = Attempter(
            self.resilience.breaker, self.resilience.limiter, self.ledger, self.attempt_timeout
        )
        self._fast = FastPath(
            self.chain,
            breaker,
            self.resilience.limiter,
            self._attempter,
            self._make_chain,
        )

    # --- the two entry points -------------------------------------------------------

    async def complete(
        self, request: LlmRequest, *, budget: Budget | _PoolDefault | None = POOL_DEFAULT
    ) -> LlmResponse:
        """Get ``request`` answered (see the module docstring for the order of things).

        Raises the error that ends the request: a fatal one as it is, ``all_providers_failed``
        when the chain is exhausted, ``budget_exceeded`` at a cap; a cancelled caller gets
        ``trio.Cancelled``, never a failure.
        """
        if budget is POOL_DEFAULT:
            budget = self.budget
        if budget is not None or not self._plain or type(request) is not LlmRequest:
            return await self._complete(request, budget)
        fast = self._fast  # supervisors.pool.fast: the first attempt without a PooledRequest
        book, skipped, position, tokens = fast.first(request)
        if book is None:
            return await self._walk(fast.run(request, tokens, 0), skipped or [], position, None)
        target = book.target
        # Everything was checked when the pool was built, or is made here: the
        # primitive's unchecked form (the walk's Attempter.attempt, specialised).
        receipt = Receipt()
        outcome = await attempt_unchecked(
            target.ref.call(
                Complete.unchecked(request_for(request, target.model)),
                timeout=self.attempt_timeout,
                propagate_cancel=True,
                receipt=receipt,
            ),
            target.provider,
            target.model,
            fast.breaker,
            fast.limiter,
            None,  # no budget
            tokens if tokens > 0 else 0,
            None,  # no deadline
            False,  # no wait: the walk decides
            fast.usage_checks[position],
            book,
            receipt,
        )
        if type(outcome) is Replied:
            return outcome.value  # type: ignore[no-any-return]
        failed = failure_of(outcome)
        assert not isinstance(failed, LlmResponse)  # not Replied
        return await self._walk(fast.handover(book, tokens), skipped or [], position, failed)

    async def _complete(
        self, request: LlmRequest, budget: Budget | _PoolDefault | None
    ) -> LlmResponse:
        run = self._run(request, budget)
        if self.hedge_after is not None:
            async with open_nursery_unwrapped() as nursery:
                winner = await self._race(run, nursery, stream=False).settle()
                nursery.cancel_scope.cancel(reason="a hedged attempt answered")
            return winner.result  # type: ignore[return-value]
        return await self._walk(run, [], 0, None)

    async def _walk(
        self,
        run: PooledRequest,
        skipped: list[tuple[int, float]],
        index: int,
        failed: Failure | None,
    ) -> LlmResponse:
        """The chain of ``run``: the target at ``index`` failed with ``failed``, or (with
        ``failed`` ``None``) is the next to try; the targets in ``skipped`` are known to
        be down for the seconds given (their breaker refuses them).

        Until an attempt fails no chain is made: the targets are taken in order, skipping
        those whose breaker is known to refuse them (a target out for good leaves the
        choice to the chain). The chain is made at the first failure."""
        attempt = self._attempter.attempt
        targets = self.chain
        if failed is None:
            blocked = self._blocked
            wait = None
            while index < len(targets):
                wait = None if blocked is None else blocked(targets[index])
                if wait is None or wait == math.inf:
                    break
                skipped.append((index, wait))
                index += 1
            if index < len(targets) and wait is None:
                target = targets[index]
                result = await attempt(
                    run, target, Complete.unchecked(run.request_for(target.model))
                )
                if isinstance(result, LlmResponse):
                    return result
                failed = result
        chain = run.chain
        now = trio.current_time()
        for position, wait in skipped:
            if wait != math.inf:  # a target out for good is the chain's to judge
                chain.skip(chain.slots[position], wait, now)
        slot: Slot | None = None
        if failed is not None:
            slot = chain.slots[index]
            chain.cursor = index + 1
        while True:
            if slot is not None and failed is not None:
                if apply(chain, slot, failed):  # cut by the deadline (a stop raised)
                    await self._exhausted(run)
                # A failure yields: a loop of refusals cannot starve other tasks, and a
                # cancelled caller gets trio.Cancelled here rather than the failure.
                await trio.lowlevel.checkpoint()
            while (slot := chain.pick(trio.current_time())) is None:
                await self._wait(run)
            target = slot.target
            result = await attempt(run, target, Complete.unchecked(run.request_for(target.model)))
            if isinstance(result, LlmResponse):
                return result
            failed = result

    @asynccontextmanager
    async def stream(
        self, request: LlmRequest, *, budget: Budget | _PoolDefault | None = POOL_DEFAULT
    ) -> AsyncIterator[PoolStream]:
        """Stream ``request``'s answer: ``async with pool.stream(request) as events:``.

        The chain runs when the first event is asked for; it falls back only until an
        event is handed over. Afterwards a failure is raised from the iteration, typed,
        with the partial text (``partial_text``) and usage (estimated when the provider
        did not report it; the ledger entry says so). Leaving the block cancels every
        attempt in flight.
        """
        run = self._run(request, budget)
        async with streaming(lambda nursery: self._race(run, nursery, stream=True)) as events:
            yield events

    # --- the chain's waits and its end ----------------------------------------------

    def _race(self, run: PooledRequest, nursery: trio.Nursery, *, stream: bool) -> Race:
        return Race(
            run,
            nursery,
            attempter=self._attempter,
            hedge_after=self.hedge_after,
            wait=self._wait,
            exhausted=self._exhausted,
            stream=stream,
        )

    def _run(self, request: Any, budget: Budget | _PoolDefault | None) -> PooledRequest:
        if not isinstance(request, LlmRequest):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION,
                f"a pool takes an LlmRequest, not {type(request).__name__}",
                delivered=False,
            )
        if isinstance(budget, _PoolDefault):
            budget = self.budget
        elif budget is not None and not isinstance(budget, Budget):
            raise invalid("budget", "a Budget or None", budget)
        return PooledRequest(request, self._make_chain, budget, self.deadline)

    def _make_chain(self) -> Chain:
        breaker = self.resilience.breaker
        return Chain(
            self.chain,
            self.resilience.retry.policy_for,
            self._blocked,
            None
            if breaker is None
            else lambda target: breaker.model_gone_fast(target.provider, target.model),
        )

    async def _wait(self, run: PooledRequest) -> None:
        """Nothing admissible now: sleep until the earliest target is, if that comes
        before the deadline (an attempt starting at the deadline could not run) — else
        the chain is exhausted. Past the deadline nothing is admissible, whatever the
        targets say (a stream read only after its deadline passed: no attempt starts)."""
        chain = run.chain
        wake = chain.wake_at()
        if wake is None or max(wake, trio.current_time()) >= run.deadline_at:
            await self._exhausted(run)
            return
        # Sleep until then — or until one of the pool's attempts ends: a refusal's
        # retry_after for a half-open breaker is its probe's lease, and the probe's
        # verdict usually comes much sooner.
        attempter = self._attempter
        progress = attempter.progress
        if progress is None:
            progress = attempter.progress = trio.Event()
        with trio.move_on_at(wake):
            await progress.wait()
            chain.unblock()

    async def _exhausted(self, run: PooledRequest) -> None:
        """Raise ``all_providers_failed`` — unless ``on_exhausted`` decides to go on."""
        chain = run.chain
        failure = exhausted(
            run.request_id,
            tuple(run.attempts),
            chain.last_failure(),
            chain.retry_after(trio.current_time()),
        )
        hook = self.on_exhausted
        if hook is None:
            raise failure
        try:
            decision = await hook(failure)
        except ActorError:
            raise
        except Exception as exc:
            raise ActorError.from_code(
                Code.INTERNAL, "the pool's on_exhausted hook raised", cause=exc
            ) from exc
        if decision is not None and not isinstance(decision, RetryLater | UseTarget | Abort):
            raise invalid(
                "the on_exhausted decision", "RetryLater, UseTarget, Abort or None", decision
            ) from failure
        _audit(run, failure, decision)
        if isinstance(decision, RetryLater):
            await trio.sleep(decision.seconds)
            chain.reopen()
        elif isinstance(decision, UseTarget):
            chain.add(decision.target)
        else:
            failure.decision = decision
            raise failure
        if self.deadline is not None:
            run.deadline_at = trio.current_time() + self.deadline


if TYPE_CHECKING:

    def _a_pool_is_a_provider(pool: ProviderPool) -> LlmProvider:
        return pool  # mypy checks ProviderPool against the protocol


def _prices(prices: Mapping[tuple[str, str], Price] | None) -> dict[tuple[str, str], Price]:
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise invalid("prices", "a mapping of (provider, model) to Price", prices)
    for key, price in prices.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            raise invalid("prices key", "a (provider, model) pair of strings", key)
        if not isinstance(price, Price):
            raise invalid(f"prices[{key!r}]", "a Price", price)
    return dict(prices)


def _audit(run: PooledRequest, failure: AllProvidersFailed, decision: Decision | None) -> None:
    emit(
        PoolEscalated(
            request_id=run.request_id,
            decision=_KIND.get(type(decision), "none"),
            by=getattr(decision, "by", None),
            seconds=decision.seconds if isinstance(decision, RetryLater) else None,
            provider=decision.target.provider if isinstance(decision, UseTarget) else None,
            model=decision.target.model if isinstance(decision, UseTarget) else None,
            reason=decision.reason if isinstance(decision, Abort) else None,
            category=None if failure.category is None else str(failure.category),
            attempts=len(failure.attempts),
        )
    )


_KIND: Final[Mapping[type, str]] = {RetryLater: "retry", UseTarget: "use_target", Abort: "abort"}
