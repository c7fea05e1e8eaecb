"""A pooled stream whose deadline passes before its consumer reads: no attempt can
start any more, and the request ends at once as exhausted (it used to spin, waking for
targets that were ready but could no longer be tried)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from actors.providers import LlmResponse, StreamEvent
from supervisors import ProviderPool, Target
from tests.pool_helpers import request


class OneEvent(Actor):
    """Streams one event, then answers; counts the streams it was asked for."""

    max_deferred = 4

    def __init__(self, asked: list[float]) -> None:
        self.asked = asked

    async def handle(self, message: Any) -> Any:
        self.asked.append(trio.current_time())
        return self.defer(self.work, message)

    async def work(self, message: Any) -> LlmResponse:
        await message.sink.send(StreamEvent(kind="text", text="only"))
        return LlmResponse(content="only", provider="W", model="m1")


async def test_a_stream_read_after_its_deadline_ends_exhausted_at_once(
    autojump_clock: MockClock,
) -> None:
    asked: list[float] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: OneEvent(asked))
        pool = ProviderPool([Target(ref=ref, provider="W", model="m1")], deadline=1.0)
        with trio.fail_after(5):
            async with pool.stream(request()) as events:
                await trio.sleep(2)
                with pytest.raises(ActorError) as raised:
                    async for _ in events:
                        pass  # pragma: no cover - nothing is streamed
        assert raised.value.code is Code.ALL_PROVIDERS_FAILED
        assert raised.value.attempts == ()
        assert trio.current_time() == 2.0
        assert asked == []
        # Read in time, the same pool streams.
        async with pool.stream(request()) as events:
            assert [(event.kind, event.text) async for event in events] == [("text", "only")]
        assert asked == [2.0]
