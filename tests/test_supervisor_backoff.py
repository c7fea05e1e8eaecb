"""Backoff between restarts: schedule, jitter clamp, retry_after, reset, queued messages."""

from __future__ import annotations

import random
from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st
from trio.testing import MockClock

from actors import Code
from supervisors import Backoff, open_tree
from tests.sup_helpers import starts, tree_spec, worker


def test_exponential_schedule_is_capped() -> None:
    backoff = Backoff(initial=1, factor=2, max=30)
    assert [backoff.delay(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]


@given(seed=st.integers(), n=st.integers(min_value=0, max_value=40))
def test_jitter_never_exceeds_max(seed: int, n: int) -> None:
    backoff = Backoff(initial=1, factor=2, max=30, jitter=0.2, random=random.Random(seed).random)
    delay = backoff.delay(n)
    assert 0 <= delay <= 30
    assert delay >= 0.8 * min(30, 2**n)


def test_jitter_is_reproducible_with_a_seeded_source() -> None:
    first = Backoff(initial=1, jitter=0.2, max=30, random=random.Random(7).random)
    second = Backoff(initial=1, jitter=0.2, max=30, random=random.Random(7).random)
    assert [first.delay(n) for n in range(10)] == [second.delay(n) for n in range(10)]


def test_retry_after_raises_the_delay() -> None:
    backoff = Backoff(initial=1, factor=2, max=30)
    assert backoff.delay(0, retry_after=7) == 7
    assert backoff.delay(3, retry_after=7) == 8
    assert backoff.delay(0, retry_after=90) == 90  # honoured even past max


def test_linear_and_fixed() -> None:
    assert [Backoff(kind="linear", initial=2, step=2).delay(n) for n in range(3)] == [2, 4, 6]
    assert [Backoff(kind="fixed", initial=3).delay(n) for n in range(3)] == [3, 3, 3]


async def test_restarts_follow_the_schedule_and_messages_wait(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(
        worker("w", journal),
        backoff=Backoff(initial=1, factor=2, max=30, reset_after=100),
        max_restarts=10,
        period=100,
    )
    async with open_tree(spec) as tree:
        ref = tree.ref("w")
        for _ in range(3):
            await ref.cast(("crash", Code.TOOL_FAILED))
            await ref.cast("queued during backoff")
            await trio.testing.wait_all_tasks_blocked()
            assert str(tree.root.which_children()[0].state) == "backing_off"
            assert await ref.call("after", timeout=60) == ("w", "after", 2)
    assert starts(journal) == [0.0, 1.0, 3.0, 7.0]


async def test_exponent_resets_after_quiet_running(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(
        worker("w", journal),
        backoff=Backoff(initial=1, factor=2, max=30, reset_after=10),
        max_restarts=10,
        period=5,
    )
    async with open_tree(spec) as tree:
        ref = tree.ref("w")
        await ref.cast(("crash", Code.TOOL_FAILED))  # t=0 -> restart at 1
        await trio.sleep(2)
        await ref.cast(("crash", Code.TOOL_FAILED))  # t=2, ran 1 s -> delay 2 -> 4
        await trio.sleep_until(20)
        await ref.cast(("crash", Code.TOOL_FAILED))  # t=20, ran 16 s -> reset -> 21
        await trio.sleep(5)
    assert starts(journal) == [0.0, 1.0, 4.0, 21.0]


async def test_error_retry_after_raises_restart_delay(autojump_clock: MockClock) -> None:
    from actors import Actor, ActorError

    started: list[float] = []

    class Limited(Actor):
        async def on_start(self) -> None:
            started.append(trio.current_time())

        async def handle(self, message: Any) -> Any:
            raise ActorError.from_code(Code.RATE_LIMITED, "429", retry_after=7.0)

    from supervisors import ChildSpec

    spec = tree_spec(ChildSpec(id="l", actor=Limited), backoff=Backoff(initial=1, factor=2, max=30))
    async with open_tree(spec) as tree:
        await tree.ref("l").cast("go")
        await trio.sleep(10)
    assert started == [0.0, 7.0]


async def test_decision_event_and_restarting_child_errors(autojump_clock: MockClock) -> None:
    import pytest

    from actors import ActorError
    from actors.testing import capture_events

    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(worker("w", journal), backoff=Backoff(initial=4, max=30))
    with capture_events("supervisor.decision") as events:
        async with open_tree(spec) as tree:
            await tree.ref("w").cast(("crash", Code.RATE_LIMITED))
            await trio.testing.wait_all_tasks_blocked()
            for operation in (tree.root.restart_child, tree.root.delete_child):
                with pytest.raises(ActorError) as caught:
                    await operation("w")
                assert caught.value.code is Code.CHILD_RESTARTING
    (event,) = events
    assert {
        k: event.fields()[k]
        for k in (
            "supervisor",
            "child",
            "code",
            "error_class",
            "directive",
            "restarts",
            "delay",
            "at",
        )
    } == {
        "supervisor": "/root",
        "child": "w",
        "code": "rate_limited",
        "error_class": "provider_transient",
        "directive": "restart",
        "restarts": 1,
        "delay": 4.0,
        "at": 0.0,
    }
