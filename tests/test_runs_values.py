"""Run state values: copied in (types kept, plain data), read through read-only views."""

from __future__ import annotations

import copy
import json
import pickle
from collections import OrderedDict, namedtuple
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from actors import ActorError
from supervisors.runs import Edge, Llm, NodeContext, Workflow
from tests.runs_helpers import of, running, step, world

pytestmark = pytest.mark.trio

Point = namedtuple("Point", "x y")


def nested(levels: int) -> Any:
    """A value of ``levels`` nested lists around a 0."""
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


async def test_a_view_refuses_even_dict_setitem(autojump_clock: Any) -> None:
    seen: list[BaseException] = []

    async def sneaky(ctx: NodeContext) -> None:
        try:
            dict.__setitem__(ctx.state["doc"], "owner", "mallory")  # type: ignore[index]
        except TypeError as exc:
            seen.append(exc)
            raise

    async with running() as (_, runs):
        run = await runs.start(Workflow(name="w", nodes=[step("a", sneaky)]), {"doc": {"o": 1}})
        outcome = await run.wait()
    assert outcome.code == "internal"
    assert len(seen) == 1 and "dict" in str(seen[0])
    assert outcome.state == {"doc": {"o": 1}}


async def test_values_keep_their_types_and_stay_plain_data(autojump_clock: Any) -> None:
    async def make(ctx: NodeContext) -> dict[str, Any]:
        return {
            "tags": ["urgent"],
            "pair": (1, 2),
            "point": Point(1, 2),
            "seen": {"a"},
            "ordered": OrderedDict(b=1),
        }

    inputs = {"doc": {"owner": "alice", "ids": [1, 2]}}
    async with running() as (_, runs):
        run = await runs.start(
            Workflow(name="w", nodes=[step("a", make, "tags", "pair", "point", "seen", "ordered")]),
            inputs,
        )
        outcome = await run.wait()
    state = outcome.state
    assert outcome.status == "completed"
    assert type(state["tags"]) is list and state["tags"] == ["urgent"]
    assert type(state["pair"]) is tuple and state["pair"] == (1, 2)
    assert type(state["point"]) is Point and state["point"].y == 2
    assert type(state["seen"]) is set
    assert type(state["ordered"]) is dict and state["ordered"] == {"b": 1}
    assert type(state["doc"]) is dict and type(state["doc"]["ids"]) is list
    started = of(run, "run:started")[0]
    assert json.loads(json.dumps(started.inputs)) == inputs
    assert json.loads(json.dumps({k: v for k, v in state.items() if k != "seen"}))["tags"] == [
        "urgent"
    ]
    assert pickle.loads(pickle.dumps(dict(state))) == state
    completed = of(run, "node:completed")[0]
    assert json.loads(json.dumps(completed.updates["tags"])) == ["urgent"]


async def test_a_value_shared_across_a_dag_is_copied_once(autojump_clock: Any) -> None:
    shared: Any = [0]
    for _ in range(60):  # 2**60 paths: a copy that follows each one never ends
        shared = [shared, shared]

    async def make(ctx: NodeContext) -> dict[str, Any]:
        return {"x": shared}

    async with running() as (_, runs):
        outcome = await (await runs.start(Workflow(name="w", nodes=[step("a", make, "x")]))).wait()
    copied = outcome.state["x"]
    assert outcome.status == "completed"
    assert copied is not shared and copied[0] is copied[1]


async def test_nesting_boundary_is_one_hundred_levels(autojump_clock: Any) -> None:
    async def make(ctx: NodeContext) -> dict[str, Any]:
        return {"ok": nested(100), "deep": nested(101) if ctx.state.get("go") else 0}

    wf = Workflow(name="w", nodes=[step("a", make, "ok", "deep")])
    async with running() as (_, runs):
        fine = await (await runs.start(wf)).wait()
        deep = await (await runs.start(wf, {"go": True})).wait()
        with pytest.raises(ActorError, match=r"^\[input_validation\] Runs\.start: inputs must"):
            await runs.start(wf, {"x": nested(101)})
        at_limit = await (await runs.start(wf, {"x": nested(100)})).wait()
    assert fine.status == "completed" and fine.state["ok"] == nested(100)
    assert deep.code == "output_validation"
    assert deep.error is not None
    assert deep.error.message == "node 'a': 'deep' nests deeper than 100 levels (or has a cycle)"
    assert at_limit.status == "completed"


async def test_views_compare_print_and_copy_as_their_data(autojump_clock: Any) -> None:
    seen: dict[str, Any] = {}

    async def read(ctx: NodeContext) -> None:
        tags = ctx.state["tags"]
        seen["eq"] = tags == ["urgent"] and ctx.state["doc"] == {"ids": [1, 2]}
        seen["repr"] = repr(ctx.state["doc"])
        seen["str"] = str(tags)
        seen["slice"] = tags[0:1] == ["urgent"]
        seen["set"] = type(ctx.state["seen"]) is frozenset
        mutable = copy.deepcopy(ctx.state["doc"])
        mutable["ids"].append(3)
        seen["copy"] = mutable
        seen["no_append"] = not hasattr(tags, "append")
        seen["unhashable"] = ctx.state.__hash__ is None

    inputs = {"tags": ["urgent"], "doc": {"ids": [1, 2]}, "seen": {"a"}}
    async with running() as (_, runs):
        outcome = await (
            await runs.start(Workflow(name="w", nodes=[step("a", read)]), inputs)
        ).wait()
    assert outcome.status == "completed"
    assert seen == {
        "eq": True,
        "repr": "{'ids': [1, 2]}",
        "str": "['urgent']",
        "slice": True,
        "set": True,
        "copy": {"ids": [1, 2, 3]},
        "no_append": True,
        "unhashable": True,
    }
    assert outcome.state["doc"] == {"ids": [1, 2]}


@pytest.mark.parametrize("when", ["tags == ['urgent']", lambda state: state["tags"] == ["urgent"]])
async def test_conditions_compare_lists_as_lists(autojump_clock: Any, when: Any) -> None:
    async def noop(ctx: NodeContext) -> None:
        return None

    wf = Workflow(
        name="w",
        nodes=[step("a", noop), step("b", noop)],
        edges=[Edge(source="a", target="b", when=when)],
    )
    async with running() as (_, runs):
        run = await runs.start(wf, {"tags": ["urgent"]})
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert [r.node_id for r in of(run, "node:completed")] == ["a", "b"]


async def test_a_prompt_renders_a_list_as_a_list(autojump_clock: Any) -> None:
    async with world() as w:
        wf = Workflow(
            name="w", nodes=[Llm(id="a", model="m1", messages=[("user", "reply: {ids}")])]
        )
        outcome = await (await w.runs.start(wf, {"ids": [1, 2]})).wait()
    assert outcome.state["a"] == "[1, 2]"


class Unreadable(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("backing store gone")

    def __len__(self) -> int:
        return 1


async def test_inputs_that_cannot_be_read_are_input_validation(autojump_clock: Any) -> None:
    async with running() as (tree, runs):
        with pytest.raises(
            ActorError, match=r"^\[input_validation\] Runs\.start: inputs could not be read"
        ) as caught:
            await runs.start(Workflow(name="w", nodes=[step("a", lambda ctx: None)]), Unreadable())
        assert isinstance(caught.value.__cause__, RuntimeError)
        cyclic: dict[str, Any] = {}
        cyclic["me"] = cyclic
        with pytest.raises(ActorError, match=r"^\[input_validation\] Runs\.start: inputs must"):
            await runs.start(Workflow(name="w", nodes=[step("a", lambda ctx: None)]), cyclic)
        assert not runs.live
        assert [c.id for c in tree.root.which_children()] == ["runs"]


async def test_a_node_passing_on_what_it_read_writes_plain_data(autojump_clock: Any) -> None:
    async def pass_on(ctx: NodeContext) -> dict[str, Any]:
        return {"copy": ctx.state["items"], "doc": ctx.state["doc"]}

    wf = Workflow(name="w", nodes=[step("a", pass_on, "copy", "doc")])
    async with running() as (_, runs):
        outcome = await (await runs.start(wf, {"items": [1, [2, 3]], "doc": {"k": (4,)}})).wait()
    assert outcome.status == "completed"
    assert type(outcome.state["copy"]) is list and outcome.state["copy"] == [1, [2, 3]]
    assert type(outcome.state["copy"][1]) is list
    assert type(outcome.state["doc"]) is dict and outcome.state["doc"] == {"k": (4,)}
    assert json.loads(json.dumps(outcome.state["copy"])) == [1, [2, 3]]


async def test_a_log_line_shows_a_bounded_summary_of_state_values() -> None:
    from actors.events.runs import LOGGED_CHARS, LOGGED_KEYS, logged_values

    values = {"big": 10**5000, "text": "v" * 300, **{f"x{i}": i for i in range(25)}}
    shown = logged_values(values)
    assert (LOGGED_KEYS, LOGGED_CHARS) == (20, 200)
    assert shown["big"] == "<unprintable int: ValueError>"
    assert shown["text"].startswith("'vvv") and "..." in shown["text"]
    assert len(shown["text"]) <= 200
    assert list(shown)[-1] == "…" and shown["…"] == "7 more keys"
    assert len(shown) == 21
    assert logged_values({"k" * 100: [1, [2, [3, [4, [5]]]]]}) == {"k" * 64: "[1, [2, [3, [...]]]]"}
    long = logged_values({"l": list(range(1000))})["l"]
    assert long == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...]"
