"""The pool's fast path, pinned where the differential tests cannot see: a breaker whose
state is shared (no in-process knowledge), the per-position memory of targets known
down (which target is tried, how often the breaker is asked)."""

from __future__ import annotations

from typing import Any

from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, fail, open_runtime
from actors.providers import LlmResponse
from supervisors import Breaker, BreakerConfig, ProviderPool, Resilience, Target
from supervisors.state import MemoryState
from tests.pool_helpers import request, rules


class Scripted(Actor):
    """Answers each request by the next step of its script (the last one repeats):
    ``"ok"``, an error code, or ``"junk"`` (not an LlmResponse)."""

    def __init__(self, name: str, script: list[str], calls: list[str]) -> None:
        self.name, self.script, self.calls = name, script, calls

    async def handle(self, message: Any) -> Any:
        self.calls.append(self.name)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if step == "ok":
            return LlmResponse(
                content=self.name,
                usage=Usage(input_tokens=3, output_tokens=2),
                provider=self.name,
                model="m1",
            )
        if step == "junk":
            return {"not": "a response"}
        return fail(Code(step), f"{self.name} says {step}", retryable=True)


class Shared:
    """A breaker state that is not the in-process one (as a shared backend would be):
    every call is MemoryState's, but the breaker cannot read it synchronously."""

    def __init__(self) -> None:
        self.inner = MemoryState()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Counting(Breaker):
    """A breaker that counts how often the pool asks it whether a target is down."""

    asked: list[str]

    def blocked_fast(
        self, provider: str, model: str | None = None, now: float | None = None
    ) -> float | None:
        self.asked.append(provider)
        return super().blocked_fast(provider, model, now)


async def _spawn(runtime: Any, scripts: dict[str, list[str]], calls: list[str]) -> list[Target]:
    targets = []
    for name, script in scripts.items():
        ref = await runtime.spawn(lambda n=name, s=script: Scripted(n, list(s), calls))
        targets.append(Target(ref=ref, provider=name, model="m1"))
    return targets


async def test_a_shared_breaker_state_asks_the_first_target_every_time(
    autojump_clock: MockClock,
) -> None:
    calls: list[str] = []
    breaker = Breaker(BreakerConfig(failure_threshold=1), state=Shared())
    assert breaker.local is None
    async with open_runtime() as runtime:
        targets = await _spawn(runtime, {"A": ["unavailable", "ok"], "B": ["ok"]}, calls)
        pool = ProviderPool(targets, resilience=Resilience(retry=rules(), breaker=breaker))
        first = await pool.complete(request())
        second = await pool.complete(request())
    assert (first.content, second.content) == ("B", "B")
    # A failed once (its breaker opened, in the shared state): the second request is
    # refused by the breaker before any call, so A is called once.
    assert calls == ["A", "B", "B"]
    assert [(e.number, e.provider, e.outcome, e.code) for e in pool.ledger] == [
        (1, "A", "failed", Code.UNAVAILABLE),
        (2, "B", "ok", None),
        (1, "B", "ok", None),
    ]


async def test_a_shared_breaker_state_lets_a_healthy_first_target_answer(
    autojump_clock: MockClock,
) -> None:
    calls: list[str] = []
    breaker = Breaker(BreakerConfig(failure_threshold=1), state=Shared())
    async with open_runtime() as runtime:
        targets = await _spawn(runtime, {"A": ["ok"], "B": ["ok"]}, calls)
        pool = ProviderPool(targets, resilience=Resilience(retry=rules(), breaker=breaker))
        replies = [(await pool.complete(request())).content for _ in range(2)]
    assert replies == ["A", "A"]
    assert calls == ["A", "A"]
    assert [(e.number, e.provider, e.outcome) for e in pool.ledger] == [(1, "A", "ok")] * 2


async def _two_down(
    third: list[str], requests: int
) -> tuple[list[Any], list[str], list[str], ProviderPool]:
    """A and B fail once (their breakers open: unavailable, probe in 30 s); C answers
    by ``third``; ``requests`` more requests follow, as the fast path takes them."""
    calls: list[str] = []
    breaker = Counting(BreakerConfig(failure_threshold=1))
    breaker.asked = []
    async with open_runtime() as runtime:
        scripts = {"A": ["unavailable"], "B": ["unavailable"], "C": ["ok", *third]}
        targets = await _spawn(runtime, scripts, calls)
        pool = ProviderPool(targets, resilience=Resilience(retry=rules(), breaker=breaker))
        assert (await pool.complete(request())).content == "C"
        calls.clear()
        breaker.asked.clear()
        outcomes: list[Any] = []
        for _ in range(requests):
            try:
                outcomes.append((await pool.complete(request())).content)
            except ActorError as error:
                outcomes.append((error.code, error.message))
    return outcomes, calls, breaker.asked, pool


async def test_targets_known_down_are_not_asked_again_until_their_probe(
    autojump_clock: MockClock,
) -> None:
    outcomes, calls, asked, _ = await _two_down(["ok"], 3)
    assert outcomes == ["C", "C", "C"]
    assert calls == ["C", "C", "C"]
    # The first of them asks each breaker once; the others remember until when A and
    # B are down (no success, lease or reset since): only C, which is not, is asked.
    assert asked == ["A", "B", "C", "C", "C"]


async def test_the_target_after_remembered_ones_is_the_one_attempted(
    autojump_clock: MockClock,
) -> None:
    outcomes, calls, _, pool = await _two_down(["ok", "junk"], 2)
    assert outcomes == [
        "C",
        (Code.INTERNAL, "target C/m1 answered a dict, not an LlmResponse"),
    ]
    assert calls == ["C", "C"]
    assert [(e.provider, e.outcome, e.code) for e in list(pool.ledger)[-2:]] == [
        ("C", "ok", None),
        ("C", "failed", Code.INTERNAL),
    ]
