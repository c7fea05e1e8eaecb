"""Proactive rate limits: token buckets for requests and tokens per minute, FIFO.

``acquire(key, tokens=estimate)`` reserves one request and ``estimate`` tokens (prompt
plus ``max_tokens``) from the key's buckets at once; ``settle(permit, actual)`` refunds
what was over-estimated or charges what was under. Semantics:

* reservations are FIFO: each one takes its tokens at once (a bucket may go negative)
  and waits until the bucket has refilled to cover it, so later callers wait longer;
* a wait that cannot finish within the caller's deadline — ``deadline`` if given, else
  trio's current effective deadline — fails **at once** with a local ``rate_limited``
  carrying ``retry_after``, and takes nothing;
* a caller cancelled while waiting gives back exactly what it reserved, nothing more;
* ``acquire`` is a checkpoint: a caller already cancelled gets ``trio.Cancelled`` and
  takes nothing (never ``rate_limited``); a permit granted at once, or a refusal, still
  yields to the scheduler once, so a loop of refused calls lets other tasks run;
* buckets start full; ``burst`` (default: one minute's worth) is their capacity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs
import trio

from actors import ActorError, Code
from actors.checks import finite_positive, optional, per_minute, validator
from supervisors.state import BucketSpec, MemoryState, StateBackend
from supervisors.state.memory import Bucket


@attrs.frozen(kw_only=True)
class RateLimit:
    """Limits for one key (``None``: unlimited). Checked as it is built
    (:mod:`actors.checks`): ``config_invalid`` naming the field for a rate that is not
    ``None`` or a finite number > 0 per minute, a burst that is not ``None`` or a finite
    number > 0."""

    requests_per_minute: float | None = attrs.field(default=None, validator=validator(per_minute))
    tokens_per_minute: float | None = attrs.field(default=None, validator=validator(per_minute))
    request_burst: float | None = attrs.field(
        default=None, validator=validator(optional(finite_positive))
    )
    token_burst: float | None = attrs.field(
        default=None, validator=validator(optional(finite_positive))
    )

    def specs(self, key: str) -> dict[str, BucketSpec]:
        """The token buckets this limit needs under ``key``: requests and/or tokens, by
        bucket key."""
        specs = {}
        if self.requests_per_minute is not None:
            specs[f"{key}:requests"] = BucketSpec(
                capacity=self.request_burst or self.requests_per_minute,
                rate=self.requests_per_minute / 60.0,
            )
        if self.tokens_per_minute is not None:
            specs[f"{key}:tokens"] = BucketSpec(
                capacity=self.token_burst or self.tokens_per_minute,
                rate=self.tokens_per_minute / 60.0,
            )
        return specs


class Permit:
    """What one ``acquire`` took; hand it to :meth:`RateLimiter.settle`.

    A value, never changed after it is made: :meth:`RateLimiter.acquire_fast` hands out
    the same permit again for the same key and estimate (no allocation on the hot path).
    """

    __slots__ = ("bucket", "estimate", "key")

    def __init__(self, key: str, estimate: int, bucket: Bucket | None = None) -> None:
        self.key = key
        self.estimate = estimate
        self.bucket = bucket  # the in-process token bucket, when acquire_fast granted it


class _Local:
    """The in-process fast path of one key: its bucket objects (``None`` for a limit it
    does not have) and the permit ``acquire_fast`` handed out last."""

    __slots__ = ("permit", "requests", "tokens")

    def __init__(self, requests: Bucket | None, tokens: Bucket | None) -> None:
        self.requests = requests
        self.tokens = tokens
        self.permit: Permit | None = None


class RateLimiter:
    """Token buckets per key (usually a provider)."""

    def __init__(
        self, limits: Mapping[str, RateLimit], *, state: StateBackend | None = None
    ) -> None:
        self.state: StateBackend = state if state is not None else MemoryState()
        self._local = self.state if isinstance(self.state, MemoryState) else None
        # A backend whose reserve always yields to the scheduler (a network round trip;
        # RedisState yields in degraded mode too) needs no extra yield per acquire.
        self._yields = bool(getattr(self.state, "reserve_yields", False))
        self._specs = {key: limit.specs(key) for key, limit in limits.items()}
        self._token_bucket = {
            key: f"{key}:tokens" for key, specs in self._specs.items() if f"{key}:tokens" in specs
        }
        self._locals: dict[str, _Local] = {}  # key -> its in-process fast path

    def acquire_fast(self, key: str, *, tokens: int = 0, now: float | None = None) -> Permit | None:
        """A permit at once, without a coroutine, when the in-process buckets can grant it
        with no wait; else ``None`` (then use :meth:`acquire`). Not a checkpoint. ``now``:
        the trio time, when the caller has it (default: read here)."""
        local = self._locals.get(key)
        if local is None:
            local = self._local_of(key)
            if local is None:
                return None  # a shared backend: use acquire()
        requests, token_bucket = local.requests, local.tokens
        if requests is not None or token_bucket is not None:
            # Bucket.refill inlined: this runs on every call of the hot path.
            if now is None:
                now = trio.current_time()
            if requests is not None:
                level = requests.level
                if now > requests.updated:
                    level += (now - requests.updated) * requests.rate
                    if level > requests.capacity:
                        level = requests.capacity
                    requests.level, requests.updated = level, now
                if level < 1.0:
                    return None
            if token_bucket is not None:
                level = token_bucket.level
                if now > token_bucket.updated:
                    level += (now - token_bucket.updated) * token_bucket.rate
                    if level > token_bucket.capacity:
                        level = token_bucket.capacity
                    token_bucket.updated = now
                if level < tokens:
                    token_bucket.level = level
                    return None
                token_bucket.level = level - tokens
            if requests is not None:
                requests.level -= 1.0
        permit = local.permit
        if permit is None or permit.estimate != tokens:
            permit = local.permit = Permit(key, tokens, token_bucket)
        return permit

    def settle_fast(self, permit: Permit, actual_tokens: int) -> bool:
        """:meth:`settle` without a coroutine for in-process buckets; ``False`` when the
        backend needs the async path."""
        delta = permit.estimate - actual_tokens
        if not delta:
            return True
        bucket = permit.bucket
        if bucket is None:
            if permit.key not in self._token_bucket:
                return True  # no token limit on this key
            local = self._local_of(permit.key)
            if local is None:
                return False  # a shared backend: use settle()
            bucket = local.tokens
            assert bucket is not None  # the key has a token limit
        # No refill first: refill is linear, so adding now or later is the same except
        # at the cap, where this is the conservative side.
        level = bucket.level + delta
        bucket.level = level if level < bucket.capacity else bucket.capacity
        return True

    def _local_of(self, key: str) -> _Local | None:
        """The in-process fast path of ``key`` (no buckets when it is unlimited), or
        ``None`` for a shared backend."""
        local = self._locals.get(key)
        if local is None:
            specs = self._specs.get(key)
            if not specs:
                local = self._locals[key] = _Local(None, None)  # unlimited
                return local
            if self._local is None:
                return None
            state, now = self._local, trio.current_time()
            requests, token_bucket = f"{key}:requests", f"{key}:tokens"
            local = self._locals[key] = _Local(
                state.bucket(requests, specs[requests], now) if requests in specs else None,
                state.bucket(token_bucket, specs[token_bucket], now)
                if token_bucket in specs
                else None,
            )
        return local

    async def acquire(self, key: str, *, tokens: int = 0, deadline: float | None = None) -> Permit:
        """Reserve one request and ``tokens`` tokens for ``key``; see the module docstring.

        One atomic ``reserve`` on the state backend (a hot caller tries
        :meth:`acquire_fast` first). A checkpoint: a caller whose scope is cancelled gets
        ``trio.Cancelled`` and takes nothing (never ``rate_limited``); a permit granted
        without a wait, or a refusal, still yields to the scheduler once (shielded: a
        permit once taken is always returned)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        outcome = await self.acquire_or_refuse(key, tokens=tokens, deadline=deadline)
        if not self._yields:  # a backend whose reserve yields has done it
            await trio.lowlevel.cancel_shielded_checkpoint()
        if isinstance(outcome, ActorError):
            raise outcome
        return outcome

    async def acquire_or_refuse(
        self, key: str, *, tokens: int = 0, deadline: float | None = None
    ) -> Permit | ActorError:
        """:meth:`acquire` without its checkpoint, the refusal (``rate_limited``) as a value.

        Still cancellable while it waits for the buckets to refill (then it gives back
        exactly what it reserved). For a caller that checks cancellation and yields
        itself (:class:`~supervisors.Resilience` does, once per call)."""
        specs = self._specs.get(key)
        if not specs:
            return Permit(key, tokens)
        amounts = _amounts(specs, tokens)
        now = trio.current_time()
        limit = trio.current_effective_deadline() if deadline is None else deadline
        max_wait = None if limit == math.inf else max(0.0, limit - now)
        reservation = await self.state.reserve(amounts, specs, now=now, max_wait=max_wait)
        if not reservation.granted:
            return ActorError.from_code(
                Code.RATE_LIMITED,
                f"local rate limit for {key}: {reservation.wait:.3f} s to wait, "
                f"{max_wait:.3f} s left",
                provider=key,
                retry_after=reservation.wait,
            )
        if reservation.wait > 0:
            try:
                await trio.sleep(reservation.wait)
            except BaseException:
                # Cancelled (or interrupted) while waiting: give back exactly what we took.
                with trio.CancelScope(shield=True):
                    await self.state.refund(amounts, specs, now=trio.current_time())
                raise
        return Permit(key, tokens)

    async def release(self, permit: Permit) -> None:
        """Give back everything ``permit`` reserved — its request and its estimated
        tokens — for an attempt that was never sent (refused by the breaker, or not
        delivered to the actor). Shielded: a permit once given back stays given back."""
        specs = self._specs.get(permit.key)
        if not specs:
            return
        with trio.CancelScope(shield=True):
            await self.state.refund(
                _amounts(specs, permit.estimate), specs, now=trio.current_time()
            )

    async def settle(self, permit: Permit, actual_tokens: int) -> None:
        """Refund the over-estimate, or charge the under-estimate, of ``permit``."""
        bucket = self._token_bucket.get(permit.key)
        delta = permit.estimate - actual_tokens
        if bucket is None or not delta:
            return
        specs = self._specs[permit.key]
        await self.state.refund({bucket: float(delta)}, specs, now=trio.current_time())


def _amounts(specs: Mapping[str, BucketSpec], tokens: int) -> dict[str, float]:
    """What one request of ``tokens`` estimated tokens takes from each bucket of a key."""
    return {bucket: 1.0 if bucket.endswith(":requests") else float(tokens) for bucket in specs}
