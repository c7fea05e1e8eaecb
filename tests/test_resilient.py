"""Resilience.call: limiter + breaker + retry around a real actor call, usage counted."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, open_runtime
from actors.testing import capture_events
from supervisors import (
    Backoff,
    Breaker,
    Budget,
    BudgetLimits,
    RateLimit,
    RateLimiter,
    Resilience,
    RetryPolicy,
)


class Provider(Actor):
    """Answers ``{"usage": Usage}`` or raises the next scripted error."""

    def __init__(self, script: list[ActorError | None], calls: list[float]) -> None:
        self.script = script
        self.calls = calls

    async def handle(self, message: Any) -> Any:
        self.calls.append(trio.current_time())
        step = self.script.pop(0) if self.script else None
        if step is not None:
            raise step
        return {"text": f"re: {message}", "usage": Usage(input_tokens=30, output_tokens=10)}


def usage_of(reply: Any) -> Usage:
    return reply["usage"]  # type: ignore[no-any-return]


def failure(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "scripted", **fields)


FIXED = RetryPolicy(max_attempts=3, backoff=Backoff(kind="fixed", initial=1, max=1))


async def test_retries_then_succeeds_and_settles(autojump_clock: MockClock) -> None:
    calls: list[float] = []
    limiter = RateLimiter({"alpha": RateLimit(tokens_per_minute=600)})
    resilience = Resilience(retry=FIXED, limiter=limiter, usage_of=usage_of)
    async with open_runtime() as runtime:
        script: list[ActorError | None] = [failure(Code.UNAVAILABLE, retry_after=2.0)]
        ref = await runtime.spawn(lambda: Provider(script, calls), max_restarts=5)
        reply = await resilience.call(ref, "hi", provider="alpha", tokens=200)
    assert reply["text"] == "re: hi"
    assert calls == [0.0, 2.0]  # Retry-After honoured
    # 2 x 200 reserved, the success settled to 40 used: 600 - 200 - 40 = 360 (+ refill)
    permit = limiter.acquire_fast("alpha", tokens=380)
    assert permit is not None


async def test_open_breaker_fails_fast_under_default_rules(autojump_clock: MockClock) -> None:
    calls: list[float] = []
    breaker = Breaker()
    resilience = Resilience(breaker=breaker)  # DEFAULT_RETRY: circuit_open is not retried
    async with open_runtime() as runtime:
        script: list[ActorError | None] = [failure(Code.UNAVAILABLE)] * 10
        ref = await runtime.spawn(lambda: Provider(script, calls), max_restarts=20)
        with capture_events("breaker.transition") as events, pytest.raises(ActorError) as caught:
            await resilience.call(ref, "hi", provider="alpha", model="m")
    assert calls == [0.0]  # the retry after ~1 s was refused by the open breaker
    assert caught.value.code is Code.CIRCUIT_OPEN
    assert 0 < trio.current_time() < 1.2
    assert caught.value.retry_after == pytest.approx(30 - trio.current_time())
    assert [(e.before, e.after) for e in events] == [("closed", "open")]


async def test_retries_against_an_open_breaker_wait_for_the_probe(
    autojump_clock: MockClock,
) -> None:
    calls: list[float] = []
    breaker = Breaker()
    resilience = Resilience(retry=FIXED, breaker=breaker)  # retries circuit_open too
    async with open_runtime() as runtime:
        script: list[ActorError | None] = [failure(Code.UNAVAILABLE)] * 10
        ref = await runtime.spawn(lambda: Provider(script, calls), max_restarts=20)
        with capture_events("breaker.transition") as events, pytest.raises(ActorError) as caught:
            await resilience.call(ref, "hi", provider="alpha")
    assert calls == [0.0, 30.0]  # only the probe reached the provider
    assert caught.value.code is Code.CIRCUIT_OPEN
    assert [(e.before, e.after) for e in events] == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "open"),
    ]


async def test_every_attempts_usage_is_charged(autojump_clock: MockClock) -> None:
    calls: list[float] = []
    budget = Budget("run-1", BudgetLimits(tokens=110))
    resilience = Resilience(retry=FIXED, usage_of=usage_of)
    cut = failure(Code.NETWORK, usage=Usage(input_tokens=30, output_tokens=5))
    async with open_runtime() as runtime:
        script: list[ActorError | None] = [cut, cut]
        ref = await runtime.spawn(lambda: Provider(script, calls), max_restarts=5)
        await resilience.call(ref, "hi", provider="alpha", budget=budget)
        assert budget.tokens == 35 + 35 + 40
        with pytest.raises(ActorError) as caught:
            await resilience.call(ref, "again", provider="alpha", budget=budget)
    assert caught.value.code is Code.BUDGET_EXCEEDED  # checked before the attempt
    assert len(calls) == 3


async def test_fatal_errors_and_cancellation_pass_through(autojump_clock: MockClock) -> None:
    calls: list[float] = []
    breaker = Breaker()
    resilience = Resilience(retry=FIXED, breaker=breaker)
    async with open_runtime() as runtime:
        script: list[ActorError | None] = [failure(Code.BAD_REQUEST)]
        ref = await runtime.spawn(lambda: Provider(script, calls), max_restarts=5)
        with pytest.raises(ActorError) as caught:
            await resilience.call(ref, "hi", provider="alpha")
        assert caught.value.code is Code.BAD_REQUEST
        assert str(await breaker.state_of("alpha")) == "closed"  # not the provider's fault
        script.append(failure(Code.UNAVAILABLE))
        with trio.move_on_after(0.5):
            await resilience.call(ref, "hi", provider="alpha")  # cancelled while backing off
    assert calls == [0.0, 0.0]


async def test_fast_path_returns_after_recovery(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    with pytest.raises(ActorError):
        async with breaker.guard("alpha", "m"):
            raise failure(Code.TIMEOUT)
    assert breaker.admit_fast("alpha", "m") is None
    await trio.sleep(30)
    async with breaker.guard("alpha", "m"):
        pass  # the probe closes it
    admission = breaker.admit_fast("alpha", "m")
    assert admission is not None and admission.clean


# --- arguments: the breaker, limiter and usage_of once, a call's own on each call ------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"breaker": "b"}, "Resilience: breaker must be None or a Breaker, got str"),
        ({"limiter": 1}, "Resilience: limiter must be None or a RateLimiter, got int"),
        ({"usage_of": 1}, "Resilience: usage_of must be None or a callable, got int"),
    ],
)
def test_a_wrong_part_is_refused_when_built(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ActorError) as raised:
        Resilience(**fields)
    assert raised.value.code is Code.CONFIG_INVALID
    assert raised.value.message == message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"provider": 3}, "provider must be a str, got int 3"),
        ({"model": b"m"}, "model must be None or a str, got bytes b'm'"),
        ({"tokens": -1}, "tokens must be an int >= 0, got int -1"),
        ({"tokens": 1.5}, "tokens must be an int >= 0, got float 1.5"),
        ({"tokens": True}, "tokens must be an int >= 0, got bool True"),
        ({"budget": 1}, "budget must be None or a Budget, got int 1"),
    ],
)
async def test_a_wrong_call_argument_is_input_validation_and_sends_nothing(
    autojump_clock: MockClock, fields: dict[str, Any], message: str
) -> None:
    calls: list[float] = []
    limiter = RateLimiter({"alpha": RateLimit(tokens_per_minute=600)})
    resilience = Resilience(retry=FIXED, breaker=Breaker(), limiter=limiter, usage_of=usage_of)
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Provider([], calls))
        with pytest.raises(ActorError) as raised:
            await resilience.call(ref, "hi", **{"provider": "alpha", **fields})
        reply = await resilience.call(ref, "hi", provider="alpha", tokens=10)
    assert raised.value.code is Code.INPUT_VALIDATION
    assert raised.value.message == f"Resilience.call(): {message}"
    assert raised.value.delivered is False
    assert calls == [0.0]  # only the good call was sent
    assert reply["text"] == "re: hi"
