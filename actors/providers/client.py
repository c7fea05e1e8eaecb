"""The caller's side of a provider actor: :class:`ProviderClient` is an ``LlmProvider``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from actors.actor import ActorRef
from actors.errors import ActorError
from actors.nursery import open_nursery_unwrapped
from actors.providers.base import (
    Complete,
    LlmProvider,
    LlmRequest,
    LlmResponse,
    Stream,
    StreamEvent,
    StreamReader,
)


class ProviderClient(LlmProvider):
    """Calls a provider actor. Cancelling the caller cancels the HTTP request.

    ``stream()`` hands events over a zero-capacity channel: the adapter sends the next
    event only when the consumer takes it (backpressure). Leaving the block early — a
    ``break``, an error, a cancel — cancels the request and closes the upstream
    connection. A consumer that stops reading but stays in the block holds the request
    (and the upstream connection) open until it leaves or ``timeout`` fires —
    ``read_timeout`` does not apply, nothing is being read. ``timeout`` (seconds, for the
    whole call or stream) fails with ``call_timeout``, which carries no partial text.
    """

    def __init__(self, ref: ActorRef, name: str, *, timeout: float | None = None) -> None:
        self.ref = ref
        self.name = name
        self.timeout = timeout

    async def complete(self, request: LlmRequest) -> LlmResponse:
        reply: LlmResponse = await self.ref.call(
            Complete(request), timeout=self.timeout, propagate_cancel=True
        )
        return reply

    @asynccontextmanager
    async def stream(self, request: LlmRequest) -> AsyncIterator[StreamReader]:
        send, receive = trio.open_memory_channel[StreamEvent](0)
        reader = StreamReader(receive)

        async def run() -> None:
            try:
                reader.response = await self.ref.call(
                    Stream(request, send), timeout=self.timeout, propagate_cancel=True
                )
            except ActorError as err:
                reader.error = err  # raised to the consumer when the events run out
            finally:
                send.close()

        async with open_nursery_unwrapped() as nursery:
            nursery.start_soon(run)
            try:
                yield reader
            finally:
                receive.close()
                nursery.cancel_scope.cancel(reason="stream consumer left")
