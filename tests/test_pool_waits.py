"""What a pool waits for, and what it reports when it stops waiting: limiter refusals,
open breakers, escalation's fresh start, the earliest retry_after."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, fail, open_runtime
from actors.events import RetryScheduled
from actors.providers import LlmResponse
from actors.testing import capture_events
from actors.testing.chaos import Fault
from supervisors import (
    AllProvidersFailed,
    Backoff,
    Breaker,
    ProviderPool,
    RateLimit,
    RateLimiter,
    Resilience,
    RetryLater,
    RetryPolicy,
    RetryRules,
    Target,
)
from tests.pool_helpers import faults, fleet, request, rules

NO_RETRIES = RetryRules(by_code={})


async def test_a_limiter_without_room_rotates_at_once_and_sleeps_only_alone(
    autojump_clock: MockClock,
) -> None:
    limiter = RateLimiter({"A": RateLimit(requests_per_minute=1)})
    async with fleet({"A": None, "B": None}) as f:
        resilience = Resilience(retry=rules(), limiter=limiter)
        both = ProviderPool(f.targets("A", "B"), resilience=resilience)
        alone = ProviderPool(f.targets("A"), resilience=resilience)
        assert (await both.complete(request())).provider == "A"
        assert (await both.complete(request())).provider == "B"  # A has no room: no wait
        assert trio.current_time() == 0.0
        reply = await alone.complete(request())  # one sleep, until A's bucket has room
        assert reply.provider == "A"
        assert trio.current_time() == pytest.approx(60.0)
        assert f.times("B") == [0.0]
        assert len(f.times("A")) == 2
    # A refusal is not an attempt: three answered attempts, nothing else.
    assert [a.outcome for a in both.ledger] == ["ok", "ok"]
    assert [a.outcome for a in alone.ledger] == ["ok"]


async def test_a_limiter_refusal_past_the_deadline_reports_its_wait(
    autojump_clock: MockClock,
) -> None:
    limiter = RateLimiter({"A": RateLimit(requests_per_minute=1)})
    async with fleet({"A": None}) as f:
        pool = ProviderPool(
            f.targets("A"), resilience=Resilience(retry=rules(), limiter=limiter), deadline=10
        )
        await pool.complete(request())
        with pytest.raises(AllProvidersFailed) as caught:
            await pool.complete(request())
        assert trio.current_time() == 0.0
        assert caught.value.category is Code.RATE_LIMITED
        assert caught.value.retry_after == pytest.approx(60.0)
        assert caught.value.attempts == ()


async def test_targets_open_for_good_end_the_chain_at_once_as_circuit_open(
    autojump_clock: MockClock,
) -> None:
    scripts = {"A": faults(Fault(kind="status", status=401)), "B": None}
    breaker = Breaker()
    async with fleet(scripts) as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(breaker=breaker))
        with pytest.raises(Exception, match=r"\[auth\]"):
            await pool.complete(request())
        with pytest.raises(AllProvidersFailed) as caught:
            await pool.complete(request())
        assert trio.current_time() == 0.0
        assert caught.value.category is Code.CIRCUIT_OPEN
        assert caught.value.retry_after is None  # open until an operator resets it
        assert caught.value.attempts == ()
        assert f.count("A") == 1
        await breaker.reset("A")
        assert (await pool.complete(request())).provider == "A"


async def test_the_earliest_retry_after_counts_a_target_whose_retries_are_used_up(
    autojump_clock: MockClock,
) -> None:
    scripts = {
        "A": faults(Fault(kind="status", status=429, headers={"retry-after": "7"})),
        "B": faults(Fault(kind="status", status=503)),
    }
    async with fleet(scripts) as f:
        pool = ProviderPool(f.targets("A", "B"), resilience=Resilience(retry=NO_RETRIES))
        with pytest.raises(AllProvidersFailed) as caught:
            await pool.complete(request())
        assert caught.value.retry_after == 7.0
        assert caught.value.category is Code.UNAVAILABLE  # the last failure's code
        assert [a.provider for a in caught.value.attempts] == ["A", "B"]


async def test_a_retry_later_brings_back_used_up_targets_not_gone_ones(
    autojump_clock: MockClock,
) -> None:
    scripts = {
        "A": faults(Fault(kind="status", status=503)),
        "C": faults(Fault(kind="status", status=503, times=2)),
    }
    decisions = [RetryLater(seconds=10), None]

    async def hook(failure: AllProvidersFailed) -> RetryLater | None:
        return decisions.pop(0)

    once = RetryPolicy(max_attempts=0, backoff=Backoff(initial=1, jitter=0))
    async with fleet(scripts) as f:
        pool = ProviderPool(
            [f.target("A"), f.target("C")],
            resilience=Resilience(retry=once),
            on_exhausted=hook,
        )
        # A 503 (used up), C 503 (used up): exhausted; retry in 10 s: A answers.
        reply = await pool.complete(request())
        assert (reply.provider, trio.current_time()) == ("A", 10.0)
        assert f.times("A") == [0.0, 10.0]


async def test_a_model_gone_is_never_tried_again_after_a_retry_later(
    autojump_clock: MockClock,
) -> None:
    scripts = {
        "A": faults(Fault(kind="status", status=404), Fault(kind="status", status=503)),
        "B": faults(Fault(kind="status", status=503, times=2)),
    }
    decisions = [RetryLater(seconds=5), None]

    async def hook(failure: AllProvidersFailed) -> RetryLater | None:
        return decisions.pop(0)

    once = RetryPolicy(max_attempts=0, backoff=Backoff(initial=1, jitter=0))
    async with fleet(scripts) as f:
        pool = ProviderPool(
            f.targets("A", "B"),
            downgrades={"A": ["m2"]},
            resilience=Resilience(retry=once),
            on_exhausted=hook,
        )
        with capture_events("pool.escalated") as audit:
            reply = await pool.complete(request())
        # A/m1 404 (gone) -> A/m2 503 -> B 503: exhausted at 0. At 5 the walk starts
        # again from the top, without A/m1: B 503 again, then A/m2 answers.
        assert (reply.provider, reply.model, trio.current_time()) == ("A", "m2", 5.0)
        assert [r.model for r in f.servers["A"].requests] == ["m1", "m2", "m2"]
        assert f.times("B") == [0.0, 5.0]
        assert [e.decision for e in audit] == ["retry"]


# --- the chain's own rules, on actors that answer by script (no HTTP) ------------------


class Steps(Actor):
    """Answers each request by the next step (the last one repeats): ``"ok"``, a code,
    or ``(code, retry_after)``; records ``(provider, model, time)`` of every request."""

    def __init__(self, name: str, steps: list[Any], seen: list[tuple[str, str, float]]) -> None:
        self.name, self.steps, self.seen = name, steps, seen

    async def handle(self, message: Any) -> Any:
        model = message.request.model
        self.seen.append((self.name, model, trio.current_time()))
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if step == "ok":
            usage = Usage(input_tokens=1, output_tokens=1)
            return LlmResponse(content=self.name, usage=usage, provider=self.name, model=model)
        code, retry_after = step if isinstance(step, tuple) else (step, None)
        retryable = ActorError.from_code(Code(code)).retryable
        return fail(
            Code(code), f"{self.name} says {code}", retryable=retryable, retry_after=retry_after
        )


async def _steps(
    runtime: Any, seen: list[tuple[str, str, float]], **scripts: list[Any]
) -> dict[str, Any]:
    """One actor per provider of ``scripts``, by name."""
    refs = {}
    for name, steps in scripts.items():
        refs[name] = await runtime.spawn(lambda n=name, s=steps: Steps(n, list(s), seen))
    return refs


async def test_retries_are_announced_with_their_number_delay_and_source(
    autojump_clock: MockClock,
) -> None:
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(
            runtime, seen, A=["unavailable", "unavailable", ("rate_limited", 5.0), "ok"]
        )
        pool = ProviderPool(
            [Target(ref=refs["A"], provider="A", model="m1")], resilience=Resilience(retry=rules())
        )
        with capture_events(RetryScheduled) as retries:
            reply = await pool.complete(request())
    assert reply.content == "A"
    assert [at for _, _, at in seen] == [0.0, 1.0, 3.0, 8.0]
    assert [(r.attempt, r.delay, r.source, r.error.code) for r in retries] == [
        (1, 1.0, "schedule", Code.UNAVAILABLE),
        (2, 2.0, "schedule", Code.UNAVAILABLE),
        (3, 5.0, "header", Code.RATE_LIMITED),
    ]


async def test_a_model_known_gone_ends_the_request_naming_it(autojump_clock: MockClock) -> None:
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["model_not_found"], B=["ok"])
        targets = [
            Target(ref=refs["A"], provider="A", model="m1"),
            Target(ref=refs["B"], provider="B", model="m1"),
        ]
        pool = ProviderPool(targets, resilience=Resilience(retry=rules(), breaker=Breaker()))
        with pytest.raises(ActorError) as first:
            await pool.complete(request())
        assert (first.value.code, first.value.message) == (
            Code.MODEL_NOT_FOUND,
            "A says model_not_found",
        )
        with pytest.raises(ActorError) as second:
            await pool.complete(request())
    assert second.value.code is Code.MODEL_NOT_FOUND
    assert second.value.message == (
        "the model is known not to exist: its breaker is open until reset"
    )
    assert (second.value.provider, second.value.model) == ("A", "m1")
    assert seen == [("A", "m1", 0.0)]  # the second request never called it


async def test_a_model_known_gone_moves_to_the_providers_next_model(
    autojump_clock: MockClock,
) -> None:
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["model_not_found", "ok"], B=["ok"])
        targets = [
            Target(ref=refs["A"], provider="A", model="m1"),
            Target(ref=refs["B"], provider="B", model="m1"),
        ]
        pool = ProviderPool(
            targets,
            downgrades={"A": ["m2"]},
            resilience=Resilience(retry=rules(), breaker=Breaker()),
        )
        replies = [await pool.complete(request()) for _ in range(2)]
    assert [(r.content, r.model) for r in replies] == [("A", "m2"), ("A", "m2")]
    assert seen == [("A", "m1", 0.0), ("A", "m2", 0.0), ("A", "m2", 0.0)]


async def test_a_chain_ending_on_an_open_breaker_names_it_and_counts_from_now(
    autojump_clock: MockClock,
) -> None:
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["unavailable"])
        pool = ProviderPool(
            [Target(ref=refs["A"], provider="A", model="m1")],
            resilience=Resilience(retry=rules(), breaker=Breaker()),
            deadline=10.0,
        )
        with pytest.raises(AllProvidersFailed) as caught:
            await pool.complete(request())
        # A failed at 0 (its breaker opened: probe at 30); its retry at 1 found the
        # breaker refusing for 29 s, past the deadline: exhausted at 1, on that skip.
        assert trio.current_time() == 1.0
    assert seen == [("A", "m1", 0.0)]
    error = caught.value
    assert (error.category, error.provider, error.model) == (Code.CIRCUIT_OPEN, "A", "m1")
    assert error.retry_after == 29.0  # the probe at 30, counted from 1
    cause = error.__cause__
    assert isinstance(cause, ActorError)
    assert (cause.code, cause.message) == (Code.CIRCUIT_OPEN, "circuit for A is open")
    assert (cause.provider, cause.model, cause.retry_after) == ("A", "m1", 29.0)


async def test_a_chain_ended_before_any_attempt_names_no_cause(autojump_clock: MockClock) -> None:
    # A stream read only after its deadline: nothing was tried, nothing failed.
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["ok"])
        pool = ProviderPool([Target(ref=refs["A"], provider="A", model="m1")], deadline=1.0)
        with pytest.raises(AllProvidersFailed) as caught:
            async with pool.stream(request()) as events:
                await trio.sleep(2)
                async for _ in events:
                    pass  # pragma: no cover - nothing is streamed
    error = caught.value
    assert (error.category, error.provider, error.model, error.retry_after) == (
        None,
        None,
        None,
        None,
    )
    assert (error.__cause__, error.attempts, seen) == (None, (), [])
