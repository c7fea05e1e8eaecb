"""A half-open probe that fails reopens its breaker with a probe time that may come
before the lease it ends: the fast path must not keep skipping the target until the old
lease end (what it remembered), and must behave as the general walk does.

Scenario (A primary, B secondary; A opens at once, probes after 10 s, leases a probe
30 s): A fails at 0; A's probe starts at 10 and fails at 15 (so A may probe again at
25, not 40); a request at 11 goes to B while the probe is out; a request at 26 probes A.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, Code, Usage, fail, open_runtime
from actors.providers import LlmResponse
from supervisors import (
    Breaker,
    BreakerConfig,
    Budget,
    BudgetLimits,
    ProviderPool,
    Resilience,
    Target,
)
from tests.pool_helpers import request, rules


class Timed(Actor):
    """Each call runs the next step of its script (the last repeats): ``(seconds, what)``,
    ``what`` being ``"ok"`` or an error code; the call is logged with its start time."""

    def __init__(self, name: str, script: list[tuple[float, str]], log: list[Any]) -> None:
        self.name, self.script, self.log = name, script, log

    async def handle(self, message: Any) -> Any:
        self.log.append((self.name, trio.current_time()))
        seconds, what = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        await trio.sleep(seconds)
        if what == "ok":
            return LlmResponse(
                content=self.name,
                usage=Usage(input_tokens=3, output_tokens=2),
                provider=self.name,
                model="m1",
            )
        return fail(Code(what), f"{self.name} says {what}", retryable=True)


@pytest.mark.parametrize("path", ["fast", "walk"])
async def test_a_failed_probe_reopens_and_the_next_probe_comes_at_its_time(
    autojump_clock: MockClock, path: str
) -> None:
    log: list[Any] = []
    breaker = Breaker(
        BreakerConfig(cooldowns={Code.UNAVAILABLE: 10.0}, early_probe=0.0, probe_lease=30.0)
    )
    answers: list[tuple[float, str]] = []
    async with open_runtime() as runtime:
        a = await runtime.spawn(
            lambda: Timed("A", [(0, "unavailable"), (5, "unavailable"), (0, "ok")], log)
        )
        b = await runtime.spawn(lambda: Timed("B", [(0, "ok")], log))
        pool = ProviderPool(
            [Target(ref=a, provider="A", model="m1"), Target(ref=b, provider="B", model="m1")],
            resilience=Resilience(retry=rules(), breaker=breaker),
        )
        budget = Budget("r", BudgetLimits()) if path == "walk" else None

        async def ask(at: float) -> None:
            await trio.sleep_until(at)
            answer = await pool.complete(request(), budget=budget)
            answers.append((at, answer.content))

        async with trio.open_nursery() as nursery:
            for at in (0.0, 10.0, 11.0, 26.0):
                nursery.start_soon(ask, at)
    assert log == [
        ("A", 0.0),  # fails: A opens, may probe at 10
        ("B", 0.0),
        ("A", 10.0),  # the probe (lease until 40) fails at 15: A may probe again at 25
        ("B", 11.0),  # A's probe is out
        ("B", 15.0),  # the request of 10, after its probe failed
        ("A", 26.0),  # probed at its new time, not skipped until the old lease end
    ]
    assert sorted(answers) == [(0.0, "B"), (10.0, "B"), (11.0, "B"), (26.0, "A")]
