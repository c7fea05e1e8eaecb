"""The consumer's side of a pooled stream: events by ``async for``, then the answer or
the typed failure (see :meth:`supervisors.pool.pool.ProviderPool.stream`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors import ActorError, Code
from actors.lowlevel import open_nursery_unwrapped
from actors.providers import LlmResponse, StreamEvent
from supervisors.pool.race import Race, Runner
from supervisors.resilience.attempt import CutOff, TurnedAway


@asynccontextmanager
async def streaming(start: Callable[[trio.Nursery], Race]) -> AsyncIterator[PoolStream]:
    """A pooled stream whose attempts run in a nursery of the block: ``start`` makes
    its :class:`Race` there. Leaving the block cancels every attempt in flight, and
    reading on afterwards raises ``cancelled`` (unless the stream had ended)."""
    async with open_nursery_unwrapped() as nursery:
        events = PoolStream(start(nursery))
        try:
            yield events
        finally:
            events._leave()
            nursery.cancel_scope.cancel(reason="stream consumer left")


class PoolStream:
    """The events of one pooled stream; iterate it with ``async for``.

    After a complete stream :attr:`response` is the assembled answer; after a failure
    :attr:`error` is what was raised. :attr:`attempts` lists this request's ledger
    entries so far.
    """

    def __init__(self, race: Race) -> None:
        self._race = race
        self._runner: Runner | None = None
        self._reading = False
        self._left = False  # the stream's block was left
        self.response: LlmResponse | None = None
        self.error: ActorError | None = None

    @property
    def attempts(self) -> list[Any]:
        """The stream's attempts so far, in order (each an :class:`~supervisors.Attempt`)."""
        return list(self._race.run.attempts)

    def __aiter__(self) -> PoolStream:
        return self

    async def __anext__(self) -> StreamEvent:
        """The next event. One task reads at a time (another gets ``input_validation``);
        after the block was left, a stream that had not ended raises ``cancelled``."""
        if self._reading:
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "another task is reading this stream", delivered=False
            )
        self._reading = True
        try:
            return await self._next()
        finally:
            self._reading = False

    async def _next(self) -> StreamEvent:
        if self.response is not None:
            raise StopAsyncIteration
        if self.error is not None:
            raise StopAsyncIteration
        if self._left:
            self.error = ActorError.from_code(
                Code.CANCELLED, "the stream's block was left before the stream ended"
            )
            raise self.error
        runner = self._runner
        if runner is None:
            try:
                runner = self._runner = await self._race.settle()
            except ActorError as err:
                self.error = err
                raise
            await runner.peeked.wait()  # a stream that won by its answer: its first event
            first = runner.first
            if first is not None:
                return self._event(runner, first)
        receive = runner.receive
        assert receive is not None  # a stream's runner has its channel
        try:
            event = await receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return self._end(runner)
        runner.tap.events += 1
        return self._event(runner, event)

    def _event(self, runner: Runner, event: Any) -> StreamEvent:
        """``event`` handed to the consumer — or, if a target streamed something that is
        not a :class:`StreamEvent` (not a provider actor), ``internal``."""
        if not isinstance(event, StreamEvent):
            target = runner.slot.target
            self.error = ActorError.from_code(
                Code.INTERNAL,
                f"target {target.provider}/{target.model} streamed a "
                f"{type(event).__name__}, not a StreamEvent",
                provider=target.provider,
                model=target.model,
            )
            raise self.error
        if event.kind == "text":
            runner.tap.text += event.text
        return event

    def _end(self, runner: Runner) -> StreamEvent:
        result = runner.result
        if isinstance(result, LlmResponse):
            self.response = result
            raise StopAsyncIteration
        error = result.error if isinstance(result, TurnedAway | CutOff) else result
        if not isinstance(error, ActorError):  # the attempt was cancelled: the block left
            error = ActorError.from_code(
                Code.CANCELLED, "the stream's block was left before the stream ended"
            )
        if runner.tap.usage is not None:
            error.usage = runner.tap.usage  # as in the ledger (which says if estimated)
        self.error = error
        raise error

    def _leave(self) -> None:
        self._left = True
