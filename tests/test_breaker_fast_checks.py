"""The breaker's side-effect-free checks, pinned: blocked_fast, model_gone_fast,
unchanged_by_success — in-process state, and a shared backend (which they never guess)."""

from __future__ import annotations

import math
from typing import Any

import trio
from trio.testing import MockClock

from actors import ActorError, Code
from supervisors import Breaker, BreakerConfig
from supervisors.state import MemoryState


class Shared:
    """A state backend that is not in-process (delegates to a MemoryState)."""

    def __init__(self) -> None:
        self.inner = MemoryState()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def error(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "x", provider="p", **fields)


async def fail(breaker: Breaker, code: Code, model: str | None = None, **fields: Any) -> None:
    admission = await breaker.admit("p", model)
    await breaker.record(admission, error(code, **fields))


async def test_blocked_fast_follows_the_breaker_state(autojump_clock: MockClock) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=2, probe_lease=5.0))
    assert breaker.blocked_fast("p", "m") is None  # no state at all
    await fail(breaker, Code.UNAVAILABLE, "m")
    assert breaker.blocked_fast("p", "m") is None  # closed, one failure counted
    await fail(breaker, Code.UNAVAILABLE, "m")  # open: cooldown 60, probe at 30
    assert breaker.blocked_fast("p", "m") == 30.0
    assert breaker.blocked_fast("p") == 30.0
    assert breaker.blocked_fast("q", "m") is None  # another provider
    await trio.sleep(10)
    assert breaker.blocked_fast("p") == 20.0
    await trio.sleep(20)
    assert breaker.blocked_fast("p") is None  # the probe time came: admit() decides
    probe = await breaker.admit("p")  # half-open, the lease held for 5 s
    assert breaker.blocked_fast("p") == 5.0
    await trio.sleep(2)
    assert breaker.blocked_fast("p") == 3.0
    await breaker.record(probe, None)  # closed
    assert breaker.blocked_fast("p", "m") is None


async def test_blocked_fast_takes_the_providers_wait_first_then_the_models(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker()
    await fail(breaker, Code.MODEL_NOT_FOUND, "m")
    assert breaker.blocked_fast("p", "m") == math.inf  # the model, for good
    assert breaker.blocked_fast("p", "other") is None
    assert breaker.blocked_fast("p") is None
    await fail(breaker, Code.RATE_LIMITED, "other", retry_after=7.0)
    assert breaker.blocked_fast("p", "m") == 7.0  # the provider's own breaker first
    assert breaker.blocked_fast("p") == 7.0


async def test_model_gone_fast_is_a_model_open_for_good(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    assert breaker.model_gone_fast("p", "m") is False
    await fail(breaker, Code.MODEL_NOT_FOUND, "m")
    assert breaker.model_gone_fast("p", "m") is True
    assert breaker.model_gone_fast("p", "n") is False
    await breaker.reset("p", "m")
    assert breaker.model_gone_fast("p", "m") is False
    await fail(breaker, Code.UNAVAILABLE, "m")  # open, but not for good
    assert breaker.model_gone_fast("p", "m") is False
    await breaker.reset("p")
    await fail(breaker, Code.AUTH, "n")  # the provider for good, not a model
    assert breaker.model_gone_fast("p", "n") is False


async def test_unchanged_by_success(autojump_clock: MockClock) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=3))
    clean = await breaker.admit("p", "m")
    assert clean.clean and breaker.unchanged_by_success(clean) is True
    await fail(breaker, Code.UNAVAILABLE, "other-model")  # p counts one failure
    assert breaker.unchanged_by_success(clean) is False
    await breaker.reset("p")
    assert breaker.unchanged_by_success(clean) is True
    await fail(breaker, Code.MODEL_NOT_FOUND, "m")  # the model's key is dirty
    assert breaker.unchanged_by_success(clean) is False
    bare = await breaker.admit("z")  # no model
    assert breaker.unchanged_by_success(bare) is True
    dirty = await breaker.admit("p", "n")
    await fail(breaker, Code.UNAVAILABLE, "n")
    assert dirty.clean is True
    after = await breaker.admit("p", "n")
    assert after.clean is False and breaker.unchanged_by_success(after) is False


async def test_a_shared_backend_is_never_guessed(autojump_clock: MockClock) -> None:
    breaker = Breaker(state=Shared())  # type: ignore[arg-type]
    await fail(breaker, Code.MODEL_NOT_FOUND, "m")
    await fail(breaker, Code.UNAVAILABLE)
    assert breaker.blocked_fast("p", "m") is None  # ask admit() instead
    assert breaker.model_gone_fast("p", "m") is False
    admission = await breaker.admit("q")
    assert admission.clean is True
    assert breaker.unchanged_by_success(admission) is False  # always recorded
