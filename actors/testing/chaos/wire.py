"""The HTTP/1.1 plumbing of the chaos server, over h11 and a trio socket stream."""

from __future__ import annotations

import socket
from collections.abc import Mapping

import h11
import trio


async def read_request(
    conn: h11.Connection, stream: trio.SocketStream
) -> tuple[h11.Request, bytes] | None:
    """The next request and its whole body; ``None`` once the client closed between requests."""
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            conn.receive_data(data)
            if not data and conn.their_state is h11.IDLE:
                return None
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def start_response(
    conn: h11.Connection, stream: trio.SocketStream, status: int, headers: Mapping[str, str]
) -> None:
    """Send the status line and headers (plus ``server: chaos``); the body follows separately."""
    pairs = [("server", "chaos"), *headers.items()]
    await stream.send_all(conn.send(h11.Response(status_code=status, headers=pairs)) or b"")


async def send_response(
    conn: h11.Connection,
    stream: trio.SocketStream,
    status: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Send a complete response: ``body`` as JSON unless ``headers`` say otherwise."""
    all_headers = {"content-type": "application/json", **(headers or {})}
    all_headers["content-length"] = str(len(body))
    await start_response(conn, stream, status, all_headers)
    await stream.send_all(conn.send(h11.Data(data=body)) or b"")
    await stream.send_all(conn.send(h11.EndOfMessage()) or b"")


def reset_connection(stream: trio.SocketStream) -> None:
    """Close with RST (SO_LINGER 0), as a crashed proxy would."""
    sock = stream.socket
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()
