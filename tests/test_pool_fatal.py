"""Fatal errors stop the chain; downgrades, opt-ins and skips move it (routing.py)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from actors.providers import Capabilities, ToolSpec
from actors.testing import capture_events
from actors.testing.chaos import Fault
from supervisors import Breaker, ProviderPool, Resilience, Target
from supervisors.pool import MOVES, Move, move_for
from tests.pool_helpers import faults, fleet, request, rules
from tests.test_pool_mutants_attempt import Shared
from tests.test_pool_waits import _steps


@pytest.mark.parametrize(("status", "code"), [(401, Code.AUTH), (402, Code.PAYMENT)])
async def test_auth_and_payment_end_the_request_and_open_the_breaker_for_good(
    autojump_clock: MockClock, status: int, code: Code
) -> None:
    breaker = Breaker()
    async with fleet({"A": faults(Fault(kind="status", status=status)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), resilience=Resilience(breaker=breaker))
        with capture_events("breaker.transition") as transitions:
            with pytest.raises(ActorError) as caught:
                await pool.complete(request())
            assert caught.value.code is code
            assert (f.count("A"), f.count("B")) == (1, 0)  # B never called
            assert str(await breaker.state_of("A")) == "open"
            # Later requests skip A without asking it, for good.
            await trio.sleep(3600)
            reply = await pool.complete(request())
            assert reply.provider == "B"
            assert (f.count("A"), f.count("B")) == (1, 1)
    assert [(t.provider, t.after, t.permanent) for t in transitions] == [("A", "open", True)]


async def test_model_not_found_downgrades_on_the_same_provider(autojump_clock: MockClock) -> None:
    breaker = Breaker()
    async with fleet({"A": faults(Fault(kind="status", status=404)), "B": None}) as f:
        pool = ProviderPool(
            f.targets("A", "B"),
            downgrades={"A": ["m2"]},
            resilience=Resilience(breaker=breaker),
        )
        reply = await pool.complete(request())
        assert (reply.provider, reply.model) == ("A", "m2")
        assert [r.model for r in f.servers["A"].requests] == ["m1", "m2"]
        assert f.count("B") == 0
        assert [(a.model, a.outcome, a.code) for a in pool.ledger] == [
            ("m1", "failed", Code.MODEL_NOT_FOUND),
            ("m2", "ok", None),
        ]
        # The model's breaker is open for good, the provider's is not.
        assert str(await breaker.state_of("A", "m1")) == "open"
        assert str(await breaker.state_of("A")) == "closed"
        again = await pool.complete(request())
        assert (again.provider, again.model) == ("A", "m2")
        assert [r.model for r in f.servers["A"].requests] == ["m1", "m2", "m2"]


async def test_model_not_found_without_a_downgrade_ends_the_request(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": faults(Fault(kind="status", status=404, times=3)), "B": None}) as f:
        alone = ProviderPool(f.targets("A", "B"))
        with pytest.raises(ActorError) as caught:
            await alone.complete(request())
        assert caught.value.code is Code.MODEL_NOT_FOUND
        assert f.count("B") == 0
        exhausted = ProviderPool(f.targets("A", "B"), downgrades={"A": ["m2"]})
        with pytest.raises(ActorError) as caught:
            await exhausted.complete(request())
        assert caught.value.code is Code.MODEL_NOT_FOUND
        assert [r.model for r in f.servers["A"].requests] == ["m1", "m1", "m2"]
        assert f.count("B") == 0


async def test_content_filter_is_not_routed_around_unless_a_target_opts_in(
    autojump_clock: MockClock,
) -> None:
    script = faults(Fault(kind="content_filter", times=2))
    async with fleet({"A": script, "B": None, "C": None}) as f:
        plain = ProviderPool(f.targets("A", "B"))
        with pytest.raises(ActorError) as caught:
            await plain.complete(request())
        assert caught.value.code is Code.CONTENT_FILTER
        assert f.count("B") == 0
        opted = ProviderPool(
            [f.target("A"), f.target("B"), f.target("C", content_filter_fallback=True)]
        )
        reply = await opted.complete(request())
        assert reply.provider == "C"
        assert (f.count("A"), f.count("B"), f.count("C")) == (2, 0, 1)


async def test_context_window_moves_only_to_a_target_marked_larger(
    autojump_clock: MockClock,
) -> None:
    script = faults(Fault(kind="context_length", times=2))
    async with fleet({"A": script, "B": None, "C": None}) as f:
        unmarked = ProviderPool(f.targets("A", "B"))
        with pytest.raises(ActorError) as caught:
            await unmarked.complete(request())
        assert caught.value.code is Code.CONTEXT_WINDOW_EXCEEDED
        assert f.count("B") == 0
        marked = ProviderPool(
            [
                f.target("A", context_window=8192),
                f.target("B", context_window=4096),  # smaller: not a way out
                f.target("C", context_window=200_000),
            ]
        )
        reply = await marked.complete(request())
        assert reply.provider == "C"
        assert (f.count("A"), f.count("B"), f.count("C")) == (2, 0, 1)


@pytest.mark.parametrize("move", ["content_filter", "context_length"])
async def test_after_a_move_only_the_targets_that_fit_are_tried_even_on_a_retry(
    autojump_clock: MockClock, move: str
) -> None:
    # A refuses the request on its content (or size); B may take it but is briefly down;
    # C may not take it (not opted in, or no larger window). Rotating away from B's
    # failure must not hand the request to C: it waits for B's retry.
    async with fleet(
        {"A": faults(Fault(kind=move)), "B": faults(Fault(kind="status", status=503)), "C": None}
    ) as f:
        if move == "content_filter":
            targets = [f.target("A"), f.target("B", content_filter_fallback=True), f.target("C")]
        else:
            targets = [
                f.target("A", context_window=8192),
                f.target("B", context_window=200_000),
                f.target("C", context_window=4096),
            ]
        pool = ProviderPool(targets)
        reply = await pool.complete(request())
        assert reply.provider == "B"
        assert (f.count("A"), f.count("B"), f.count("C")) == (1, 2, 0)
        assert [(a.provider, a.outcome) for a in pool.ledger] == [
            ("A", "failed"),
            ("B", "failed"),
            ("B", "ok"),
        ]
        assert trio.current_time() > 0  # B's retry delay was waited for


async def test_bad_request_stops_the_chain(autojump_clock: MockClock) -> None:
    async with fleet({"A": faults(Fault(kind="status", status=400)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), resilience=Resilience(retry=rules()))
        with pytest.raises(ActorError) as caught:
            await pool.complete(request())
        assert caught.value.code is Code.BAD_REQUEST
        assert f.count("B") == 0
        assert trio.current_time() == 0.0


async def test_a_target_lacking_a_capability_is_skipped_before_any_http(
    autojump_clock: MockClock,
) -> None:
    models = {"m1": Capabilities(tools=False)}
    async with fleet({"A": None}, models=models) as fa, fleet({"B": None}) as fb:
        pool = ProviderPool([fa.target("A"), fb.target("B")])
        tools = [ToolSpec(name="lookup")]
        reply = await pool.complete(request(tools=tools))
        assert reply.provider == "B"
        assert (fa.count("A"), fb.count("B")) == (0, 1)
        assert [(a.provider, a.code) for a in pool.ledger] == [
            ("A", Code.CAPABILITY_MISSING),
            ("B", None),
        ]


def test_the_routing_table_is_pinned() -> None:
    assert dict(MOVES) == {
        Code.MODEL_NOT_FOUND: Move.NEXT_MODEL,
        Code.CONTEXT_WINDOW_EXCEEDED: Move.LARGER_WINDOW,
        Code.CONTENT_FILTER: Move.OPT_IN,
        Code.CAPABILITY_MISSING: Move.SKIP,
        Code.ACTOR_STOPPED: Move.SKIP,
        Code.OUTCOME_UNKNOWN: Move.SKIP,
        Code.CALL_TIMEOUT: Move.SKIP,
        Code.START_FAILED: Move.SKIP,
        Code.RESTART_INTENSITY_EXCEEDED: Move.SKIP,
        Code.CHILD_RESTARTING: Move.SKIP,
    }
    for code in Code:
        error = ActorError.from_code(code)
        expected = MOVES.get(code, Move.RETRY if error.retryable else Move.STOP)
        assert move_for(error) is expected, code
    # retryable overrides: a 503 marked final by x-should-retry stops
    assert move_for(ActorError.from_code(Code.UNAVAILABLE, retryable=False)) is Move.STOP
    assert move_for(ActorError.from_code(Code.UNAVAILABLE)) is Move.RETRY
    for code in (Code.AUTH, Code.PAYMENT, Code.BAD_REQUEST, Code.INTERNAL, Code.CANCELLED):
        assert move_for(ActorError.from_code(code)) is Move.STOP


class NotAProvider(Actor):
    """Answers every message with text: a misconfigured target."""

    async def handle(self, message: Any) -> Any:
        return "hello"


async def test_a_target_that_is_not_a_provider_ends_the_request_as_internal(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"B": None}) as f, open_runtime() as runtime:
        wrong = await runtime.spawn(NotAProvider)
        breaker = Breaker()
        pool = ProviderPool(
            [Target(ref=wrong, provider="W", model="m1"), f.target("B")],
            resilience=Resilience(breaker=breaker),
        )
        with pytest.raises(ActorError, match="answered a str, not an LlmResponse") as caught:
            await pool.complete(request())
        assert caught.value.code is Code.INTERNAL  # a bug is not routed around
        assert f.count("B") == 0
        assert str(await breaker.state_of("W")) == "closed"  # not the provider's fault
        [entry] = pool.ledger
        assert (entry.provider, entry.outcome, entry.code) == ("W", "failed", Code.INTERNAL)


async def test_a_request_id_that_is_not_text_is_written_as_text(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": None}) as f:
        pool = ProviderPool(f.targets("A"))
        await pool.complete(request(metadata={"request_id": 42}))  # type: ignore[dict-item]
        assert [a.request_id for a in pool.ledger] == ["42"]


# --- skips and windows, on actors that answer by script (no HTTP) -----------------------


async def test_a_skipped_target_stays_out_while_the_others_wait(autojump_clock: MockClock) -> None:
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["capability_missing", "ok"], B=["unavailable", "ok"])
        targets = [Target(ref=refs[n], provider=n, model="m1") for n in ("A", "B")]
        reply = await ProviderPool(targets, resilience=Resilience(retry=rules())).complete(
            request()
        )
        assert trio.current_time() == 1.0  # B's retry delay: A was not asked again
    assert reply.content == "B"
    assert seen == [("A", "m1", 0.0), ("B", "m1", 0.0), ("B", "m1", 1.0)]


async def test_a_window_exceeded_moves_to_any_marked_window_and_stays_out(
    autojump_clock: MockClock,
) -> None:
    # A has no mark (counts as 0): B's window of 1 is larger. A is out for the request:
    # while B waits its retry delay, A is not asked again.
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(
            runtime, seen, A=["context_window_exceeded", "ok"], B=["unavailable", "ok"]
        )
        targets = [
            Target(ref=refs["A"], provider="A", model="m1"),
            Target(ref=refs["B"], provider="B", model="m1", context_window=1),
        ]
        reply = await ProviderPool(targets, resilience=Resilience(retry=rules())).complete(
            request()
        )
        assert trio.current_time() == 1.0
    assert reply.content == "B"
    assert seen == [("A", "m1", 0.0), ("B", "m1", 0.0), ("B", "m1", 1.0)]


async def test_a_preferred_target_still_waiting_is_waited_for(autojump_clock: MockClock) -> None:
    # B (the larger window) failed first and waits its retry delay when A's window is
    # exceeded: the chain waits for B rather than looking for another preference.
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, B=["unavailable", "ok"], A=["context_window_exceeded"])
        targets = [
            Target(ref=refs["B"], provider="B", model="m1", context_window=1000),
            Target(ref=refs["A"], provider="A", model="m1"),
        ]
        reply = await ProviderPool(targets, resilience=Resilience(retry=rules())).complete(
            request()
        )
    assert reply.content == "B"
    assert seen == [("B", "m1", 0.0), ("A", "m1", 0.0), ("B", "m1", 1.0)]


async def test_the_next_model_is_the_providers_next_one_from_the_cursor_on(
    autojump_clock: MockClock,
) -> None:
    seen: list[tuple[str, str, float]] = []
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["model_not_found", "ok"], B=["ok"])
        targets = [
            Target(ref=refs["A"], provider="A", model="m1"),
            Target(ref=refs["B"], provider="B", model="m1"),
            Target(ref=refs["A"], provider="A", model="m2"),
            Target(ref=refs["A"], provider="A", model="m3"),
        ]
        reply = await ProviderPool(targets, resilience=Resilience(retry=rules())).complete(
            request()
        )
    assert (reply.content, reply.model) == ("A", "m2")
    assert seen == [("A", "m1", 0.0), ("A", "m2", 0.0)]


async def test_a_shared_breaker_open_for_good_puts_its_target_out(
    autojump_clock: MockClock,
) -> None:
    # A shared state: the pool cannot know without asking; the breaker's refusal (no
    # retry_after: open for good) puts A out, and B serves.
    seen: list[tuple[str, str, float]] = []
    breaker = Breaker(state=Shared())
    async with open_runtime() as runtime:
        refs = await _steps(runtime, seen, A=["ok"], B=["ok"])
        admission = await breaker.admit("A", "m1")
        await breaker.record(admission, ActorError.from_code(Code.AUTH, "bad key"))
        targets = [Target(ref=refs[n], provider=n, model="m1") for n in ("A", "B")]
        pool = ProviderPool(targets, resilience=Resilience(retry=rules(), breaker=breaker))
        reply = await pool.complete(request())
    assert reply.content == "B"
    assert seen == [("B", "m1", 0.0)]
    assert [(a.provider, a.outcome) for a in pool.ledger] == [("B", "ok")]
