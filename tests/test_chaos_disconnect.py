"""The chaos server records a client that gave up on a request, at any point, and when.

Virtual time: the chaos server runs in the test's trio run, so ``disconnected_at`` is the
virtual time the caller's cancel closed the connection.
"""

from __future__ import annotations

import socket
import struct

import attrs
import httpx
import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from actors import open_runtime
from actors.providers import (
    AnthropicProvider,
    HttpProvider,
    LlmRequest,
    Message,
    OpenAIProvider,
    ProviderClient,
    ProviderConfig,
)
from actors.testing.chaos import ChaosServer, Fault, FaultScript, RecordedRequest, chaos_server

REQUEST = LlmRequest(model="m-1", messages=[Message(role="user", content="hello chaos world")])
PROVIDERS = [
    pytest.param(OpenAIProvider, id="openai"),
    pytest.param(AnthropicProvider, id="anthropic"),
]


async def give_up_after(
    seconds: float, provider: type[HttpProvider], fault: Fault, *, stream: bool = False
) -> tuple[RecordedRequest, float]:
    """One call through ``provider`` with ``fault``, cancelled by its caller after
    ``seconds``; the server's record and the virtual time of the cancel."""
    async with chaos_server(FaultScript(faults=[fault])) as server, open_runtime() as runtime:
        config = ProviderConfig(
            name="p", base_url=server.url, api_key="chaos-test-key", read_timeout=60
        )
        client = ProviderClient(await runtime.spawn(lambda: provider(config)), "p")
        with trio.move_on_after(seconds) as scope:
            if stream:
                async with client.stream(attrs.evolve(REQUEST, stream=True)) as events:
                    async for _ in events:
                        pass
            else:
                await client.complete(REQUEST)
        assert scope.cancelled_caught
        cancelled_at = trio.current_time()
        await wait_all_tasks_blocked()  # the server notices the closed connection
        assert server.count() == 1
        return server.requests[0], cancelled_at


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_call_cancelled_during_a_hang_is_recorded_at_the_cancel(
    autojump_clock: MockClock, provider: type[HttpProvider]
) -> None:
    record, cancelled_at = await give_up_after(7, provider, Fault(kind="hang"))
    assert cancelled_at == 7
    assert (record.fault, record.disconnected, record.disconnected_at) == ("hang", True, 7)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_call_cancelled_during_latency_is_recorded_at_the_cancel(
    autojump_clock: MockClock, provider: type[HttpProvider]
) -> None:
    record, _ = await give_up_after(3, provider, Fault(kind="latency", seconds=10))
    assert (record.fault, record.disconnected, record.disconnected_at) == ("latency", True, 3)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_left_midway_is_recorded_at_the_cancel(
    autojump_clock: MockClock, provider: type[HttpProvider]
) -> None:
    fault = Fault(kind="slow_stream", seconds=1)
    record, _ = await give_up_after(2.5, provider, fault, stream=True)
    assert (record.fault, record.disconnected, record.disconnected_at) == ("slow_stream", True, 2.5)


async def test_a_stream_cancelled_before_its_first_event_is_recorded(
    autojump_clock: MockClock,
) -> None:
    """The caller gives up while the server waits to start the stream."""
    fault = Fault(kind="latency", seconds=4)
    record, _ = await give_up_after(1.5, OpenAIProvider, fault, stream=True)
    assert (record.stream, record.disconnected, record.disconnected_at) == (True, True, 1.5)


async def _whole_answer_then_close(server: ChaosServer, stream: bool) -> None:
    body = {"model": "m-1", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    async with httpx.AsyncClient(base_url=server.url) as client:
        response = await client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200
    await wait_all_tasks_blocked()


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_client_that_closes_after_the_whole_answer_did_not_disconnect(
    autojump_clock: MockClock, stream: bool
) -> None:
    faults = [Fault(kind="latency", seconds=1), Fault(kind="slow_stream", seconds=1)]
    async with chaos_server(FaultScript(faults=faults)) as server:
        await _whole_answer_then_close(server, stream)
        await _whole_answer_then_close(server, stream)
    assert [(r.disconnected, r.disconnected_at) for r in server.requests] == [(False, None)] * 2
    assert [r.fault for r in server.requests] == ["latency", "slow_stream" if stream else None]


async def test_a_client_reset_mid_stream_is_recorded(autojump_clock: MockClock) -> None:
    """A client whose connection resets (not a clean close) is noticed too."""
    fault = Fault(kind="slow_stream", seconds=1)
    async with chaos_server(FaultScript(faults=[fault])) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
        body = b'{"model": "m-1", "messages": [], "stream": true}'
        head = (
            b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n" % len(body)
        )
        await stream.send_all(head + body)
        assert (await stream.receive_some(65536)).startswith(b"HTTP/1.1 200 ")
        await trio.sleep(1.25)
        linger = struct.pack("ii", 1, 0)  # close with RST
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        stream.socket.close()
        await wait_all_tasks_blocked()
    record = server.requests[0]
    assert (record.disconnected, record.disconnected_at) == (True, 1.25)
