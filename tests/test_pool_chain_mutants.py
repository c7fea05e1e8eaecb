"""The chain's choices where the other pool tests do not look: a target that refused a
request on its content stays out even when it opts in, the target a move names is tried
before the rotation's, a preferred target out for good is forgotten, a hedge never
doubles a running target when a skip names it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, fail, open_runtime
from actors.providers import LlmResponse
from supervisors import (
    AllProvidersFailed,
    Backoff,
    Breaker,
    BreakerConfig,
    Budget,
    BudgetLimits,
    ProviderPool,
    Resilience,
    RetryPolicy,
    RetryRules,
    Target,
)
from tests.pool_helpers import request

#: No retries: a retryable failure puts its target out at once.
ONCE = RetryPolicy(max_attempts=0, backoff=Backoff(initial=1, jitter=0))
NO_RETRY = RetryRules(by_code={Code.UNAVAILABLE: ONCE})


class Scripted(Actor):
    """Answers each request by the next step of its script (the last one repeats):
    ``"ok"`` (after ``delay`` seconds), or an error code (non-retryable for ``auth``)."""

    def __init__(self, name: str, script: list[str], calls: list[str], delay: float) -> None:
        self.name, self.script, self.calls, self.delay = name, script, calls, delay

    async def handle(self, message: Any) -> Any:
        self.calls.append(self.name)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if step == "ok":
            await trio.sleep(self.delay)
            return LlmResponse(
                content=self.name,
                usage=Usage(input_tokens=3, output_tokens=2),
                provider=self.name,
                model="m",
            )
        code = Code(step)
        return fail(
            code,
            f"{self.name} says {step}",
            retryable=code is not Code.AUTH,
            usage=Usage(input_tokens=10, output_tokens=0) if self.name == "costly" else None,
        )


async def _target(
    runtime: Any,
    name: str,
    script: list[str],
    calls: list[str],
    *,
    provider: str | None = None,
    model: str = "m",
    delay: float = 0.0,
    **fields: Any,
) -> Target:
    ref = await runtime.spawn(lambda: Scripted(name, list(script), calls, delay))
    return Target(ref=ref, provider=provider or name, model=model, **fields)


async def test_a_content_refusal_puts_its_target_out_even_when_it_opts_in(
    autojump_clock: MockClock,
) -> None:
    calls: list[str] = []
    async with open_runtime() as runtime:
        only = await _target(
            runtime, "A", ["content_filter", "ok"], calls, content_filter_fallback=True
        )
        pool = ProviderPool([only], resilience=Resilience(retry=NO_RETRY))
        with pytest.raises(ActorError) as caught:
            await pool.complete(request())
    assert (caught.value.code, caught.value.message) == (
        Code.CONTENT_FILTER,
        "A says content_filter",
    )
    assert calls == ["A"]
    assert [(e.provider, e.outcome, e.code) for e in pool.ledger] == [
        ("A", "failed", Code.CONTENT_FILTER)
    ]


async def test_the_target_a_move_names_goes_before_the_rotation(
    autojump_clock: MockClock,
) -> None:
    """S fails ``context_window_exceeded``: L1 (the first larger window) is named, but
    its breaker refuses it until its probe; L2 is tried and fails, L3 is refused too.
    When L1 and L3 may probe (at the same instant), the named L1 goes first — the
    rotation alone would take L3 (the cursor is past L2)."""
    calls: list[str] = []
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: 5.0})
    breaker = Breaker(config)
    resilience = Resilience(retry=NO_RETRY, breaker=breaker)
    async with open_runtime() as runtime:
        big = {"context_window": 32_000}
        s = await _target(runtime, "S", ["context_window_exceeded"], calls, context_window=8_000)
        l1 = await _target(runtime, "L1", ["unavailable", "ok"], calls, **big)
        l2 = await _target(runtime, "L2", ["unavailable"], calls, **big)
        l3 = await _target(runtime, "L3", ["unavailable", "ok"], calls, **big)
        with pytest.raises(AllProvidersFailed):  # opens L1's and L3's breakers
            await ProviderPool([l1, l3], resilience=resilience).complete(request())
        assert calls == ["L1", "L3"]
        calls.clear()
        pool = ProviderPool([s, l1, l2, l3], resilience=resilience)
        answer = await pool.complete(request())
        assert trio.current_time() == 5.0
    assert answer.content == "L1"
    assert calls == ["S", "L2", "L1"]
    assert [(e.provider, e.outcome, e.code, e.started_at) for e in pool.ledger][-3:] == [
        ("S", "failed", Code.CONTEXT_WINDOW_EXCEEDED, 0.0),
        ("L2", "failed", Code.UNAVAILABLE, 0.0),
        ("L1", "ok", None, 5.0),
    ]


async def test_a_named_target_out_for_good_is_forgotten(autojump_clock: MockClock) -> None:
    """S fails ``context_window_exceeded`` and names L1, whose provider's breaker is open
    for good (``auth``): L1 is put out, L2 is tried, fails, waits its retry delay (2 s)
    and then its own breaker's probe (30 s), and answers — the chain picks three times
    more after forgetting L1."""
    calls: list[str] = []
    breaker = Breaker(BreakerConfig())
    rules = RetryRules(
        by_code={
            Code.UNAVAILABLE: RetryPolicy(max_attempts=1, backoff=Backoff(initial=2, jitter=0))
        }
    )
    resilience = Resilience(retry=rules, breaker=breaker)
    async with open_runtime() as runtime:
        big = {"context_window": 32_000}
        s = await _target(runtime, "S", ["context_window_exceeded"], calls, context_window=8_000)
        l1 = await _target(runtime, "L1", ["auth"], calls, **big)
        l2 = await _target(runtime, "L2", ["unavailable", "ok"], calls, **big)
        with pytest.raises(ActorError) as caught:  # opens L1's breaker for good
            await ProviderPool([l1], resilience=resilience).complete(request())
        assert caught.value.code is Code.AUTH
        calls.clear()
        pool = ProviderPool([s, l1, l2], resilience=resilience)
        answer = await pool.complete(request())
        assert trio.current_time() == 30.0
    assert answer.content == "L2"
    assert calls == ["S", "L2", "L2"]
    assert [(e.provider, e.outcome, e.started_at) for e in pool.ledger][-3:] == [
        ("S", "failed", 0.0),
        ("L2", "failed", 0.0),
        ("L2", "ok", 30.0),
    ]


async def test_a_skip_that_names_the_running_target_does_not_hedge_it(
    autojump_clock: MockClock,
) -> None:
    """A/m2 is known not to exist (its breaker open for good). X = A/m1 runs slowly; the
    hedge finds A/m2, whose skip names A's next model — X itself, which is running: no
    second attempt starts, X's answer wins."""
    calls: list[str] = []
    breaker = Breaker(BreakerConfig())
    resilience = Resilience(retry=NO_RETRY, breaker=breaker)
    async with open_runtime() as runtime:
        x = await _target(runtime, "X", ["ok"], calls, provider="A", model="m1", delay=10.0)
        y = await _target(runtime, "Y", ["model_not_found"], calls, provider="A", model="m2")
        with pytest.raises(ActorError) as caught:  # A/m2 is gone
            await ProviderPool([y], resilience=resilience).complete(request())
        assert caught.value.code is Code.MODEL_NOT_FOUND
        assert breaker.model_gone_fast("A", "m2")
        calls.clear()
        pool = ProviderPool([x, y], resilience=resilience, hedge_after=1.0)
        answer = await pool.complete(request())
        assert trio.current_time() == 10.0
    assert answer.content == "X"
    assert calls == ["X"]
    assert [(e.provider, e.model, e.outcome, e.hedge) for e in pool.ledger][-1:] == [
        ("A", "m1", "ok", False)
    ]


async def test_a_target_its_breaker_refuses_is_not_attempted(autojump_clock: MockClock) -> None:
    """B's breaker is open (probe at 30 s). A fails, with a usage that spends the
    request's budget: the chain skips B without attempting it, and the spent budget
    (reached, not passed) ends the request only when a target may be attempted again (A's probe, at 30 s) —
    an attempt of B at once would have met the budget at 0 s."""
    calls: list[str] = []
    breaker = Breaker(BreakerConfig())
    resilience = Resilience(retry=NO_RETRY, breaker=breaker)
    async with open_runtime() as runtime:
        a = await _target(runtime, "costly", ["unavailable"], calls, provider="A")
        b = await _target(runtime, "B", ["unavailable", "ok"], calls)
        with pytest.raises(AllProvidersFailed):  # opens B's breaker
            await ProviderPool([b], resilience=resilience).complete(request())
        calls.clear()
        rules = RetryRules(
            by_code={
                Code.UNAVAILABLE: RetryPolicy(max_attempts=1, backoff=Backoff(initial=1, jitter=0))
            }
        )
        pool = ProviderPool([a, b], resilience=Resilience(retry=rules, breaker=breaker))
        budget = Budget("r", BudgetLimits(tokens=10))
        with pytest.raises(ActorError) as caught:
            await pool.complete(request(), budget=budget)
        assert trio.current_time() == 30.0
    assert caught.value.code is Code.BUDGET_EXCEEDED
    assert calls == ["costly"]
    assert [(e.provider, e.outcome, e.tokens) for e in pool.ledger][-1:] == [("A", "failed", 10)]
