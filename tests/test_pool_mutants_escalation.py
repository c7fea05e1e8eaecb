"""The ``all_providers_failed`` error's fields, each pinned: the last failure's code,
provider and model, its message and cause, the earliest ``retry_after``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime
from supervisors import (
    Abort,
    AllProvidersFailed,
    Backoff,
    ProviderPool,
    Resilience,
    RetryPolicy,
    RetryRules,
    Target,
)
from tests.pool_helpers import request

#: No retries: each target gets one attempt per walk of the chain.
ONCE = RetryPolicy(max_attempts=0, backoff=Backoff(initial=1, jitter=0))


class Fails(Actor):
    """Answers every request with ``code`` (retryable), naming the provider ``said``
    (not the target's name: the pool reports what the error says) and ``retry_after``."""

    def __init__(self, code: Code, said: str, model: str, retry_after: float | None) -> None:
        self.code, self.said, self.model, self.retry_after = code, said, model, retry_after
        self.calls = 0

    async def handle(self, message: Any) -> Any:
        self.calls += 1
        return fail(
            self.code,
            f"{self.said} is down",
            retryable=True,
            provider=self.said,
            model=self.model,
            retry_after=self.retry_after,
        )


def _factory(actor: Fails) -> Callable[[], Fails]:
    return lambda: actor


async def _failure(*actors: tuple[str, str, Fails], **pool: Any) -> AllProvidersFailed:
    async with open_runtime() as runtime:
        targets = []
        for provider, model, actor in actors:
            ref = await runtime.spawn(_factory(actor))
            targets.append(Target(ref=ref, provider=provider, model=model))
        rules = RetryRules(by_code={Code.UNAVAILABLE: ONCE, Code.RATE_LIMITED: ONCE})
        with pytest.raises(AllProvidersFailed) as caught:
            await ProviderPool(targets, resilience=Resilience(retry=rules), **pool).complete(
                request(metadata={"request_id": "req-9"})
            )
    return caught.value


async def test_the_error_names_the_last_failure_its_provider_and_model(
    autojump_clock: MockClock,
) -> None:
    first = Fails(Code.UNAVAILABLE, "alpha", "a-model", None)
    last = Fails(Code.RATE_LIMITED, "beta", "b-model", 7.0)
    failure = await _failure(("A", "m1", first), ("B", "m2", last))
    assert failure.code is Code.ALL_PROVIDERS_FAILED
    assert str(failure) == "[all_providers_failed] request req-9: every target failed (2 attempts)"
    assert failure.message == "request req-9: every target failed (2 attempts)"
    assert failure.request_id == "req-9"
    assert failure.category is Code.RATE_LIMITED
    assert (failure.provider, failure.model) == ("beta", "b-model")
    assert failure.retry_after == 7.0
    assert [(a.provider, a.model, a.code) for a in failure.attempts] == [
        ("A", "m1", Code.UNAVAILABLE),
        ("B", "m2", Code.RATE_LIMITED),
    ]
    cause = failure.__cause__
    assert isinstance(cause, ActorError)
    assert (cause.code, cause.message) == (Code.RATE_LIMITED, "beta is down")
    assert failure.decision is None
    assert (first.calls, last.calls) == (1, 1)


async def test_one_target_one_attempt_and_no_retry_after(autojump_clock: MockClock) -> None:
    only = Fails(Code.UNAVAILABLE, "gamma", "g-model", None)
    failure = await _failure(("C", "m3", only))
    assert failure.message == "request req-9: every target failed (1 attempts)"
    assert (failure.category, failure.provider, failure.model) == (
        Code.UNAVAILABLE,
        "gamma",
        "g-model",
    )
    assert failure.retry_after is None
    assert len(failure.attempts) == 1


async def test_an_abort_keeps_the_last_failures_provider_and_model(
    autojump_clock: MockClock,
) -> None:
    async def abort(failure: AllProvidersFailed) -> Abort:
        assert (failure.provider, failure.model) == ("delta", "d-model")
        return Abort(reason="enough")

    only = Fails(Code.UNAVAILABLE, "delta", "d-model", 2.5)
    failure = await _failure(("D", "m4", only), on_exhausted=abort)
    assert failure.decision == Abort(reason="enough")
    assert (failure.provider, failure.model, failure.retry_after) == ("delta", "d-model", 2.5)
