"""Provider pool overhead: the pool vs a direct ``Resilience.call``, same run, same actors.

Two stub provider actors ("alpha", "beta") answer ``Complete`` messages with a fixed
``LlmResponse`` (no HTTP: this measures the pool, not the network). Both sides share one
``Resilience`` (default retry rules, a breaker keyed by provider and model, a limiter on
requests and tokens set never to wait, the in-memory state backend) and do per request
what the pool does for its user: build the ``Complete`` message and estimate the tokens
(prompt estimate + ``max_tokens``) for the limiter.

* ``pool_primary`` — the primary is healthy: ``pool.complete(request)`` vs
  ``resilience.call(alpha, Complete(request), …)``. Target: throughput ratio >= 0.95.
* ``pool_failover`` — alpha's breaker is open (a failure recorded first): the pool skips
  alpha and is served by beta, vs ``resilience.call(beta, …)`` directly — no time lost on
  a target known to be down. Target: throughput ratio >= 0.9.

The ratio is the median of 21 paired rounds (:func:`bench.common.paired_median`): the
pool is a thin layer over the same call, so the ratio sits near 1 and best-of-each-side
would move it by the machine's noise, not by the code.

Logging is at info into a null sink (as ``supervisor_restart``): an answered attempt
logs nothing at info (``pool.attempt`` is debug), the ledger keeps it.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from actors import Actor, ActorError, Code, Usage, open_runtime
from actors.providers import Complete, LlmRequest, LlmResponse, Message
from bench.common import Row, logs_to_null, paired_median
from supervisors import (
    DEFAULT_RETRY,
    Breaker,
    ProviderPool,
    RateLimit,
    RateLimiter,
    Resilience,
    Target,
)

CALLS = 3_000
#: Rounds of both sides, back to back; the row's ratio is the median of the rounds'.
ROUNDS = 21
REQUEST = LlmRequest(model="m", messages=[Message(role="user", content="hello bench")])


class StubProvider(Actor):
    """Answers every ``Complete`` with the same response; fails when told to."""

    def __init__(self, name: str) -> None:
        self.response = LlmResponse(
            content="ok", usage=Usage(input_tokens=3, output_tokens=1), provider=name, model="m"
        )
        self.failing = False

    async def handle(self, message: Any) -> Any:
        if self.failing:
            raise ActorError.from_code(Code.UNAVAILABLE, "stub down")
        return self.response


def _resilience() -> Resilience:
    limits = RateLimit(requests_per_minute=1e12, tokens_per_minute=1e15)
    return Resilience(
        retry=DEFAULT_RETRY,
        breaker=Breaker(),
        limiter=RateLimiter({"alpha": limits, "beta": limits}),
        usage_of=lambda reply: reply.usage,
    )


async def _loop(pooled: bool, failover: bool) -> float:
    resilience = _resilience()
    async with open_runtime() as runtime:
        alpha_actor = StubProvider("alpha")
        alpha = await runtime.spawn(lambda: alpha_actor)
        beta = await runtime.spawn(lambda: StubProvider("beta"))
        pool = ProviderPool(
            [
                Target(ref=alpha, provider="alpha", model="m"),
                Target(ref=beta, provider="beta", model="m"),
            ],
            resilience=resilience,
            keep=100,
        )
        if failover:
            alpha_actor.failing = True
            await pool.complete(REQUEST)  # alpha fails once: its breaker opens (60 s)
        direct, provider = (beta, "beta") if failover else (alpha, "alpha")
        await pool.complete(REQUEST)
        start = time.perf_counter()
        if pooled:
            for _ in range(CALLS):
                await pool.complete(REQUEST)
        else:
            call = resilience.call
            for _ in range(CALLS):
                request = REQUEST
                tokens = request.estimated_prompt_tokens() + request.max_tokens
                await call(direct, Complete(request), provider=provider, model="m", tokens=tokens)
        elapsed = time.perf_counter() - start
        if failover:
            assert pool.ledger.by_target["alpha", "m"].attempts == 1  # skipped, never called
        return elapsed


def _row(name: str, failover: bool, target: str) -> Row:
    with logs_to_null():  # the failover's first failure is logged (crash, breaker, attempt)
        direct, pooled, ratio = paired_median(
            ROUNDS,
            lambda: trio.run(_loop, False, failover),
            lambda: trio.run(_loop, True, failover),
        )
    per_direct, per_pooled = direct / CALLS * 1e6, pooled / CALLS * 1e6
    return Row(name, per_pooled, "us/request", per_direct, ratio, target)


def pool_primary() -> list[Row]:
    return [_row("pool_primary", False, ">= 0.95")]


def pool_failover() -> list[Row]:
    return [_row("pool_failover", True, ">= 0.9")]
