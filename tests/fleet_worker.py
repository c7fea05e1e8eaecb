"""One replica of a fleet, for tests/test_state_fleet.py: ``python -m tests.fleet_worker
URL REPLICAS``. It opens the Redis state, then reads one command per line on stdin and
answers each with one JSON line on stdout, so the test can start every replica's phase
at the same moment (and drive them while Redis is down)."""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from actors import ActorError, Code
from actors.events import Event
from actors.observe import add_event_hook, configure_logging
from supervisors import Breaker, BreakerConfig, RateLimit, RateLimiter
from supervisors.state import RedisState, open_redis_state

TASKS = 8  # concurrent callers per replica
LIMITS = {
    "tokens": RateLimit(tokens_per_minute=1000),
    "requests": RateLimit(requests_per_minute=400),
}
BREAKER = BreakerConfig(cooldowns={Code.UNAVAILABLE: 0.5}, probe_lease=30.0)


async def race(operation: Any) -> list[Any]:
    """``TASKS`` callers, each repeating ``operation`` until it returns ``None``."""
    results: list[Any] = []

    async def caller() -> None:
        while (result := await operation()) is not None:
            results.append(result)

    async with trio.open_nursery() as nursery:
        for _ in range(TASKS):
            nursery.start_soon(caller)
    return results


async def admit(limiter: RateLimiter, key: str, tokens: int) -> int | None:
    """One permit without waiting: its tokens, or ``None`` once refused."""
    try:
        await limiter.acquire(key, tokens=tokens, deadline=trio.current_time())
    except ActorError as error:
        assert error.code is Code.RATE_LIMITED, error
        return None
    return tokens


async def requests(limiter: RateLimiter, most: int | None) -> int:
    """Requests admitted without waiting by ``TASKS`` callers, ``most`` in all."""
    taken: list[int] = []

    async def one() -> int | None:
        if most is not None and len(taken) >= most:
            return None
        taken.append(1)
        if await admit(limiter, "requests", 0) is None:
            taken.pop()
            return None
        return 1

    return len(await race(one))


async def probe(breaker: Breaker) -> str:
    """One admission try: ``"probe"``, ``"admitted"`` or ``"refused"``."""
    try:
        admission = await breaker.admit("alpha")
    except ActorError as error:
        assert error.code is Code.CIRCUIT_OPEN, error
        return "refused"
    return "probe" if admission.probe else "admitted"


async def at_once(operation: Any) -> list[Any]:
    """``TASKS`` callers running ``operation`` once each, together."""
    results: list[Any] = []

    async def caller() -> None:
        results.append(await operation())

    async with trio.open_nursery() as nursery:
        for _ in range(TASKS):
            nursery.start_soon(caller)
    return results


async def serve(state: RedisState, events: list[str]) -> None:
    limiter = RateLimiter(LIMITS, state=state)
    breaker = Breaker(BREAKER, state=state)
    stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stdin.receive_some()
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        command = line.decode().strip()
        answer: Any
        if command == "quit":
            return
        if command.startswith("await "):  # a barrier: say so, wait until the test sets the key
            await state.client.incr("waiting")
            with trio.fail_after(60):
                while not await state.client.exists([command.split()[1]]):
                    await trio.sleep(0.001)
            command = command.split()[2]
        if command == "tokens":
            answer = sum(await race(lambda: admit(limiter, "tokens", 10)))
        elif command.startswith("requests"):  # "requests [at most N]"
            answer = await requests(limiter, int(command.split()[1]) if " " in command else None)
        elif command == "probe":
            answer = await at_once(lambda: probe(breaker))
        elif command == "wait_recovered":
            with trio.fail_after(10):
                while state.degraded:
                    await trio.sleep(0.01)
            answer = True
        elif command == "events":
            answer, events[:] = list(events), []
        else:
            answer = f"unknown command {command!r}"
        print(json.dumps(answer), flush=True)


async def main(url: str, replicas: int) -> None:
    events: list[str] = []

    def keep(event: Event) -> None:
        if event.name.startswith("state."):
            events.append(event.name)

    configure_logging(mode="json", level="warning", stream=sys.stderr)
    add_event_hook(keep)
    # A Redis call counts as failed after 2 s: a loaded machine must not make a replica
    # degrade (a killed server refuses the connection at once, whatever the timeout).
    async with open_redis_state(url, replicas=replicas, timeout=2.0, retry_interval=0.1) as state:
        print(json.dumps("ready"), flush=True)
        await serve(state, events)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]))
