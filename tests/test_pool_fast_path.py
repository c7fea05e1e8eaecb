"""The pool's fast path (no budget, deadline or hedging: a first attempt made without a
chain) behaves exactly as the general walk on every branch it can leave by.

Each scenario runs twice on a fresh runtime: with ``deadline=None`` (the fast path) and
with a deadline far away (the general walk, same rules otherwise). Both must give the
same answer or error, the same ledger entries, the same calls to each actor and the same
breaker states afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Runtime, Usage, fail, open_runtime
from actors.providers import LlmResponse
from supervisors import (
    Breaker,
    BreakerConfig,
    ProviderPool,
    RateLimit,
    RateLimiter,
    Resilience,
    Target,
)
from supervisors.state.base import BreakerState
from tests.pool_helpers import cancelled_by_a_crashing_sibling, request, rules

FAR = 10_000.0


class Scripted(Actor):
    """Answers each request by the next step of its script (the last one repeats):
    ``"ok"``, an error code, ``"junk"`` (not an LlmResponse), ``("slow", s)``."""

    def __init__(self, name: str, script: list[Any], calls: list[str]) -> None:
        self.name, self.script, self.calls = name, script, calls

    async def handle(self, message: Any) -> Any:
        self.calls.append(self.name)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, tuple):
            await trio.sleep(step[1])
            step = "ok"
        if step == "ok":
            return LlmResponse(
                content=self.name,
                usage=Usage(input_tokens=3, output_tokens=2),
                provider=self.name,
                model="m1",
            )
        if step == "junk":
            return {"not": "a response"}
        code = Code(step)  # returned, not raised: the actor goes on, as a provider's does
        return fail(
            code, f"{self.name} says {step}", retryable=ActorError.from_code(code).retryable
        )


Prepare = Callable[[ProviderPool, Resilience], Awaitable[None]]


async def _nothing(pool: ProviderPool, resilience: Resilience) -> None:
    return None


async def _run(
    scripts: dict[str, list[Any]],
    deadline: float | None,
    *,
    prepare: Prepare = _nothing,
    limits: RateLimit | None = None,
    threshold: int = 1,
    requests: int = 1,
) -> dict[str, Any]:
    calls: list[str] = []
    resilience = Resilience(
        retry=rules(),
        breaker=Breaker(BreakerConfig(failure_threshold=threshold)),
        limiter=None if limits is None else RateLimiter({"A": limits}),
    )
    async with open_runtime() as runtime:
        targets = []
        for name, script in scripts.items():
            ref = await runtime.spawn(lambda n=name, s=script: Scripted(n, list(s), calls))
            targets.append(Target(ref=ref, provider=name, model="m1"))
        pool = ProviderPool(targets, resilience=resilience, deadline=deadline)
        await prepare(pool, resilience)
        calls.clear()
        outcomes: list[Any] = []
        for _ in range(requests):
            try:
                outcomes.append((await pool.complete(request())).content)
            except ActorError as exc:
                outcomes.append(exc.code)
        entries = [(e.number, e.provider, e.outcome, e.code, e.usage) for e in list(pool.ledger)]
        breaker = resilience.breaker
        assert breaker is not None
        states = {name: await breaker.state_of(name, "m1") for name in scripts}
        states |= {f"{name}/provider": await breaker.state_of(name) for name in scripts}
        return {"outcomes": outcomes, "entries": entries, "calls": calls, "states": states}


async def _both(scripts: dict[str, list[Any]], **options: Any) -> dict[str, Any]:
    fast = await _run(scripts, None, **options)
    walk = await _run(scripts, FAR, **options)
    assert fast == walk
    return fast


async def _open_a(pool: ProviderPool, resilience: Resilience) -> None:
    """A fails once: its breaker counts it (threshold 1: it opens for its cooldown)."""
    try:
        await pool.complete(request())
    except ActorError as error:
        assert error.code is Code.AUTH  # auth ends the request; others fall over to B


async def test_a_healthy_first_target_answers(autojump_clock: MockClock) -> None:
    got = await _both({"A": ["ok"], "B": ["ok"]}, requests=3)
    assert got["outcomes"] == ["A", "A", "A"]
    assert got["calls"] == ["A", "A", "A"]
    assert [entry[:4] for entry in got["entries"]] == [(1, "A", "ok", None)] * 3
    assert got["entries"][0][4] == Usage(input_tokens=3, output_tokens=2)


async def test_a_target_its_breaker_knows_down_is_skipped_without_a_call(
    autojump_clock: MockClock,
) -> None:
    got = await _both({"A": ["unavailable", "ok"], "B": ["ok"]}, prepare=_open_a, requests=2)
    assert got["outcomes"] == ["B", "B"]
    assert got["calls"] == ["B", "B"]  # A's breaker is open: never called
    assert [entry[:4] for entry in got["entries"][-2:]] == [(1, "B", "ok", None)] * 2
    assert got["states"]["A/provider"] is BreakerState.OPEN


async def test_a_target_out_for_good_leaves_the_choice_to_the_chain(
    autojump_clock: MockClock,
) -> None:
    got = await _both({"A": ["auth", "ok"], "B": ["ok"]}, prepare=_open_a, requests=2)
    assert got["outcomes"] == ["B", "B"]
    assert got["calls"] == ["B", "B"]


async def test_a_breaker_with_failures_counted_is_asked_and_a_success_resets_it(
    autojump_clock: MockClock,
) -> None:
    got = await _both(
        {"A": ["unavailable", "ok"], "B": ["ok"]}, prepare=_open_a, threshold=3, requests=1
    )
    assert got["outcomes"] == ["A"]
    assert got["calls"] == ["A"]
    assert got["states"]["A/provider"] is BreakerState.CLOSED


async def test_a_limiter_that_would_wait_moves_to_the_next_target(
    autojump_clock: MockClock,
) -> None:
    limits = RateLimit(requests_per_minute=1, request_burst=1)
    got = await _both({"A": ["ok"], "B": ["ok"]}, limits=limits, requests=3)
    assert got["outcomes"] == ["A", "B", "B"]
    assert got["calls"] == ["A", "B", "B"]


@pytest.mark.parametrize(
    ("script", "outcome", "calls", "entries"),
    [
        (["unavailable", "ok"], "B", ["A", "B"], [(1, "A", "failed", Code.UNAVAILABLE)]),
        (["bad_request"], Code.BAD_REQUEST, ["A"], [(1, "A", "failed", Code.BAD_REQUEST)]),
        (["junk"], Code.INTERNAL, ["A"], [(1, "A", "failed", Code.INTERNAL)]),
    ],
)
async def test_a_first_attempt_that_fails_hands_over_to_the_walk(
    autojump_clock: MockClock,
    script: list[Any],
    outcome: Any,
    calls: list[str],
    entries: list[tuple[Any, ...]],
) -> None:
    got = await _both({"A": script, "B": ["ok"]})
    assert got["outcomes"] == [outcome]
    assert got["calls"] == calls
    assert [entry[:4] for entry in got["entries"]][: len(entries)] == entries
    if outcome == "B":
        assert got["entries"][1][:4] == (2, "B", "ok", None)


@pytest.mark.parametrize("deadline", [None, FAR])
async def test_a_success_after_failures_counted_in_flight_resets_them(
    autojump_clock: MockClock, deadline: float | None
) -> None:
    """A slow success of provider A ends after another request's failure of A was
    counted (two pools, one breaker): the success resets the count — the fast path may
    not skip recording it."""
    calls: list[str] = []
    resilience = Resilience(retry=rules(), breaker=Breaker(BreakerConfig(failure_threshold=3)))
    async with open_runtime() as runtime:
        slow = await runtime.spawn(lambda: Scripted("A", [("slow", 2)], calls))
        failing = await runtime.spawn(lambda: Scripted("A", ["unavailable"], calls))
        b = await runtime.spawn(lambda: Scripted("B", ["ok"], calls))
        first = ProviderPool(
            [Target(ref=slow, provider="A", model="m1")],
            resilience=resilience,
            deadline=deadline,
        )
        second = ProviderPool(
            [
                Target(ref=failing, provider="A", model="m1"),
                Target(ref=b, provider="B", model="m1"),
            ],
            resilience=resilience,
            deadline=deadline,
        )
        answers: list[str] = []

        async def ask(pool: ProviderPool, answers: list[str] = answers) -> None:
            answers.append((await pool.complete(request())).content)

        breaker = resilience.breaker
        assert breaker is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, first)
            await trio.sleep(0.5)
            await ask(second)  # A fails at once (counted), B answers
            assert breaker.admit_fast("A", "m1") is None  # a failure is counted
        assert answers == ["B", "A"]
        assert breaker.admit_fast("A", "m1") is not None  # clean: the count was reset


@pytest.mark.parametrize("deadline", [None, FAR])
async def test_a_cancelled_first_attempt_is_cancelled_in_the_ledger(
    autojump_clock: MockClock, deadline: float | None
) -> None:
    calls: list[str] = []
    async with open_runtime() as runtime:
        a = await runtime.spawn(lambda: Scripted("A", [("slow", 5)], calls))
        pool = ProviderPool([Target(ref=a, provider="A", model="m1")], deadline=deadline)
        with trio.move_on_after(1) as scope:
            await pool.complete(request())
        assert scope.cancelled_caught
        assert [(e.number, e.outcome, e.code) for e in pool.ledger] == [(1, "cancelled", None)]
        assert pool.ledger.total.attempts == 1


async def _a_down(runtime: Runtime, calls: list[str]) -> tuple[ProviderPool, Breaker]:
    """A pool over A then B whose first request failed at A: A's breaker (threshold 1)
    is open for 60 s, its probe at 30 s; A answers later calls."""
    resilience = Resilience(retry=rules(), breaker=Breaker(BreakerConfig(failure_threshold=1)))
    a = await runtime.spawn(lambda: Scripted("A", ["unavailable", "ok"], calls))
    b = await runtime.spawn(lambda: Scripted("B", ["ok"], calls))
    pool = ProviderPool(
        [Target(ref=a, provider="A", model="m1"), Target(ref=b, provider="B", model="m1")],
        resilience=resilience,
    )
    assert (await pool.complete(request())).content == "B"
    assert resilience.breaker is not None
    return pool, resilience.breaker


async def _skips_a(pool: ProviderPool, calls: list[str]) -> None:
    """A request that skips A without calling it (its breaker is open)."""
    calls.clear()
    assert (await pool.complete(request())).content == "B"
    assert calls == ["B"]


@pytest.mark.parametrize("how", ["reset", "probe_success", "probe_released"])
async def test_a_breaker_that_may_admit_sooner_is_asked_again_at_once(
    autojump_clock: MockClock, how: str
) -> None:
    """The fast path remembers until when A's breaker refuses it; a reset, a probe's
    success or a freed probe lease makes it ask again on the next request."""
    calls: list[str] = []
    async with open_runtime() as runtime:
        pool, breaker = await _a_down(runtime, calls)
        await _skips_a(pool, calls)
        await _skips_a(pool, calls)  # remembered: A's breaker not asked
        if how == "reset":
            await breaker.reset("A")
        else:
            await trio.sleep(30)  # the probe time: someone else takes the probe
            probe = await breaker.admit("A", "m1")
            assert probe.probe
            await _skips_a(pool, calls)  # half-open, the probe lease held
            if how == "probe_success":
                await breaker.record(probe, None)
            else:
                await breaker.record(probe, trio.Cancelled._create())  # type: ignore[attr-defined]
        calls.clear()
        assert (await pool.complete(request())).content == "A"
        assert calls == ["A"]


async def test_a_remembered_refusal_ends_at_the_time_the_breaker_gave(
    autojump_clock: MockClock,
) -> None:
    calls: list[str] = []
    async with open_runtime() as runtime:
        pool, _ = await _a_down(runtime, calls)  # A's breaker opened at t=0: probe at t=30
        await trio.sleep(29.999)
        await _skips_a(pool, calls)
        await trio.sleep(0.001)  # exactly the probe time: A is asked (and probed)
        calls.clear()
        assert (await pool.complete(request())).content == "A"
        assert calls == ["A"]


async def test_on_the_fast_path_an_enclosing_cancel_is_a_cancel(autojump_clock: MockClock) -> None:
    """No budget, no deadline: the first attempt runs on the fast path; a sibling's crash
    cancels the scope around the request — the caller gets trio.Cancelled, the attempt is
    ledgered ``cancelled``, the breaker counts nothing."""
    calls: list[str] = []
    resilience = Resilience(retry=rules(), breaker=Breaker(BreakerConfig(failure_threshold=1)))
    async with open_runtime() as runtime:
        a = await runtime.spawn(lambda: Scripted("A", [("slow", 10)], calls))
        pool = ProviderPool([Target(ref=a, provider="A", model="m1")], resilience=resilience)
        seen = await cancelled_by_a_crashing_sibling(lambda: pool.complete(request()))
        assert [type(exc) for exc in seen] == [trio.Cancelled]
        assert [(e.number, e.outcome, e.code) for e in pool.ledger] == [(1, "cancelled", None)]
        breaker = resilience.breaker
        assert breaker is not None
        assert breaker.admit_fast("A", "m1") is not None  # clean: a cancel is no verdict


async def test_on_the_fast_path_an_aborted_tree_ends_the_request_cancelled(
    autojump_clock: MockClock,
) -> None:
    from actors.testing.chaos import Fault
    from tests.pool_helpers import faults, fleet

    slow = {"A": faults(Fault(kind="latency", seconds=10)), "B": None}
    caught: list[BaseException] = []
    with pytest.raises(BaseExceptionGroup) as escaped:  # the tree's abort, in its nurseries
        async with fleet(slow) as f:
            pool = ProviderPool(f.targets("A", "B"), resilience=Resilience(retry=rules()))

            async def abort_later() -> None:
                await trio.sleep(1)
                f.tree.abort("operator")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(abort_later)
                try:
                    await pool.complete(request())
                except BaseException as exc:
                    caught.append(exc)
                    raise
    assert escaped.value.subgroup(ActorError) is not None
    assert len(caught) == 1 and isinstance(caught[0], ActorError)
    assert (caught[0].code, caught[0].message) == (Code.CANCELLED, "operator")
    # Never all_providers_failed, never B's answer: a cancel ends the request.
    assert f.count("B") == 0
