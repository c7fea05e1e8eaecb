"""Degraded mode of the Redis state, exact: the real redis-server behind a switch that
makes every round trip fail at once (coredis's ``ConnectionError``, as a server gone
does) or lose its reply after the script ran. On a frozen :class:`trio.testing.MockClock`
the local share's waits, the retry interval and ``degraded_for`` are exact: virtual time
moves only when a test jumps it, while the real server answers on real sockets."""

from __future__ import annotations

import math
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import coredis
import coredis.exceptions
import pytest
import trio
from trio.testing import MockClock

from actors import ActorError
from actors.events import StateDegraded, StateRecovered
from actors.testing import capture_events
from supervisors.state import BreakerSnapshot, BucketSpec, RedisState, Reservation, Transition
from supervisors.state.base import GRANTED_NOW, BreakerState
from tests.redis_server import RedisServer

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


class Switch:
    """A coredis client of the real server whose round trips fail while ``down``; with
    ``lose_replies`` a script runs on the server but its reply never comes back."""

    def __init__(self, inner: coredis.Redis[str]) -> None:
        self.inner = inner
        self.down = False
        self.lose_replies = False
        #: Scripts that may still run before every later one fails (``ping`` answers).
        self.scripts_left: int | None = None
        self.in_flight = 0  # round trips on the real server's socket right now

    async def _inner(self, call: Awaitable[Any]) -> Any:
        self.in_flight += 1
        try:
            return await call
        finally:
            self.in_flight -= 1

    def _check(self) -> None:
        if self.down:
            raise coredis.exceptions.ConnectionError("switched off")

    async def evalsha(self, sha: str, keys: Any = None, args: Any = None) -> Any:
        self._check()
        if self.scripts_left is not None:
            if self.scripts_left == 0:
                raise coredis.exceptions.ConnectionError("scripts off")
            self.scripts_left -= 1
        reply = await self._inner(self.inner.evalsha(sha, keys=keys, args=args))
        if self.lose_replies:
            raise coredis.exceptions.ConnectionError("reply lost")
        return reply

    async def script_load(self, source: str) -> str:
        self._check()
        return await self._inner(self.inner.script_load(source))

    async def ping(self) -> Any:
        self._check()
        return await self._inner(self.inner.ping())

    async def hget(self, key: str, field: str) -> Any:
        self._check()
        return await self._inner(self.inner.hget(key, field))


@asynccontextmanager
async def switched(redis: RedisServer, **options: Any) -> AsyncIterator[tuple[RedisState, Switch]]:
    """A state on the switched client, its recovery task running."""
    client = coredis.Redis.from_url(redis.url, decode_responses=True)
    async with client:
        switch = Switch(client)
        options.setdefault("replicas", 2)
        state = RedisState(switch, **options)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(state.recover_forever)
            yield state, switch
            nursery.cancel_scope.cancel()


async def quiet(switch: Switch) -> None:
    """Until every task waits and no round trip is on the socket (the recovery task
    asleep, not mid-request)."""
    deadline = time.monotonic() + 2.0
    while True:
        await trio.testing.wait_all_tasks_blocked()
        if switch.in_flight == 0:
            return
        assert time.monotonic() < deadline, "a round trip did not end"
        await trio.lowlevel.checkpoint()


async def jump(clock: MockClock, seconds: float, switch: Switch) -> None:
    """Move virtual time on once all is :func:`quiet`: a jump mid-request would expire
    coredis's own deadlines (its connection handshake's)."""
    await quiet(switch)
    clock.jump(seconds)


async def settle(state: RedisState, *, degraded: bool) -> None:
    """Let the recovery task run (real I/O, frozen clock) until ``degraded`` is reached."""
    deadline = time.monotonic() + 2.0
    while state.degraded is not degraded:
        assert time.monotonic() < deadline, "the recovery task did not get there"
        await trio.lowlevel.checkpoint()


def fields(event: Any) -> tuple[Any, ...]:
    if isinstance(event, StateDegraded):
        return ("degraded", event.backend, event.replicas, event.operation, event.error)
    return ("recovered", event.backend, event.degraded_for, event.runs_merged)


SPEC = {"k:tokens": BucketSpec(capacity=9.0, rate=3.0)}

OPERATIONS: dict[str, tuple[Callable[[RedisState], Awaitable[Any]], Any]] = {
    "breaker_admit": (
        lambda s: s.breaker_admit("a", now=0.0, lease_ttl=5.0),
        BreakerSnapshot(True, False, 0.0, None, True),
    ),
    "breaker_success": (
        lambda s: s.breaker_success("a", now=0.0, probe=True, success_threshold=1),
        None,
    ),
    "breaker_failure": (
        lambda s: s.breaker_failure(
            "a",
            now=0.0,
            probe=False,
            code="timeout",
            threshold=1,
            cooldown=7.5,
            probe_after=2.0,
            permanent=False,
        ),
        Transition("a", CLOSED, OPEN, "timeout", 7.5),
    ),
    "breaker_release": (lambda s: s.breaker_release("a", probe=True), None),
    "breaker_reset": (lambda s: s.breaker_reset("a"), None),
    "breaker_state": (lambda s: s.breaker_state("a", now=0.0), CLOSED),
    "reserve": (lambda s: s.reserve({"k:tokens": 4.0}, SPEC, now=0.0, max_wait=None), None),
    "refund": (lambda s: s.refund({"k:tokens": 1.0}, SPEC, now=0.0), None),
    "add_usage": (lambda s: s.add_usage("r", tokens=1, cost=0.5, turns=2), (1, 0.5, 2)),
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_each_operation_degrades_naming_itself_and_answers_locally(
    redis: RedisServer, mock_clock: MockClock, operation: str
) -> None:
    call, expected = OPERATIONS[operation]
    async with switched(redis, replicas=3) as (state, switch):
        switch.down = True
        with capture_events(StateDegraded) as seen:
            answer = await call(state)
            assert await state.breaker_admit("b", now=0.0, lease_ttl=1.0)  # degraded already
        if operation == "reserve":  # 4 of a local share of 3 (9 / 3), refilled at 1 a second
            assert answer == Reservation(True, 1.0)
        else:
            assert answer == expected
        assert [fields(e) for e in seen] == [
            ("degraded", "redis", 3, operation, "ConnectionError: switched off")
        ]
        assert state.degraded


async def test_the_local_share_starts_from_the_level_last_seen(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    specs = {"k:tokens": BucketSpec(40.0, 8.0), "j:tokens": BucketSpec(40.0, 8.0)}
    async with switched(redis, replicas=4) as (state, switch):
        assert (await state.reserve({"k:tokens": 20.0}, specs, now=0.0, max_wait=0)).granted
        switch.down = True
        # A share: capacity 10, 2 tokens a second, from 20 / 4 = 5 tokens left.
        both = {"k:tokens": 5.0, "j:tokens": 10.0}  # j never seen in Redis: a full share
        assert await state.reserve(both, specs, now=0.0, max_wait=0) is GRANTED_NOW
        assert await state.reserve({"k:tokens": 4.0}, specs, now=0.0, max_wait=None) == (
            Reservation(True, 2.0)
        )
        assert await state.reserve({"j:tokens": 1.0}, specs, now=0.0, max_wait=0.1) == (
            Reservation(False, 0.5)
        )
        await state.refund({"k:tokens": 100.0}, specs, now=0.0)  # capped at the share
        assert await state.reserve({"k:tokens": 12.0}, specs, now=0.0, max_wait=0.5) == (
            Reservation(False, 1.0)
        )
        assert await state.reserve({"k:tokens": 10.0}, specs, now=0.0, max_wait=0) is GRANTED_NOW
        assert await state.reserve({"k:tokens": 6.0}, specs, now=3.0, max_wait=0) is GRANTED_NOW
        assert await state.reserve({"k:tokens": 1.0}, specs, now=3.0, max_wait=0.1) == (
            Reservation(False, 0.5)
        )


async def test_recovery_comes_at_the_retry_interval_and_says_how_long(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis, retry_interval=1.5) as (state, switch):
        with capture_events(StateDegraded, StateRecovered) as seen:
            switch.down = True
            await state.breaker_admit("a", now=0.0, lease_ttl=1.0)
            await jump(mock_clock, 1.5, switch)  # a ping, refused: still degraded
            await quiet(switch)
            switch.down = False
            await jump(mock_clock, 1.0, switch)
            await quiet(switch)
            assert state.degraded  # not yet: every 1.5 s
            await jump(mock_clock, 0.5, switch)
            await settle(state, degraded=False)
        assert [fields(e) for e in seen] == [
            ("degraded", "redis", 2, "breaker_admit", "ConnectionError: switched off"),
            ("recovered", "redis", 3.0, 0),
        ]
        # Shared again; a second outage is reported again, timed from its own start.
        with capture_events(StateDegraded, StateRecovered) as seen:
            switch.down = True
            await state.breaker_state("a", now=0.0)
            switch.down = False
            await jump(mock_clock, 1.5, switch)
            await settle(state, degraded=False)
        assert [fields(e)[:4] for e in seen] == [
            ("degraded", "redis", 2, "breaker_state"),
            ("recovered", "redis", 1.5, 0),
        ]


async def test_local_probes_keep_their_verdicts_local_after_recovery(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis, retry_interval=100.0) as (state, switch):
        switch.down = True
        for key in ("a", "b", "c"):
            opened = await state.breaker_failure(
                key,
                now=0.0,
                probe=False,
                code="unavailable",
                threshold=1,
                cooldown=60.0,
                probe_after=5.0,
                permanent=False,
            )
            assert opened == Transition(key, CLOSED, OPEN, "unavailable", 60.0)
            assert await state.breaker_state(key, now=0.0) is OPEN
            probing = Transition(key, OPEN, HALF_OPEN, "unavailable", 60.0)
            snapshot = await state.breaker_admit(key, now=5.0, lease_ttl=30.0)
            assert snapshot == BreakerSnapshot(True, True, 0.0, probing)
        switch.down = False
        await jump(mock_clock, 100.0, switch)
        await settle(state, degraded=False)
        # Shared again, but the local probes' verdicts stay local.
        reopened = await state.breaker_failure(
            "a",
            now=6.0,
            probe=True,
            code="timeout",
            threshold=1,
            cooldown=1.0,
            probe_after=1.0,
            permanent=False,
        )
        assert reopened == Transition("a", HALF_OPEN, OPEN, "timeout", 1.0)
        assert state.local.breaker_blocked("a", 6.0) == 1.0
        await state.breaker_release("b", probe=True)
        assert state.local.breaker_blocked("b", 6.0) is None  # the local lease freed
        closed = await state.breaker_success("c", now=6.0, probe=True, success_threshold=1)
        assert closed == Transition("c", HALF_OPEN, CLOSED, None, None)
        assert await switch.inner.keys("*") == set()  # Redis never heard of them
        # The next verdicts are Redis's.
        assert await state.breaker_success("a", now=7.0, probe=True, success_threshold=1) is None
        shared = await state.breaker_failure(
            "a",
            now=7.0,
            probe=True,
            code="timeout",
            threshold=1,
            cooldown=1.0,
            probe_after=1.0,
            permanent=False,
        )
        assert shared == Transition("a", CLOSED, OPEN, "timeout", 1.0)
        assert await switch.inner.hget("ra:{a}:breaker", "st") == "open"
        assert await state.breaker_state("b", now=7.0) is CLOSED  # Redis's answer


async def test_a_probe_verdict_from_before_the_outage_is_no_local_verdict(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis, retry_interval=100.0) as (state, switch):
        switch.down = True
        for key in ("a", "b"):
            await state.breaker_failure(
                key,
                now=0.0,
                probe=False,
                code="unavailable",
                threshold=1,
                cooldown=60.0,
                probe_after=5.0,
                permanent=False,
            )
            assert (await state.breaker_admit(key, now=5.0, lease_ttl=30.0)).probe
            await state.breaker_release(key, probe=True)  # the local probe: lease freed
        # Half-open locally, no local probe out: a probe from Redis reports.
        assert await state.breaker_success("a", now=6.0, probe=True, success_threshold=1) is None
        failed = await state.breaker_failure(
            "b",
            now=6.0,
            probe=True,
            code="timeout",
            threshold=1,
            cooldown=1.0,
            probe_after=1.0,
            permanent=False,
        )
        assert failed is None
        assert await state.breaker_state("a", now=6.0) is HALF_OPEN
        assert await state.breaker_state("b", now=6.0) is HALF_OPEN
        # A local probe's own failure does re-open.
        assert (await state.breaker_admit("b", now=6.0, lease_ttl=30.0)).probe
        reopened = await state.breaker_failure(
            "b",
            now=7.0,
            probe=True,
            code="timeout",
            threshold=1,
            cooldown=1.0,
            probe_after=1.0,
            permanent=True,
        )
        assert reopened == Transition("b", HALF_OPEN, OPEN, "timeout", math.inf)


async def test_a_reset_while_degraded_closes_the_local_breaker(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis) as (state, switch):
        switch.down = True
        await state.breaker_failure(
            "a",
            now=0.0,
            probe=False,
            code="auth",
            threshold=1,
            cooldown=math.inf,
            probe_after=math.inf,
            permanent=True,
        )
        assert await state.breaker_reset("a") == Transition("a", OPEN, CLOSED, None, None)
        assert await state.breaker_reset("a") is None
        assert await state.breaker_admit("a", now=0.0, lease_ttl=1.0) == BreakerSnapshot(
            True, False, 0.0, None, True
        )


async def test_a_success_while_degraded_clears_the_local_count(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    async with switched(redis) as (state, switch):
        switch.down = True
        for expected in (None, None, Transition("a", CLOSED, OPEN, "timeout", 7.5)):
            assert (
                await state.breaker_success("a", now=0.0, probe=False, success_threshold=1) is None
            )
            for _ in range(2 if expected else 1):
                failed = await state.breaker_failure(
                    "a",
                    now=0.0,
                    probe=False,
                    code="timeout",
                    threshold=2,
                    cooldown=7.5,
                    probe_after=1.0,
                    permanent=False,
                )
            assert failed == expected


async def test_a_replica_names_itself_and_checks_its_own_arguments() -> None:
    state = RedisState(object(), replicas=1)
    host, pid, token = state.holder.rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert re.fullmatch(r"[0-9a-f]{8}", token), token
    assert RedisState(object(), replicas=1).holder != state.holder
    assert state.degraded is False
    with pytest.raises(
        ActorError,
        match=r"^\[config_invalid\] redis state: timeout must be a finite number of seconds > 0, "
        r"got 0$",
    ):
        RedisState(object(), replicas=1, timeout=0)
