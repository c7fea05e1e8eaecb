"""The HTTP/1.1 plumbing of the chaos server, over h11 and a trio socket stream."""

from __future__ import annotations

import socket
from collections.abc import Mapping

import attrs
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


async def wait_for_hangup(conn: h11.Connection, stream: trio.SocketStream) -> bool:
    """Wait, while a request is being answered, for the client to go away.

    ``True`` when it did: end of file (it closed its connection, or shut down its
    sending side — a client that did so after its request is taken to have given up) or
    a reset. ``False`` when our side closed the socket (a scripted reset). Bytes that
    arrive meanwhile (a next request, pipelined) are handed to h11 for the next cycle.
    Cancel it when the answer is sent.
    """
    while True:
        try:
            data = await stream.receive_some(65536)
        except trio.BrokenResourceError:
            return True
        except trio.ClosedResourceError:
            return False
        if not data:
            return True
        conn.receive_data(data)


@attrs.define
class Exchange:
    """One response being sent on ``stream``; ``complete`` once its last byte is handed
    to the kernel (the client may then close without having given up)."""

    conn: h11.Connection
    stream: trio.SocketStream
    complete: bool = False

    async def start(self, status: int, headers: Mapping[str, str]) -> None:
        """Send the status line and headers (plus ``server: chaos``); the body follows."""
        pairs = [("server", "chaos"), *headers.items()]
        await self._send(self.conn.send(h11.Response(status_code=status, headers=pairs)))

    async def data(self, data: bytes) -> None:
        """Send a piece of the body."""
        await self._send(self.conn.send(h11.Data(data=data)))

    async def end(self, data: bytes = b"") -> None:
        """Send the last piece of the body (if any) and end it: the exchange is complete."""
        framed = self.conn.send(h11.Data(data=data)) if data else b""
        await self._send((framed or b"") + (self.conn.send(h11.EndOfMessage()) or b""))
        self.complete = True

    async def respond(
        self, status: int, body: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        """Send a complete response: ``body`` as JSON unless ``headers`` say otherwise."""
        all_headers = {"content-type": "application/json", **(headers or {})}
        all_headers["content-length"] = str(len(body))
        await self.start(status, all_headers)
        await self.end(body)

    def reset(self) -> None:
        """Close with RST (SO_LINGER 0), as a crashed proxy would."""
        sock = self.stream.socket
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()

    async def _send(self, data: bytes | None) -> None:
        if data:
            await self.stream.send_all(data)
