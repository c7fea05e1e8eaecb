"""Circuit breaker: one probe at a time, cancellation-neutral, per-model keys."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing import capture_events
from supervisors import Breaker, BreakerConfig


def err(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "test", **fields)


async def fail_with(breaker: Breaker, error: ActorError, model: str | None = None) -> None:
    with pytest.raises(ActorError):
        async with breaker.guard("alpha", model):
            raise error


async def rejected(breaker: Breaker, model: str | None = None) -> ActorError:
    with pytest.raises(ActorError) as caught:
        async with breaker.guard("alpha", model):
            pytest.fail("must not be admitted")
    assert caught.value.code is Code.CIRCUIT_OPEN
    return caught.value


async def test_half_open_admits_exactly_one_of_ten(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.UNAVAILABLE))  # opens; probe at 60 - 30 = 30 s
    await trio.sleep(30)
    reached: list[int] = []
    refused: list[ActorError] = []

    async def caller(i: int) -> None:
        try:
            async with breaker.guard("alpha"):
                reached.append(i)
                await trio.sleep(2)  # the probe is in flight
        except ActorError as error:
            refused.append(error)

    async with trio.open_nursery() as nursery:
        for i in range(10):
            nursery.start_soon(caller, i)
    assert len(reached) == 1
    assert len(refused) == 9
    assert {(e.code, e.retry_after) for e in refused} == {(Code.CIRCUIT_OPEN, 30.0)}
    assert str(await breaker.state_of("alpha")) == "closed"  # the probe succeeded


async def test_cancelled_probe_frees_the_lease(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.TIMEOUT))  # 30 s cooldown: no early probe
    await trio.sleep(30)
    with trio.move_on_after(1):
        async with breaker.guard("alpha"):
            await trio.sleep(10)
    assert str(await breaker.state_of("alpha")) == "half_open"
    async with breaker.guard("alpha"):
        pass  # admitted as the next probe at once
    assert str(await breaker.state_of("alpha")) == "closed"


async def test_cancelled_call_in_closed_state_does_not_count(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    for _ in range(3):
        with trio.move_on_after(1):
            async with breaker.guard("alpha"):
                await trio.sleep(10)
    assert str(await breaker.state_of("alpha")) == "closed"


async def test_auth_opens_permanently_until_reset(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    with capture_events("breaker.transition") as events:
        await fail_with(breaker, err(Code.AUTH))
        await trio.sleep(10**6)
        error = await rejected(breaker)
        assert (error.retry_after, error.retryable) == (None, False)
        await breaker.reset("alpha")
        async with breaker.guard("alpha"):
            pass
    assert [(e.before, e.after, e.permanent) for e in events] == [
        ("closed", "open", True),
        ("open", "closed", False),
    ]


async def test_model_not_found_blocks_only_that_model(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.MODEL_NOT_FOUND), model="big")
    await rejected(breaker, model="big")
    async with breaker.guard("alpha", "small"):
        pass
    async with breaker.guard("alpha"):
        pass
    assert str(await breaker.state_of("alpha")) == "closed"


async def test_early_probe_thirty_seconds_before_a_sixty_second_cooldown(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker()
    with capture_events("breaker.transition") as events:
        await fail_with(breaker, err(Code.UNAVAILABLE))
        await trio.sleep(29)
        assert (await rejected(breaker)).retry_after == 1.0
        await trio.sleep(1)
        async with breaker.guard("alpha"):
            assert trio.current_time() == 30.0
    assert [(e.before, e.after, e.code, e.cooldown) for e in events] == [
        ("closed", "open", "unavailable", 60.0),
        ("open", "half_open", "unavailable", 60.0),
        ("half_open", "closed", None, None),
    ]


async def test_retry_after_cooldown_is_honoured_exactly(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.RATE_LIMITED, retry_after=90.0))
    await trio.sleep(89)
    assert (await rejected(breaker)).retry_after == 1.0
    await trio.sleep(1)
    async with breaker.guard("alpha"):
        pass


async def test_request_errors_do_not_count(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    for code in (
        Code.BAD_REQUEST,
        Code.CONTENT_FILTER,
        Code.CONTEXT_WINDOW_EXCEEDED,
        Code.TOOL_DENIED,
    ):
        await fail_with(breaker, err(code))
    assert str(await breaker.state_of("alpha")) == "closed"


async def test_failed_probe_reopens_with_a_fresh_cooldown(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.TIMEOUT))
    await trio.sleep(30)
    await fail_with(breaker, err(Code.TIMEOUT))  # the probe fails at t=30
    assert (await rejected(breaker)).retry_after == 30.0


async def test_thresholds(autojump_clock: MockClock) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=3, success_threshold=2))
    for _ in range(2):
        await fail_with(breaker, err(Code.UNAVAILABLE))
    async with breaker.guard("alpha"):
        pass  # a success resets the consecutive count
    for _ in range(3):
        await fail_with(breaker, err(Code.UNAVAILABLE))
    assert str(await breaker.state_of("alpha")) == "open"
    await trio.sleep(30)
    async with breaker.guard("alpha"):
        pass
    assert str(await breaker.state_of("alpha")) == "half_open"
    async with breaker.guard("alpha"):
        pass
    assert str(await breaker.state_of("alpha")) == "closed"
