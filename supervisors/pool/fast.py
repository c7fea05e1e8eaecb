"""The pool's fast path: a request's first attempt made without per-request state.

Taken by :meth:`~supervisors.pool.pool.ProviderPool.complete` for a request with no
budget, under a pool with no deadline and no hedging. It is the general walk's first
step specialised, not another policy: :meth:`FastPath.first` picks, synchronously, the
first target whose in-process breaker is not known to refuse it (the walk's own skip:
``Breaker.blocked_fast``); the pool sends it the request the walk would send it
(:func:`~supervisors.pool.target.request_for`: the target's own model) through the one
attempt primitive, :func:`supervisors.resilience.attempt.attempt` (whose own fast path
admits synchronously when the in-process limiter and breaker need no await), with the
same :class:`~supervisors.pool.attempt.Bookkeeper` as the walk (ledger entry, event). An
answer is returned; everything else — a failure, a refusal, a target out for good — is
handed to the walk (:meth:`FastPath.handover`) at the target where it stopped, with the
targets it skipped. ``tests/test_pool_differential.py`` checks that both paths give the
same answers, ledgers, events, breaker states and requests sent.

The pool awaits the primitive itself (no frame of this module in between: every frame
between the caller and the actor call costs on each of its suspensions).

It remembers, per chain position, until when a target's breaker refuses it, and does
not ask again before then — unless the in-process breakers' generation changed (a
success, a freed probe lease, a reset or a reopening may admit sooner: a failed probe's
new probe time may come before the lease it ends).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import trio

from actors.providers import LlmRequest
from supervisors.pool.attempt import Attempter, Bookkeeper, PooledRequest
from supervisors.pool.chain import Chain
from supervisors.pool.target import Target
from supervisors.resilience.breaker import Breaker
from supervisors.resilience.ratelimit import RateLimiter

#: What :meth:`FastPath.first` found: the first attempt's bookkeeper (its target), or
#: ``None`` when the walk starts at once; the skipped targets, by position, with their
#: breaker's wait (``None``: none); the position reached; the limiter's estimate (``-1``:
#: not made).
First = tuple[Bookkeeper | None, list[tuple[int, float]] | None, int, int]


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
        "usage_checks",
    )

    def __init__(
        self,
        chain: Sequence[Target],
        breaker: Breaker | None,
        limiter: RateLimiter | None,
        attempter: Attempter,
        make_chain: Callable[[], Chain],
    ) -> None:
        self.chain = tuple(chain)
        self.breaker = breaker
        self.limiter = limiter
        self.attempter = attempter
        self.make_chain = make_chain
        #: Per chain position, the attempt's ``usage_of`` (made once, not per attempt).
        self.usage_checks = [attempter.usage_check(target) for target in self.chain]
        # Per chain position, the trio time until which its breaker refuses it — valid
        # while the in-process state's generation is the one seen.
        self._down = [-math.inf] * len(self.chain)
        self._generation = -1  # pragma: no mutate: any value, as _down is all -inf until set

    def run(self, request: LlmRequest, tokens: int, number: int = 1) -> PooledRequest:
        """The request's state for the walk: no budget, no deadline, ``number`` attempts
        made and the limiter's estimate ``tokens`` (``-1``: not made yet)."""
        run = PooledRequest(request, self.make_chain, None, None)
        run.tokens, run.number = tokens, number
        return run

    def handover(self, book: Bookkeeper, tokens: int) -> PooledRequest:
        """The request's state for the walk after the first attempt (``book``'s) did not
        answer: its ledger entry (if it was sent) and request id carried over."""
        run = PooledRequest(book.request, self.make_chain, None, None, book.request_id)
        run.tokens, run.number = tokens, book.number
        if book.entry is not None:
            run.attempts.append(book.entry)
        return run

    def first(self, request: LlmRequest) -> First:
        """The first target to try for ``request`` (synchronous: nothing is taken)."""
        breaker = self.breaker
        tokens = -1  # pragma: no mutate: read only with a limiter, which sets it below
        if self.limiter is not None:
            tokens = request.estimated_prompt_tokens() + request.max_tokens
        local = None if breaker is None else breaker.local
        if breaker is None or (local is not None and not local.breakers):
            # No breaker, or every in-process breaker is closed and clean (only those that
            # are not have an entry): the first target may be admitted (the primitive asks).
            return Bookkeeper(self.attempter, self.chain[0], request), None, 0, tokens
        skipped: list[tuple[int, float]] | None = None  # made when a target is skipped
        position = 0
        down = self._down
        if local is not None and local.generation != self._generation:
            # A breaker may admit sooner (a success, a freed lease, a reset).
            down = self._down = [-math.inf] * len(self.chain)
            self._generation = local.generation
        now = trio.lowlevel.current_clock().current_time()
        for target in self.chain:
            if down[position] > now:  # its breaker said so: not asked again until then
                if skipped is None:
                    skipped = []
                skipped.append((position, down[position] - now))
                position += 1
                continue
            wait = breaker.blocked_fast(target.provider, target.model, now)
            if wait is not None:
                if wait == math.inf:
                    break  # out for good: the walk (its chain) decides
                down[position] = now + wait
                if skipped is None:
                    skipped = []
                skipped.append((position, wait))
                position += 1
                continue
            return Bookkeeper(self.attempter, target, request), skipped, position, tokens
        return None, skipped, position, tokens
