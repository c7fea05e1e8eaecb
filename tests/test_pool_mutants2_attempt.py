"""An attempt's bookkeeping, pinned where a mutant showed it unpinned: a stream that
fails after its events reached the consumer (the partial text the provider reports or the
consumer received, the usage reported, reported before any output, or not at all), a
stream cut by the deadline after its events, and a waiting request woken when a probe in
flight is withdrawn."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, fail, open_runtime
from actors.providers import LlmResponse, StreamEvent
from supervisors import Breaker, ProviderPool, Resilience, Target
from tests.pool_helpers import request

#: The pool's estimate of request()'s prompt (``hello``: 5 characters).
PROMPT = request().estimated_prompt_tokens()


def tokens(given: int, output: int) -> Usage:
    return Usage(input_tokens=given, output_tokens=output)


def text(*pieces: str) -> list[StreamEvent]:
    return [StreamEvent(kind="text", text=piece) for piece in pieces]


class Streams(Actor):
    """Streams ``events``, then waits ``stall`` seconds and fails with ``failure`` (a wait
    after the last event: the stream is handed over before it fails)."""

    def __init__(self, events: list[StreamEvent], failure: Any, stall: float = 0.0) -> None:
        self.events, self.failure, self.stall = events, failure, stall

    async def handle(self, message: Any) -> Any:
        for event in self.events:
            await message.sink.send(event)
        await trio.sleep(self.stall)
        return self.failure


async def _streamed(actor: Streams, **options: Any) -> tuple[list[str], ActorError, Any]:
    """Stream request() from a pool over ``actor``: the texts received, the error the
    consumer got, the pool."""
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: actor)
        pool = ProviderPool([Target(ref=ref, provider="A", model="m1")], **options)
        received: list[str] = []
        with pytest.raises(ActorError) as caught:
            async with pool.stream(request()) as events:
                async for event in events:
                    received.append(event.text)
        assert events.error is caught.value
    return received, caught.value, pool


def test_the_prompt_estimate() -> None:
    assert PROMPT == 2  # the cases below rely on it differing from the reported 100


@pytest.mark.parametrize(
    ("events", "context", "usage", "estimated"),
    [
        # The provider's partial text (12 chars), not what the consumer received (4).
        (text("ab", "cd"), {"partial_text": "abcdefghijkl"}, tokens(PROMPT, 4), True),
        # No partial text on the error: what the consumer received (8 chars).
        (text("abcde", "fgh"), {}, tokens(PROMPT, 3), True),
        # Reported with output: as reported.
        (
            text("ab"),
            {"partial_text": "abcd", "usage": tokens(100, 9)},
            tokens(100, 9),
            False,
        ),
        # Reported before any output (Anthropic's message_start): its input, the output
        # estimated from the partial text (8 chars).
        (
            text("ab"),
            {"partial_text": "abcdefgh", "usage": tokens(100, 0)},
            tokens(100, 3),
            True,
        ),
        # No text at all reached the consumer (a tool call): no output estimated.
        (
            [StreamEvent(kind="tool_call", tool_call_id="c1", tool_name="f", arguments="{")],
            {},
            tokens(PROMPT, 0),
            True,
        ),
    ],
    ids=["provider-text", "consumer-text", "reported", "reported-before-output", "no-text"],
)
async def test_a_stream_failing_after_its_events_is_partial_with_its_usage(
    autojump_clock: MockClock,
    events: list[StreamEvent],
    context: dict[str, Any],
    usage: Usage,
    estimated: bool,
) -> None:
    failure = fail(Code.NETWORK, "connection reset", **context)
    received, error, pool = await _streamed(Streams(events, failure, stall=1.0))
    assert received == [event.text for event in events]
    assert (error.code, error.message) == (Code.NETWORK, "connection reset")
    assert error.partial_text == context.get("partial_text")
    assert error.usage == usage  # what the budget was charged, as in the ledger
    [entry] = pool.ledger
    assert (entry.number, entry.outcome, entry.code) == (1, "partial", Code.NETWORK)
    assert (entry.usage, entry.usage_estimated) == (usage, estimated)


async def test_a_stream_cut_by_the_deadline_after_its_events_is_failed_uncharged(
    autojump_clock: MockClock,
) -> None:
    actor = Streams(text("abcd", "efgh"), None, stall=100.0)
    received, error, pool = await _streamed(actor, deadline=10.0)
    assert received == ["abcd", "efgh"]
    assert error.code is Code.TIMEOUT
    assert error.usage is None  # nothing charged: the provider may bill, no one knows what
    assert trio.current_time() == 10.0
    [entry] = pool.ledger
    assert (entry.outcome, entry.code, entry.usage, entry.usage_estimated) == (
        "failed",
        Code.TIMEOUT,
        None,
        False,
    )
    assert (entry.started_at, entry.latency) == (0.0, 10.0)


class Queue(Actor):
    """Fails its first request (its breaker opens); ``"busy"`` keeps it 10 s; answers
    every later request at once. Records ``(what, time)`` of each message it takes."""

    def __init__(self, seen: list[tuple[str, float]]) -> None:
        self.seen = seen

    async def handle(self, message: Any) -> Any:
        now = trio.current_time()
        if isinstance(message, str):
            self.seen.append((message, now))
            await trio.sleep(10)
            return message
        self.seen.append((message.request.messages[0].content, now))
        if len(self.seen) == 1:
            return fail(Code.UNAVAILABLE, "down", retryable=True)
        return LlmResponse(content="ok", usage=Usage(input_tokens=1, output_tokens=1))


async def test_a_request_waiting_on_a_probe_wakes_when_the_probe_is_withdrawn(
    autojump_clock: MockClock,
) -> None:
    # The breaker opens at 0 (probe at 30). At 30 "probe" takes the probe lease, its
    # message queued behind "busy" (until 39); at 31 "waiter" is refused (the lease runs
    # to 60) and waits. At 32 "probe" is cancelled while queued: withdrawn, the lease
    # freed — "waiter" wakes at once, becomes the probe, and is answered at 39.
    seen: list[tuple[str, float]] = []
    served: dict[str, float] = {}
    breaker = Breaker()
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Queue(seen))
        targets = [Target(ref=ref, provider="A", model="m1")]
        once = ProviderPool(targets, resilience=Resilience(breaker=breaker), deadline=5.0)
        with pytest.raises(ActorError):
            await once.complete(request("first"))
        pool = ProviderPool(targets, resilience=Resilience(breaker=breaker))
        await trio.sleep_until(29)

        async def ask(name: str, at: float, within: float) -> None:
            await trio.sleep_until(at)
            with trio.move_on_after(within):
                await pool.complete(request(name))
                served[name] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: ref.call("busy", timeout=None))
            nursery.start_soon(ask, "probe", 30, 2)
            nursery.start_soon(ask, "waiter", 31, 100)
    assert served == {"waiter": 39.0}
    assert seen == [("first", 0.0), ("busy", 29.0), ("waiter", 39.0)]
    assert [(a.outcome, a.started_at, a.latency) for a in pool.ledger] == [("ok", 32.0, 7.0)]
