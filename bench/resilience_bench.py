"""Resilience overhead: an actor call wrapped in retry policy + breaker + rate limiter.

Same run, same actor: the bare ``ref.call`` vs ``Resilience.call`` with the default
retry rules, a breaker keyed by provider and model, and a limiter on requests and tokens
whose reservation is settled with the reply's usage on every call (limits high enough
never to wait; the in-memory state backend). Target: <= 1.2x.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from actors import Actor, Usage, open_runtime
from bench.common import Row, paired_median
from supervisors import DEFAULT_RETRY, Breaker, RateLimit, RateLimiter, Resilience

CALLS = 20_000
USAGE = Usage(input_tokens=60, output_tokens=20)


class Echo(Actor):
    async def handle(self, message: Any) -> Any:
        return message


async def _loop(wrapped: bool) -> float:
    resilience = Resilience(
        retry=DEFAULT_RETRY,
        breaker=Breaker(),
        limiter=RateLimiter({"alpha": RateLimit(requests_per_minute=1e12, tokens_per_minute=1e15)}),
        usage_of=lambda _reply: USAGE,
    )
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo)
        await ref.call(0)
        start = time.perf_counter()
        if wrapped:
            for i in range(CALLS):
                await resilience.call(ref, i, provider="alpha", model="model-a", tokens=100)
        else:
            for i in range(CALLS):
                await ref.call(i)
        return time.perf_counter() - start


def resilience_overhead() -> list[Row]:
    bare, wrapped, speed = paired_median(
        9, lambda: trio.run(_loop, False), lambda: trio.run(_loop, True)
    )
    per_bare, per_wrapped = bare / CALLS * 1e6, wrapped / CALLS * 1e6
    return [Row("resilience_overhead", per_wrapped, "us/call", per_bare, 1 / speed, "<= 1.2")]
