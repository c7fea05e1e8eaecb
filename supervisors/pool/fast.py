"""The pool's fast path: a request's first attempt made without per-request state.

Taken by :meth:`~supervisors.pool.pool.ProviderPool.complete` for a request with no
budget, under a pool with no deadline and no hedging. It is the general walk's first
step specialised, not another policy: the first target whose in-process breaker and
limiter admit it *at once* is sent the request the walk would send it
(:func:`~supervisors.pool.target.request_for`: the target's own model), its ending goes
through the same :meth:`~supervisors.pool.attempt.Attempter.ended` (verdict, reservation,
ledger entry, event) unless it is a clean success that changes nothing, and everything
else — a failure, a breaker that counted failures, a limiter that would make the request
wait, a target out for good — is handed to the walk at the target where it stopped, with
the targets it skipped. ``tests/test_pool_differential.py`` checks that both paths give
the same answers, ledgers, events, breaker states and requests sent.

It remembers, per chain position, until when a target's breaker refuses it, and does
not ask again before then — unless the in-process breakers' generation changed (a
success, a freed probe lease or a reset may admit sooner).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence

import trio

from actors import ActorError, Usage
from actors.providers import Complete, LlmRequest, LlmResponse
from supervisors.breaker import Admission, Breaker
from supervisors.pool.attempt import Attempter, Cut, Refused, Run, request_ids
from supervisors.pool.chain import Chain
from supervisors.pool.target import Target, request_for
from supervisors.ratelimit import Permit, RateLimiter

#: The general walk: ``run``'s target at ``index`` failed with ``failed`` (``None``:
#: it is the next to try); the skipped targets, by position, with their breaker's wait.
Walk = Callable[
    [Run, list[tuple[int, float]], int, Refused | Cut | ActorError | None],
    Awaitable[LlmResponse],
]


class FastPath:
    """A pool's fast path over ``chain`` (see the module docstring)."""

    __slots__ = (
        "_down",
        "_generation",
        "attempter",
        "breaker",
        "chain",
        "limiter",
        "make_chain",
        "walk",
    )

    def __init__(
        self,
        chain: Sequence[Target],
        breaker: Breaker | None,
        limiter: RateLimiter | None,
        attempter: Attempter,
        make_chain: Callable[[], Chain],
        walk: Walk,
    ) -> None:
        self.chain = tuple(chain)
        self.breaker = breaker
        self.limiter = limiter
        self.attempter = attempter
        self.make_chain = make_chain
        self.walk = walk
        # Per chain position, the trio time until which its breaker refuses it — valid
        # while the in-process state's generation is the one seen.
        self._down = [-math.inf] * len(self.chain)
        self._generation = -1

    def run(self, request: LlmRequest, tokens: int, number: int = 1) -> Run:
        """The request's state for the walk: no budget, no deadline, ``number`` attempts
        made and the limiter's estimate ``tokens`` (``-1``: not made yet)."""
        run = Run(request, self.make_chain, None, None)
        run.tokens, run.number = tokens, number
        return run

    async def complete(self, request: LlmRequest) -> LlmResponse:
        """Get ``request`` answered: the first attempt here, the rest by the walk."""
        breaker, limiter = self.breaker, self.limiter
        skipped: list[tuple[int, float]] = []
        tokens = -1
        position = 0
        clock = trio.lowlevel.current_clock()
        now = clock.current_time()
        down = self._down
        if (
            breaker is not None
            and (local := breaker.local) is not None
            and local.generation != self._generation  # a breaker may admit sooner
        ):
            down = self._down = [-math.inf] * len(self.chain)
            self._generation = local.generation
        for target in self.chain:
            provider, model = target.provider, target.model
            admission: Admission | None = None
            if breaker is not None:
                if down[position] > now:  # its breaker said so: not asked again until then
                    skipped.append((position, down[position] - now))
                    position += 1
                    continue
                admission = breaker.admit_fast(provider, model)
                if admission is None:
                    wait = breaker.blocked_fast(provider, model, now)
                    if wait is None or wait == math.inf:
                        break  # it may admit (or is out for good): the walk decides
                    down[position] = now + wait
                    skipped.append((position, wait))
                    position += 1
                    continue
            permit: Permit | None = None
            if limiter is not None:
                if tokens < 0:
                    tokens = request.estimated_prompt_tokens() + request.max_tokens
                permit = limiter.acquire_fast(provider, tokens=tokens, now=now)
                if permit is None:
                    break  # it would wait (or refuse): the walk decides
            attempter = self.attempter
            started = now  # nothing was awaited since
            try:
                reply = await target.ref.call(
                    Complete.unchecked(request_for(request, model)),
                    timeout=attempter.timeout,
                    propagate_cancel=True,
                )
            except BaseException as exc:  # noqa: BLE001 - a cancellation is re-raised there
                run = self.run(request, tokens)
                failed = await attempter.ended(
                    run, target, 1, started, admission, permit, None, exc
                )
                assert not isinstance(failed, LlmResponse)  # a call that raised
                return await self.walk(run, skipped, position, failed)
            if (
                type(reply) is LlmResponse
                and type(usage := reply.usage) is Usage
                and (admission is None or breaker.unchanged_by_success(admission))  # type: ignore[union-attr]
                and (permit is None or limiter.settle_fast(permit, usage.total_tokens))  # type: ignore[union-attr]
            ):
                given = request.metadata.get("request_id")  # request_id_of, inlined
                attempter.enter(
                    str(given) if given else f"pool-{next(request_ids)}",
                    1,
                    target,
                    started,
                    clock.current_time() - started,
                    "ok",
                    None,
                    usage,
                    False,
                    False,
                )
                return reply
            run = self.run(request, tokens)
            answered = await attempter.ended(run, target, 1, started, admission, permit, reply)
            if isinstance(answered, LlmResponse):
                return answered
            return await self.walk(run, skipped, position, answered)
        return await self.walk(self.run(request, tokens, 0), skipped, position, None)
