"""A block's own exception leaves open_runtime / open_tree / the helper as raised."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from actors import open_runtime
from actors.nursery import open_nursery_unwrapped
from supervisors import SupervisorSpec, open_tree


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
