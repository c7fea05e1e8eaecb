"""A pooled stream's typed errors, field by field: a second reader, a stream read after
its block was left, a reader waiting when the block is left, a target streaming something
that is not an event."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, open_runtime
from actors.providers import LlmResponse, StreamEvent
from supervisors import ProviderPool, Target
from tests.pool_helpers import request

LEFT = "the stream's block was left before the stream ended"


class Drip(Actor):
    """Streams "a", then "b" 10 s later, then answers "ab"."""

    async def handle(self, message: Any) -> Any:
        await message.sink.send(StreamEvent(kind="text", text="a"))
        await trio.sleep(10)
        await message.sink.send(StreamEvent(kind="text", text="b"))
        usage = Usage(input_tokens=1, output_tokens=1)
        return LlmResponse(content="ab", usage=usage, provider="W", model="m1")


class NotEvents(Actor):
    """Streams a string: not a provider actor."""

    async def handle(self, message: Any) -> Any:
        await message.sink.send("not an event")
        return LlmResponse(content="x")


async def _pool(runtime: Any, actor: type[Actor]) -> ProviderPool:
    ref = await runtime.spawn(actor)
    return ProviderPool([Target(ref=ref, provider="W", model="m1")])


async def test_a_second_reader_is_refused_as_not_delivered(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        pool = await _pool(runtime, Drip)
        async with pool.stream(request()) as events:
            assert (await events.__anext__()).text == "a"
            texts: list[str] = []

            async def read() -> None:
                texts.append((await events.__anext__()).text)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                await trio.sleep(1)
                with pytest.raises(ActorError) as caught:
                    await events.__anext__()
            assert texts == ["b"]
            assert trio.current_time() == 10.0
            assert [event.text async for event in events] == []
        assert events.response is not None and events.response.content == "ab"
    error = caught.value
    assert (error.code, error.message) == (
        Code.INPUT_VALIDATION,
        "another task is reading this stream",
    )
    assert error.delivered is False
    assert events.error is None  # the refused reader did not end the stream


async def test_a_stream_read_after_its_block_was_left_is_cancelled(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        pool = await _pool(runtime, Drip)
        async with pool.stream(request()) as events:
            pass
        with pytest.raises(ActorError) as caught:
            await events.__anext__()
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()  # ended: it stays ended
    assert (caught.value.code, caught.value.message) == (Code.CANCELLED, LEFT)
    assert events.error is caught.value


async def test_a_reader_waiting_when_the_block_is_left_gets_cancelled(
    autojump_clock: MockClock,
) -> None:
    errors: list[ActorError] = []
    async with open_runtime() as runtime:
        pool = await _pool(runtime, Drip)
        async with trio.open_nursery() as outside, pool.stream(request()) as events:
            assert (await events.__anext__()).text == "a"

            async def read() -> None:
                with pytest.raises(ActorError) as caught:
                    await events.__anext__()
                errors.append(caught.value)

            outside.start_soon(read)
            await trio.sleep(1)  # the reader waits for "b"
        assert trio.current_time() == 1.0
        [attempt] = pool.ledger
        assert (attempt.outcome, attempt.code) == ("cancelled", None)
    [error] = errors
    assert (error.code, error.message, error.usage) == (Code.CANCELLED, LEFT, None)
    assert events.error is error


async def test_a_target_streaming_something_else_is_internal_naming_it(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        pool = await _pool(runtime, NotEvents)
        with pytest.raises(ActorError) as caught:
            async with pool.stream(request()) as events:
                async for _ in events:
                    pass
    error = caught.value
    assert (error.code, error.provider, error.model) == (Code.INTERNAL, "W", "m1")
    assert error.message == "target W/m1 streamed a str, not a StreamEvent"
    assert events.error is error
