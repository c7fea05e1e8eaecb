"""The chaos server: an HTTP/1.1 loopback server that answers per a fault script.

:class:`ChaosServer` routes ``POST /v1/chat/completions`` (``openai``) and
``POST /v1/messages`` (``anthropic``); any other path gets 404, a body that is not a
JSON object 400 — neither consumes a fault nor is recorded. Every routed request asks the
script for its fault once and is recorded (:class:`RecordedRequest`) before it is
answered (:func:`~actors.testing.chaos.respond.respond`). :func:`chaos_server` runs one
for the duration of a block.

While a request is answered the server watches its connection: a client that goes away
before the answer's last byte is sent — during a ``latency`` or ``hang`` (the server
stops waiting at once), before the body, mid-stream — is recorded as disconnected, at the
trio time it was noticed, and the answer is abandoned. A client that closes once it has
the whole answer is not.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import trio

from actors.nursery import open_nursery_unwrapped
from actors.redact import SENSITIVE_KEYS
from actors.testing.chaos.respond import respond
from actors.testing.chaos.script import Fault, FaultScript
from actors.testing.chaos.wire import Exchange, read_request, wait_for_hangup

ROUTES: Mapping[str, str] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


@attrs.define
class RecordedRequest:
    """One request as the server saw it, credentials removed.

    ``at`` is the trio time it was read; ``fault`` the kind played on it (``None``: a
    normal answer). ``disconnected`` says the client went away before the whole answer
    was sent (at any point: while the server waited, before the body, mid-stream), and
    ``disconnected_at`` when the server noticed (trio time; ``None`` when it did not).
    """

    route: str
    path: str
    model: str | None
    stream: bool
    headers: dict[str, str]
    messages: int
    at: float
    fault: str | None
    disconnected: bool = False
    disconnected_at: float | None = None

    def note_disconnect(self, at: float) -> None:
        """Record that the client went away at ``at`` (the first notice counts)."""
        if not self.disconnected:
            self.disconnected, self.disconnected_at = True, at


class ChaosServer:
    """A running chaos server; its faults are tabled in :mod:`actors.testing.chaos`."""

    def __init__(self, script: FaultScript) -> None:
        self.script = script
        self.requests: list[RecordedRequest] = []
        self.url = ""

    def count(self, route: str | None = None) -> int:
        """How many requests the server got, on ``route`` (``openai``, ``anthropic``) or on
        any."""
        return sum(1 for r in self.requests if route is None or r.route == route)

    async def serve(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        task_status: trio.TaskStatus[ChaosServer] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host``:``port`` (0: a free port; :attr:`url` says which) and answer
        until cancelled; ``await nursery.start(server.serve)`` returns once it listens."""
        listeners = await trio.open_tcp_listeners(port, host=host)
        bound = listeners[0].socket.getsockname()
        self.url = f"http://{bound[0]}:{bound[1]}"
        async with trio.open_nursery() as nursery:
            task_status.started(self)
            await trio.serve_listeners(self._connection, listeners, handler_nursery=nursery)

    # --- HTTP plumbing ----------------------------------------------------------------

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                received = await read_request(conn, stream)
                if received is None:
                    return
                request, body = received
                closed = await self._answer(conn, stream, request, body)
                if closed or conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return  # the client went away: nothing to answer
        finally:
            await stream.aclose()

    async def _answer(
        self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, body: bytes
    ) -> bool:
        """Answer one request; ``True`` when the connection must not be used again."""
        path = request.target.decode("latin-1").split("?", 1)[0]
        route = ROUTES.get(path)
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            payload = None
        exchange = Exchange(conn, stream)
        if route is None or not isinstance(payload, dict):
            status = 404 if route is None else 400
            await exchange.respond(status, b'{"error": "bad request"}')
            return False
        model = payload.get("model") if isinstance(payload.get("model"), str) else None
        streaming = payload.get("stream") is True
        fault = self.script.next(route, stream=streaming, model=model)
        record = RecordedRequest(
            route=route,
            path=path,
            model=model,
            stream=streaming,
            headers={
                k.decode("latin-1"): v.decode("latin-1")
                for k, v in request.headers
                if k.decode("latin-1").lower() not in SENSITIVE_KEYS
            },
            messages=len(payload.get("messages") or []),
            at=trio.current_time(),
            fault=fault.kind if fault else None,
        )
        self.requests.append(record)
        return await self._watched(exchange, route, payload, fault, record)

    async def _watched(
        self,
        exchange: Exchange,
        route: str,
        payload: dict[str, Any],
        fault: Fault | None,
        record: RecordedRequest,
    ) -> bool:
        """:func:`respond`, abandoned as soon as the client goes away (recorded)."""
        closed = True  # unless the answer is sent in full
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                if await wait_for_hangup(exchange.conn, exchange.stream):
                    if not exchange.complete:
                        record.note_disconnect(trio.current_time())
                    nursery.cancel_scope.cancel(reason="the client went away")

            nursery.start_soon(watch)
            try:
                closed = await respond(exchange, route, payload, fault)
            except trio.BrokenResourceError:
                if not exchange.complete:
                    record.note_disconnect(trio.current_time())
            except (trio.ClosedResourceError, h11.ProtocolError):
                closed = True  # our side closed it, or h11 cannot go on: close it
            nursery.cancel_scope.cancel(reason="answered")
        return closed or record.disconnected


@asynccontextmanager
async def chaos_server(
    script: FaultScript | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[ChaosServer]:
    """Run a chaos server on loopback for the duration of the block."""
    server = ChaosServer(script or FaultScript())
    # An error of the block comes out as raised, not in a group (as from open_tree).
    async with open_nursery_unwrapped() as nursery:
        await nursery.start(
            lambda task_status: server.serve(host=host, port=port, task_status=task_status)
        )
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel(reason="chaos server closed")
