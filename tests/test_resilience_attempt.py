"""The one attempt primitive (supervisors.resilience.attempt): every exit path, with
exact codes, virtual times (MockClock, autojump) and the breaker / limiter / budget state
after. Through the public API (Resilience.call over a real actor) at the end."""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Receipt, Usage, open_runtime
from supervisors import Breaker, Budget, BudgetLimits, Dimension, RateLimit, RateLimiter
from supervisors.resilience.attempt import (
    CutOff,
    Ended,
    Faulted,
    Replied,
    TurnedAway,
    attempt,
)
from supervisors.state import BucketSpec
from supervisors.state.base import BreakerState

USAGE = Usage(input_tokens=30, output_tokens=10)
LIMIT = RateLimit(requests_per_minute=60, tokens_per_minute=600)  # 1 request/s, 10 tokens/s


def usage_of(reply: Any) -> Usage | None:
    return reply.get("usage") if isinstance(reply, dict) else None


async def answer(value: Any = "ok", *, after: float = 0.0, usage: Usage | None = USAGE) -> Any:
    await trio.sleep(after)
    return {"value": value, "usage": usage}


async def fail(error: BaseException, *, after: float = 0.0) -> Any:
    await trio.sleep(after)
    raise error


async def give(value: Any) -> Any:
    return value


def error(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "scripted", **fields)


def tokens_level(limiter: RateLimiter, key: str = "alpha") -> float:
    spec = LIMIT.specs(key)[f"{key}:tokens"]
    state: Any = limiter.state  # a MemoryState
    return float(state.bucket(f"{key}:tokens", spec, trio.current_time()).level)


def requests_level(limiter: RateLimiter, key: str = "alpha") -> float:
    spec: BucketSpec = LIMIT.specs(key)[f"{key}:requests"]
    state: Any = limiter.state  # a MemoryState
    return float(state.bucket(f"{key}:requests", spec, trio.current_time()).level)


class Book:
    """A Bookkeeping that records what it is told and charges ``charge``."""

    def __init__(self, charge: Usage | None = None) -> None:
        self.told: list[Any] = []
        self.charge = charge

    def sent(self, now: float) -> None:
        self.told.append(("sent", now))

    def ended(self, outcome: Ended | None, now: float) -> Usage | None:
        assert now == trio.current_time()  # told when it ended
        self.told.append(("ended", type(outcome).__name__, now))
        return self.charge

    def withdrawn(self) -> None:
        self.told.append(("withdrawn", trio.current_time()))


async def opened(breaker: Breaker, provider: str = "alpha", model: str | None = None) -> None:
    """Open ``provider``'s breaker with one ``unavailable`` (60 s cooldown, probe at 30 s)."""
    ended = await attempt(
        fail(error(Code.UNAVAILABLE)), provider=provider, model=model, breaker=breaker
    )
    assert isinstance(ended, Faulted)
    assert await breaker.state_of(provider) is BreakerState.OPEN


# --- answered ---------------------------------------------------------------------------


async def test_replied_records_settles_and_charges(autojump_clock: MockClock) -> None:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    budget = Budget("r", BudgetLimits(tokens=1000))
    book = Book(charge=Usage(input_tokens=7, output_tokens=0))
    ended = await attempt(
        answer(after=2.0),
        provider="alpha",
        model="m",
        breaker=breaker,
        limiter=limiter,
        budget=budget,
        tokens=100,
        usage_of=usage_of,
        book=book,
    )
    assert ended == Replied({"value": "ok", "usage": USAGE}, USAGE)
    assert trio.current_time() == 2.0
    assert book.told == [("sent", 0.0), ("ended", "Replied", 2.0)]
    assert budget.used(Dimension.TOKENS) == 7  # what the book said to charge
    # 100 reserved at 0, 40 used: 60 back; then 2 s of refill (20).
    assert tokens_level(limiter) == 580.0
    assert requests_level(limiter) == 60.0  # 59 after the reservation, +2 refilled, capped
    assert await breaker.state_of("alpha") is BreakerState.CLOSED
    assert breaker.local is not None and breaker.local.breakers == {}


async def test_replied_without_usage_keeps_the_reservation(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": LIMIT})
    budget = Budget("r", BudgetLimits(tokens=1000))
    ended = await attempt(
        give("plain"), provider="alpha", limiter=limiter, budget=budget, tokens=100
    )
    assert ended == Replied("plain", None)
    assert tokens_level(limiter) == 500.0
    assert budget.used(Dimension.TOKENS) == 0


async def test_a_success_resets_counted_failures(autojump_clock: MockClock) -> None:
    from supervisors import BreakerConfig

    breaker = Breaker(BreakerConfig(failure_threshold=2))
    await attempt(fail(error(Code.UNAVAILABLE)), provider="alpha", breaker=breaker)
    assert breaker.local is not None and breaker.local.breakers["alpha"].failures == 1
    ended = await attempt(give(1), provider="alpha", breaker=breaker)
    assert ended == Replied(1)
    assert not breaker.local.breakers or breaker.local.breakers["alpha"].failures == 0


# --- failed -----------------------------------------------------------------------------


@pytest.mark.parametrize("raised", [True, False], ids=["raised", "returned"])
async def test_a_typed_failure_gets_its_verdict(autojump_clock: MockClock, raised: bool) -> None:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    budget = Budget("r", BudgetLimits(tokens=1000))
    failure = error(Code.UNAVAILABLE, usage=Usage(input_tokens=20, output_tokens=0))
    call = fail(failure, after=1.0) if raised else give(failure)
    ended = await attempt(
        call, provider="alpha", breaker=breaker, limiter=limiter, budget=budget, tokens=100
    )
    assert ended == Faulted(failure)
    assert ended.error is failure
    assert budget.used(Dimension.TOKENS) == 20  # a failed attempt's usage counts
    assert tokens_level(limiter) == (590.0 if raised else 580.0)  # settled with 20, refilled
    assert await breaker.state_of("alpha") is BreakerState.OPEN
    assert breaker.blocked_fast("alpha") == 30.0  # 60 s cooldown, early probe at 30 s


async def test_a_failure_not_delivered_gives_the_reservation_back(
    autojump_clock: MockClock,
) -> None:
    limiter = RateLimiter({"alpha": LIMIT})
    failure = error(Code.ACTOR_STOPPED, delivered=False)
    ended = await attempt(fail(failure), provider="alpha", limiter=limiter, tokens=100)
    assert ended == Faulted(failure)
    assert tokens_level(limiter) == 600.0
    assert requests_level(limiter) == 60.0


async def test_a_failure_without_usage_keeps_the_reservation(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": LIMIT})
    budget = Budget("r", BudgetLimits(tokens=1000))
    ended = await attempt(
        fail(error(Code.NETWORK)), provider="alpha", limiter=limiter, budget=budget, tokens=100
    )
    assert type(ended) is Faulted and ended.error.code is Code.NETWORK
    assert tokens_level(limiter) == 500.0
    assert requests_level(limiter) == 59.0
    assert budget.used(Dimension.TOKENS) == 0


async def test_a_request_error_is_no_verdict(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    ended = await attempt(fail(error(Code.BAD_REQUEST)), provider="alpha", breaker=breaker)
    assert type(ended) is Faulted and ended.error.code is Code.BAD_REQUEST
    assert breaker.local is not None and breaker.local.breakers == {}


async def test_a_foreign_exception_is_classified_with_the_target(
    autojump_clock: MockClock,
) -> None:
    crash = ValueError("boom")
    ended = await attempt(fail(crash), provider="alpha", model="m")
    assert type(ended) is Faulted
    assert ended.error.code is Code.INTERNAL
    assert ended.error.__cause__ is crash


async def test_usage_of_refusing_a_reply_is_a_failure(autojump_clock: MockClock) -> None:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    refusal = error(Code.INTERNAL)

    def strict(reply: Any) -> Usage:
        raise refusal

    ended = await attempt(
        give("junk"), provider="alpha", breaker=breaker, limiter=limiter, tokens=100,
        usage_of=strict,
    )  # fmt: skip
    assert ended == Faulted(refusal)
    assert tokens_level(limiter) == 500.0  # sent: kept
    assert breaker.local is not None and breaker.local.breakers == {}  # internal: no verdict


async def test_an_actor_crash_is_a_failure(autojump_clock: MockClock) -> None:
    class Crashing(Actor):
        async def handle(self, message: Any) -> Any:
            raise ValueError("crash")

    breaker = Breaker()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Crashing)
        ended = await attempt(ref.call("hi"), provider="alpha", breaker=breaker)
    assert type(ended) is Faulted
    assert ended.error.code is Code.INTERNAL
    assert breaker.local is not None and breaker.local.breakers == {}


# --- refused ----------------------------------------------------------------------------


async def test_refused_by_the_budget_takes_nothing(autojump_clock: MockClock) -> None:
    limiter, breaker = RateLimiter({"alpha": LIMIT}), Breaker()
    budget = Budget("r", BudgetLimits(tokens=10))
    await budget.charge(Usage(input_tokens=10, output_tokens=0))
    started: list[bool] = []

    async def call() -> None:
        started.append(True)

    ended = await attempt(
        call(), provider="alpha", breaker=breaker, limiter=limiter, budget=budget, tokens=100
    )
    assert type(ended) is TurnedAway and ended.by == "budget"
    assert ended.error.code is Code.BUDGET_EXCEEDED
    assert started == []
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0


async def test_refused_by_the_limiter_with_its_wait(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": LIMIT})
    book = Book()
    ended = await attempt(
        give(1), provider="alpha", limiter=limiter, tokens=650, wait=False, book=book
    )
    assert type(ended) is TurnedAway and ended.by == "limiter"
    assert ended.error.code is Code.RATE_LIMITED
    assert ended.error.retry_after == 5.0  # 50 tokens short at 10 tokens/s
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0
    assert book.told == []
    assert trio.current_time() == 0.0


async def test_the_limiter_waits_within_the_deadline(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": LIMIT})
    book = Book()
    ended = await attempt(
        give(1), provider="alpha", limiter=limiter, tokens=650, deadline=10.0, book=book
    )
    assert ended == Replied(1)
    assert book.told == [("sent", 5.0), ("ended", "Replied", 5.0)]
    ended = await attempt(give(2), provider="alpha", limiter=limiter, tokens=600, deadline=20.0)
    assert type(ended) is TurnedAway and ended.error.retry_after == 60.0


async def test_refused_by_the_breaker_gives_the_reservation_back(
    autojump_clock: MockClock,
) -> None:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    await opened(breaker)
    await trio.sleep(10.0)
    ended = await attempt(give(1), provider="alpha", breaker=breaker, limiter=limiter, tokens=100)
    assert type(ended) is TurnedAway and ended.by == "breaker"
    assert ended.error.code is Code.CIRCUIT_OPEN
    assert ended.error.retry_after == 20.0
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0


async def test_refused_by_a_model_breaker(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    ended = await attempt(
        fail(error(Code.MODEL_NOT_FOUND)), provider="alpha", model="big", breaker=breaker
    )
    assert type(ended) is Faulted
    ended = await attempt(give(1), provider="alpha", model="big", breaker=breaker)
    assert type(ended) is TurnedAway and ended.by == "breaker"
    assert ended.error.retry_after is None and ended.error.retryable is False
    assert await attempt(give(2), provider="alpha", model="small", breaker=breaker) == Replied(2)


# --- cut by the deadline ----------------------------------------------------------------


async def test_cut_off_at_the_deadline(autojump_clock: MockClock) -> None:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    budget = Budget("r", BudgetLimits(tokens=1000))
    await opened(breaker)
    await trio.sleep(30.0)  # probe time: this attempt holds the probe lease
    book = Book(charge=USAGE)
    ended = await attempt(
        answer(after=10.0),
        provider="alpha",
        model="m",
        breaker=breaker,
        limiter=limiter,
        budget=budget,
        tokens=100,
        deadline=34.5,
        book=book,
    )
    assert type(ended) is CutOff
    assert ended.error.code is Code.TIMEOUT and ended.error.retryable is False
    assert (ended.error.provider, ended.error.model) == ("alpha", "m")
    assert trio.current_time() == 34.5
    assert book.told == [("sent", 30.0), ("ended", "CutOff", 34.5)]
    assert budget.used(Dimension.TOKENS) == 40  # the book's charge (the pool's is None)
    assert await breaker.state_of("alpha") is BreakerState.HALF_OPEN
    assert breaker.blocked_fast("alpha") is None  # the probe lease was freed
    assert tokens_level(limiter) == 545.0  # kept: 600 - 100 + 4.5 s of refill


async def test_a_deadline_of_inf_never_cuts(autojump_clock: MockClock) -> None:
    assert await attempt(give(1), provider="alpha", deadline=math.inf) == Replied(1)
    ended = await attempt(answer(after=5.0, usage=None), provider="alpha", deadline=6)
    assert ended == Replied({"value": "ok", "usage": None})


# --- cancellation -----------------------------------------------------------------------


async def probe_cancelled(
    autojump_clock: MockClock, run: Callable[[Breaker, RateLimiter, Book], Awaitable[None]]
) -> tuple[Breaker, RateLimiter, Book]:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    await opened(breaker)
    await trio.sleep(30.0)
    book = Book()
    await run(breaker, limiter, book)
    assert await breaker.state_of("alpha") is BreakerState.HALF_OPEN
    assert breaker.blocked_fast("alpha") is None  # the lease is free: the next call probes
    return breaker, limiter, book


async def test_a_cancel_during_the_call(autojump_clock: MockClock) -> None:
    async def run(breaker: Breaker, limiter: RateLimiter, book: Book) -> None:
        with trio.move_on_after(2.0) as scope:
            await attempt(
                answer(after=10.0), provider="alpha", breaker=breaker, limiter=limiter,
                tokens=100, book=book,
            )  # fmt: skip
        assert scope.cancelled_caught

    _, limiter, book = await probe_cancelled(autojump_clock, run)
    assert trio.current_time() == 32.0
    assert book.told == [("sent", 30.0), ("ended", "NoneType", 32.0)]
    assert tokens_level(limiter) == 520.0  # kept (sent): 600 - 100 + 2 s of refill


async def test_a_cancel_of_an_enclosing_scope(autojump_clock: MockClock) -> None:
    async def run(breaker: Breaker, limiter: RateLimiter, book: Book) -> None:
        async with trio.open_nursery() as nursery:

            async def canceller() -> None:
                await trio.sleep(1.0)
                nursery.cancel_scope.cancel()

            nursery.start_soon(canceller)
            await attempt(answer(after=10.0), provider="alpha", breaker=breaker, book=book)
            raise AssertionError("not reached")  # pragma: no cover

    await probe_cancelled(autojump_clock, run)
    assert trio.current_time() == 31.0


async def test_a_caller_cancelled_before_the_call_takes_nothing(
    autojump_clock: MockClock,
) -> None:
    breaker, limiter, book = Breaker(), RateLimiter({"alpha": LIMIT}), Book()
    await opened(breaker)
    await trio.sleep(30.0)  # half-open: the next admission takes the probe lease
    coroutine = answer()
    with trio.CancelScope() as scope:
        scope.cancel()
        await attempt(
            coroutine, provider="alpha", breaker=breaker, limiter=limiter, tokens=100, book=book
        )
    assert scope.cancelled_caught
    assert inspect.getcoroutinestate(coroutine) == "CORO_CLOSED"
    assert book.told == []
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0
    # Not even asked: the probe is due (half-open to a reader) and still free.
    assert await breaker.state_of("alpha") is BreakerState.HALF_OPEN
    assert breaker.blocked_fast("alpha") is None  # the next call probes
    assert (await breaker.admit("alpha")).probe is True


async def test_a_caller_already_cancelled_is_cancelled_not_refused(
    autojump_clock: MockClock,
) -> None:
    budget = Budget("r", BudgetLimits(tokens=10))
    await budget.charge(Usage(input_tokens=10, output_tokens=0))  # spent: would refuse
    with trio.CancelScope() as scope:
        scope.cancel()
        await attempt(give(1), provider="alpha", budget=budget)
        raise AssertionError("not reached")  # pragma: no cover
    assert scope.cancelled_caught


class Busy(Actor):
    """Takes 10 s a message; counts what it handled."""

    def __init__(self) -> None:
        self.handled: list[Any] = []

    async def handle(self, message: Any) -> Any:
        self.handled.append(message)
        await trio.sleep(10)
        return {"value": message, "usage": USAGE}


async def test_a_call_withdrawn_while_queued_was_never_sent(autojump_clock: MockClock) -> None:
    busy = Busy()

    async def run(breaker: Breaker, limiter: RateLimiter, book: Book) -> None:
        async with open_runtime() as runtime:
            ref = await runtime.spawn(lambda: busy)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: ref.call("first", timeout=None))  # until 40 s
                await trio.sleep(1.0)
                receipt = Receipt()
                with trio.move_on_after(2.0) as scope:  # queued behind "first" throughout
                    await attempt(
                        ref.call("second", timeout=None, receipt=receipt), provider="alpha",
                        breaker=breaker, limiter=limiter, tokens=100, book=book,
                        receipt=receipt,
                    )  # fmt: skip
                assert scope.cancelled_caught and receipt.delivered is False
                assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0

    _, _, book = await probe_cancelled(autojump_clock, run)
    assert book.told == [("sent", 31.0), ("withdrawn", 33.0)]
    assert busy.handled == ["first"]


async def test_a_call_cancelled_while_handled_was_sent(autojump_clock: MockClock) -> None:
    busy = Busy()

    async def run(breaker: Breaker, limiter: RateLimiter, book: Book) -> None:
        async with open_runtime() as runtime:
            ref = await runtime.spawn(lambda: busy)
            receipt = Receipt()
            with trio.move_on_after(2.0):
                await attempt(
                    ref.call("taken", timeout=None, receipt=receipt), provider="alpha",
                    breaker=breaker, limiter=limiter, tokens=100, book=book, receipt=receipt,
                )  # fmt: skip
            assert receipt.delivered is True
            assert tokens_level(limiter) == 520.0  # kept: 600 - 100 + 2 s of refill

    _, _, book = await probe_cancelled(autojump_clock, run)
    assert book.told == [("sent", 30.0), ("ended", "NoneType", 32.0)]


async def test_a_cancel_during_admission_takes_nothing(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": LIMIT})
    started: list[bool] = []

    async def call() -> None:
        started.append(True)  # pragma: no cover - never started

    async with trio.open_nursery() as nursery:

        async def canceller() -> None:
            await trio.sleep(2.0)
            nursery.cancel_scope.cancel()

        nursery.start_soon(canceller)
        await attempt(call(), provider="alpha", limiter=limiter, tokens=650)  # waits 5 s
    assert started == []
    assert trio.current_time() == 2.0
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0


async def test_a_group_holding_cancelled_and_value_error_is_a_cancellation(
    autojump_clock: MockClock,
) -> None:
    cancelled: list[BaseException] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled as exc:
            cancelled.append(exc)
            raise
    group = BaseExceptionGroup("mixed", [cancelled[0], ValueError("cleanup broke")])

    async def run(breaker: Breaker, limiter: RateLimiter, book: Book) -> None:
        with pytest.raises(BaseExceptionGroup) as raised:
            await attempt(
                fail(group, after=1.0), provider="alpha", breaker=breaker, limiter=limiter,
                tokens=100, book=book,
            )  # fmt: skip
        assert raised.value is group

    _, limiter, book = await probe_cancelled(autojump_clock, run)
    assert book.told == [("sent", 30.0), ("ended", "NoneType", 31.0)]
    assert tokens_level(limiter) == 510.0  # kept


async def test_an_interrupt_propagates_with_no_verdict(autojump_clock: MockClock) -> None:
    async def run(breaker: Breaker, limiter: RateLimiter, book: Book) -> None:
        with pytest.raises(KeyboardInterrupt):
            await attempt(fail(KeyboardInterrupt()), provider="alpha", breaker=breaker)

    await probe_cancelled(autojump_clock, run)


# --- the charge -------------------------------------------------------------------------


async def test_a_charge_past_a_cap_is_raised_after_everything_is_settled(
    autojump_clock: MockClock,
) -> None:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    budget = Budget("r", BudgetLimits(tokens=30))
    with pytest.raises(ActorError) as raised:
        await attempt(
            answer(), provider="alpha", model="m", breaker=breaker, limiter=limiter,
            budget=budget, tokens=100, usage_of=usage_of,
        )  # fmt: skip
    assert raised.value.code is Code.BUDGET_EXCEEDED
    assert budget.used(Dimension.TOKENS) == 40
    assert tokens_level(limiter) == 560.0  # settled with 40 first


async def test_no_charge_without_a_budget_or_usage(autojump_clock: MockClock) -> None:
    book = Book(charge=USAGE)
    assert await attempt(give(1), provider="alpha", book=book) == Replied(1)


# --- bad arguments ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"provider": 3}, "provider must be a str, got int 3"),
        ({"model": b"m"}, "model must be None or a str, got bytes b'm'"),
        ({"tokens": -1}, "tokens must be an int >= 0, got int -1"),
        ({"tokens": 1.5}, "tokens must be an int >= 0, got float 1.5"),
        ({"tokens": math.nan}, "tokens must be an int >= 0, got float nan"),
        ({"tokens": True}, "tokens must be an int >= 0, got bool True"),
        ({"deadline": math.nan}, "deadline must be None or a trio time (not NaN), got float nan"),
        ({"deadline": "1"}, "deadline must be None or a trio time (not NaN), got str '1'"),
        ({"breaker": "b"}, "breaker must be None or a Breaker, got str 'b'"),
        ({"limiter": 1}, "limiter must be None or a RateLimiter, got int 1"),
        ({"budget": 1}, "budget must be None or a Budget, got int 1"),
        ({"receipt": 1}, "receipt must be None or an actors.Receipt, got int 1"),
    ],
)
async def test_bad_arguments_are_input_validation(
    autojump_clock: MockClock, fields: dict[str, Any], message: str
) -> None:
    started: list[bool] = []

    async def call() -> None:
        started.append(True)  # pragma: no cover - never started

    coroutine = call()
    arguments: dict[str, Any] = {"provider": "alpha", **fields}
    with pytest.raises(ActorError) as raised:
        await attempt(coroutine, **arguments)
    assert raised.value.code is Code.INPUT_VALIDATION
    assert raised.value.message == f"attempt(): {message}"
    assert raised.value.delivered is False
    assert started == []
    assert inspect.getcoroutinestate(coroutine) == "CORO_CLOSED"  # closed, not left to warn


async def test_a_call_that_is_not_a_coroutine(autojump_clock: MockClock) -> None:
    with pytest.raises(ActorError) as raised:
        await attempt(give, provider="alpha")  # type: ignore[arg-type]
    assert raised.value.code is Code.INPUT_VALIDATION
    assert raised.value.message.startswith(
        "attempt(): call must be a coroutine (not started), got function"
    )


async def test_refusals_close_the_call_unstarted(autojump_clock: MockClock) -> None:
    breaker, limiter = Breaker(), RateLimiter({"alpha": LIMIT})
    await opened(breaker)
    choices: list[dict[str, Any]] = [
        {"breaker": breaker},
        {"limiter": limiter, "tokens": 700, "wait": False},
    ]
    for fields in choices:
        coroutine = give(1)
        ended = await attempt(coroutine, provider="alpha", **fields)
        assert type(ended) is TurnedAway
        assert inspect.getcoroutinestate(coroutine) == "CORO_CLOSED"


# --- through the public API -------------------------------------------------------------


async def test_resilience_call_is_the_primitive(autojump_clock: MockClock) -> None:
    from supervisors import Backoff, Resilience, RetryPolicy

    class Flaky(Actor):
        def __init__(self) -> None:
            self.calls: list[float] = []

        async def handle(self, message: Any) -> Any:
            self.calls.append(trio.current_time())
            if len(self.calls) == 1:
                raise error(Code.UNAVAILABLE, usage=Usage(input_tokens=5, output_tokens=0))
            return {"usage": USAGE}

    flaky = Flaky()
    limiter = RateLimiter({"alpha": LIMIT})
    budget = Budget("r", BudgetLimits(tokens=1000))
    policy = RetryPolicy(max_attempts=2, backoff=Backoff(kind="fixed", initial=1, max=1))
    resilience = Resilience(retry=policy, limiter=limiter, usage_of=usage_of)
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: flaky, max_restarts=5)
        reply = await resilience.call(ref, "hi", provider="alpha", tokens=100, budget=budget)
    assert reply == {"usage": USAGE}
    assert budget.used(Dimension.TOKENS) == 45  # the failed attempt's 5 once, then 40
    assert flaky.calls == [0.0, 1.0]


#: 60 requests and 6000 tokens, all but never refilled: what a call keeps stays taken.
STILL = RateLimit(
    requests_per_minute=1e-9, request_burst=60, tokens_per_minute=1e-9, token_burst=6000
)


def still_levels(limiter: RateLimiter) -> tuple[float, float]:
    state: Any = limiter.state  # a MemoryState
    now, specs = trio.current_time(), STILL.specs("alpha")
    return (
        round(state.bucket("alpha:requests", specs["alpha:requests"], now).level, 6),
        round(state.bucket("alpha:tokens", specs["alpha:tokens"], now).level, 6),
    )


async def test_resilience_call_by_a_caller_already_cancelled_takes_nothing(
    autojump_clock: MockClock,
) -> None:
    from supervisors import Resilience

    busy, limiter = Busy(), RateLimiter({"alpha": STILL})
    resilience = Resilience(limiter=limiter, breaker=Breaker())
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: busy)
        with trio.CancelScope() as scope:
            scope.cancel()
            await resilience.call(ref, "hi", provider="alpha", tokens=1000)
        assert scope.cancelled_caught
        await trio.sleep(20)
    assert (busy.handled, still_levels(limiter)) == ([], (60.0, 6000.0))


async def test_resilience_call_withdrawn_while_queued_gives_the_reservation_back(
    autojump_clock: MockClock,
) -> None:
    from supervisors import Resilience

    busy, limiter = Busy(), RateLimiter({"alpha": STILL})
    resilience = Resilience(limiter=limiter)
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: busy)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: ref.call("first", timeout=None))  # busy until 10 s
            await trio.sleep(1)
            with trio.move_on_after(1) as scope:
                await resilience.call(ref, "second", provider="alpha", tokens=1000, timeout=None)
            assert scope.cancelled_caught
            assert still_levels(limiter) == (60.0, 6000.0)
    assert busy.handled == ["first"]


async def test_resilience_call_cancelled_while_handled_keeps_the_reservation(
    autojump_clock: MockClock,
) -> None:
    from supervisors import Resilience

    busy, limiter = Busy(), RateLimiter({"alpha": STILL})
    resilience = Resilience(limiter=limiter)
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: busy)
        with trio.move_on_after(1):
            await resilience.call(ref, "taken", provider="alpha", tokens=1000, timeout=None)
    assert busy.handled == ["taken"]
    assert still_levels(limiter) == (59.0, 5000.0)  # the provider may have it


# --- a shared state backend (no synchronous path, every operation yields) ----------------


class Remote:
    """A state backend that is not in process: every operation yields first (a network
    round trip), then is done by an in-memory state (``inner``, read by the tests)."""

    def __init__(self) -> None:
        from supervisors.state import MemoryState

        self.inner = MemoryState()

    def __getattr__(self, name: str) -> Any:
        operation = getattr(self.inner, name)

        async def remote(*args: Any, **kwargs: Any) -> Any:
            await trio.lowlevel.checkpoint()
            return await operation(*args, **kwargs)

        return remote


def remote_tokens(state: Remote, key: str = "alpha") -> float:
    spec = LIMIT.specs(key)[f"{key}:tokens"]
    return float(state.inner.bucket(f"{key}:tokens", spec, trio.current_time()).level)


async def test_a_shared_limiter_is_settled_by_its_coroutines(autojump_clock: MockClock) -> None:
    state = Remote()
    limiter = RateLimiter({"alpha": LIMIT}, state=state)  # type: ignore[arg-type]
    ended = await attempt(
        answer(), provider="alpha", limiter=limiter, tokens=100, usage_of=usage_of
    )
    assert type(ended) is Replied
    assert remote_tokens(state) == 560.0  # 100 reserved, 60 refunded
    failure = error(Code.UNAVAILABLE, usage=Usage(input_tokens=50, output_tokens=0))
    ended = await attempt(fail(failure), provider="alpha", limiter=limiter, tokens=100)
    assert ended == Faulted(failure)
    assert remote_tokens(state) == 510.0  # 100 reserved, 50 refunded


async def test_a_failure_with_usage_settles_even_while_cancelled(
    autojump_clock: MockClock,
) -> None:
    state = Remote()
    limiter = RateLimiter({"alpha": LIMIT}, state=state)  # type: ignore[arg-type]
    failure = error(Code.UNAVAILABLE, usage=Usage(input_tokens=10, output_tokens=0))
    with trio.CancelScope() as scope:

        async def call() -> None:
            scope.cancel()  # the failure comes while the caller is being cancelled
            raise failure

        ended = await attempt(call(), provider="alpha", limiter=limiter, tokens=100)
        assert ended == Faulted(failure)
        await trio.lowlevel.checkpoint()
    assert remote_tokens(state) == 590.0  # settled (shielded): 100 reserved, 90 back


async def test_a_cancel_during_a_shared_breakers_admission_gives_the_permit_back(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker(state=Remote())  # type: ignore[arg-type]
    limiter = RateLimiter({"alpha": LIMIT})
    coroutine = give(1)
    with trio.CancelScope() as scope:
        scope.cancel()
        await attempt(coroutine, provider="alpha", breaker=breaker, limiter=limiter, tokens=100)
    assert scope.cancelled_caught
    assert inspect.getcoroutinestate(coroutine) == "CORO_CLOSED"
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0


async def test_a_shared_breaker_refuses_and_records(autojump_clock: MockClock) -> None:
    breaker = Breaker(state=Remote())  # type: ignore[arg-type]
    limiter = RateLimiter({"alpha": LIMIT})
    await opened(breaker)
    ended = await attempt(give(1), provider="alpha", breaker=breaker, limiter=limiter, tokens=9)
    assert type(ended) is TurnedAway and ended.by == "breaker"
    assert ended.error.retry_after == 30.0
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0


async def test_the_limiter_reserves_no_tokens_by_default(autojump_clock: MockClock) -> None:
    limiter = RateLimiter({"alpha": LIMIT})
    assert await attempt(give(1), provider="alpha", limiter=limiter) == Replied(1)
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 59.0


async def test_the_charge_is_priced_for_the_target(autojump_clock: MockClock) -> None:
    from supervisors import Price

    prices = {
        ("alpha", "m"): Price(input_per_mtok=1_000_000.0, output_per_mtok=0.0),
        ("alpha", "*"): Price(input_per_mtok=0.0, output_per_mtok=0.0),
    }
    budget = Budget("r", BudgetLimits(cost=1e9), prices=prices)
    await attempt(answer(), provider="alpha", model="m", budget=budget, usage_of=usage_of)
    assert budget.used(Dimension.COST) == 30.0  # (alpha, m): $1 a token, 30 input tokens
    failure = error(Code.UNAVAILABLE, usage=Usage(input_tokens=5, output_tokens=0))
    await attempt(fail(failure), provider="alpha", model="m", budget=budget)
    assert budget.used(Dimension.COST) == 35.0


async def test_a_failure_is_classified_with_the_target(autojump_clock: MockClock) -> None:
    ended = await attempt(fail(OSError("reset")), provider="alpha", model="m")
    assert type(ended) is Faulted
    assert (ended.error.provider, ended.error.model) == ("alpha", "m")


async def test_the_cut_is_a_timeout_named_so(autojump_clock: MockClock) -> None:
    ended = await attempt(answer(after=5.0), provider="alpha", model="m", deadline=1.0)
    assert type(ended) is CutOff
    assert ended.error.message == "the deadline passed during the attempt"
    assert ended.error.retry_after is None


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"model": "m", "deadline": math.nan}, "deadline"),
        ({"model": "m", "deadline": 5.0, "breaker": "b"}, "breaker"),
        ({"breaker": Breaker(), "limiter": 1}, "limiter"),
        ({"limiter": RateLimiter({}), "budget": 1}, "budget"),
        ({"model": "m", "receipt": object()}, "receipt"),
    ],
)
async def test_bad_arguments_name_the_first_wrong_one(
    autojump_clock: MockClock, fields: dict[str, Any], named: str
) -> None:
    coroutine = give(1)
    with pytest.raises(ActorError) as raised:
        await attempt(coroutine, provider="alpha", **fields)
    assert raised.value.message.startswith(f"attempt(): {named} must be")


async def test_a_bad_call_is_named_after_good_arguments(autojump_clock: MockClock) -> None:
    budget = Budget("r", BudgetLimits())
    with pytest.raises(ActorError) as raised:
        await attempt(
            None,  # type: ignore[arg-type]
            provider="alpha", model="m", tokens=1, deadline=1.0, breaker=Breaker(),
            limiter=RateLimiter({}), budget=budget,
        )  # fmt: skip
    assert (
        raised.value.message
        == "attempt(): call must be a coroutine (not started), got NoneType None"
    )


async def test_a_cancel_landing_in_a_shared_breakers_admission_gives_the_permit_back(
    autojump_clock: MockClock,
) -> None:
    """The caller is not cancelled when the attempt starts (so the limiter grants), and
    the cancel lands while the breaker's state answers: the permit goes back whole."""

    class CancelledWhileAdmitting(Remote):
        async def breaker_admit(self, *args: Any, **kwargs: Any) -> Any:
            assert requests_level(limiter) == 59.0  # granted before the breaker is asked
            scope.cancel()
            return await self.__getattr__("breaker_admit")(*args, **kwargs)

    breaker = Breaker(state=CancelledWhileAdmitting())  # type: ignore[arg-type]
    limiter = RateLimiter({"alpha": LIMIT})
    coroutine = give(1)
    with trio.CancelScope() as scope:
        await attempt(coroutine, provider="alpha", breaker=breaker, limiter=limiter, tokens=100)
    assert scope.cancelled_caught
    assert inspect.getcoroutinestate(coroutine) == "CORO_CLOSED"
    assert tokens_level(limiter) == 600.0 and requests_level(limiter) == 60.0
    assert trio.current_time() == 0.0
