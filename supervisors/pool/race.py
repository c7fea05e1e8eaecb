"""Attempts as tasks: hedging, and streams that fall back only before their first event.

A :class:`Race` runs a request's attempts in a nursery, at most ``width`` at once (2 with
hedging, else 1). :meth:`Race.settle` walks the chain like the pool's sequential loop and
returns the winning :class:`Runner`:

* for a completion, the first attempt that answers;
* for a stream, the first attempt whose first event arrived (or that answered with no
  event at all). From then on the stream is *committed*: its events go to the consumer
  and a failure is the consumer's, typed, with the partial text — no other target is
  tried. An attempt that failed before its first event was handed over is an ordinary
  failure: the chain moves on.

Hedging (``hedge_after``): when the running attempt has produced no answer (no first
event, for a stream) ``hedge_after`` seconds after it started, the next admissible target
is started beside it; the first to win is kept and the others are cancelled — their
provider requests closed, their ledger entries ``cancelled`` (no breaker verdict, no
charge). A failure of one of them routes through the chain as usual while the other runs.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import trio

from actors import ActorError
from actors.providers import Complete, LlmResponse, Stream, StreamEvent
from supervisors.pool.attempt import Attempter, Failure, PooledRequest, Tap, apply
from supervisors.pool.chain import Slot
from supervisors.resilience.attempt import CutOff

Result = LlmResponse | Failure
Kind = Literal["first", "done"]
#: The pool's wait (sleep until a target is admissible, or end the chain) and its end of
#: the chain (raise ``all_providers_failed``, unless the escalation hook goes on).
Step = Callable[[PooledRequest], Awaitable[None]]


class Runner:
    """One attempt running as a task."""

    __slots__ = ("first", "hedge", "peeked", "receive", "result", "scope", "slot", "tap")

    def __init__(self, slot: Slot, hedge: bool) -> None:
        self.slot = slot
        self.hedge = hedge
        self.scope = trio.CancelScope()
        self.result: Result | None = None
        self.first: StreamEvent | None = None
        self.receive: trio.MemoryReceiveChannel[StreamEvent] | None = None
        self.peeked = trio.Event()  # a stream's first event taken (or none will come)
        self.tap = Tap()


class Race:
    """The attempts of one request, as tasks in ``nursery`` (see the module docstring)."""

    def __init__(
        self,
        run: PooledRequest,
        nursery: trio.Nursery,
        *,
        attempter: Attempter,
        hedge_after: float | None,
        wait: Step,
        exhausted: Step,
        stream: bool,
    ) -> None:
        self.run = run
        self.nursery = nursery
        self.attempter = attempter
        self.hedge_after = hedge_after
        self.wait = wait
        self.exhausted = exhausted
        self.stream = stream
        self.width = 1 if hedge_after is None else 2
        self.running: dict[Slot, Runner] = {}
        self._send, self._outcomes = trio.open_memory_channel[tuple[Kind, Runner, Any]](math.inf)

    async def settle(self) -> Runner:
        """Run the chain until an attempt wins (see the module docstring); the other
        attempts are cancelled. Raises what ends the request."""
        run, chain, running = self.run, self.run.chain, self.running
        hedge_due = math.inf  # pragma: no mutate: read only while running, set by each start
        while True:
            now = trio.current_time()
            if (
                len(running) < self.width
                and (not running or hedge_due <= now)
                and now < run.deadline_at  # past it, the cuts of those running are awaited
            ):
                slot = chain.pick(now, running)
                if slot is not None:
                    self._start(slot, hedge=bool(running))
                    hedge_due = math.inf if self.hedge_after is None else now + self.hedge_after
                    continue
                if running:  # nothing to hedge with now: look again when one is free
                    free_at = chain.wake_at(running)
                    hedge_due = math.inf if free_at is None or free_at <= now else free_at
            if not running:
                await self.wait(run)
                continue
            outcome = None
            hedging = len(running) < self.width and now < run.deadline_at
            with trio.move_on_at(hedge_due if hedging else math.inf):
                outcome = await self._outcomes.receive()
            if outcome is not None:  # else the hedge is due: the loop starts one
                kind, runner, value = outcome
                winner = self._outcome(kind, runner, value)
                if winner is not None:
                    for other in running.values():
                        other.scope.cancel()
                    return winner
                if kind == "done" and isinstance(value, CutOff) and not running:
                    # The deadline cut every attempt running (each posts its cut): the
                    # chain is exhausted once, when the last one is in — outside the
                    # hedge timer, as a hook may take long.
                    await self.exhausted(run)
            await trio.lowlevel.checkpoint()

    def _outcome(self, kind: Kind, runner: Runner, value: Any) -> Runner | None:
        """Act on one outcome; the winner, if it is one."""
        if kind == "first":
            if runner.slot not in self.running or runner.result is not None:
                return None  # it already won by its answer, or failed before the event
            runner.tap.events = 1  # committed: a failure from now on is partial
            del self.running[runner.slot]
            return runner
        del self.running[runner.slot]
        result = value
        if isinstance(result, _Raise):
            raise result.error
        if isinstance(result, LlmResponse):
            return runner
        apply(self.run.chain, runner.slot, result)  # a stop raises; a cut: settle() ends
        return None

    def _start(self, slot: Slot, *, hedge: bool) -> None:
        runner = Runner(slot, hedge)
        self.running[slot] = runner
        self.nursery.start_soon(self._stream if self.stream else self._complete, runner)

    async def _complete(self, runner: Runner) -> None:
        run = self.run
        message = Complete.unchecked(run.request_for(runner.slot.target.model))
        with runner.scope:
            await self._attempt(runner, message, None)

    async def _stream(self, runner: Runner) -> None:
        run = self.run
        send, receive = trio.open_memory_channel[StreamEvent](0)
        runner.receive = receive
        message = Stream(run.request_for(runner.slot.target.model), send)

        async def peek() -> None:
            try:
                first = await receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return  # no event: the attempt's own ending says why
            finally:
                runner.peeked.set()
            runner.first = first  # kept here too: the answer may be posted before it
            self._send.send_nowait(("first", runner, first))

        with runner.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peek)
                with send:
                    await self._attempt(runner, message, runner.tap)

    async def _attempt(self, runner: Runner, message: Any, tap: Tap | None) -> None:
        """Run the attempt; its result (or the error that ends the request) is posted
        as a ``done`` outcome, and kept on the runner before the stream's channel closes."""
        try:
            result: Any = await self.attempter.attempt(
                self.run, runner.slot.target, message, tap=tap, hedge=runner.hedge
            )
        except ActorError as err:  # a spent budget: it ends the request
            result = _Raise(err)
        runner.result = result if not isinstance(result, _Raise) else result.error
        self._send.send_nowait(("done", runner, result))


class _Raise:
    """An error that ends the request, posted from a runner to :meth:`Race.settle`."""

    __slots__ = ("error",)

    def __init__(self, error: ActorError) -> None:
        self.error = error
