"""A block's own exception leaves open_runtime / open_tree / the helper as raised."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from actors import open_runtime
from actors.journal import MemoryStore
from actors.nursery import open_nursery_unwrapped
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import open_journal, open_runs


class Boom(Exception):
    pass


async def test_helper_reraises_unwrapped_and_cancels_children(autojump_clock: MockClock) -> None:
    cancelled: list[float] = []

    async def child() -> None:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled.append(trio.current_time())
            raise

    with pytest.raises(Boom):
        async with open_nursery_unwrapped() as nursery:
            nursery.start_soon(child)
            await trio.sleep(1)
            raise Boom
    assert cancelled == [1.0]


async def test_runtime_block_error_is_unwrapped(autojump_clock: MockClock) -> None:
    with pytest.raises(Boom):
        async with open_runtime():
            raise Boom


async def test_tree_block_error_is_unwrapped(autojump_clock: MockClock) -> None:
    with pytest.raises(Boom):
        async with open_tree(SupervisorSpec()):
            raise Boom


async def test_a_block_error_of_the_journal_and_the_runs_is_unwrapped(
    autojump_clock: MockClock,
) -> None:
    with pytest.raises(Boom):
        async with open_journal(MemoryStore()):
            raise Boom
    with pytest.raises(Boom):
        async with open_tree(SupervisorSpec()) as tree, open_runs(tree):
            raise Boom


async def test_ctrl_c_leaves_the_nested_blocks_as_one_bare_keyboard_interrupt(
    autojump_clock: MockClock,
) -> None:
    """KeyboardInterrupt is raised in the main task, inside the user's blocks: it comes
    out of each of them as itself, its children cancelled on the way."""
    cancelled: list[str] = []

    async def child(name: str) -> None:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled.append(name)
            raise

    with pytest.raises(KeyboardInterrupt) as caught:
        async with (
            open_journal(MemoryStore()) as journal,
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree, journal=journal),
            open_nursery_unwrapped() as nursery,
        ):
            nursery.start_soon(child, "inner")
            await trio.sleep(1)
            raise KeyboardInterrupt
    assert type(caught.value) is KeyboardInterrupt
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert cancelled == ["inner"]


async def test_a_keyboard_interrupt_with_a_real_error_beside_it_keeps_the_group(
    autojump_clock: MockClock,
) -> None:
    async def failing(error: type[BaseException]) -> None:
        raise error  # at once: both tasks run in the same batch

    with pytest.RaisesGroup(KeyboardInterrupt, Boom, flatten_subgroups=True):
        async with open_nursery_unwrapped() as nursery:
            nursery.start_soon(failing, KeyboardInterrupt)
            nursery.start_soon(failing, Boom)
            await trio.sleep(2)
    # Only interrupts and cancels: the interrupt alone.
    with pytest.raises(KeyboardInterrupt):
        async with open_nursery_unwrapped() as nursery:

            async def interrupted() -> None:
                raise KeyboardInterrupt

            nursery.start_soon(interrupted)
            await trio.sleep(5)
