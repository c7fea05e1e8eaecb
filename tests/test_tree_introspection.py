"""Tree.which_children / count_children: the root's children, or a nested supervisor's
by path — as on the supervisors themselves."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Actor, ActorError
from supervisors import ChildSpec, ChildState, SupervisorSpec, open_tree


class Idle(Actor):
    async def handle(self, message: Any) -> Any:
        return message


SPEC = SupervisorSpec(
    children=[
        ChildSpec(id="a", actor=Idle),
        ChildSpec(id="sub", supervisor=SupervisorSpec(children=[ChildSpec(id="b", actor=Idle)])),
    ]
)


async def test_the_tree_lists_the_roots_children_and_a_nested_supervisors(
    autojump_clock: Any,
) -> None:
    async with open_tree(SPEC) as tree:
        assert [(c.id, c.kind, c.state) for c in tree.which_children()] == [
            ("a", "worker", ChildState.RUNNING),
            ("sub", "supervisor", ChildState.RUNNING),
        ]
        assert tree.which_children() == tree.root.which_children()
        assert [(c.id, c.kind) for c in tree.which_children("sub")] == [("b", "worker")]
        assert tree.which_children("sub")[0].ref == tree.ref("sub", "b")
        assert tree.count_children() == {"specs": 2, "active": 2, "supervisors": 1, "workers": 1}
        assert tree.count_children("sub") == {
            "specs": 1,
            "active": 1,
            "supervisors": 0,
            "workers": 1,
        }
        with pytest.raises(ActorError, match=r"^\[child_not_found\] .*'a' is not a supervisor"):
            tree.which_children("a")
        with pytest.raises(ActorError, match=r"^\[child_not_found\]"):
            tree.count_children("nope")
