"""Restart types, strategies, order of stops and starts, start failures."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code
from supervisors import ChildSpec, open_tree
from tests.sup_helpers import tree_spec, worker


def _lifecycle(journal: list[tuple[Any, ...]]) -> list[tuple[str, str]]:
    return [(e[0], e[1]) for e in journal]


async def test_rest_for_one_order(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(*(worker(n, journal) for n in "abcd"), strategy="rest_for_one")
    async with open_tree(spec) as tree:
        journal.clear()
        await tree.ref("b").cast(("crash", Code.TOOL_FAILED))
        await trio.sleep(1)
        assert _lifecycle(journal) == [
            ("stop", "d"),
            ("stop", "c"),
            ("start", "b"),
            ("start", "c"),
            ("start", "d"),
        ]
        assert [c.restarts for c in tree.root.which_children()] == [0, 1, 1, 1]
        journal.clear()
    assert _lifecycle(journal) == [("stop", n) for n in "dcba"]


async def test_one_for_all_order(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(*(worker(n, journal) for n in "abc"), strategy="one_for_all")
    async with open_tree(spec) as tree:
        journal.clear()
        await tree.ref("b").cast(("crash", Code.TOOL_FAILED))
        await trio.sleep(1)
    assert _lifecycle(journal)[:5] == [
        ("stop", "c"),
        ("stop", "a"),
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ]


async def test_temporary_child_is_never_restarted(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(
        worker("a", journal),
        worker("t", journal, restart="temporary"),
        worker("c", journal),
        strategy="one_for_all",
    )
    async with open_tree(spec) as tree:
        await tree.ref("c").cast(("crash", Code.TOOL_FAILED))
        await trio.sleep(1)
        assert [c.id for c in tree.root.which_children()] == ["a", "c"]
        assert journal.count(("stop", "t", "restart:c")) == 1
        assert [e[1] for e in journal if e[0] == "start"] == ["a", "t", "c", "a", "c"]


async def test_transient_restarts_only_after_a_crash(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(worker("t", journal, restart="transient"), worker("p", journal))
    async with open_tree(spec) as tree:
        await tree.ref("t").cast(("crash", Code.TOOL_FAILED))
        await trio.sleep(1)
        assert await tree.ref("t").call("x") == ("t", "x", 1)
        assert await tree.ref("t").call("exit") == "exiting"
        await tree.ref("p").call("exit")
        await trio.sleep(1)
        states = {c.id: (str(c.state), c.restarts) for c in tree.root.which_children()}
        assert states == {"t": ("stopped", 1), "p": ("running", 1)}
        with pytest.raises(ActorError) as caught:
            await tree.ref("t").call("x")
        assert caught.value.code is Code.ACTOR_STOPPED


async def test_start_failure_stops_started_children_in_reverse(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []

    class Broken(Actor):
        async def on_start(self) -> None:
            raise ActorError.from_code(Code.AUTH, "no key")

    spec = tree_spec(worker("a", journal), worker("b", journal), ChildSpec(id="c", actor=Broken))
    with pytest.raises(ActorError) as caught:
        async with open_tree(spec):
            pytest.fail("the block must not run")
    assert caught.value.code is Code.START_FAILED
    assert caught.value.node_id == "c"
    assert isinstance(caught.value.__cause__, ActorError)
    assert caught.value.__cause__.code is Code.AUTH
    assert _lifecycle(journal) == [("start", "a"), ("start", "b"), ("stop", "b"), ("stop", "a")]


async def test_crash_never_cancels_a_sibling(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    cancelled: list[str] = []

    class Busy(Actor):
        async def handle(self, message: Any) -> Any:
            try:
                await trio.sleep(5)
            except trio.Cancelled:
                cancelled.append("busy")
                raise
            return "done"

    spec = tree_spec(ChildSpec(id="busy", actor=Busy), worker("w", journal))
    async with open_tree(spec) as tree:
        async with trio.open_nursery() as nursery:
            result: list[Any] = []

            async def call_busy() -> None:
                result.append(await tree.ref("busy").call("go", timeout=10))

            nursery.start_soon(call_busy)
            await trio.sleep(1)
            await tree.ref("w").cast(("crash", Code.TOOL_FAILED))
        assert result == ["done"]
        assert cancelled == []
        assert trio.current_time() == 5.0


async def test_nested_supervisor_that_gives_up_is_restarted_by_parent(
    autojump_clock: MockClock,
) -> None:
    journal: list[tuple[Any, ...]] = []
    inner = tree_spec(worker("w", journal), max_restarts=1, period=5)
    spec = tree_spec(ChildSpec(id="inner", supervisor=inner, restart="transient"))
    async with open_tree(spec) as tree:
        ref = tree.ref("inner", "w")
        await ref.cast(("crash", Code.TOOL_FAILED))
        await ref.cast(("crash", Code.TOOL_FAILED))  # second within 5 s: inner gives up
        await ref.cast("survives the restart")
        await trio.sleep(1)
        assert tree.root.which_children()[0].restarts == 1
        assert tree.ref("inner", "w") is ref  # the address stays
        assert await ref.call("x") == ("w", "x", 2)
    assert [e[1] for e in journal if e[0] == "start"] == ["w", "w", "w"]
