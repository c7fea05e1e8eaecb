"""``SystemExit`` leaves the runtime's blocks bare, as ``KeyboardInterrupt`` does (issue
28): ``sys.exit()`` in a handler, in a workflow's step or in the block itself stops the
program with its exit code, never a ``BaseExceptionGroup`` to unpack — whatever was
running is cancelled on the way. With a real error beside it the group is kept (nothing
is dropped)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, open_runtime
from actors.journal import MemoryStore
from actors.nursery import open_nursery_unwrapped
from supervisors import ChildSpec, SupervisorSpec, open_tree
from supervisors.runs import NodeContext, Step, Workflow, open_journal, open_runs


class Exits(Actor):
    async def handle(self, message: Any) -> Any:
        sys.exit(message)


class Boom(Exception):
    pass


async def test_sys_exit_in_a_handler_leaves_open_runtime_bare(autojump_clock: MockClock) -> None:
    with pytest.raises(SystemExit) as caught:
        async with open_runtime() as runtime:
            ref = await runtime.spawn(Exits, name="exits")
            await ref.cast(3)
            await trio.sleep_forever()
    assert type(caught.value) is SystemExit and caught.value.code == 3


async def test_sys_exit_in_a_handler_called_leaves_open_runtime_bare(
    autojump_clock: MockClock,
) -> None:
    with pytest.raises(SystemExit) as caught:
        async with open_runtime() as runtime:
            ref = await runtime.spawn(Exits, name="exits")
            await ref.call(4)
    assert type(caught.value) is SystemExit and caught.value.code == 4


async def test_sys_exit_in_a_supervised_child_leaves_open_tree_bare(
    autojump_clock: MockClock,
) -> None:
    spec = SupervisorSpec(children=[ChildSpec(id="exits", actor=Exits)])
    with pytest.raises(SystemExit) as caught:
        async with open_tree(spec) as tree:
            await tree.ref("exits").cast(5)
            await trio.sleep_forever()
    assert type(caught.value) is SystemExit and caught.value.code == 5


async def _exit_step(ctx: NodeContext) -> None:
    sys.exit(6)


async def test_sys_exit_in_a_step_leaves_open_runs_bare(autojump_clock: MockClock) -> None:
    flow = Workflow(name="exiting", nodes=[Step(id="s", fn=_exit_step)])
    with pytest.raises(SystemExit) as caught:
        async with (
            open_journal(MemoryStore()) as journal,
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree, journal=journal) as runs,
        ):
            run = await runs.start(flow)
            await run.wait()
            await trio.sleep_forever()
    assert type(caught.value) is SystemExit and caught.value.code == 6


async def test_sys_exit_in_the_block_leaves_the_nested_blocks_bare(
    autojump_clock: MockClock,
) -> None:
    cancelled: list[str] = []

    async def child() -> None:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled.append("inner")
            raise

    with pytest.raises(SystemExit) as caught:
        async with (
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree),
            open_nursery_unwrapped() as nursery,
        ):
            nursery.start_soon(child)
            await trio.sleep(1)
            sys.exit(7)
    assert type(caught.value) is SystemExit and caught.value.code == 7
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert cancelled == ["inner"]


async def test_a_system_exit_with_a_real_error_beside_it_keeps_the_group(
    autojump_clock: MockClock,
) -> None:
    async def failing(error: BaseException) -> None:
        raise error

    with pytest.RaisesGroup(SystemExit, Boom, flatten_subgroups=True):
        async with open_nursery_unwrapped() as nursery:
            nursery.start_soon(failing, SystemExit(1))
            nursery.start_soon(failing, Boom())
            await trio.sleep(2)
