"""Pooled streams: fallback only before the first event reaches the consumer; after it a
typed failure with the partial text and usage, never a silent truncation."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from actors import ActorError, Code
from actors.testing.chaos import Fault
from supervisors import AllProvidersFailed, ProviderPool, Resilience
from tests.pool_helpers import faults, fleet, request, rules

TEXT = "one two three four five"  # the answer: "echo: one two three four five"


async def test_a_stream_cut_before_its_first_event_is_served_by_the_next_target(
    autojump_clock: MockClock,
) -> None:
    # OpenAI's first SSE event is a keep-alive comment: cut after it, no event was read.
    async with fleet({"A": faults(Fault(kind="cut_stream", after=1)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), resilience=Resilience(retry=rules()))
        async with pool.stream(request(TEXT)) as events:
            text = "".join([event.text async for event in events if event.kind == "text"])
        assert text == f"echo: {TEXT}"
        assert events.response is not None
        assert events.response.provider == "B"
        assert events.error is None
        assert (f.count("A"), f.count("B")) == (1, 1)
        assert trio.current_time() == 0.0
        assert [(a.provider, a.outcome, a.code) for a in events.attempts] == [
            ("A", "failed", Code.NETWORK),
            ("B", "ok", None),
        ]


async def test_a_stream_cut_after_three_events_fails_typed_with_the_partial_text(
    autojump_clock: MockClock,
) -> None:
    # OpenAI's SSE: a keep-alive comment, the role's delta, then one chunk a word.
    async with fleet({"A": faults(Fault(kind="cut_stream", after=5)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), resilience=Resilience(retry=rules()))
        received: list[str] = []
        with pytest.raises(ActorError) as caught:
            async with pool.stream(request(TEXT)) as events:
                async for event in events:
                    received.append(event.text)
        assert received == ["echo: ", "one ", "two "]
        error = caught.value
        assert error.code is Code.NETWORK
        assert error.partial_text == "echo: one two "
        assert error.usage is not None  # estimated: the provider reported none
        assert error.usage.output_tokens == len("echo: one two ") // 4 + 1
        assert events.error is error
        assert events.response is None
        assert f.count("B") == 0  # never fell back after the first event
        [entry] = pool.ledger
        assert (entry.provider, entry.outcome, entry.code) == ("A", "partial", Code.NETWORK)
        assert entry.usage_estimated is True
        assert entry.usage == error.usage


async def test_anthropic_partial_usage_keeps_the_reported_input(
    autojump_clock: MockClock,
) -> None:
    script = faults(Fault(kind="cut_stream", after=5))
    async with fleet({"A": script}, dialect="anthropic") as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(retry=rules()))
        with pytest.raises(ActorError) as caught:
            async with pool.stream(request(TEXT)) as events:
                async for _ in events:
                    pass
        assert caught.value.partial_text  # some text reached the consumer
        [entry] = pool.ledger
        assert entry.outcome == "partial"
        # message_start reported the input tokens and no output yet: the output the
        # consumer received is estimated (it was generated, and is billed).
        assert entry.usage_estimated is True
        assert entry.usage is not None
        assert entry.usage.input_tokens == len(TEXT) // 4 + 1  # as message_start reported
        partial = caught.value.partial_text or ""
        assert entry.usage.output_tokens == len(partial) // 4 + 1
        assert caught.value.usage == entry.usage  # the consumer sees what was charged


async def test_an_error_event_before_any_text_falls_back(autojump_clock: MockClock) -> None:
    async with fleet({"A": faults(Fault(kind="stream_error", after=1)), "B": None}) as f:
        pool = ProviderPool(f.targets("A", "B"), resilience=Resilience(retry=rules()))
        async with pool.stream(request(TEXT)) as events:
            kinds = [event.kind async for event in events]
        assert "text" in kinds
        assert events.response is not None and events.response.provider == "B"
        assert [a.outcome for a in pool.ledger] == ["failed", "ok"]


async def test_every_target_failing_a_stream_raises_all_providers_failed(
    autojump_clock: MockClock,
) -> None:
    scripts = {"A": faults(Fault(kind="status", status=503, times=4)), "B": None}
    async with fleet(scripts) as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(retry=rules()), deadline=100.0)
        with pytest.raises(AllProvidersFailed) as caught:
            async with pool.stream(request(TEXT)) as events:
                async for _ in events:
                    pass
        assert events.error is caught.value
        assert caught.value.category is Code.UNAVAILABLE
        assert f.times("A") == [0.0, 1.0, 3.0, 7.0]
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()  # a finished stream stays finished


async def test_leaving_a_stream_early_cancels_the_attempt_and_records_it(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": faults(Fault(kind="slow_stream", seconds=1.0))}) as f:
        pool = ProviderPool(f.targets("A"), resilience=Resilience(retry=rules()))
        async with pool.stream(request(TEXT)) as events:
            async for event in events:
                if event.kind == "text":
                    break
        await trio.sleep(5)  # the server notices the disconnect on its next write
        [record] = f.servers["A"].requests
        assert record.disconnected is True
        [entry] = pool.ledger
        assert (entry.outcome, entry.code) == ("cancelled", None)
        assert events.response is None and events.error is None
