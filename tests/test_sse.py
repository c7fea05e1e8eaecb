"""SSE parser: edge cases, arbitrary chunkings, arbitrary bytes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import ActorError, Code
from actors.providers.sse import SseEvent, SseParser

STREAM = (
    b": keep-alive\r\n"
    b"event: message_start\r\n"
    b'data: {"type": "message_start"}\r\n'
    b"\r\n"
    b"data: line one\n"
    b"data: line two\n"
    b"id: 7\n"
    b"\n"
    b":ping\r"
    b"\r"
    b"event: ping\r"
    b"data:no-space\r"
    b"retry: 1500\r"
    b"\r"
    b"event: empty\n"
    b"\n"
    b"data\n"
    b"\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SseEvent(event="message_start", data='{"type": "message_start"}'),
    SseEvent(data="line one\nline two", id="7"),
    SseEvent(event="ping", data="no-space", id="7", retry=1500),
    SseEvent(data="", id="7", retry=1500),
    SseEvent(data="[DONE]", id="7", retry=1500),
]


def parse(chunks: list[bytes]) -> tuple[list[SseEvent], bool]:
    parser = SseParser()
    events = [e for chunk in chunks for e in parser.feed(chunk)]
    return events, parser.close()


def test_edge_cases_in_one_chunk() -> None:
    assert parse([STREAM]) == (EXPECTED, False)


def test_byte_by_byte() -> None:
    assert parse([STREAM[i : i + 1] for i in range(len(STREAM))]) == (EXPECTED, False)


def test_crlf_split_across_chunks_is_one_break() -> None:
    assert parse([b"data: a\r", b"\n\r", b"\ndata: b\n\n"]) == (
        [SseEvent(data="a"), SseEvent(data="b")],
        False,
    )


def test_unfinished_event_is_reported_not_dispatched() -> None:
    events, truncated = parse([b"data: whole\n\ndata: half"])
    assert events == [SseEvent(data="whole")]
    assert truncated is True


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=30))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted({0, len(STREAM), *cuts})
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert parse(chunks) == (EXPECTED, False)


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.binary(max_size=64), max_size=10))
def test_arbitrary_bytes_give_events_or_a_typed_error(data: list[bytes]) -> None:
    try:
        events, _ = parse(data)
    except ActorError as error:
        assert error.code is Code.MALFORMED_RESPONSE
    else:
        assert all(isinstance(e, SseEvent) for e in events)


def test_invalid_utf8_and_oversized_events_are_typed() -> None:
    with pytest.raises(ActorError) as bad:
        SseParser().feed(b"data: \xff\xfe\n\n")
    assert bad.value.code is Code.MALFORMED_RESPONSE
    with pytest.raises(ActorError) as big:
        SseParser(max_event_bytes=100).feed(b"data: " + b"x" * 200)
    assert big.value.code is Code.MALFORMED_RESPONSE
