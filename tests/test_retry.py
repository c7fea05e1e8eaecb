"""Retry schedules on virtual time: seed 003's defaults, Retry-After, deadlines."""

from __future__ import annotations

import random
from typing import Any

import attrs
import httpx
import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing import capture_events
from supervisors import DEFAULT_RETRY, Backoff, RetryPolicy, RetryRules, retrying


def no_jitter(rules: RetryRules = DEFAULT_RETRY, **changes: Any) -> RetryRules:
    """The default rules with every jitter source pinned to the middle (no jitter)."""
    return attrs.evolve(
        rules,
        by_code={
            code: attrs.evolve(p, backoff=attrs.evolve(p.backoff, random=lambda: 0.5))
            for code, p in rules.by_code.items()
        },
        **changes,
    )


class Flaky:
    """Fails with the given errors in turn (the last one forever), recording call times."""

    def __init__(self, *errors: ActorError | Exception, succeed_after: int | None = None) -> None:
        self.errors = errors
        self.calls: list[float] = []
        self.succeed_after = succeed_after

    async def __call__(self) -> str:
        self.calls.append(trio.current_time())
        if self.succeed_after is not None and len(self.calls) > self.succeed_after:
            return "ok"
        raise self.errors[min(len(self.calls), len(self.errors)) - 1]


def err(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "test", **fields)


async def test_rate_limit_schedule_and_its_six_attempt_end(autojump_clock: MockClock) -> None:
    fn = Flaky(err(Code.RATE_LIMITED))
    with capture_events("retry.scheduled") as events, pytest.raises(ActorError) as caught:
        await retrying(no_jitter(), fn)
    assert fn.calls == [0, 5, 15, 35, 75, 155, 315]
    assert trio.current_time() == 315  # no sleep after the sixth attempt
    assert caught.value.code is Code.RATE_LIMITED
    assert [(e.attempt, e.delay, e.source) for e in events] == [
        (1, 5, "schedule"),
        (2, 10, "schedule"),
        (3, 20, "schedule"),
        (4, 40, "schedule"),
        (5, 80, "schedule"),
        (6, 160, "schedule"),
    ]


async def test_rate_limit_jitter_is_seeded_and_within_twenty_percent(
    autojump_clock: MockClock,
) -> None:
    source = random.Random(2026)
    rules = attrs.evolve(
        DEFAULT_RETRY,
        by_code={
            Code.RATE_LIMITED: attrs.evolve(
                DEFAULT_RETRY.by_code[Code.RATE_LIMITED],
                backoff=Backoff(initial=5, factor=2, max=160, jitter=0.2, random=source.random),
            )
        },
    )
    fn = Flaky(err(Code.RATE_LIMITED))
    with pytest.raises(ActorError):
        await retrying(rules, fn)
    replay = random.Random(2026)
    expected, at = [0.0], 0.0
    for n in range(6):
        base = min(160, 5 * 2**n)
        delay = min(160, base * (1 + 0.2 * (2 * replay.random() - 1)))
        assert 0.8 * base <= delay <= base * 1.2
        at += delay
        expected.append(at)
    assert fn.calls == pytest.approx(expected)


async def test_retry_after_is_honoured_exactly(autojump_clock: MockClock) -> None:
    fn = Flaky(err(Code.RATE_LIMITED, retry_after=90.0), succeed_after=1)
    with capture_events("retry.scheduled") as events:
        assert await retrying(no_jitter(), fn) == "ok"
    assert fn.calls == [0, 90]
    assert [(e.delay, e.source) for e in events] == [(90.0, "header")]


async def test_retry_after_beyond_the_deadline_fails_at_once(autojump_clock: MockClock) -> None:
    fn = Flaky(err(Code.RATE_LIMITED, retry_after=90.0))
    with pytest.raises(ActorError) as caught:
        await retrying(no_jitter(deadline=60), fn)
    assert trio.current_time() == 0
    assert fn.calls == [0]
    assert (caught.value.code, caught.value.retry_after) == (Code.RATE_LIMITED, 90.0)


async def test_transient_schedule(autojump_clock: MockClock) -> None:
    fn = Flaky(err(Code.UNAVAILABLE), err(Code.TIMEOUT), err(Code.NETWORK))
    with pytest.raises(ActorError) as caught:
        await retrying(no_jitter(), fn)
    assert fn.calls == [0, 1, 3, 7]
    assert trio.current_time() == 7
    assert caught.value.code is Code.NETWORK


async def test_store_schedule(autojump_clock: MockClock) -> None:
    fn = Flaky(err(Code.PERSISTENCE_UNAVAILABLE))
    with pytest.raises(ActorError):
        await retrying(no_jitter(), fn)
    assert fn.calls == [0, 2, 6, 12]


@pytest.mark.parametrize(
    "error",
    [
        err(Code.AUTH),
        err(Code.BAD_REQUEST),
        err(Code.UNAVAILABLE, retryable=False),  # x-should-retry: false on a 503
        err(Code.TOOL_DENIED),
    ],
    ids=["auth", "bad_request", "should-retry-false", "tool_denied"],
)
async def test_fatal_errors_are_not_retried(autojump_clock: MockClock, error: ActorError) -> None:
    fn = Flaky(error)
    with pytest.raises(ActorError) as caught:
        await retrying(no_jitter(), fn)
    assert caught.value is error
    assert fn.calls == [0]


async def test_foreign_errors_are_classified_then_retried(autojump_clock: MockClock) -> None:
    fn = Flaky(httpx.ConnectError("refused"), succeed_after=2)
    assert await retrying(no_jitter(), fn) == "ok"
    assert fn.calls == [0, 1, 3]


async def test_cancellation_passes_through_and_is_never_retried(autojump_clock: MockClock) -> None:
    calls: list[float] = []

    async def slow() -> None:
        calls.append(trio.current_time())
        await trio.sleep(100)

    with trio.move_on_after(10) as scope:
        await retrying(no_jitter(), slow)
    assert scope.cancelled_caught
    assert calls == [0]

    fn = Flaky(err(Code.RATE_LIMITED))
    with trio.move_on_after(7):
        await retrying(no_jitter(), fn)  # cancelled during the second sleep
    assert fn.calls == [10, 15]


async def test_deadline_cuts_a_running_attempt(autojump_clock: MockClock) -> None:
    calls: list[float] = []

    async def hangs() -> None:
        calls.append(trio.current_time())
        if len(calls) == 1:
            raise err(Code.UNAVAILABLE)
        await trio.sleep(1000)

    with pytest.raises(ActorError) as caught:
        await retrying(no_jitter(deadline=30), hangs)
    assert trio.current_time() == 30
    assert (caught.value.code, caught.value.retryable) == (Code.TIMEOUT, False)
    assert isinstance(caught.value.__cause__, ActorError)
    assert caught.value.__cause__.code is Code.UNAVAILABLE


async def test_a_bare_policy_retries_any_retryable_error(autojump_clock: MockClock) -> None:
    policy = RetryPolicy(max_attempts=2, backoff=Backoff(kind="fixed", initial=3, max=3))
    fn = Flaky(err(Code.TOOL_FAILED))
    with pytest.raises(ActorError):
        await retrying(policy, fn)
    assert fn.calls == [0, 3, 6]
