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
* buckets start full; ``burst`` (default: one minute's worth) is their capacity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs
import trio

from actors import ActorError, Code
from supervisors.state import BucketSpec, MemoryState, StateBackend
from supervisors.state.memory import Bucket


@attrs.frozen(kw_only=True)
class RateLimit:
    """Limits for one key (``None``: unlimited)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    request_burst: float | None = None
    token_burst: float | None = None

    def specs(self, key: str) -> dict[str, BucketSpec]:
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
    """What one ``acquire`` took; hand it to :meth:`RateLimiter.settle`."""

    __slots__ = ("bucket", "estimate", "key")

    def __init__(self, key: str, estimate: int, bucket: Bucket | None = None) -> None:
        self.key = key
        self.estimate = estimate
        self.bucket = bucket  # the in-process token bucket, when acquire_fast granted it


class RateLimiter:
    """Token buckets per key (usually a provider)."""

    def __init__(
        self, limits: Mapping[str, RateLimit], *, state: StateBackend | None = None
    ) -> None:
        self.state: StateBackend = state if state is not None else MemoryState()
        self._local = self.state if isinstance(self.state, MemoryState) else None
        self._specs = {key: limit.specs(key) for key, limit in limits.items()}
        self._token_bucket = {
            key: f"{key}:tokens" for key, specs in self._specs.items() if f"{key}:tokens" in specs
        }
        self._local_handles: dict[str, list[tuple[Bucket, bool]]] = {}

    def acquire_fast(self, key: str, *, tokens: int = 0) -> Permit | None:
        """A permit at once, without a coroutine, when the in-process buckets can grant it
        with no wait; else ``None`` (then use :meth:`acquire`)."""
        handles = self._handles(key)
        if handles is None:
            return None
        now = trio.current_time()
        token_bucket = None
        for bucket, is_requests in handles:
            bucket.refill(now)
            if bucket.level < (1.0 if is_requests else tokens):
                return None
        for bucket, is_requests in handles:
            if is_requests:
                bucket.level -= 1.0
            else:
                bucket.level -= tokens
                token_bucket = bucket
        return Permit(key, tokens, token_bucket)

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
            handles = self._handles(permit.key)
            if handles is None:
                return False  # a shared backend: use settle()
            bucket = next(b for b, is_requests in handles if not is_requests)
        # No refill first: refill is linear, so adding now or later is the same except
        # at the cap, where this is the conservative side.
        level = bucket.level + delta
        bucket.level = level if level < bucket.capacity else bucket.capacity
        return True

    def _handles(self, key: str) -> list[tuple[Bucket, bool]] | None:
        """The in-process bucket objects of ``key`` (``[]`` when unlimited), or ``None``
        for a shared backend."""
        handles = self._local_handles.get(key)
        if handles is None:
            specs = self._specs.get(key)
            if not specs:
                return []
            if self._local is None:
                return None
            now = trio.current_time()
            handles = self._local_handles[key] = [
                (self._local.bucket(bucket, spec, now), bucket.endswith(":requests"))
                for bucket, spec in specs.items()
            ]
        return handles

    async def acquire(self, key: str, *, tokens: int = 0, deadline: float | None = None) -> Permit:
        """Reserve one request and ``tokens`` tokens for ``key``; see the module docstring.

        One atomic ``reserve`` on the state backend (a hot caller tries
        :meth:`acquire_fast` first)."""
        specs = self._specs.get(key)
        if not specs:
            return Permit(key, tokens)
        amounts = {b: 1.0 if b.endswith(":requests") else float(tokens) for b in specs}
        now = trio.current_time()
        limit = trio.current_effective_deadline() if deadline is None else deadline
        max_wait = None if math.isinf(limit) else max(0.0, limit - now)
        reservation = await self.state.reserve(amounts, specs, now=now, max_wait=max_wait)
        if not reservation.granted:
            raise ActorError.from_code(
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

    async def settle(self, permit: Permit, actual_tokens: int) -> None:
        """Refund the over-estimate, or charge the under-estimate, of ``permit``."""
        bucket = self._token_bucket.get(permit.key)
        delta = permit.estimate - actual_tokens
        if bucket is None or not delta:
            return
        specs = self._specs[permit.key]
        await self.state.refund({bucket: float(delta)}, specs, now=trio.current_time())
