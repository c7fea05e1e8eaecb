"""Shared state in Redis: breakers, token buckets and budgets shared by a fleet of
replicas (extra ``redis``; coredis, which runs under trio through anyio).

Each operation of :class:`~supervisors.state.StateBackend` is one Lua script
(:mod:`supervisors.state.redis_scripts`), loaded once per server and run with ``EVALSHA``:
atomic on the server and timed by the server's clock — the ``now`` the caller passes
is not used, so replicas with skewed clocks still agree. Keys are
``<namespace>:{<tag>}:<kind>``; the tag is the breaker key (a provider, or one model of
it), the limiter key of a bucket (``alpha`` for ``alpha:requests`` and
``alpha:tokens``, so one reservation's buckets share a hash slot) or ``run:<id>`` for a
budget: the backend works on Redis Cluster.

**Degraded mode.** When Redis fails or does not answer within ``timeout`` seconds, the
replica emits ``state.degraded`` and goes on with a local
:class:`~supervisors.state.MemoryState` whose buckets hold ``1/replicas`` of each limit
(capacity and rate), starting from ``1/replicas`` of the level it last saw in Redis:
the shares together start at most at one capacity, so in any window of ``W`` seconds the
fleet admits at most twice the capacity plus what refills (docs/fleet.md states and tests
the bound; stale sightings under uneven traffic make "limit plus one share" false).
Breakers start closed
locally; budgets go on from the totals last seen, and what is counted meanwhile is
added to Redis on recovery (:mod:`supervisors.state.redis_usage`). Every
``retry_interval`` seconds a background task pings Redis; when it answers, the replica
is back on shared state at once, and ``state.recovered`` once the pending usage is
merged. A Redis outage never fails a request by itself.

**Cancellation.** A round trip in flight is finished (shielded, at most ``timeout``)
before a cancel takes effect, so a reservation or a probe lease is never taken on the
server without the caller knowing it. The caller's own structure gives it back (a
limiter refunds, a breaker releases); should the replica die first, probe leases end
at their TTL and buckets refill at their rate (a bucket's key expires once full).
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import socket
from collections.abc import Mapping, Sequence
from typing import Any, Final

import trio

from actors import ActorError, Code
from actors.events import StateDegraded, StateRecovered
from actors.lowlevel import emit
from supervisors.state.base import (
    BreakerSnapshot,
    BreakerState,
    BucketSpec,
    Reservation,
    StateBackend,
    Transition,
)
from supervisors.state.memory import MemoryState
from supervisors.state.redis_calls import Keys, ScriptCalls, totals
from supervisors.state.redis_checks import finite, positive
from supervisors.state.redis_usage import Increment, PendingUsage, SeenTotals

DEFAULT_TIMEOUT: Final = 2.0
DEFAULT_RETRY_INTERVAL: Final = 1.0
DEFAULT_USAGE_TTL: Final = 7 * 24 * 3600


class RedisState(StateBackend):
    """:class:`~supervisors.state.StateBackend` shared through Redis (see the module
    docstring). Create it with :func:`~supervisors.state.open_redis_state`."""

    #: :meth:`reserve` always yields to the scheduler (a round trip, or a checkpoint in
    #: degraded mode): the rate limiter adds no yield of its own after it.
    reserve_yields = True

    def __init__(
        self,
        client: Any,
        *,
        replicas: int,
        namespace: str = "ra",
        timeout: float = DEFAULT_TIMEOUT,
        retry_interval: float = DEFAULT_RETRY_INTERVAL,
        usage_ttl: float = DEFAULT_USAGE_TTL,
    ) -> None:
        positive("replicas", replicas, integer=True)
        positive("timeout", timeout)
        positive("retry_interval", retry_interval)
        positive("usage_ttl", usage_ttl)
        if not isinstance(namespace, str) or not namespace or any(c in namespace for c in "{}"):
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                f"redis state: namespace must be a non-empty string without braces, "
                f"not {namespace!r}",
            )
        self.client = client
        self.replicas = replicas
        self.namespace = namespace
        self.timeout = float(timeout)
        self.retry_interval = float(retry_interval)
        self.usage_ttl = math.ceil(usage_ttl)
        #: This replica's name as a probe-lease holder.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._calls = ScriptCalls(client, self.timeout)
        self._keys = Keys(namespace)
        self.local = MemoryState()  # degraded mode's state
        self.degraded = False
        self._degraded_at = 0.0
        self._wake = trio.Event()
        self._levels: dict[str, float] = {}  # bucket -> level last seen in Redis
        # (bucket, spec) -> (its Redis key, capacity and rate as script arguments)
        self._bucket_args: dict[tuple[str, BucketSpec], tuple[str, str, str]] = {}
        self._usage = SeenTotals()
        # run -> increments counted locally, with their ids: added to Redis on recovery
        self._pending = PendingUsage()
        # Back on Redis, the merge not done yet: the outage is not over.
        self._recovering = False
        self._increments = 0
        self._local_probes: set[str] = set()  # breaker keys whose probe is local
        self._seed: dict[str, float] = {}  # bucket -> Redis level when degraded began

    # --- keys ------------------------------------------------------------------------

    def _increment_id(self) -> str:
        self._increments += 1
        return f"{self.holder}:{self._increments}"

    # --- the round trip --------------------------------------------------------------

    async def _call(
        self, operation: str, script: str, keys: Sequence[str], args: Sequence[Any]
    ) -> Any:
        """Run one script; ``None`` when Redis failed or timed out (then degraded).

        Shielded and bounded by ``timeout``: a caller's cancel takes effect after it."""
        if self.degraded:
            await trio.lowlevel.cancel_shielded_checkpoint()  # see ``reserve_yields``
            return None
        answered, reply = await self._calls.bounded(self._calls.run, script, keys, args)
        if answered:
            return reply
        self._degrade(operation, reply)
        return None

    def _degrade(self, operation: str, error: str) -> None:
        if self.degraded:
            return
        self.degraded = True
        self.local = MemoryState()
        self._local_probes.clear()
        self._seed = dict(self._levels)
        self._wake.set()
        if self._recovering:  # failed before the merge ended: the same outage goes on
            return
        self._degraded_at = trio.current_time()
        emit(
            StateDegraded(backend="redis", replicas=self.replicas, operation=operation, error=error)
        )

    def _share(self, specs: Mapping[str, BucketSpec]) -> dict[str, BucketSpec]:
        """This replica's share of each bucket, created at its share of the level last
        seen in Redis (full when never seen)."""
        n = self.replicas
        shares = {key: BucketSpec(spec.capacity / n, spec.rate / n) for key, spec in specs.items()}
        now = trio.current_time()
        for key, share in shares.items():
            seen = self._seed.pop(key, None)
            bucket = self.local.bucket(key, share, now)
            if seen is not None:
                bucket.level = min(share.capacity, seen / n)
        return shares

    async def recover_forever(self) -> None:
        """Run by :func:`open_redis_state` for the state's life: while degraded, ping Redis
        every ``retry_interval``; once it answers, back to shared state at once, then the
        usage counted meanwhile is added to it (``state.recovered`` when it all is)."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self.degraded:
                await trio.sleep(self.retry_interval)
                if not await self._reachable():
                    continue
                # Shared again before the merge: usage added from now on goes to Redis
                # directly (the totals it answers count what is still pending), so the
                # merge only ever shrinks — however fast usage comes. A failure before it
                # ends degrades the replica again, as the same outage (no new event).
                self.degraded = False
                self._levels.clear()
                merged = await self._merge_usage()
                if merged is not None:
                    emit(
                        StateRecovered(
                            backend="redis",
                            degraded_for=trio.current_time() - self._degraded_at,
                            runs_merged=merged,
                        )
                    )

    async def _reachable(self) -> bool:
        answered, _ = await self._calls.bounded(self.client.ping)
        return answered

    async def _merge_usage(self) -> int | None:
        """Add the usage counted locally to Redis (each increment once, by its id): how
        many runs had some, or ``None`` if Redis failed meanwhile — then the state is
        degraded again, and what was not added stays pending for the next recovery."""
        self._recovering = True  # a failure meanwhile is the same outage, not a new one
        try:
            merged, failure = await self._pending.merge(self._add_usage, self._merged)
            if failure is not None:
                self._degrade("add_usage", failure)
                return None
            return merged
        finally:
            self._recovering = False

    def _merged(self, run_id: str, reply: Any) -> None:
        self._usage.seen(run_id, self._pending.plus(run_id, totals(reply)))

    async def merge_on_close(self) -> None:
        """Called as the state closes, after its recovery task ended: add the usage still
        counted locally to Redis (one try: a failure stops it), and report what could not
        be (``state.usage_unmerged``) — never dropped silently. Nothing to do (no round
        trip) when nothing is pending."""
        if not self._pending:
            return
        with trio.CancelScope(shield=True):  # the close is often a cancel: still try once
            await self._merge_usage()
        unmerged = self._pending.unmerged("redis")
        if unmerged is not None:
            emit(unmerged)

    async def _add_usage(self, run_id: str, increment: Increment) -> tuple[bool, Any]:
        """One increment, sent directly (also while degraded): whether Redis answered,
        and its reply (or what failed)."""
        increment_id, tokens, cost, turns = increment
        args = [tokens, repr(cost), turns, self.usage_ttl, increment_id]
        return await self._calls.bounded(
            self._calls.run, "ADD_USAGE", self._keys.usage(run_id), args
        )

    # --- circuit breaker -------------------------------------------------------------

    async def breaker_admit(self, key: str, *, now: float, lease_ttl: float) -> BreakerSnapshot:
        reply = await self._call(
            "breaker_admit",
            "BREAKER_ADMIT",
            [self._keys.breaker(key)],
            [repr(lease_ttl), self.holder],
        )
        if reply is None:
            snap = await self.local.breaker_admit(key, now=now, lease_ttl=lease_ttl)
            if snap.probe:
                self._local_probes.add(key)
            return snap
        admitted, probe, wait, before, code, cooldown, clean = reply
        transition = None
        if before:
            transition = Transition(
                key,
                BreakerState(before),
                BreakerState.HALF_OPEN,
                code or None,
                float(cooldown) if cooldown else None,
            )
        return BreakerSnapshot(bool(admitted), bool(probe), float(wait), transition, bool(clean))

    def _probe_is_local(self, key: str, probe: bool) -> bool:
        if probe and key in self._local_probes:
            self._local_probes.discard(key)
            return True
        return False

    async def breaker_success(
        self, key: str, *, now: float, probe: bool, success_threshold: int
    ) -> Transition | None:
        if self._probe_is_local(key, probe):
            return await self.local.breaker_success(
                key, now=now, probe=probe, success_threshold=success_threshold
            )
        reply = await self._call(
            "breaker_success",
            "BREAKER_SUCCESS",
            [self._keys.breaker(key)],
            [int(probe), success_threshold, self.holder],
        )
        if reply is None:
            return await self.local.breaker_success(
                key, now=now, probe=False, success_threshold=success_threshold
            )
        return (
            Transition(key, BreakerState(reply), BreakerState.CLOSED, None, None) if reply else None
        )

    async def breaker_failure(
        self,
        key: str,
        *,
        now: float,
        probe: bool,
        code: str,
        threshold: int,
        cooldown: float,
        probe_after: float,
        permanent: bool,
    ) -> Transition | None:
        local = self._probe_is_local(key, probe)
        reply = None
        if not local:
            reply = await self._call(
                "breaker_failure",
                "BREAKER_FAILURE",
                [self._keys.breaker(key)],
                [
                    int(probe),
                    code,
                    threshold,
                    repr(cooldown),
                    repr(probe_after),
                    int(permanent),
                    self.holder,
                ],
            )
        if reply is None:
            return await self.local.breaker_failure(
                key,
                now=now,
                probe=probe and local,
                code=code,
                threshold=threshold,
                cooldown=cooldown,
                probe_after=probe_after,
                permanent=permanent,
            )
        if not reply:
            return None
        return Transition(
            key, BreakerState(reply), BreakerState.OPEN, code, math.inf if permanent else cooldown
        )

    async def breaker_release(self, key: str, *, probe: bool) -> None:
        if self._probe_is_local(key, probe):
            await self.local.breaker_release(key, probe=True)
        elif probe:
            await self._call(
                "breaker_release", "BREAKER_RELEASE", [self._keys.breaker(key)], [self.holder]
            )

    async def breaker_reset(self, key: str) -> Transition | None:
        local = await self.local.breaker_reset(key)
        reply = await self._call("breaker_reset", "BREAKER_RESET", [self._keys.breaker(key)], [])
        if reply is None:
            return local
        if not reply or reply == "closed":
            return None
        return Transition(key, BreakerState(reply), BreakerState.CLOSED, None, None)

    async def breaker_state(self, key: str, *, now: float) -> BreakerState:
        reply = await self._call("breaker_state", "BREAKER_STATE", [self._keys.breaker(key)], [])
        if reply is None:  # degraded: this replica's own view
            return await self.local.breaker_state(key, now=now)
        return BreakerState(reply)

    # --- token buckets ---------------------------------------------------------------

    def _buckets(
        self, amounts: Mapping[str, float], specs: Mapping[str, BucketSpec], args: list[Any]
    ) -> list[str]:
        """The Redis keys of ``amounts``' buckets; appends amount, capacity and rate of
        each to ``args``."""
        keys = []
        cache = self._bucket_args
        for bucket, amount in amounts.items():
            finite(f"amount of {bucket}", amount)
            spec = specs[bucket]
            known = cache.get((bucket, spec))
            if known is None:
                known = cache[bucket, spec] = (
                    self._keys.bucket(bucket),
                    repr(spec.capacity),
                    repr(spec.rate),
                )
            keys.append(known[0])
            args += (repr(amount), known[1], known[2])
        return keys

    async def reserve(
        self,
        amounts: Mapping[str, float],
        specs: Mapping[str, BucketSpec],
        *,
        now: float,
        max_wait: float | None,
    ) -> Reservation:
        # No limit (None, or an infinite one: Lua reads no "inf") is an empty argument.
        no_limit = max_wait is None or not math.isfinite(max_wait)
        args: list[Any] = ["" if no_limit else repr(max_wait)]
        keys = self._buckets(amounts, specs, args)
        reply = await self._call("reserve", "RESERVE", keys, args)
        if reply is None:
            return await self.local.reserve(amounts, self._share(specs), now=now, max_wait=max_wait)
        levels = self._levels
        for bucket, level in zip(amounts, reply[2:], strict=True):
            levels[bucket] = float(level)
        return Reservation(bool(reply[0]), float(reply[1]))

    async def refund(
        self, amounts: Mapping[str, float], specs: Mapping[str, BucketSpec], *, now: float
    ) -> None:
        args: list[Any] = []
        keys = self._buckets(amounts, specs, args)
        reply = await self._call("refund", "REFUND", keys, args)
        if reply is None:
            await self.local.refund(amounts, self._share(specs), now=now)

    # --- budgets ---------------------------------------------------------------------

    async def add_usage(
        self, run_id: str, *, tokens: int, cost: float, turns: int
    ) -> tuple[int, float, int]:
        finite("cost", cost)
        increment = self._increment_id()
        args = [tokens, repr(cost), turns, self.usage_ttl, increment]
        pending = self._pending
        # While a merge is under way, its lock: the answer plus what is pending is exact.
        merging = pending.lock if pending and not self.degraded else contextlib.nullcontext()
        async with merging:
            reply = await self._call("add_usage", "ADD_USAGE", self._keys.usage(run_id), args)
            if reply is not None:
                return self._usage.seen(run_id, pending.plus(run_id, totals(reply)))
        # Not known to be applied (refused, or no answer in time): counted here, and sent
        # again with the same id on recovery — applied once either way.
        pending.add(run_id, (increment, tokens, cost, turns))
        seen = self._usage.get(run_id)
        return self._usage.seen(run_id, (seen[0] + tokens, seen[1] + cost, seen[2] + turns))
