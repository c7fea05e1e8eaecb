"""A call's receipt: whether the message reached the actor when its caller left cancelled."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from actors import Actor, Receipt, open_runtime


class Slow(Actor):
    """Takes 10 s a message; counts what it handled."""

    def __init__(self) -> None:
        self.handled: list[object] = []

    async def handle(self, message: object) -> object:
        self.handled.append(message)
        await trio.sleep(10)
        return message


async def test_a_caller_already_cancelled_withdraws_its_message(autojump_clock: MockClock) -> None:
    slow = Slow()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: slow)
        receipt = Receipt()
        with trio.CancelScope() as scope:
            scope.cancel()
            await ref.call("never", receipt=receipt, timeout=None)
        await trio.sleep(20)
    assert (receipt.delivered, slow.handled) == (False, [])


async def test_a_caller_cancelled_while_queued_withdraws_its_message(
    autojump_clock: MockClock,
) -> None:
    slow = Slow()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: slow)
        first, second = Receipt(), Receipt()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: ref.call("first", receipt=first, timeout=None))
            await trio.sleep(1)
            with trio.move_on_after(2):  # queued behind "first" (busy for 10 s)
                await ref.call("second", receipt=second, timeout=None)
        assert trio.current_time() == 10.0
    assert (first.delivered, second.delivered, slow.handled) == (None, False, ["first"])


async def test_a_caller_cancelled_while_handled_was_delivered(autojump_clock: MockClock) -> None:
    slow = Slow()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: slow)
        receipt = Receipt()
        with trio.move_on_after(3):
            await ref.call("taken", receipt=receipt, timeout=None)
    assert (receipt.delivered, slow.handled) == (True, ["taken"])


async def test_a_caller_that_is_answered_leaves_the_receipt_empty(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Slow)
        receipt = Receipt()
        assert await ref.call("x", receipt=receipt, timeout=None) == "x"
    assert receipt.delivered is None
