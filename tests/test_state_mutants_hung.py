"""Round trips to a hung Redis that overlap: the real redis-server behind a client whose
calls hang while ``hung`` (as a server stopped mid-request does), on a frozen
:class:`trio.testing.MockClock` so that each call's timeout ends exactly when a test
moves virtual time past it."""

from __future__ import annotations

from typing import Any

import coredis
import trio
from trio.testing import MockClock

from actors.events import StateDegraded
from actors.testing import capture_events
from supervisors.state import RedisState, Transition
from supervisors.state.base import BreakerState
from tests.redis_server import RedisServer
from tests.test_state_mutants_degraded import Switch, jump, quiet


class Hanging(Switch):
    """The switch of tests/test_state_mutants_degraded.py, plus: while ``hung``, a round
    trip never answers."""

    hung = False

    async def evalsha(self, sha: str, keys: Any = None, args: Any = None) -> Any:
        if self.hung:
            await trio.sleep_forever()
        return await super().evalsha(sha, keys=keys, args=args)

    async def hget(self, key: str, field: str) -> Any:
        if self.hung:
            await trio.sleep_forever()
        return await super().hget(key, field)


async def test_a_read_that_timed_out_answers_what_degraded_mode_decided_meanwhile(
    redis: RedisServer, mock_clock: MockClock
) -> None:
    client = coredis.Redis.from_url(redis.url, decode_responses=True)
    async with client:
        switch = Hanging(client)
        state = RedisState(switch, replicas=2, timeout=0.5)
        assert await state.breaker_state("a", now=0.0) is BreakerState.CLOSED  # answered
        switch.hung = True
        answers: dict[str, Any] = {}

        async def failure() -> None:
            answers["failure"] = await state.breaker_failure(
                "a",
                now=0.0,
                probe=False,
                code="timeout",
                threshold=1,
                cooldown=7.5,
                probe_after=60.0,
                permanent=False,
            )

        async def read() -> None:
            answers["state"] = await state.breaker_state("a", now=0.0)

        with capture_events(StateDegraded) as seen:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(failure)  # times out at 0.5
                await jump(mock_clock, 0.1, switch)
                nursery.start_soon(read)  # times out at 0.6
                await jump(mock_clock, 0.4, switch)  # the failure: degraded, opened locally
                await quiet(switch)
                assert answers == {
                    "failure": Transition(
                        "a", BreakerState.CLOSED, BreakerState.OPEN, "timeout", 7.5
                    )
                }
                await jump(mock_clock, 0.1, switch)
        # The read began before the outage was known: it answers from the local state
        # the outage started meanwhile, and reports no second outage.
        assert answers["state"] is BreakerState.OPEN
        assert [(e.operation, e.error) for e in seen] == [("breaker_failure", "timeout")]
        assert trio.current_time() == 0.6
