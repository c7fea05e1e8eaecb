"""Issue 9, items 5 and 6: a refused call is a checkpoint, and a caller that goes away
cancels its provider request.

Item 5 runs on virtual time. Item 6 runs on the real clock against the chaos server over
loopback (a mock clock would jump to httpx's timeouts while a request is in flight).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, ActorRef, Code, Usage, fail, open_runtime
from actors.providers import (
    Complete,
    LlmRequest,
    Message,
    OpenAIProvider,
    ProviderConfig,
    Stream,
    StreamEvent,
)
from actors.testing.chaos import Fault, FaultScript, chaos_server
from supervisors import (
    DEFAULT_RETRY,
    Breaker,
    Budget,
    BudgetLimits,
    ChildSpec,
    RateLimit,
    RateLimiter,
    Resilience,
    RetryRules,
    SupervisorSpec,
    open_tree,
    retrying,
)


class Echo(Actor):
    async def handle(self, message: Any) -> Any:
        return message


async def _open_breaker() -> Breaker:
    """A breaker whose ``alpha`` circuit is open (probe in 30 s)."""
    breaker = Breaker()
    with pytest.raises(ActorError, match="scripted"):
        async with breaker.guard("alpha"):
            raise ActorError.from_code(Code.UNAVAILABLE, "scripted")
    return breaker


async def _spent_limiter() -> RateLimiter:
    """A limiter whose ``alpha`` bucket is empty for the next 60 s."""
    limiter = RateLimiter({"alpha": RateLimit(requests_per_minute=1, request_burst=1)})
    await limiter.acquire("alpha")
    return limiter


async def _spent_budget() -> Budget:
    """A budget whose token cap is reached: the next attempt is refused."""
    budget = Budget("run-1", BudgetLimits(tokens=10))
    await budget.charge(Usage(input_tokens=10))
    return budget


# How to build a Resilience (and a budget) that refuses the next call at once.
Refusal = Callable[[], Awaitable[tuple[Resilience, Budget | None]]]


async def _by_breaker() -> tuple[Resilience, Budget | None]:
    return Resilience(breaker=await _open_breaker()), None


async def _by_limiter() -> tuple[Resilience, Budget | None]:
    # No retries: DEFAULT_RETRY would sleep 5 s and try again after a local rate_limited.
    return Resilience(retry=RetryRules(by_code={}), limiter=await _spent_limiter()), None


async def _by_budget() -> tuple[Resilience, Budget | None]:
    return Resilience(), await _spent_budget()


REFUSALS = [
    pytest.param(_by_breaker, Code.CIRCUIT_OPEN, "circuit for alpha is open", id="breaker"),
    pytest.param(_by_limiter, Code.RATE_LIMITED, "local rate limit for alpha", id="limiter"),
    pytest.param(_by_budget, Code.BUDGET_EXCEEDED, "tokens 10 over the cap of 10", id="budget"),
]


async def _call(resilience: Resilience, ref: ActorRef, budget: Budget | None) -> Any:
    # A deadline of 10 s: the limiter refuses a wait of 60 s at once (without a deadline
    # it would wait for the bucket).
    with trio.fail_after(10):
        return await resilience.call(ref, "hi", provider="alpha", model="m", budget=budget)


@pytest.mark.parametrize(("refusal", "code", "message"), REFUSALS)
async def test_a_cancelled_caller_gets_cancelled_not_the_refusal(
    autojump_clock: MockClock, refusal: Refusal, code: Code, message: str
) -> None:
    resilience, budget = await refusal()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo)
        with pytest.raises(ActorError, match=message) as caught:
            await _call(resilience, ref, budget)  # refused while not cancelled ...
        assert caught.value.code is code
        with trio.CancelScope() as scope:
            scope.cancel()
            await _call(resilience, ref, budget)  # ... but a cancelled caller is Cancelled
            pytest.fail("a cancelled caller went past Resilience.call")
        assert scope.cancelled_caught
    assert trio.current_time() == 0.0


@pytest.mark.parametrize(("refusal", "code", "message"), REFUSALS)
async def test_a_loop_of_refused_calls_lets_other_tasks_run(
    autojump_clock: MockClock, refusal: Refusal, code: Code, message: str
) -> None:
    resilience, budget = await refusal()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with open_runtime() as runtime, trio.open_nursery() as nursery:
        ref = await runtime.spawn(Echo)
        nursery.start_soon(ticker)
        before = ticks
        for _ in range(1000):
            with pytest.raises(ActorError, match=message) as caught:
                await _call(resilience, ref, budget)
            assert caught.value.code is code
        progress = ticks - before
        nursery.cancel_scope.cancel()
    # The ticker ran once per refused call (give or take one: trio runs a batch of tasks in
    # a random order). Without a yield in the refusal it never ran at all.
    assert progress >= 999
    assert trio.current_time() == 0.0  # nothing slept: each refusal only yielded


Refused = Callable[[], Awaitable[None]]


async def _admit() -> Refused:
    breaker = await _open_breaker()

    async def refused() -> None:
        await breaker.admit("alpha")

    return refused


async def _guard() -> Refused:
    breaker = await _open_breaker()

    async def refused() -> None:
        async with breaker.guard("alpha"):
            pytest.fail("admitted by an open breaker")

    return refused


async def _acquire() -> Refused:
    limiter = await _spent_limiter()

    async def refused() -> None:
        await limiter.acquire("alpha", deadline=trio.current_time() + 10)

    return refused


async def _check() -> Refused:
    return (await _spent_budget()).check


async def _charge() -> Refused:
    budget = Budget("run-2", BudgetLimits(tokens=10))

    async def refused() -> None:
        await budget.charge(Usage(input_tokens=11))

    return refused


async def _turn() -> Refused:
    budget = Budget("run-3", BudgetLimits(turns=1))
    await budget.turn()
    return budget.turn


async def _retrying() -> Refused:
    async def refused_at_once() -> None:
        raise ActorError.from_code(Code.CIRCUIT_OPEN, "refused at once")

    async def refused() -> None:
        await retrying(DEFAULT_RETRY, refused_at_once)

    return refused


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        pytest.param(_admit, "circuit for alpha is open", id="Breaker.admit"),
        pytest.param(_guard, "circuit for alpha is open", id="Breaker.guard"),
        pytest.param(_acquire, "local rate limit for alpha", id="RateLimiter.acquire"),
        pytest.param(_check, "tokens 10 over the cap of 10", id="Budget.check"),
        pytest.param(_charge, "tokens 11 over the cap of 10", id="Budget.charge"),
        pytest.param(_turn, "turns 2 over the cap of 1", id="Budget.turn"),
        pytest.param(_retrying, "refused at once", id="retrying"),
    ],
)
async def test_every_entry_point_checks_cancellation_before_refusing(
    autojump_clock: MockClock, prepare: Callable[[], Awaitable[Refused]], message: str
) -> None:
    refused = await prepare()
    with pytest.raises(ActorError, match=message):
        await refused()  # refuses a caller that is not cancelled
    refused = await prepare()
    with trio.CancelScope() as scope:
        scope.cancel()
        await refused()
        pytest.fail("a cancelled caller went past the entry point")
    assert scope.cancelled_caught
    assert trio.current_time() == 0.0


async def test_a_charge_counts_the_usage_even_for_a_cancelled_caller(
    autojump_clock: MockClock,
) -> None:
    budget = Budget("run-1", BudgetLimits(tokens=100))
    with trio.CancelScope() as scope:
        scope.cancel()
        await budget.charge(Usage(input_tokens=30, output_tokens=10))
    assert scope.cancelled_caught
    assert budget.tokens == 40  # spent is spent: counted before the checkpoint


# --- item 6: a caller that goes away cancels its provider request ----------------------

REQUEST = LlmRequest(model="m-1", messages=[Message(role="user", content="hello chaos world")])


def _tree(config: ProviderConfig) -> SupervisorSpec:
    return SupervisorSpec(children=[ChildSpec(id="alpha", actor=OpenAIProvider, args=(config,))])


async def test_a_cancelled_call_cancels_its_http_request_and_the_tree_leaves_at_once() -> None:
    async with chaos_server(FaultScript(faults=[Fault(kind="hang")])) as server:
        config = ProviderConfig(name="alpha", base_url=server.url, api_key="sk-test")
        breaker = Breaker()
        resilience = Resilience(breaker=breaker)
        async with open_tree(_tree(config)) as tree:
            with trio.move_on_after(0.2) as scope:
                await resilience.call(
                    tree.ref("alpha"), Complete(REQUEST), provider="alpha", timeout=None
                )
            assert scope.cancelled_caught
            assert server.count() == 1  # the request reached the server, then hung
            leaving = trio.current_time()
        # Nothing left to finish: the request was cancelled with its caller. (Without it,
        # the tree's shutdown waited for the hung request: its 5 s shutdown timeout.)
        assert trio.current_time() - leaving < 1.0
        assert tree.error is None
        assert str(await breaker.state_of("alpha")) == "closed"  # a cancel counts for nothing


async def test_a_cancelled_streaming_call_closes_the_upstream_connection() -> None:
    fault = Fault(kind="slow_stream", seconds=0.05)
    async with chaos_server(FaultScript(faults=[fault])) as server:
        config = ProviderConfig(name="alpha", base_url=server.url, api_key="sk-test")
        resilience = Resilience()
        async with open_tree(_tree(config)) as tree:
            send, receive = trio.open_memory_channel[StreamEvent](0)
            received: list[StreamEvent] = []

            async def consume() -> None:
                async for event in receive:
                    received.append(event)
                    scope.cancel()  # leave in the middle of the stream

            # Cancelled at the first event, however slow the machine (the stream's events
            # come 0.05 s apart); the outer bound only keeps a broken run from hanging.
            with trio.fail_after(30), trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(consume)
                    await resilience.call(
                        tree.ref("alpha"),
                        Stream(REQUEST, send),
                        provider="alpha",
                        timeout=None,
                    )
            assert scope.cancelled_caught and received  # left in the middle of the stream
            with trio.fail_after(2):  # the chaos server sees the disconnect
                while not server.requests[0].disconnected:
                    await trio.sleep(0.02)
        assert server.count() == 1
        assert tree.error is None


async def test_a_timed_out_call_cancels_its_http_request() -> None:
    async with chaos_server(FaultScript(faults=[Fault(kind="hang")])) as server:
        config = ProviderConfig(name="alpha", base_url=server.url, api_key="sk-test")
        resilience = Resilience()
        async with open_tree(_tree(config)) as tree:
            with pytest.raises(ActorError, match="within the call timeout") as caught:
                await resilience.call(
                    tree.ref("alpha"), Complete(REQUEST), provider="alpha", timeout=0.2
                )
            assert caught.value.code is Code.CALL_TIMEOUT
            leaving = trio.current_time()
        # The timeout cancelled the request as a caller's cancel does (the cell cancels
        # the deferred work of a propagate_cancel call that timed out).
        assert trio.current_time() - leaving < 1.0
        assert server.count() == 1


@pytest.mark.parametrize("refused_by", ["breaker", "stopped-actor"])
async def test_an_attempt_never_sent_gives_its_rate_limit_back(
    autojump_clock: MockClock, refused_by: str
) -> None:
    """Five attempts refused before anything was sent (an open breaker, an actor that is
    stopped: ``delivered=False``) leave the limiter's quota of 2 requests untouched."""
    limiter = RateLimiter(
        {"alpha": RateLimit(requests_per_minute=2, request_burst=2, tokens_per_minute=100)}
    )
    breaker = await _open_breaker() if refused_by == "breaker" else Breaker()
    resilience = Resilience(retry=RetryRules(by_code={}), limiter=limiter, breaker=breaker)
    async with open_runtime() as runtime:
        echo = await runtime.spawn(Echo, name="echo")
        stopped = await runtime.spawn(Echo, name="stopped")
        await stopped.stop()
        target = echo if refused_by == "breaker" else stopped
        expected = Code.CIRCUIT_OPEN if refused_by == "breaker" else Code.ACTOR_STOPPED
        for _ in range(5):
            with pytest.raises(ActorError) as caught:
                await resilience.call(target, "hi", provider="alpha", tokens=40, timeout=1)
            assert caught.value.code is expected
        await breaker.reset("alpha")
        with trio.fail_after(0.001):  # no wait for a refill: the quota is all there
            assert [
                await resilience.call(echo, i, provider="alpha", tokens=40) for i in range(2)
            ] == [0, 1]
        with pytest.raises(ActorError, match="local rate limit for alpha"):
            with trio.fail_after(1):
                await resilience.call(echo, 2, provider="alpha", tokens=40)


async def test_a_failed_attempt_settles_its_reservation_with_the_usage_it_reports(
    autojump_clock: MockClock,
) -> None:
    """Sent, failed, 10 tokens reported: the 60 reserved are settled to 10, so 90 of the
    100-token bucket are left at once for the next call."""

    class Failing(Actor):
        async def handle(self, message: Any) -> Any:
            if message == "fail":
                return fail(Code.UNAVAILABLE, "down", usage=Usage(input_tokens=10))
            return message

    limiter = RateLimiter({"alpha": RateLimit(tokens_per_minute=100, token_burst=100)})
    resilience = Resilience(retry=RetryRules(by_code={}), limiter=limiter)
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Failing, name="failing")
        with pytest.raises(ActorError, match="down"):
            await resilience.call(ref, "fail", provider="alpha", tokens=60)
        with trio.fail_after(0.001):  # no wait for a refill: 90 tokens are there
            assert await resilience.call(ref, "ok", provider="alpha", tokens=90) == "ok"


async def test_release_gives_a_permit_back_even_for_a_cancelled_caller(
    autojump_clock: MockClock,
) -> None:
    limiter = RateLimiter({"alpha": RateLimit(requests_per_minute=1, request_burst=1)})
    permit = await limiter.acquire("alpha")
    with trio.CancelScope() as scope:
        scope.cancel()
        await limiter.release(permit)  # shielded: a cancel never loses the refund
    with trio.fail_after(0.001):
        await limiter.acquire("alpha")  # the one request is back, no wait for a refill
    with pytest.raises(ActorError, match="local rate limit for alpha"):
        await limiter.acquire("alpha", deadline=trio.current_time() + 1)
