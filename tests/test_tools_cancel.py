"""The caller's cancel always wins over a tool call: ``trio.Cancelled`` to the caller,
never ``tool_failed`` / ``tool_timeout``, never retried after it, no tool run left."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing import capture_events
from actors.tools import ToolGroup, ToolHost, tool
from supervisors import Backoff, RetryPolicy
from tests.tools_helpers import TWO_RETRIES, hosted


@attrs.define
class Live:
    """Tool runs in progress (incremented at start, decremented when the function
    ends, whatever the way), and how each ended."""

    running: int = 0
    ended: list[str] = attrs.Factory(list)


def behaving(live: Live, *, timeout: float | None = None, retry: Any = None) -> Any:
    """A tool whose ``mode`` says how it behaves under a cancel."""

    async def slow(mode: str, seconds: float) -> str:
        live.running += 1
        try:
            if mode == "raise":
                await trio.sleep(seconds)
                raise RuntimeError("failed after a while")
            await trio.sleep(seconds)
            live.ended.append("returned")
            return "done"
        except trio.Cancelled:
            live.ended.append("cancelled")
            if mode == "raise_on_cancel":
                raise ValueError("a cleanup that fails") from None
            if mode == "stubborn":  # ignores the cancel for its cleanup (shielded)
                with trio.CancelScope(shield=True):
                    await trio.sleep(1.0)
            raise
        finally:
            live.running -= 1

    return tool(slow, timeout=timeout, retry=retry)


@pytest.mark.parametrize("mode", ["sleep", "raise_on_cancel", "stubborn"])
async def test_a_cancelled_caller_gets_trio_cancelled_at_once(
    autojump_clock: MockClock, mode: str
) -> None:
    live = Live()
    async with hosted(ToolGroup("g", [behaving(live, retry=TWO_RETRIES)])) as (_, tools):
        with capture_events() as events, trio.move_on_after(2) as scope:
            await tools.call("slow", {"mode": mode, "seconds": 10})
        assert scope.cancelled_caught
        assert trio.current_time() == 2.0  # answered at once, stubborn cleanup or not
        with trio.fail_after(5):
            while live.running:
                await trio.sleep(0.1)
        assert trio.current_time() <= 3.1
        assert live.ended == ["cancelled"]
        codes = [getattr(e, "code", None) for e in events if e.name.startswith("tool.")]
        assert codes == ["cancelled"]
        assert not any(e.name == "tool.retry" for e in events)
        # The host was not hurt: the next call is served.
        assert (await tools.call("slow", {"mode": "sleep", "seconds": 1})).value == "done"


async def test_a_cancel_during_the_retry_wait_stops_the_retries(
    autojump_clock: MockClock,
) -> None:
    live = Live()
    async with hosted(ToolGroup("g", [behaving(live, retry=TWO_RETRIES)])) as (_, tools):
        with capture_events("tool.retry") as retries, trio.move_on_after(1.5) as scope:
            await tools.call("slow", {"mode": "raise", "seconds": 1})  # fails at 1.0
        assert scope.cancelled_caught
        await trio.sleep(10)
    assert [e.attempt for e in retries] == [1]
    assert live.ended == []  # one run, which raised; no second run started


async def test_an_enclosing_scope_cancelled_by_a_crashing_sibling_is_a_cancel(
    autojump_clock: MockClock,
) -> None:
    live = Live()
    caught: list[BaseException] = []
    async with hosted(ToolGroup("g", [behaving(live)])) as (_, tools):

        async def call() -> None:
            try:
                await tools.call("slow", {"mode": "sleep", "seconds": 10})
            except BaseException as exc:
                caught.append(exc)
                raise

        async def crash() -> None:
            await trio.sleep(1)
            raise KeyError("sibling")

        with pytest.RaisesGroup(KeyError):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                nursery.start_soon(crash)
    assert [type(exc) for exc in caught] == [trio.Cancelled]
    assert live.ended == ["cancelled"]


async def test_a_host_stopped_under_a_call_is_outcome_unknown_never_tool_failed(
    autojump_clock: MockClock,
) -> None:
    live = Live()
    async with hosted(ToolGroup("g", [behaving(live)])) as (tree, tools):

        async def stop_later() -> None:
            await trio.sleep(1)
            await tree.root.terminate_child("tools.g.0")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_later)
            with pytest.raises(ActorError) as caught:
                await tools.call("slow", {"mode": "sleep", "seconds": 10})
        # The stop waits out its shutdown timeout (5 s), then kills the run: the caller
        # learns the outcome is unknown (the tool may have had its effect), not a failure.
        assert trio.current_time() == 6.0
    assert (caught.value.code, caught.value.attempt) == (Code.OUTCOME_UNKNOWN, 1)
    assert live.ended == ["cancelled"]


# --- a cancel at any moment (hypothesis) -----------------------------------------------

SCENARIOS = {
    # mode, seconds, tool timeout, policy
    "answers": ("sleep", 2.0, None, None),
    "fails_and_retries": ("raise", 1.0, None, TWO_RETRIES),
    "times_out_and_retries": ("sleep", 10.0, 1.5, TWO_RETRIES),
    "raises_on_cancel": ("raise_on_cancel", 3.0, 2.5, TWO_RETRIES),
    "stubborn": ("stubborn", 3.0, 2.0, RetryPolicy(max_attempts=1, backoff=Backoff(jitter=0))),
}


async def _cancel_at(scenario: str, cancel_at: float) -> None:
    mode, seconds, timeout, policy = SCENARIOS[scenario]
    live = Live()
    async with hosted(ToolGroup("g", [behaving(live, timeout=timeout, retry=policy)])) as (
        _,
        tools,
    ):
        outcome: Any = None
        started = trio.current_time()
        with capture_events() as events, trio.move_on_after(cancel_at) as scope:
            try:
                outcome = await tools.call("slow", {"mode": mode, "seconds": seconds})
            except ActorError as error:
                outcome = error
        cancelled_at = trio.current_time()
        if scope.cancelled_caught:
            assert outcome is None  # a cancel is never reported as a failure
            starts_after = [e for e in events if e.name == "tool.retry"]
            assert all(e.delay >= 0 for e in starts_after)
            failed = [e for e in events if e.name == "tool.call_failed"]
            assert [e.code for e in failed] == ["cancelled"]
        else:
            assert outcome is not None
        runs_at_cancel = len(live.ended) + live.running
        await trio.sleep(30)  # nothing starts after the cancel; every run ends
        assert live.running == 0
        assert len(live.ended) <= runs_at_cancel  # no run started after the cancel
        # The caller was answered at once: at the cancel's own instant when cancelled
        # (a stubborn cleanup does not hold it), else before it.
        if scope.cancelled_caught:
            assert cancelled_at == scope.deadline
        assert cancelled_at - started <= cancel_at


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=st.sampled_from(sorted(SCENARIOS)),
    cancel_at=st.floats(min_value=0.0, max_value=12.0),
)
def test_a_cancel_at_any_moment_is_a_cancel_and_leaves_no_run(
    scenario: str, cancel_at: float
) -> None:
    trio.run(_cancel_at, scenario, cancel_at, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_an_aborted_tree_answers_its_callers_cancelled_never_a_tool_failure(
    autojump_clock: MockClock,
) -> None:
    live = Live()
    caught: list[BaseException] = []
    with pytest.RaisesGroup(pytest.RaisesExc(ActorError, match="operator")):
        async with hosted(ToolGroup("g", [behaving(live, retry=TWO_RETRIES)])) as (tree, tools):

            async def abort_later() -> None:
                await trio.sleep(1)
                tree.abort("operator")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(abort_later)
                with capture_events("tool.retry", "tool.call_failed") as events:
                    try:
                        await tools.call("slow", {"mode": "sleep", "seconds": 10})
                    except BaseException as exc:
                        caught.append(exc)
                        raise
    assert len(caught) == 1 and isinstance(caught[0], ActorError)
    assert (caught[0].code, caught[0].message) == (Code.CANCELLED, "operator")
    assert [(e.name, e.code) for e in events] == [("tool.call_failed", "cancelled")]
    assert live.ended == ["cancelled"]


async def test_a_worker_whose_constructor_raises_fails_the_trees_start_naming_it(
    autojump_clock: MockClock,
) -> None:
    from supervisors import ChildSpec, SupervisorSpec, open_tree

    bad = ChildSpec(id="bad", actor=ToolHost, args=(["not a tool"],))
    with pytest.raises(ActorError, match="child 'bad' failed to start") as caught:
        async with open_tree(SupervisorSpec(children=[bad])):
            pass
    assert caught.value.code is Code.START_FAILED
    assert "ToolHost tools[0] must be a Tool" in str(caught.value.__cause__)
