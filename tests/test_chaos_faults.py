"""Every fault kind, streaming and not, on both routes: what a plain HTTP client sees is
what the table in ``actors.testing.chaos`` says — and every fault recorded against a
request was applied to it.

Virtual time (the chaos server runs in the test's trio run). Each case first takes the
normal answer of the same request (no fault queued), then queues the fault and asks again:
"the normal answer" is that baseline, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, get_args

import attrs
import httpx
import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from actors.testing.chaos import ChaosServer, Fault, FaultKind, FaultScript, chaos_server

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
CLIENT_TIMEOUT = 5.0


def body_for(route: str, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m-1",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello chaos world"}],
    }
    if stream:
        body["stream"] = True
        if route == "openai":
            body["stream_options"] = {"include_usage": True}
    return body


@attrs.frozen
class Seen:
    """What the client saw: the status and headers (``None``: no response), the body as
    received, when the headers and the end came (trio time from the request), and how
    it ended: ``complete`` (the body ended cleanly), ``reset`` (a network error),
    ``timeout`` (the client gave up after :data:`CLIENT_TIMEOUT`)."""

    status: int | None
    headers: httpx.Headers
    body: bytes
    headers_at: float | None
    ended_at: float
    ending: str

    @property
    def blocks(self) -> list[bytes]:
        """The body cut into SSE blocks (each with its blank line; a partial last one
        without)."""
        parts = self.body.split(b"\n\n")
        blocks = [part + b"\n\n" for part in parts[:-1]]
        return blocks + ([parts[-1]] if parts[-1] else [])

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")


async def ask(server: ChaosServer, route: str, stream: bool) -> Seen:
    started = trio.current_time()
    status, headers, headers_at = None, httpx.Headers(), None
    received = bytearray()
    ending = "complete"
    async with httpx.AsyncClient(base_url=server.url, timeout=CLIENT_TIMEOUT) as client:
        try:
            async with client.stream("POST", PATHS[route], json=body_for(route, stream)) as resp:
                status, headers = resp.status_code, resp.headers
                headers_at = trio.current_time() - started
                async for chunk in resp.aiter_raw():
                    received += chunk
        except httpx.TimeoutException:
            ending = "timeout"
        except (httpx.ReadError, httpx.RemoteProtocolError):
            ending = "reset"
    return Seen(status, headers, bytes(received), headers_at, trio.current_time() - started, ending)


def data_of(block: bytes) -> str:
    return block.split(b"data: ", 1)[1].strip().decode()


def is_json(text: str | bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def error_of(seen: Seen) -> dict[str, Any]:
    assert seen.content_type == "application/json"
    body = json.loads(seen.body)
    return body["error"]  # type: ignore[no-any-return]


# --- the expectations, one per row of the table --------------------------------------
# Each takes (route, stream, what the client saw, the normal answer's, the server).

Check = Callable[[str, bool, Seen, Seen, ChaosServer], None]


def normal_answer(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending, seen.body) == (200, "complete", normal.body)


def status_429(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending, seen.headers["retry-after"]) == (429, "complete", "2")
    error = error_of(seen)
    if route == "openai":
        assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    else:
        assert json.loads(seen.body)["type"] == "error"
        assert error["type"] == "rate_limit_error"


def html_page(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending, seen.content_type) == (502, "complete", "text/html")
    assert seen.body.startswith(b"<html>") and b"502 Bad Gateway" in seen.body


def malformed(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending, seen.content_type) == (200, "complete", normal.content_type)
    if not stream:
        assert seen.body == normal.body[: len(normal.body) // 2]
        assert not is_json(seen.body)
        return
    # One event's JSON is cut in half; the rest of the stream, terminator included, follows.
    assert len(seen.blocks) == len(normal.blocks)
    differing = [
        i for i, (a, b) in enumerate(zip(seen.blocks, normal.blocks, strict=True)) if a != b
    ]
    assert len(differing) == 1
    cut, whole = data_of(seen.blocks[differing[0]]), data_of(normal.blocks[differing[0]])
    assert whole.startswith(cut) and len(cut) == len(whole) // 2
    assert not is_json(cut) and is_json(whole)
    assert seen.blocks[-1] == normal.blocks[-1]


def late(seconds: float) -> Check:
    def check(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
        normal_answer(route, stream, seen, normal, server)
        assert seen.headers_at == seconds

    return check


def nothing(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending, seen.ended_at) == (None, "timeout", CLIENT_TIMEOUT)
    record = server.requests[-1]
    assert (record.disconnected, record.disconnected_at) == (True, record.at + CLIENT_TIMEOUT)


def reset_before(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending, seen.body) == (None, "reset", b"")


def reset_mid(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending, seen.content_type) == (200, "reset", normal.content_type)
    if not stream:
        assert seen.body == normal.body[: len(normal.body) // 2]
        assert seen.headers["content-length"] == str(len(normal.body))
        return
    # Half the events, then a reset: never the finish, never the terminator.
    assert seen.body == b"".join(normal.blocks[: len(normal.blocks) // 2])


def cut_after(count: int, clean: bool) -> Check:
    def check(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
        assert (seen.status, seen.content_type) == (200, "text/event-stream")
        if clean:
            assert (seen.ending, seen.blocks) == ("complete", normal.blocks[:count])
        else:
            assert seen.ending == "reset"
            assert seen.blocks == normal.blocks[:count]

    return check


def error_event_after(count: int) -> Check:
    def check(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
        assert (seen.status, seen.ending) == (200, "complete")
        assert seen.blocks[:-1] == normal.blocks[:count]
        event = json.loads(data_of(seen.blocks[-1]))
        if route == "openai":
            assert event["error"]["code"] == "overloaded"
        else:
            assert seen.blocks[-1].startswith(b"event: error\n")
            assert event["error"]["type"] == "overloaded_error"

    return check


def events_apart(seconds: float) -> Check:
    def check(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
        normal_answer(route, stream, seen, normal, server)
        assert seen.ended_at == seconds * len(normal.blocks)  # a pause after each event

    return check


def refusal(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending) == (400, "complete")
    error = error_of(seen)
    if route == "openai":
        assert (error["type"], error["code"]) == ("invalid_request_error", "content_filter")
    else:
        assert error["type"] == "invalid_request_error"
        assert "content filtering policy" in error["message"]


def too_long(route: str, stream: bool, seen: Seen, normal: Seen, server: ChaosServer) -> None:
    assert (seen.status, seen.ending) == (400, "complete")
    error = error_of(seen)
    if route == "openai":
        assert (error["type"], error["code"]) == (
            "invalid_request_error",
            "context_length_exceeded",
        )
    else:
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith("prompt is too long")


STREAM_ONLY_WAITS = "waits"  # on a non-streaming request: the normal answer, fault kept

# (id, fault, check when streaming, check when not — STREAM_ONLY_WAITS for stream-only kinds)
CASES: list[tuple[str, Fault, Check, Check | str]] = [
    (
        "status",
        Fault(kind="status", status=429, headers={"retry-after": "2"}),
        status_429,
        status_429,
    ),
    ("html", Fault(kind="html"), html_page, html_page),
    ("malformed_json", Fault(kind="malformed_json"), malformed, malformed),
    ("latency", Fault(kind="latency", seconds=3), late(3), late(3)),
    ("hang", Fault(kind="hang"), nothing, nothing),
    ("hang-seconds", Fault(kind="hang", seconds=2), late(2), late(2)),
    ("reset_before", Fault(kind="reset_before"), reset_before, reset_before),
    ("reset_mid", Fault(kind="reset_mid"), reset_mid, reset_mid),
    ("cut_stream", Fault(kind="cut_stream", after=3), cut_after(3, True), STREAM_ONLY_WAITS),
    (
        "cut_stream-reset",
        Fault(kind="cut_stream", after=3, clean=False),
        cut_after(3, False),
        STREAM_ONLY_WAITS,
    ),
    (
        "cut_stream-past-the-end",
        Fault(kind="cut_stream", after=1000),
        # Never past the content: OpenAI's finish, usage and [DONE], Anthropic's
        # message_delta and message_stop are not sent.
        lambda route, stream, seen, normal, server: cut_after(
            len(normal.blocks) - (3 if route == "openai" else 2), True
        )(route, stream, seen, normal, server),
        STREAM_ONLY_WAITS,
    ),
    ("stream_error", Fault(kind="stream_error", after=3), error_event_after(3), STREAM_ONLY_WAITS),
    ("slow_stream", Fault(kind="slow_stream", seconds=1), events_apart(1), STREAM_ONLY_WAITS),
    ("content_filter", Fault(kind="content_filter"), refusal, refusal),
    ("context_length", Fault(kind="context_length"), too_long, too_long),
]


def test_every_fault_kind_has_a_case() -> None:
    assert {fault.kind for _, fault, _, _ in CASES} == set(get_args(FaultKind))


@pytest.mark.parametrize("route", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("fault", "streaming", "not_streaming"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
async def test_the_client_sees_what_the_table_says(
    autojump_clock: MockClock,
    route: str,
    stream: bool,
    fault: Fault,
    streaming: Check,
    not_streaming: Check | str,
) -> None:
    async with chaos_server(FaultScript()) as server:
        normal = {mode: await ask(server, route, mode) for mode in (False, True)}
        for answer in normal.values():
            assert (answer.status, answer.ending, answer.headers_at) == (200, "complete", 0)
        server.script.push(attrs.evolve(fault, route=route))
        seen = await ask(server, route, stream)
        await wait_all_tasks_blocked()  # the server has seen what the client did
        if not stream and not_streaming == STREAM_ONLY_WAITS:
            normal_answer(route, stream, seen, normal[stream], server)
            assert server.requests[-1].fault is None  # not recorded: it was not applied
            seen = await ask(server, route, stream=True)  # it waits for a stream
            await wait_all_tasks_blocked()
            streaming(route, True, seen, normal[True], server)
        else:
            check = streaming if stream else not_streaming
            assert callable(check)
            check(route, stream, seen, normal[stream], server)
        waited = [None] if not stream and not_streaming == STREAM_ONLY_WAITS else []
        assert [r.fault for r in server.requests] == [None, None, *waited, fault.kind]
        if fault.kind != "hang" or fault.seconds:
            assert not any(r.disconnected for r in server.requests)
