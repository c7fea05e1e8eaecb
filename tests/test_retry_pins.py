"""Pins of supervisors.resilience.retry: the default rules, the deadline's edges, what is passed on.

Each test fails if one default, one schedule, one boundary or one piece of context
changes (``make mutate MODULE=supervisors/resilience/retry.py`` measures how well they do).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing import capture_events
from supervisors import DEFAULT_RETRY, Backoff, RetryPolicy, RetryRules, retrying
from supervisors.resilience.retry import (
    RATE_LIMITED_POLICY,
    STORE_POLICY,
    TRANSIENT_POLICY,
    next_delay,
)


def err(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "pinned", **fields)


def fixed(seconds: float, attempts: int = 3, **fields: Any) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=attempts, backoff=Backoff(kind="fixed", initial=seconds, max=seconds), **fields
    )


class Failing:
    """Raises the given errors in turn (the last one forever) and records call times."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = errors
        self.calls: list[float] = []

    async def __call__(self) -> str:
        self.calls.append(trio.current_time())
        raise self.errors[min(len(self.calls), len(self.errors)) - 1]


def test_default_rules_by_code() -> None:
    assert dict(DEFAULT_RETRY.by_code) == {
        Code.RATE_LIMITED: RATE_LIMITED_POLICY,
        Code.TIMEOUT: TRANSIENT_POLICY,
        Code.NETWORK: TRANSIENT_POLICY,
        Code.UNAVAILABLE: TRANSIENT_POLICY,
        Code.MALFORMED_RESPONSE: TRANSIENT_POLICY,
        Code.PERSISTENCE_UNAVAILABLE: STORE_POLICY,
    }
    assert DEFAULT_RETRY.deadline is None


def test_default_schedules() -> None:
    rate_limited = RetryPolicy(
        max_attempts=6, backoff=Backoff(initial=5, factor=2, max=160, jitter=0.2)
    )
    transient = RetryPolicy(max_attempts=3, backoff=Backoff(initial=1, factor=2, max=4, jitter=0.1))
    store = RetryPolicy(max_attempts=3, backoff=Backoff(kind="linear", initial=2, step=2, max=6))
    assert (rate_limited, transient, store) == (RATE_LIMITED_POLICY, TRANSIENT_POLICY, STORE_POLICY)
    for policy in (RATE_LIMITED_POLICY, TRANSIENT_POLICY, STORE_POLICY):
        assert (policy.honour_retry_after, policy.deadline) == (True, None)
        assert policy.backoff.kind == ("linear" if policy is STORE_POLICY else "exponential")


def test_retry_policy_and_rules_defaults_and_bounds() -> None:
    policy = RetryPolicy(max_attempts=0, backoff=Backoff())
    assert (policy.honour_retry_after, policy.deadline) == (True, None)
    assert RetryRules(by_code={}).deadline is None
    with pytest.raises(ActorError) as caught:
        RetryPolicy(max_attempts=-1, backoff=Backoff())
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == "RetryPolicy.max_attempts must be an integer >= 0, got -1"


def test_rules_by_code_is_a_read_only_copy() -> None:
    source = {Code.TIMEOUT: TRANSIENT_POLICY}
    rules = RetryRules(by_code=source)
    source[Code.NETWORK] = TRANSIENT_POLICY
    assert dict(rules.by_code) == {Code.TIMEOUT: TRANSIENT_POLICY}
    with pytest.raises(TypeError):
        rules.by_code[Code.NETWORK] = TRANSIENT_POLICY  # type: ignore[index]


def test_policy_for() -> None:
    assert DEFAULT_RETRY.policy_for(err(Code.TIMEOUT)) is TRANSIENT_POLICY
    assert DEFAULT_RETRY.policy_for(err(Code.PERSISTENCE_UNAVAILABLE)) is STORE_POLICY
    assert DEFAULT_RETRY.policy_for(err(Code.UNAVAILABLE, retryable=False)) is None
    assert DEFAULT_RETRY.policy_for(err(Code.TOOL_FAILED)) is None  # retryable, no rule
    bare = fixed(1)
    assert bare.policy_for(err(Code.TOOL_FAILED)) is bare
    assert bare.policy_for(err(Code.AUTH)) is None


def test_next_delay() -> None:
    policy = RetryPolicy(max_attempts=2, backoff=Backoff(initial=3, factor=2, max=100))
    assert next_delay(policy, err(Code.TIMEOUT), 0) == (3, "schedule")
    assert next_delay(policy, err(Code.TIMEOUT), 1) == (6, "schedule")
    assert next_delay(policy, err(Code.TIMEOUT), 2) is None
    assert next_delay(policy, err(Code.TIMEOUT, retry_after=0.0), 1) == (0.0, "header")
    deaf = attrs.evolve(policy, honour_retry_after=False)
    assert next_delay(deaf, err(Code.TIMEOUT, retry_after=50.0), 1) == (6, "schedule")
    assert next_delay(fixed(1, attempts=0), err(Code.TIMEOUT, retry_after=1.0), 0) is None


async def test_retry_after_zero_retries_at_once(autojump_clock: MockClock) -> None:
    fn = Failing(err(Code.RATE_LIMITED, retry_after=0.0))
    with capture_events("retry.scheduled") as events, pytest.raises(ActorError) as caught:
        await retrying(DEFAULT_RETRY, fn)
    assert fn.calls == [0.0] * 7
    assert [(e.attempt, e.delay, e.source) for e in events] == [
        (n, 0.0, "header") for n in range(1, 7)
    ]
    assert (caught.value.code, caught.value.retry_after) == (Code.RATE_LIMITED, 0.0)


async def test_a_retry_ending_exactly_at_the_deadline_is_made(autojump_clock: MockClock) -> None:
    fn = Failing(err(Code.RATE_LIMITED, retry_after=10.0))
    rules = RetryRules(by_code={Code.RATE_LIMITED: fixed(1)}, deadline=10)
    with pytest.raises(ActorError, match=r"^\[rate_limited\] pinned$"):
        await retrying(rules, fn)
    assert fn.calls == [0.0, 10.0]  # slept to the deadline, tried once more, then done
    assert trio.current_time() == 10.0


async def test_a_retry_ending_past_the_deadline_is_not_slept(autojump_clock: MockClock) -> None:
    fn = Failing(err(Code.RATE_LIMITED, retry_after=10.0))
    rules = RetryRules(by_code={Code.RATE_LIMITED: fixed(1)}, deadline=9.5)
    with pytest.raises(ActorError, match=r"^\[rate_limited\] pinned$"):
        await retrying(rules, fn)
    assert fn.calls == [0.0]
    assert trio.current_time() == 0.0


async def test_an_attempt_at_the_deadline_that_yields_times_out(autojump_clock: MockClock) -> None:
    calls: list[float] = []

    async def fn() -> None:
        calls.append(trio.current_time())
        if len(calls) == 1:
            raise err(Code.UNAVAILABLE, retry_after=4.0)
        await trio.lowlevel.checkpoint()

    rules = RetryRules(by_code={Code.UNAVAILABLE: fixed(1)}, deadline=4)
    with pytest.raises(
        ActorError, match=r"^\[timeout\] retry deadline of 4 s reached during an attempt$"
    ) as caught:
        await retrying(rules, fn, classify_with={"provider": "alpha"})
    assert calls == [0.0, 4.0]
    assert (caught.value.retryable, caught.value.provider) == (False, "alpha")
    assert isinstance(caught.value.__cause__, ActorError)
    assert caught.value.__cause__.code is Code.UNAVAILABLE


async def test_a_first_attempt_cut_by_the_deadline_has_no_cause(autojump_clock: MockClock) -> None:
    async def hangs() -> None:
        await trio.sleep(100)

    policy = attrs.evolve(fixed(1), deadline=2.5)
    with pytest.raises(
        ActorError, match=r"^\[timeout\] retry deadline of 2\.5 s reached during an attempt$"
    ) as caught:
        await retrying(policy, hangs, classify_with={"provider": "beta", "model": "m1"})
    assert trio.current_time() == 2.5
    assert caught.value.__cause__ is None
    assert (caught.value.provider, caught.value.model, caught.value.retryable) == (
        "beta",
        "m1",
        False,
    )


async def test_foreign_errors_are_classified_with_the_given_context(
    autojump_clock: MockClock,
) -> None:
    fn = Failing(ValueError("bad"))
    with pytest.raises(ActorError) as caught:
        await retrying(DEFAULT_RETRY, fn, classify_with={"provider": "alpha", "model": "m2"})
    assert (caught.value.code, caught.value.provider, caught.value.model) == (
        Code.INTERNAL,
        "alpha",
        "m2",
    )
    assert isinstance(caught.value.__cause__, ValueError)
    assert fn.calls == [0.0]


async def test_on_failure_sees_every_failed_attempt(autojump_clock: MockClock) -> None:
    seen: list[tuple[float, Code]] = []

    async def on_failure(error: ActorError) -> None:
        seen.append((trio.current_time(), error.code))

    fn = Failing(err(Code.TIMEOUT), err(Code.NETWORK), err(Code.AUTH))
    with pytest.raises(ActorError, match=r"^\[auth\] pinned$"):
        await retrying(DEFAULT_RETRY, fn, on_failure=on_failure)
    assert seen == [(0.0, Code.TIMEOUT), (fn.calls[1], Code.NETWORK), (fn.calls[2], Code.AUTH)]
    assert len(fn.calls) == 3


async def test_what_on_failure_raises_ends_the_retries(autojump_clock: MockClock) -> None:
    async def on_failure(error: ActorError) -> None:
        raise err(Code.BUDGET_EXCEEDED)

    fn = Failing(err(Code.TIMEOUT))
    with pytest.raises(ActorError, match=r"^\[budget_exceeded\] pinned$"):
        await retrying(DEFAULT_RETRY, fn, on_failure=on_failure)
    assert fn.calls == [0.0]


async def test_the_scheduled_event_names_code_and_provider(autojump_clock: MockClock) -> None:
    fn = Failing(err(Code.UNAVAILABLE, provider="alpha", retry_after=2.0), err(Code.AUTH))
    with capture_events("retry.scheduled") as events, pytest.raises(ActorError):
        await retrying(DEFAULT_RETRY, fn)
    assert [(e.attempt, e.error.code, e.delay, e.source, e.error.provider) for e in events] == [
        (1, "unavailable", 2.0, "header", "alpha")
    ]
    assert fn.calls == [0.0, 2.0]


async def test_no_deadline_means_no_cut(autojump_clock: MockClock) -> None:
    async def slow() -> str:
        await trio.sleep(10**6)
        return "done"

    assert await retrying(fixed(1), slow) == "done"
    assert trio.current_time() == 10**6
