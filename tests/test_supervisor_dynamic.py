"""Dynamic children, introspection, shutdown order, auto_shutdown, specs from TOML."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing import capture_events
from supervisors import ChildSpec, SupervisorSpec, load_spec, open_tree
from tests.sup_helpers import tree_spec, worker


async def test_dynamic_children_lifecycle(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    async with open_tree(tree_spec(worker("a", journal), max_children=3)) as tree:
        sup = tree.root
        ref = await sup.start_child(worker("d1", journal))
        assert ref is not None
        assert await ref.call("x") == ("d1", "x", 1)
        with pytest.raises(ActorError) as taken:
            await sup.start_child(worker("a", journal))
        assert taken.value.code is Code.NAME_TAKEN
        await sup.start_child(worker("d2", journal))
        with pytest.raises(ActorError) as too_many:
            await sup.start_child(worker("d3", journal))
        assert too_many.value.code is Code.MAX_CHILDREN

        with pytest.raises(ActorError) as running:
            await sup.delete_child("d1")
        assert running.value.code is Code.CHILD_RUNNING
        with pytest.raises(ActorError) as again:
            await sup.restart_child("d1")
        assert again.value.code is Code.CHILD_RUNNING

        await sup.terminate_child("d1")
        assert [(c.id, str(c.state)) for c in sup.which_children()] == [
            ("a", "running"),
            ("d1", "stopped"),
            ("d2", "running"),
        ]
        assert sup.count_children() == {"specs": 3, "active": 2, "supervisors": 0, "workers": 3}
        restarted = await sup.restart_child("d1")
        assert restarted is not None
        assert await restarted.call("y") == ("d1", "y", 1)
        await sup.terminate_child("d1")
        await sup.delete_child("d1")
        with pytest.raises(ActorError) as missing:
            await sup.terminate_child("d1")
        assert missing.value.code is Code.CHILD_NOT_FOUND


async def test_terminate_drops_a_temporary_spec(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    async with open_tree(tree_spec(worker("t", journal, restart="temporary"))) as tree:
        await tree.root.terminate_child("t")
        assert tree.root.which_children() == []


async def test_ref_stop_terminates_a_supervised_child(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    async with open_tree(tree_spec(worker("p", journal))) as tree:
        await tree.ref("p").stop()
        await trio.sleep(1)
        assert [(c.id, str(c.state), c.restarts) for c in tree.root.which_children()] == [
            ("p", "stopped", 0)
        ]


async def test_shutdown_is_reverse_order_and_dynamic_children_go_first(
    autojump_clock: MockClock,
) -> None:
    journal: list[tuple[Any, ...]] = []
    with capture_events("child.started") as started:
        async with open_tree(tree_spec(*(worker(n, journal) for n in "abc"))) as tree:
            await tree.root.start_child(worker("x", journal))
            await tree.root.start_child(worker("y", journal))
            journal.clear()
    stops = [e[1] for e in journal if e[0] == "stop"]
    assert sorted(stops[:2]) == ["x", "y"]
    assert stops[2:] == ["c", "b", "a"]
    assert [e.child for e in started] == ["a", "b", "c", "x", "y"]


async def test_auto_shutdown_any_significant(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(
        worker("keep", journal),
        worker("job", journal, restart="transient", significant=True),
        auto_shutdown="any_significant",
    )
    async with open_tree(spec) as tree:
        await tree.ref("job").call("exit")
        await trio.sleep(1)
        assert [str(c.state) for c in tree.root.which_children()] == ["stopped", "stopped"]


async def test_auto_shutdown_all_significant(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(
        worker("j1", journal, restart="transient", significant=True),
        worker("j2", journal, restart="temporary", significant=True),
        auto_shutdown="all_significant",
    )
    async with open_tree(spec) as tree:
        await tree.ref("j1").call("exit")
        await trio.sleep(1)
        assert str(tree.root.which_children()[0].state) == "stopped"
        assert await tree.ref("j2").call("x") == ("j2", "x", 1)
        await tree.ref("j2").call("exit")
        await trio.sleep(1)
        assert tree.root.count_children()["active"] == 0


def test_significant_permanent_child_is_rejected() -> None:
    with pytest.raises(ActorError, match="permanent child cannot be significant") as caught:
        ChildSpec(id="x", actor=object, significant=True)  # type: ignore[arg-type]
    assert caught.value.code is Code.CONFIG_INVALID


def test_spec_from_toml() -> None:
    spec = load_spec(
        """
        strategy = "rest_for_one"
        max_restarts = 2
        period = 10
        auto_shutdown = "never"

        [backoff]
        initial = 1
        max = 30
        jitter = 0.2

        [policy.by_code]
        tool_failed = "resume"

        [[children]]
        id = "a"
        actor = "tests.sup_helpers:Worker"
        args = ["a", []]
        shutdown = "brutal"

        [[children]]
        id = "inner"
        restart = "transient"
        [children.supervisor]
        strategy = "one_for_all"
        [[children.supervisor.children]]
        id = "x"
        actor = "tests.sup_helpers:Worker"
        args = ["x", []]
        """
    )
    assert isinstance(spec, SupervisorSpec)
    assert (spec.strategy, spec.max_restarts, spec.period) == ("rest_for_one", 2, 10.0)
    assert (spec.backoff.initial, spec.backoff.max, spec.backoff.jitter) == (1.0, 30.0, 0.2)
    assert spec.children[0].shutdown == "brutal"
    assert spec.children[1].supervisor is not None
    assert spec.children[1].supervisor.strategy == "one_for_all"
    assert str(next(iter(spec.policy.by_code.values()))) == "resume"


def test_spec_errors_name_every_offending_field() -> None:
    with pytest.raises(ActorError) as caught:
        load_spec(
            {
                "strategy": "one_for_some",
                "max_restarts": "many",
                "children": [{"id": "a", "actor": "tests.sup_helpers:Worker", "restart": "often"}],
                "colour": "blue",
            }
        )
    err = caught.value
    assert err.code is Code.CONFIG_INVALID
    for field in ("$.strategy", "$.max_restarts", "$.children[0].restart", "colour"):
        assert field in err.message


def test_spec_rejects_a_bad_actor_path() -> None:
    with pytest.raises(ActorError) as caught:
        load_spec({"children": [{"id": "a", "actor": "no_colon_here"}]})
    assert "$.children[0].actor" in caught.value.message
