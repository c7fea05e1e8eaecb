"""Token buckets: exact admission under a race, FIFO waiters, settle, deadlines."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import ActorError, Code
from supervisors import RateLimit, RateLimiter


async def test_race_admits_exactly_the_bucket(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": RateLimit(tokens_per_minute=1000)})
    admitted: list[int] = []
    refused: list[ActorError] = []

    async def caller() -> None:
        try:
            await limiter.acquire("alpha", tokens=40, deadline=trio.current_time())
            admitted.append(40)
        except ActorError as error:
            refused.append(error)

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(caller)
    assert sum(admitted) == 1000
    assert len(refused) == 25
    assert all(e.code is Code.RATE_LIMITED and e.retry_after for e in refused)


async def test_waiters_are_served_in_fifo_order(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": RateLimit(requests_per_minute=60, request_burst=1)})
    served: list[tuple[int, float]] = []

    async def caller(i: int) -> None:
        await limiter.acquire("alpha")
        served.append((i, trio.current_time()))

    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(caller, i)
            await trio.testing.wait_all_tasks_blocked()
    assert served == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)]


async def test_settle_refunds_the_over_estimate(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": RateLimit(tokens_per_minute=1000)})
    permit = await limiter.acquire("alpha", tokens=900)
    await limiter.settle(permit, 100)
    await limiter.acquire("alpha", tokens=900, deadline=trio.current_time())
    assert trio.current_time() == 0


async def test_settle_charges_the_under_estimate(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": RateLimit(tokens_per_minute=600)})  # 10 tokens/s
    permit = await limiter.acquire("alpha", tokens=100)
    await limiter.settle(permit, 700)  # charged 600 more: the bucket is at -100
    with pytest.raises(ActorError) as caught:
        await limiter.acquire("alpha", tokens=100, deadline=trio.current_time())
    assert caught.value.retry_after == pytest.approx(20.0)  # 200 tokens at 10/s


async def test_wait_past_the_callers_deadline_fails_at_once(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": RateLimit(requests_per_minute=1, request_burst=1)})
    await limiter.acquire("alpha")
    with trio.move_on_after(10), pytest.raises(ActorError) as caught:
        await limiter.acquire("alpha")  # needs 60 s, the scope allows 10
    assert trio.current_time() == 0
    assert (caught.value.code, caught.value.retry_after) == (Code.RATE_LIMITED, 60.0)


async def test_cancelled_waiter_gives_back_only_its_own(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": RateLimit(tokens_per_minute=60, token_burst=10)})
    await limiter.acquire("alpha", tokens=10)  # empty now; refills 1 token/s
    with trio.CancelScope() as scope:  # cancelled from outside: no deadline to see

        async def cancel_at_one() -> None:
            await trio.sleep(1)
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_at_one)
            await limiter.acquire("alpha", tokens=5)  # waits 5 s; cancelled at 1
    assert scope.cancelled_caught
    # Refunded the 5 it reserved: after 1 s of refill the bucket holds exactly 1 token.
    await limiter.acquire("alpha", tokens=1, deadline=trio.current_time())
    with pytest.raises(ActorError):
        await limiter.acquire("alpha", tokens=1, deadline=trio.current_time())


async def test_unknown_keys_are_unlimited(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": RateLimit(requests_per_minute=60, request_burst=1)})
    permits = [
        await limiter.acquire("beta", tokens=10**9, deadline=trio.current_time())
        for _ in range(100)
    ]
    assert trio.current_time() == 0.0  # none of them waited
    assert {(p.key, p.estimate) for p in permits} == {("beta", 10**9)}
    for permit in permits:
        await limiter.settle(permit, 5)
        await limiter.release(permit)
    fast = limiter.acquire_fast("beta", tokens=10**9)
    assert fast is not None
    assert (fast.key, fast.estimate) == ("beta", 10**9)
    assert limiter.settle_fast(fast, 5) is True
    # The known key next to it stays limited: one request, then a refusal at once.
    await limiter.acquire("alpha", deadline=trio.current_time())
    with pytest.raises(
        ActorError, match=r"^\[rate_limited\] local rate limit for alpha: 1\.000 s to wait"
    ):
        await limiter.acquire("alpha", deadline=trio.current_time())
    assert trio.current_time() == 0.0
