"""Human escalation: on_exhausted decides — retry later, use a target, abort — audited."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
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
    UseTarget,
)
from tests.pool_helpers import faults, fleet, request

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
