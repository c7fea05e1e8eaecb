"""The chaos server: an HTTP/1.1 loopback server that answers per a fault script.

:class:`ChaosServer` routes ``POST /v1/chat/completions`` (``openai``) and
``POST /v1/messages`` (``anthropic``); any other path gets 404, a body that is not a
JSON object 400 — neither consumes a fault nor is recorded. Every routed request asks the
script for its fault once and is recorded (:class:`RecordedRequest`) before it is
answered. :func:`chaos_server` runs one for the duration of a block.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import trio

from actors.redact import SENSITIVE_KEYS
from actors.testing.chaos.dialects import (
    answer_for,
    completion,
    content_filter_body,
    context_length_body,
    error_body,
    stream_error,
    stream_events,
)
from actors.testing.chaos.script import Fault, FaultScript
from actors.testing.chaos.wire import (
    read_request,
    reset_connection,
    send_response,
    start_response,
)

ROUTES: Mapping[str, str] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


@attrs.define
class RecordedRequest:
    """One request as the server saw it, credentials removed."""

    route: str
    path: str
    model: str | None
    stream: bool
    headers: dict[str, str]
    messages: int
    at: float
    fault: str | None
    disconnected: bool = False


class ChaosServer:
    """A running chaos server; its faults are tabled in :mod:`actors.testing.chaos`."""

    def __init__(self, script: FaultScript) -> None:
        self.script = script
        self.requests: list[RecordedRequest] = []
        self.url = ""

    def count(self, route: str | None = None) -> int:
        return sum(1 for r in self.requests if route is None or r.route == route)

    async def serve(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        task_status: trio.TaskStatus[ChaosServer] = trio.TASK_STATUS_IGNORED,
    ) -> None:
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
                reset = await self._answer(conn, stream, request, body)
                if reset or conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return  # the client went away: nothing to answer
        finally:
            await stream.aclose()

    async def _answer(
        self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, body: bytes
    ) -> bool:
        path = request.target.decode("latin-1").split("?", 1)[0]
        route = ROUTES.get(path)
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            payload = None
        if route is None or not isinstance(payload, dict):
            await send_response(
                conn, stream, 404 if route is None else 400, b'{"error": "bad request"}'
            )
            return False
        fault = self.script.next(route, stream=bool(payload.get("stream")))
        record = RecordedRequest(
            route=route,
            path=path,
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
            stream=bool(payload.get("stream")),
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
        return await self._respond(conn, stream, route, payload, fault, record)

    async def _respond(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        route: str,
        payload: dict[str, Any],
        fault: Fault | None,
        record: RecordedRequest,
    ) -> bool:
        kind = fault.kind if fault else None
        if fault is not None and kind in ("latency", "hang"):
            await trio.sleep(fault.seconds if fault.seconds or kind == "latency" else 3600)
        if kind == "reset_before":
            reset_connection(stream)
            return True
        if fault is not None and kind == "status":
            body = fault.body.encode() if fault.body else error_body(route, fault.status)
            await send_response(conn, stream, fault.status, body, fault.headers)
            return False
        if fault is not None and kind == "html":
            page = b"<html><head><title>502 Bad Gateway</title></head><body>proxy</body></html>"
            await send_response(
                conn,
                stream,
                fault.status if fault.status != 500 else 502,
                page,
                {"content-type": "text/html"},
            )
            return False
        if kind == "content_filter":
            await send_response(conn, stream, 400, content_filter_body(route))
            return False
        if kind == "context_length":
            await send_response(conn, stream, 400, context_length_body(route))
            return False
        text, usage = answer_for(route, payload)
        if payload.get("stream"):
            return await self._stream(conn, stream, route, payload, text, usage, fault, record)
        body = json.dumps(completion(route, payload, text, usage)).encode()
        if kind == "malformed_json":
            body = body[: len(body) // 2]
        if kind == "reset_mid":
            await start_response(conn, stream, 200, {"content-length": str(len(body))})
            await stream.send_all(conn.send(h11.Data(data=body[: len(body) // 2])) or b"")
            reset_connection(stream)
            return True
        await send_response(conn, stream, 200, body)
        return False

    async def _stream(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        route: str,
        payload: dict[str, Any],
        text: str,
        usage: tuple[int, int],
        fault: Fault | None,
        record: RecordedRequest,
    ) -> bool:
        events = stream_events(route, payload, text, usage)
        kind = fault.kind if fault else None
        await start_response(conn, stream, 200, {"content-type": "text/event-stream"})
        try:
            for number, event in enumerate(events):
                if (
                    fault is not None
                    and kind in ("cut_stream", "stream_error")
                    and number == fault.after
                ):
                    if kind == "stream_error":
                        await stream.send_all(conn.send(h11.Data(data=stream_error(route))) or b"")
                        break
                    if not fault.clean:
                        reset_connection(stream)
                        return True
                    break
                await stream.send_all(conn.send(h11.Data(data=event)) or b"")
                if fault is not None and kind == "slow_stream":
                    await trio.sleep(fault.seconds)
            await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            record.disconnected = True
            raise
        return False


@asynccontextmanager
async def chaos_server(
    script: FaultScript | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[ChaosServer]:
    """Run a chaos server on loopback for the duration of the block."""
    server = ChaosServer(script or FaultScript())
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: server.serve(host=host, port=port, task_status=task_status)
        )
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel(reason="chaos server closed")
