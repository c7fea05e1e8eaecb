"""Restart intensity: one sliding window per supervisor, inclusive at the period."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code
from actors.testing import capture_events
from supervisors import ChildSpec, open_tree
from tests.sup_helpers import tree_spec, worker


async def _crash_at(times: list[float], **spec: Any) -> tuple[ActorError, list[dict[str, Any]]]:
    journal: list[tuple[Any, ...]] = []
    with capture_events("supervisor.decision") as events, pytest.raises(ActorError) as caught:
        async with open_tree(tree_spec(worker("w", journal), **spec)) as tree:
            for at in times:
                await trio.sleep_until(at)
                await tree.ref("w").cast(("crash", Code.TOOL_FAILED))
            await trio.sleep(100)
    return caught.value, events


async def test_four_crashes_in_period_trip_on_the_fourth(autojump_clock: MockClock) -> None:
    error, events = await _crash_at([0, 1, 2, 3], max_restarts=3, period=5)
    assert trio.current_time() == 3.0
    assert error.code is Code.RESTART_INTENSITY_EXCEEDED
    assert [e.code for e in error.errors] == [Code.TOOL_FAILED] * 4
    assert [(e.directive, e.restarts) for e in events] == [
        ("restart", 1),
        ("restart", 2),
        ("restart", 3),
        ("escalate", 4),
    ]


async def test_window_slides(autojump_clock: MockClock) -> None:
    error, events = await _crash_at([0, 4.9, 5.1, 5.2, 5.3], max_restarts=3, period=5)
    assert trio.current_time() == pytest.approx(5.3)
    assert error.code is Code.RESTART_INTENSITY_EXCEEDED
    assert len(error.errors) == 4  # 4.9, 5.1, 5.2, 5.3 — the one at 0 slid out
    assert [e.restarts for e in events] == [1, 2, 2, 3, 4]


async def test_failure_exactly_period_old_still_counts(autojump_clock: MockClock) -> None:
    error, _ = await _crash_at([0, 1, 2, 5], max_restarts=3, period=5)
    assert trio.current_time() == 5.0
    assert len(error.errors) == 4


async def test_start_that_always_raises_is_bounded(autojump_clock: MockClock) -> None:
    attempts: list[float] = []

    class Flaky(Actor):
        async def on_start(self) -> None:
            attempts.append(trio.current_time())
            if len(attempts) > 1:
                raise ActorError.from_code(Code.UNAVAILABLE, "dependency down")

        async def handle(self, message: Any) -> Any:
            raise ActorError.from_code(Code.TOOL_FAILED, "crash")

    with pytest.raises(ActorError) as caught:
        async with open_tree(
            tree_spec(ChildSpec(id="f", actor=Flaky), max_restarts=2, period=5)
        ) as tree:
            await tree.ref("f").cast("go")
            await trio.sleep(100)
    assert len(attempts) == 3
    assert caught.value.code is Code.RESTART_INTENSITY_EXCEEDED
    assert [e.code for e in caught.value.errors] == [
        Code.TOOL_FAILED,
        Code.UNAVAILABLE,
        Code.UNAVAILABLE,
    ]


async def test_one_failure_under_one_for_all_counts_once(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(*(worker(n, journal) for n in "abc"), strategy="one_for_all")
    with capture_events("supervisor.decision") as events:
        async with open_tree(spec) as tree:
            await tree.ref("b").cast(("crash", Code.TOOL_FAILED))
            await trio.sleep(1)
            assert await tree.ref("a").call("x") == ("a", "x", 1)
    assert [(e.child, e.restarts) for e in events] == [("b", 1)]
