"""Pins of supervisors.resilience.breaker: defaults, cooldown table, per-model keys, events, and the
exact calls a breaker makes to its state backend.

Each test fails if one default, one cooldown rule, one event field or one backend call
changes (``make mutate MODULE=supervisors/resilience/breaker.py`` measures how well they do).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing import capture_events
from supervisors import Breaker, BreakerConfig
from supervisors.resilience.breaker import DEFAULT_COOLDOWNS, Admission, model_key
from supervisors.state import BreakerSnapshot, MemoryState, Transition
from supervisors.state.base import BreakerState

BIG = "alpha\x1fmodel\x1fbig"


def err(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "pinned", **fields)


async def fail_with(
    breaker: Breaker, error: BaseException, model: str | None = None, provider: str = "alpha"
) -> None:
    with pytest.raises(type(error)):
        async with breaker.guard(provider, model):
            raise error


async def refused(breaker: Breaker, model: str | None = None) -> ActorError:
    with pytest.raises(ActorError) as caught:
        async with breaker.guard("alpha", model):
            pytest.fail("must not be admitted")
    assert caught.value.code is Code.CIRCUIT_OPEN
    return caught.value


def transitions(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e.provider, e.model, e.before, e.after, e.code, e.cooldown) for e in events]


# --- defaults and tables -------------------------------------------------------------


def test_config_defaults() -> None:
    config = BreakerConfig()
    assert (config.failure_threshold, config.success_threshold) == (1, 1)
    assert dict(config.cooldowns) == {
        Code.RATE_LIMITED: 60.0,
        Code.TIMEOUT: 30.0,
        Code.UNAVAILABLE: 60.0,
    }
    assert config.cooldowns is DEFAULT_COOLDOWNS
    assert (config.default_cooldown, config.early_probe, config.probe_lease) == (60.0, 30.0, 30.0)
    assert config.permanent == {Code.AUTH, Code.PAYMENT}
    assert config.per_model == {Code.MODEL_NOT_FOUND}
    assert config.ignored == {Code.BAD_REQUEST, Code.CONTENT_FILTER, Code.CONTEXT_WINDOW_EXCEEDED}


def test_thresholds_are_at_least_one() -> None:
    with pytest.raises(
        ActorError,
        match=r"^\[config_invalid\] BreakerConfig\.failure_threshold must be an"
        r" integer >= 1, got 0$",
    ):
        BreakerConfig(failure_threshold=0)
    with pytest.raises(
        ActorError,
        match=r"^\[config_invalid\] BreakerConfig\.success_threshold must be an"
        r" integer >= 1, got 0$",
    ):
        BreakerConfig(success_threshold=0)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (err(Code.RATE_LIMITED), (60.0, 30.0)),
        (err(Code.RATE_LIMITED, retry_after=10.0), (10.0, 10.0)),  # exact, below the table
        (err(Code.RATE_LIMITED, retry_after=0.0), (0.0, 0.0)),  # Retry-After: 0
        (err(Code.RATE_LIMITED, retry_after=90.0), (90.0, 90.0)),
        (err(Code.TIMEOUT), (30.0, 30.0)),  # not longer than the early probe: no early probe
        (err(Code.UNAVAILABLE), (60.0, 30.0)),
        (err(Code.UNAVAILABLE, retry_after=10.0), (60.0, 30.0)),  # a shorter one is ignored
        (err(Code.UNAVAILABLE, retry_after=60.0), (60.0, 30.0)),  # an equal one too
        (err(Code.UNAVAILABLE, retry_after=75.0), (75.0, 75.0)),  # a longer one raises it
        (err(Code.NETWORK), (60.0, 30.0)),  # not in the table: default_cooldown
        (err(Code.TIMEOUT, retry_after=31.0), (31.0, 31.0)),
    ],
)
def test_cooldown_table(error: ActorError, expected: tuple[float, float]) -> None:
    assert BreakerConfig().cooldown(error) == expected


def test_cooldown_with_a_custom_table() -> None:
    config = BreakerConfig(cooldowns={Code.NETWORK: 45.0}, default_cooldown=20.0, early_probe=5.0)
    assert config.cooldown(err(Code.NETWORK)) == (45.0, 40.0)
    assert config.cooldown(err(Code.TIMEOUT)) == (20.0, 15.0)  # the default replaces the table


def test_model_key_format_is_stable() -> None:
    # Shared backends (one Redis for several replicas) key breakers by this string.
    assert model_key("alpha", "big") == BIG
    assert model_key("alpha", "big") is model_key("alpha", "big")


def test_admission_defaults() -> None:
    admission = Admission("alpha", "big")
    assert (admission.provider, admission.model) == ("alpha", "big")
    assert (admission.probe, admission.model_probe, admission.clean) == (False, False, False)
    flagged = Admission("alpha", None, probe=True, model_probe=True, clean=True)
    assert (flagged.probe, flagged.model_probe, flagged.clean) == (True, True, True)


# --- behaviour on the in-process state -------------------------------------------------


async def test_each_code_opens_for_its_cooldown(autojump_clock: MockClock) -> None:
    for error, probe_at in [
        (err(Code.TIMEOUT), 30.0),
        (err(Code.NETWORK), 30.0),
        (err(Code.RATE_LIMITED, retry_after=0.0), 0.0),
        (err(Code.UNAVAILABLE, retry_after=60.0), 30.0),
    ]:
        breaker = Breaker()
        start = trio.current_time()
        with capture_events("breaker.transition") as events:
            await fail_with(breaker, error)
        assert [e.cooldown for e in events] == [BreakerConfig().cooldown(error)[0]]
        if probe_at:
            await trio.sleep(probe_at - 1)
            assert (await refused(breaker)).retry_after == 1.0
            await trio.sleep(1)
        async with breaker.guard("alpha"):
            assert trio.current_time() - start == probe_at


async def test_a_hung_probe_loses_its_lease_after_thirty_seconds(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.TIMEOUT))
    await trio.sleep(30)
    admitted: list[float] = []

    async def probe() -> None:
        async with breaker.guard("alpha"):
            admitted.append(trio.current_time())
            await trio.sleep(1000)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(probe)
        await trio.sleep(29)
        assert (await refused(breaker)).retry_after == 1.0
        await trio.sleep(1)
        async with breaker.guard("alpha"):
            admitted.append(trio.current_time())
        nursery.cancel_scope.cancel()
    assert admitted == [30.0, 60.0]


async def test_permanent_codes_open_at_once_whatever_the_threshold(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=3))
    with capture_events("breaker.transition") as events:
        await fail_with(breaker, err(Code.PAYMENT))
    assert str(await breaker.state_of("alpha")) == "open"
    assert [(e.cooldown, e.permanent) for e in events] == [(None, True)]
    error = await refused(breaker)
    assert (error.retry_after, error.retryable, error.provider, error.model) == (
        None,
        False,
        "alpha",
        None,
    )
    assert error.message == "circuit for alpha is open"


async def test_a_refusal_names_provider_and_model(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.UNAVAILABLE))
    error = await refused(breaker, model="big")
    assert (error.provider, error.model, error.retry_after, error.retryable) == (
        "alpha",
        "big",
        30.0,
        True,
    )


async def test_a_per_model_breaker_recovers_by_reset(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    with capture_events("breaker.transition") as events:
        await fail_with(breaker, err(Code.MODEL_NOT_FOUND), model="big")
        assert str(await breaker.state_of("alpha", "big")) == "open"
        assert str(await breaker.state_of("alpha")) == "closed"
        error = await refused(breaker, model="big")
        assert (error.provider, error.model, error.retry_after, error.retryable) == (
            "alpha",
            "big",
            None,
            False,
        )
        with pytest.raises(ActorError, match=r"^\[circuit_open\] circuit for alpha is open$"):
            await breaker.admit("alpha", "big")
        await breaker.reset("alpha", "big")
        assert str(await breaker.state_of("alpha", "big")) == "closed"
        async with breaker.guard("alpha", "big"):
            pass
        await breaker.reset("alpha", "big")  # already closed: no event
    assert transitions(events) == [
        ("alpha", "big", "closed", "open", "model_not_found", None),
        ("alpha", "big", "open", "closed", None, None),
    ]
    assert [e.permanent for e in events] == [True, False]


async def test_events_name_the_provider_and_only_a_model_key_names_a_model(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker()
    with capture_events("breaker.transition") as events:
        await fail_with(breaker, err(Code.UNAVAILABLE), model="big")
        await trio.sleep(30)
        admission = await breaker.admit("alpha", "big")
        assert (admission.probe, admission.model_probe, admission.clean) == (True, False, False)
        await breaker.record(admission, None)
        await fail_with(breaker, err(Code.AUTH))
        await breaker.reset("alpha")
    assert transitions(events) == [
        ("alpha", None, "closed", "open", "unavailable", 60.0),
        ("alpha", None, "open", "half_open", "unavailable", 60.0),
        ("alpha", None, "half_open", "closed", None, None),
        ("alpha", None, "closed", "open", "auth", None),
        ("alpha", None, "open", "closed", None, None),
    ]


async def test_a_model_refusal_frees_the_provider_probe(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.MODEL_NOT_FOUND), model="big")
    await fail_with(breaker, err(Code.UNAVAILABLE), model="small")
    await trio.sleep(30)
    error = await refused(breaker, model="big")  # took the provider's probe, then refused
    assert (error.provider, error.model, error.retry_after) == ("alpha", "big", None)
    assert str(await breaker.state_of("alpha")) == "half_open"
    admission = await breaker.admit("alpha", "small")  # the probe is free again
    assert (admission.probe, admission.model, admission.clean) == (True, "small", False)


async def test_a_model_not_found_probe_frees_the_provider_probe(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.UNAVAILABLE))
    await trio.sleep(30)
    await fail_with(breaker, err(Code.MODEL_NOT_FOUND), model="big")  # was the probe
    assert str(await breaker.state_of("alpha")) == "half_open"
    assert (await breaker.admit("alpha")).probe is True


async def test_admit_reports_a_clean_admission(autojump_clock: MockClock) -> None:
    breaker = Breaker(BreakerConfig(failure_threshold=2))
    assert (await breaker.admit("alpha")).clean is True
    assert (await breaker.admit("alpha", "big")).clean is True
    await fail_with(breaker, err(Code.UNAVAILABLE))  # counted, still closed
    assert str(await breaker.state_of("alpha")) == "closed"
    counted = await breaker.admit("alpha", "big")
    assert (counted.clean, counted.probe, counted.model) == (False, False, "big")
    await breaker.record(counted, None)  # a success clears the count
    assert (await breaker.admit("alpha")).clean is True


async def test_admit_fast_serves_one_clean_admission_per_key() -> None:
    breaker = Breaker()
    first = breaker.admit_fast("alpha", "big")
    assert first is not None
    assert (first.provider, first.model, first.clean, first.probe) == ("alpha", "big", True, False)
    assert breaker.admit_fast("alpha", "big") is first
    other = breaker.admit_fast("alpha")
    assert other is not None and other is not first
    assert (other.provider, other.model) == ("alpha", None)


async def test_admit_fast_with_other_breakers_counted(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, err(Code.UNAVAILABLE), provider="beta")
    await fail_with(breaker, err(Code.MODEL_NOT_FOUND), model="big")
    assert breaker.admit_fast("beta") is None
    assert breaker.admit_fast("alpha", "big") is None
    clean = breaker.admit_fast("alpha", "small")
    assert clean is not None and clean.clean
    assert breaker.admit_fast("alpha") is not None


async def test_breakers_sharing_a_state_share_their_verdicts(autojump_clock: MockClock) -> None:
    shared = MemoryState()
    first, second = Breaker(state=shared), Breaker(state=shared)
    assert first.state is shared and first.local is shared
    await fail_with(first, err(Code.UNAVAILABLE))
    assert (await refused(second)).retry_after == 30.0


async def test_ignored_codes_are_configurable(autojump_clock: MockClock) -> None:
    breaker = Breaker(BreakerConfig(ignored=frozenset({Code.UNAVAILABLE})))
    await fail_with(breaker, err(Code.UNAVAILABLE))
    assert str(await breaker.state_of("alpha")) == "closed"
    await fail_with(breaker, err(Code.BAD_REQUEST))  # no longer ignored, still not counted
    assert str(await breaker.state_of("alpha")) == "closed"
    await fail_with(breaker, err(Code.TIMEOUT))
    assert str(await breaker.state_of("alpha")) == "open"


async def test_a_group_of_retryable_errors_counts(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    await fail_with(breaker, ExceptionGroup("g", [err(Code.UNAVAILABLE), err(Code.TIMEOUT)]))
    assert str(await breaker.state_of("alpha")) == "open"


async def test_interpreter_exits_and_foreign_base_exceptions_count_nothing(
    autojump_clock: MockClock,
) -> None:
    class Fatal(BaseException):
        pass

    breaker = Breaker()
    await fail_with(breaker, err(Code.UNAVAILABLE))
    await trio.sleep(30)
    for exc in (Fatal("boom"), BaseExceptionGroup("g", [KeyboardInterrupt()]), GeneratorExit()):
        await fail_with(breaker, exc)  # each was the probe: released, no verdict
        assert str(await breaker.state_of("alpha")) == "half_open"
    await fail_with(breaker, err(Code.CANCELLED))
    assert str(await breaker.state_of("alpha")) == "half_open"
    async with breaker.guard("alpha"):
        pass
    assert str(await breaker.state_of("alpha")) == "closed"


# --- the calls a breaker makes to its backend -----------------------------------------


class RecordingState:
    """A state backend that records every breaker call and delegates to MemoryState.

    Not a MemoryState, so the breaker has no in-process fast path and every decision goes
    through these calls. ``model_transition`` makes ``breaker_admit`` report a transition
    on model keys (a backend of another kind may have one there).
    """

    def __init__(
        self,
        *,
        model_transitions: tuple[Transition, Transition] | None = None,
        yields: bool = False,
    ) -> None:
        self.inner = MemoryState()
        self.calls: list[tuple[Any, ...]] = []
        self.model_transitions = model_transitions
        self.yields = yields

    async def breaker_admit(self, key: str, *, now: float, lease_ttl: float) -> BreakerSnapshot:
        self.calls.append(("admit", key, now, lease_ttl))
        snap = await self.inner.breaker_admit(key, now=now, lease_ttl=lease_ttl)
        if self.model_transitions is not None and key != "alpha":
            return BreakerSnapshot(True, True, 0.0, self.model_transitions[0], False)
        return snap

    async def breaker_success(
        self, key: str, *, now: float, probe: bool, success_threshold: int
    ) -> Transition | None:
        self.calls.append(("success", key, now, probe, success_threshold))
        if self.model_transitions is not None and key != "alpha":
            return self.model_transitions[1]
        return await self.inner.breaker_success(
            key, now=now, probe=probe, success_threshold=success_threshold
        )

    async def breaker_failure(self, key: str, **fields: Any) -> Transition | None:
        self.calls.append(("failure", key, fields))
        if self.yields:
            await trio.lowlevel.checkpoint()  # a backend doing I/O: a cancel point
        return await self.inner.breaker_failure(key, **fields)

    async def breaker_release(self, key: str, *, probe: bool) -> None:
        self.calls.append(("release", key, probe))
        await self.inner.breaker_release(key, probe=probe)

    async def breaker_reset(self, key: str) -> Transition | None:
        self.calls.append(("reset", key))
        return await self.inner.breaker_reset(key)

    async def breaker_state(self, key: str, *, now: float) -> BreakerState:
        self.calls.append(("state", key, now))
        return await self.inner.breaker_state(key, now=now)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def failure(code: str, threshold: int, now: float, cooldown: float, probe_after: float) -> Any:
    return {
        "now": now,
        "probe": False,
        "code": code,
        "threshold": threshold,
        "cooldown": cooldown,
        "probe_after": probe_after,
        "permanent": math.isinf(cooldown),
    }


async def test_the_backend_sees_every_key_of_a_model_call(autojump_clock: MockClock) -> None:
    state = RecordingState()
    breaker = Breaker(BreakerConfig(failure_threshold=2, success_threshold=3), state=state)
    assert breaker.local is None and breaker.admit_fast("alpha") is None
    await trio.sleep(1)
    await fail_with(breaker, err(Code.UNAVAILABLE), model="big")  # counted on the provider
    await trio.sleep(1)
    async with breaker.guard("alpha", "big"):
        pass  # not clean (one failure counted): the success reaches both keys
    await trio.sleep(1)
    await fail_with(breaker, err(Code.MODEL_NOT_FOUND), model="big")
    await trio.sleep(1)
    await fail_with(breaker, err(Code.AUTH), model="small")
    assert state.calls == [
        ("admit", "alpha", 1.0, 30.0),
        ("admit", BIG, 1.0, 30.0),
        ("release", BIG, False),
        ("failure", "alpha", failure("unavailable", 2, 1.0, 60.0, 30.0)),
        ("admit", "alpha", 2.0, 30.0),
        ("admit", BIG, 2.0, 30.0),
        ("success", "alpha", 2.0, False, 3),
        ("success", BIG, 2.0, False, 3),
        ("admit", "alpha", 3.0, 30.0),
        ("admit", BIG, 3.0, 30.0),
        ("release", "alpha", False),
        ("failure", BIG, failure("model_not_found", 2, 3.0, math.inf, math.inf)),
        ("admit", "alpha", 4.0, 30.0),
        ("admit", "alpha\x1fmodel\x1fsmall", 4.0, 30.0),
        ("release", "alpha\x1fmodel\x1fsmall", False),
        ("failure", "alpha", failure("auth", 2, 4.0, math.inf, math.inf)),
    ]


async def test_the_backend_sees_releases_state_reads_and_resets(autojump_clock: MockClock) -> None:
    state = RecordingState()
    breaker = Breaker(state=state)
    await trio.sleep(2)
    with trio.move_on_after(1):
        async with breaker.guard("alpha", "big"):
            await trio.sleep(5)  # cancelled: a release on both keys
    await fail_with(breaker, err(Code.BAD_REQUEST), model="big")  # ignored: released too
    assert str(await breaker.state_of("alpha", "big")) == "closed"
    await breaker.reset("alpha", "big")
    assert state.calls == [
        ("admit", "alpha", 2.0, 30.0),
        ("admit", BIG, 2.0, 30.0),
        ("release", "alpha", False),
        ("release", BIG, False),
        ("admit", "alpha", 3.0, 30.0),
        ("admit", BIG, 3.0, 30.0),
        ("release", "alpha", False),
        ("release", BIG, False),
        ("state", BIG, 3.0),
        ("reset", BIG),
    ]


async def test_backend_transitions_on_a_model_key_are_events(autojump_clock: MockClock) -> None:
    probing = Transition(BIG, BreakerState.OPEN, BreakerState.HALF_OPEN, "unavailable", 5.0)
    closing = Transition(BIG, BreakerState.HALF_OPEN, BreakerState.CLOSED, None, None)
    state = RecordingState(model_transitions=(probing, closing))
    breaker = Breaker(state=state)
    with capture_events("breaker.transition") as events:
        async with breaker.guard("alpha", "big"):
            pass
    assert transitions(events) == [
        ("alpha", "big", "open", "half_open", "unavailable", 5.0),
        ("alpha", "big", "half_open", "closed", None, None),
    ]
    assert state.calls[-1] == ("success", BIG, 0.0, True, 1)


async def test_a_verdict_is_recorded_while_the_caller_is_cancelled(
    autojump_clock: MockClock,
) -> None:
    state = RecordingState(yields=True)
    breaker = Breaker(state=state)
    with trio.CancelScope() as scope, pytest.raises(ActorError, match=r"^\[unavailable\] "):
        async with breaker.guard("alpha"):
            scope.cancel()
            raise err(Code.UNAVAILABLE)
    assert str(await breaker.state_of("alpha")) == "open"


async def test_an_open_breaker_reads_half_open_exactly_at_its_probe_time(
    autojump_clock: MockClock,
) -> None:
    # The in-process state, as the Redis one (tests/test_state_redis.py): a reader sees
    # what a caller would now. unavailable: 60 s cooldown, the early probe at 30 s.
    state = MemoryState()
    breaker = Breaker(state=state)
    await fail_with(breaker, err(Code.UNAVAILABLE))
    await fail_with(breaker, err(Code.AUTH), provider="beta")
    await trio.sleep(30 - 1e-6)
    assert str(await breaker.state_of("alpha")) == "open"
    await trio.sleep(1e-6)
    assert str(await breaker.state_of("alpha")) == "half_open"
    assert await state.breaker_state("alpha", now=trio.current_time() - 1e-3) == "open"
    await trio.sleep(3600)
    assert str(await breaker.state_of("beta")) == "open"  # open until reset
    assert str(await state.breaker_state("gamma", now=0.0)) == "closed"
    probe = await breaker.admit("alpha")  # reading changed nothing: the probe is free
    assert probe.probe
    await breaker.record(probe, None)
    assert str(await breaker.state_of("alpha")) == "closed"
