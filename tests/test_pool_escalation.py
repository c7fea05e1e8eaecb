"""Human escalation: on_exhausted decides — retry later, use a target, abort — audited."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from actors.testing import capture_events
from actors.testing.chaos import Fault
from supervisors import (
    Abort,
    AllProvidersFailed,
    Backoff,
    ProviderPool,
    Resilience,
    RetryLater,
    RetryPolicy,
    Target,
    UseTarget,
)
from tests.pool_helpers import faults, fleet, request
from tests.test_pool_waits import _steps

#: No retries: each target gets one attempt per walk of the chain.
ONCE = RetryPolicy(max_attempts=0, backoff=Backoff(initial=1, jitter=0))


class Hook:
    """Answers ``decisions`` in turn, remembering what it was asked."""

    def __init__(self, *decisions: Any) -> None:
        self.decisions = list(decisions)
        self.asked: list[AllProvidersFailed] = []

    async def __call__(self, failure: AllProvidersFailed) -> Any:
        self.asked.append(failure)
        decision = self.decisions.pop(0)
        if isinstance(decision, BaseException):
            raise decision
        return decision


def pool_of(f: Any, hook: Any, *providers: str) -> ProviderPool:
    return ProviderPool(f.targets(*providers), resilience=Resilience(retry=ONCE), on_exhausted=hook)


async def test_retry_later_waits_then_walks_the_chain_again(autojump_clock: MockClock) -> None:
    hook = Hook(RetryLater(seconds=10, by="ops@example"))
    async with fleet({"A": faults(Fault(kind="status", status=503))}) as f:
        with capture_events("pool.escalated") as audit:
            reply = await pool_of(f, hook, "A").complete(request())
        assert reply.provider == "A"
        assert f.times("A") == [0.0, 10.0]
    [asked] = hook.asked
    assert asked.code is Code.ALL_PROVIDERS_FAILED
    assert asked.request_id == asked.attempts[0].request_id
    assert asked.category is Code.UNAVAILABLE
    assert [a.code for a in asked.attempts] == [Code.UNAVAILABLE]
    [event] = audit
    assert event.level == logging.WARNING
    assert (event.decision, event.by, event.seconds, event.category, event.attempts) == (
        "retry",
        "ops@example",
        10.0,
        "unavailable",
        1,
    )


async def test_use_target_tries_the_target_the_hook_names(autojump_clock: MockClock) -> None:
    async with fleet({"A": faults(Fault(kind="status", status=503)), "C": None}) as f:
        hook = Hook(UseTarget(target=f.target("C", "big-model")))
        with capture_events("pool.escalated") as audit:
            reply = await pool_of(f, hook, "A").complete(request())
        assert (reply.provider, reply.model) == ("C", "big-model")
    [event] = audit
    assert (event.decision, event.by, event.provider, event.model) == (
        "use_target",
        "on_exhausted",
        "C",
        "big-model",
    )


async def test_abort_raises_with_the_decision_on_the_error(autojump_clock: MockClock) -> None:
    hook = Hook(Abort(reason="provider outage, paged on-call", by="alice"))
    async with fleet({"A": faults(Fault(kind="status", status=503))}) as f:
        with capture_events("pool.escalated") as audit, pytest.raises(AllProvidersFailed) as caught:
            await pool_of(f, hook, "A").complete(request())
    assert caught.value.decision == Abort(reason="provider outage, paged on-call", by="alice")
    [event] = audit
    assert (event.decision, event.by, event.reason) == (
        "abort",
        "alice",
        "provider outage, paged on-call",
    )


async def test_no_decision_raises_as_it_is_and_the_hook_is_asked_each_time(
    autojump_clock: MockClock,
) -> None:
    hook = Hook(RetryLater(seconds=1), None)
    async with fleet({"A": faults(Fault(kind="status", status=503, times=2))}) as f:
        with capture_events("pool.escalated") as audit, pytest.raises(AllProvidersFailed) as caught:
            await pool_of(f, hook, "A").complete(request())
        assert f.times("A") == [0.0, 1.0]
    assert caught.value.decision is None
    assert len(hook.asked) == 2
    assert len(caught.value.attempts) == 2
    assert [e.decision for e in audit] == ["retry", "none"]


async def test_a_hook_that_raises_ends_the_request(autojump_clock: MockClock) -> None:
    async with fleet({"A": faults(Fault(kind="status", status=503, times=3))}) as f:
        with pytest.raises(ActorError, match="on_exhausted hook raised") as caught:
            await pool_of(f, Hook(ValueError("oops")), "A").complete(request())
        assert caught.value.code is Code.INTERNAL
        assert isinstance(caught.value.__cause__, ValueError)
        own = ActorError.from_code(Code.PERMISSION_DENIED, "not yours")
        with pytest.raises(ActorError) as caught:
            await pool_of(f, Hook(own), "A").complete(request())
        assert caught.value is own
        with pytest.raises(ActorError, match="decision must be") as caught:
            await pool_of(f, Hook("retry please"), "A").complete(request())
        assert caught.value.code is Code.CONFIG_INVALID


async def test_a_cancel_while_the_hook_decides_is_a_cancel(autojump_clock: MockClock) -> None:
    async def slow(failure: AllProvidersFailed) -> None:
        await trio.sleep(3600)

    async with fleet({"A": faults(Fault(kind="status", status=503))}) as f:
        with trio.move_on_after(5) as scope:
            await pool_of(f, slow, "A").complete(request())
        assert scope.cancelled_caught
        assert trio.current_time() == 5.0


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: RetryLater(seconds=-1), "RetryLater.seconds"),
        (lambda: RetryLater(seconds=float("nan")), "RetryLater.seconds"),
        (lambda: RetryLater(seconds=float("inf")), "RetryLater.seconds"),
        (lambda: RetryLater(seconds="10"), "RetryLater.seconds"),
        (lambda: RetryLater(seconds=1, by=""), "RetryLater.by"),
        (lambda: UseTarget(target="alpha"), "UseTarget.target"),
        (lambda: Abort(reason=""), "Abort.reason"),
        (lambda: Abort(reason=3), "Abort.reason"),
    ],
)
def test_decisions_refuse_bad_values_naming_the_field(build: Any, field: str) -> None:
    with pytest.raises(ActorError, match=f"^\\[config_invalid\\] {field} must be") as caught:
        build()
    assert caught.value.code is Code.CONFIG_INVALID


def test_decisions_are_frozen() -> None:
    decision = RetryLater(seconds=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        decision.seconds = 2  # type: ignore[misc]


# --- the chain after a decision, on actors that answer by script (no HTTP) --------------


def _on(refs: dict[str, Any], *names: str) -> list[Target]:
    return [Target(ref=refs[name], provider=name, model="m1") for name in names]


async def test_a_retry_starts_again_from_the_first_target(autojump_clock: MockClock) -> None:
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["unavailable", "ok"], B=["unavailable", "ok"])
        pool = ProviderPool(
            _on(refs, "A", "B"),
            resilience=Resilience(retry=ONCE),
            on_exhausted=Hook(RetryLater(seconds=1)),
        )
        reply = await pool.complete(request())
    assert reply.content == "A"
    assert seen == [("A", "m1", 0.0), ("B", "m1", 0.0), ("A", "m1", 1.0)]


async def test_a_retry_gives_every_target_its_retries_again(autojump_clock: MockClock) -> None:
    seen: list[tuple[str, str, float]] = []
    one_retry = RetryPolicy(max_attempts=1, backoff=Backoff(initial=1, jitter=0))
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["unavailable"] * 3 + ["ok"])
        pool = ProviderPool(
            _on(refs, "A"),
            resilience=Resilience(retry=one_retry),
            on_exhausted=Hook(RetryLater(seconds=10), None),
        )
        reply = await pool.complete(request())
    assert reply.content == "A"
    assert [at for _, _, at in seen] == [0.0, 1.0, 11.0, 12.0]


class Late(Actor):
    """Answers after 10 s (a deadline of 2 s cuts it)."""

    async def handle(self, message: Any) -> Any:
        await trio.sleep(10)


async def test_a_target_named_by_the_hook_goes_before_the_targets_left(
    autojump_clock: MockClock,
) -> None:
    # A is cut by the deadline while B has not been tried: the hook's C goes first.
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, B=["ok"], C=["ok"])
        refs["A"] = await runtime.spawn(Late)
        hook = Hook(UseTarget(target=_on(refs, "C")[0]))
        pool = ProviderPool(_on(refs, "A", "B"), deadline=2.0, on_exhausted=hook)
        reply = await pool.complete(request())
    assert (reply.content, trio.current_time()) == ("C", 2.0)
    assert seen == [("C", "m1", 2.0)]
    [asked] = hook.asked
    assert asked.category is Code.TIMEOUT


async def test_a_target_named_by_the_hook_joins_the_chain(autojump_clock: MockClock) -> None:
    # C fails too: the chain, A and C both out, is exhausted again (the hook says no more).
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["unavailable"], C=["unavailable"])
        hook = Hook(UseTarget(target=_on(refs, "C")[0]), None)
        pool = ProviderPool(_on(refs, "A"), resilience=Resilience(retry=ONCE), on_exhausted=hook)
        with pytest.raises(AllProvidersFailed) as caught:
            await pool.complete(request())
    assert seen == [("A", "m1", 0.0), ("C", "m1", 0.0)]
    assert [(a.provider, a.code) for a in caught.value.attempts] == [
        ("A", Code.UNAVAILABLE),
        ("C", Code.UNAVAILABLE),
    ]
    assert len(hook.asked) == 2
