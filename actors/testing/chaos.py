"""The chaos provider: a loopback LLM server that fails on purpose, by script.

It speaks the OpenAI-compatible ``POST /v1/chat/completions`` and Anthropic's
``POST /v1/messages`` (non-streaming and SSE), answers deterministically — the reply is
``"echo: <last user message>"``, usage is computed from the input (4 characters a token)
— and follows a fault script. Use it in-process::

    async with chaos_server(FaultScript(faults=[Fault(kind="status", status=429,
                                                      headers={"retry-after": "2"})])) as server:
        provider = OpenAIProvider(ProviderConfig(name="alpha", base_url=server.url))

or as a command: ``python -m actors.testing.chaos --port 8099 --script faults.toml``.

Faults (``Fault.kind``), consumed in order from a queue per route (``openai``,
``anthropic``; ``*`` for any), ``times`` each — stream-only faults wait for the next
streaming request; with no queued fault, ``probabilities`` (seeded) may pick one:

| kind | what the client sees |
|---|---|
| ``status`` | ``status`` with ``headers`` and the dialect's error body (or ``body``) |
| ``html`` | a proxy's HTML error page (``status``, default 502) |
| ``malformed_json`` | 200 with a truncated JSON body |
| ``latency`` | the normal answer after ``seconds`` |
| ``hang`` | nothing, for ``seconds`` (default: until the client gives up) |
| ``reset_before`` | the connection reset before any response |
| ``reset_mid`` | headers and half a body, then a reset |
| ``cut_stream`` | ``after`` events, then a clean close (``clean``) or a reset; no terminator |
| ``stream_error`` | ``after`` stream events, then the dialect's error event (overloaded) |
| ``slow_stream`` | stream events ``seconds`` apart |
| ``content_filter`` | the dialect's content-policy refusal (400) |
| ``context_length`` | the dialect's context-length error (400) |

Every request is recorded (:attr:`ChaosServer.requests`) without secrets: credential
headers are dropped, and whether a streaming client disconnected early is noted.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import tomllib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs
import cattrs
import h11
import trio

from actors.errors import ActorError, Code
from actors.redact import SENSITIVE_KEYS

FaultKind = Literal[
    "status",
    "html",
    "malformed_json",
    "latency",
    "hang",
    "reset_before",
    "reset_mid",
    "cut_stream",
    "stream_error",
    "slow_stream",
    "content_filter",
    "context_length",
]
Route = Literal["openai", "anthropic", "*"]

STREAM_ONLY = frozenset({"cut_stream", "stream_error", "slow_stream"})
ROUTES: Mapping[str, str] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


@attrs.define(kw_only=True)
class Fault:
    kind: FaultKind
    route: Route = "*"
    status: int = 500
    headers: dict[str, str] = attrs.Factory(dict)
    body: str | None = None
    seconds: float = 0.0
    after: int = 2
    clean: bool = True
    times: int = 1


@attrs.define(kw_only=True)
class FaultScript:
    faults: list[Fault] = attrs.Factory(list)
    probabilities: dict[FaultKind, float] = attrs.Factory(dict)
    seed: int = 0
    _queues: dict[str, deque[Fault]] = attrs.field(init=False, factory=dict)
    _random: random.Random = attrs.field(init=False, factory=random.Random)

    def __attrs_post_init__(self) -> None:
        self._random.seed(self.seed)
        self.push(*self.faults)

    def next(self, route: str, *, stream: bool = False) -> Fault | None:
        """The next fault for a request on ``route``: its own queue first, then ``*``,
        then chance. Stream-only faults (``cut_stream``, ``stream_error``,
        ``slow_stream``) wait in the queue for the next streaming request."""
        for key in (route, "*"):
            queue = self._queues.get(key)
            if not queue:
                continue
            for fault in queue:
                if stream or fault.kind not in STREAM_ONLY:
                    queue.remove(fault)
                    return fault
        for kind, probability in sorted(self.probabilities.items()):
            if self._random.random() < probability:
                return Fault(kind=kind, status=503 if kind == "status" else 502)
        return None

    def push(self, *faults: Fault) -> None:
        """Queue more faults while the server runs."""
        for fault in faults:
            for _ in range(fault.times):
                self._queues.setdefault(fault.route, deque()).append(fault)


def load_script(text: str) -> FaultScript:
    """A :class:`FaultScript` from TOML (``seed``, ``[probabilities]``, ``[[faults]]``).

    Raises ``config_invalid`` naming every offending field (``$.faults[0].kind``).
    """
    try:
        return cattrs.Converter(forbid_extra_keys=True).structure(tomllib.loads(text), FaultScript)
    except (cattrs.BaseValidationError, tomllib.TOMLDecodeError) as exc:
        problems = (
            cattrs.transform_error(exc)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "invalid fault script: " + "; ".join(problems)
        ) from exc


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
    """A running chaos server; see the module docstring."""

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
                received = await _read_request(conn, stream)
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
            await _send(conn, stream, 404 if route is None else 400, b'{"error": "bad request"}')
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
            _reset(stream)
            return True
        if fault is not None and kind == "status":
            body = fault.body.encode() if fault.body else _error_body(route, fault.status)
            await _send(conn, stream, fault.status, body, fault.headers)
            return False
        if fault is not None and kind == "html":
            page = b"<html><head><title>502 Bad Gateway</title></head><body>proxy</body></html>"
            await _send(
                conn,
                stream,
                fault.status if fault.status != 500 else 502,
                page,
                {"content-type": "text/html"},
            )
            return False
        if kind == "content_filter":
            await _send(conn, stream, 400, _content_filter_body(route))
            return False
        if kind == "context_length":
            await _send(conn, stream, 400, _context_length_body(route))
            return False
        text, usage = _answer_for(route, payload)
        if payload.get("stream"):
            return await self._stream(conn, stream, route, payload, text, usage, fault, record)
        body = json.dumps(_completion(route, payload, text, usage)).encode()
        if kind == "malformed_json":
            body = body[: len(body) // 2]
        if kind == "reset_mid":
            await _start(conn, stream, 200, {"content-length": str(len(body))})
            await stream.send_all(conn.send(h11.Data(data=body[: len(body) // 2])) or b"")
            _reset(stream)
            return True
        await _send(conn, stream, 200, body)
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
        events = _stream_events(route, payload, text, usage)
        kind = fault.kind if fault else None
        await _start(conn, stream, 200, {"content-type": "text/event-stream"})
        try:
            for number, event in enumerate(events):
                if (
                    fault is not None
                    and kind in ("cut_stream", "stream_error")
                    and number == fault.after
                ):
                    if kind == "stream_error":
                        await stream.send_all(conn.send(h11.Data(data=_stream_error(route))) or b"")
                        break
                    if not fault.clean:
                        _reset(stream)
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


# --- answers -------------------------------------------------------------------------


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


def _answer_for(route: str, payload: dict[str, Any]) -> tuple[str, tuple[int, int]]:
    messages = payload.get("messages") or []
    last = ""
    prompt = str(payload.get("system", ""))
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        content_text = content if isinstance(content, str) else json.dumps(content)
        prompt += content_text
        if isinstance(message, dict) and message.get("role") == "user":
            last = content_text
    text = f"echo: {last}"
    return text, (_tokens(prompt), _tokens(text))


def _tool_call(payload: dict[str, Any], text: str) -> tuple[str, str, str] | None:
    tools = payload.get("tools") or []
    if not tools or "call:" not in text:
        return None
    first = tools[0]
    name = first.get("function", {}).get("name") or first.get("name") or "tool"
    argument = text.split("call:", 1)[1].strip()
    return "call_1", name, json.dumps({"query": argument})


def _completion(
    route: str, payload: dict[str, Any], text: str, usage: tuple[int, int]
) -> dict[str, Any]:
    model = payload.get("model", "")
    call = _tool_call(payload, text)
    if route == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": None if call else text}
        if call:
            message["tool_calls"] = [
                {
                    "id": call[0],
                    "type": "function",
                    "function": {"name": call[1], "arguments": call[2]},
                }
            ]
        return {
            "id": "chatcmpl-chaos",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if call:
        content = [
            {"type": "tool_use", "id": call[0], "name": call[1], "input": json.loads(call[2])}
        ]
    return {
        "id": "msg_chaos",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _stream_events(
    route: str, payload: dict[str, Any], text: str, usage: tuple[int, int]
) -> list[bytes]:
    pieces = [word + " " for word in text.split(" ")]
    pieces[-1] = pieces[-1].rstrip(" ")
    model = payload.get("model", "")
    if route == "openai":
        events = [b": chaos keep-alive\n\n"]
        events += [
            _sse({"id": "c", "model": model, "choices": [{"index": 0, "delta": {"content": p}}]})
            for p in pieces
        ]
        events.append(
            _sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        )
        if (payload.get("stream_options") or {}).get("include_usage"):
            events.append(
                _sse(
                    {
                        "id": "c",
                        "choices": [],
                        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
                    }
                )
            )
        events.append(b"data: [DONE]\n\n")
        return events
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_chaos",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "usage": {"input_tokens": usage[0], "output_tokens": 0},
        },
    }
    events = [_sse(start, "message_start"), b'event: ping\ndata: {"type": "ping"}\n\n']
    events.append(
        _sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        )
    )
    events += [
        _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            "content_block_delta",
        )
        for p in pieces
    ]
    events.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    events.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        )
    )
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def _error_body(route: str, status: int) -> bytes:
    if route == "openai":
        kinds = {
            401: ("invalid_request_error", "invalid_api_key"),
            429: ("requests", "rate_limit_exceeded"),
        }
        type_, code = kinds.get(status, ("server_error", None))
        return json.dumps(
            {"error": {"message": f"chaos {status}", "type": type_, "code": code}}
        ).encode()
    kinds_a = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    error = {"type": kinds_a.get(status, "api_error"), "message": f"chaos {status}"}
    return json.dumps({"type": "error", "error": error}).encode()


def _content_filter_body(route: str) -> bytes:
    if route == "openai":
        error = {"message": "filtered", "type": "invalid_request_error", "code": "content_filter"}
        return json.dumps({"error": error}).encode()
    error = {
        "type": "invalid_request_error",
        "message": "Output blocked by content filtering policy",
    }
    return json.dumps({"type": "error", "error": error}).encode()


def _context_length_body(route: str) -> bytes:
    if route == "openai":
        error = {
            "message": "This model's maximum context length is 8192 tokens",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
        return json.dumps({"error": error}).encode()
    error = {
        "type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum",
    }
    return json.dumps({"type": "error", "error": error}).encode()


def _stream_error(route: str) -> bytes:
    if route == "openai":
        return _sse(
            {"error": {"message": "overloaded", "type": "server_error", "code": "overloaded"}}
        )
    return _sse(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"
    )


# --- h11 helpers ---------------------------------------------------------------------


async def _read_request(
    conn: h11.Connection, stream: trio.SocketStream
) -> tuple[h11.Request, bytes] | None:
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


async def _start(
    conn: h11.Connection, stream: trio.SocketStream, status: int, headers: Mapping[str, str]
) -> None:
    pairs = [("server", "chaos"), *headers.items()]
    await stream.send_all(conn.send(h11.Response(status_code=status, headers=pairs)) or b"")


async def _send(
    conn: h11.Connection,
    stream: trio.SocketStream,
    status: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
) -> None:
    all_headers = {"content-type": "application/json", **(headers or {})}
    all_headers["content-length"] = str(len(body))
    await _start(conn, stream, status, all_headers)
    await stream.send_all(conn.send(h11.Data(data=body)) or b"")
    await stream.send_all(conn.send(h11.EndOfMessage()) or b"")


def _reset(stream: trio.SocketStream) -> None:
    """Close with RST (SO_LINGER 0), as a crashed proxy would."""
    sock = stream.socket
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the chaos LLM provider on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--script", help="a TOML fault script")
    args = parser.parse_args(argv)
    script = FaultScript()
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            try:
                script = load_script(handle.read())
            except ActorError as err:
                parser.exit(2, f"{err.message}\n")

    async def run() -> None:
        server = ChaosServer(script)
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: server.serve(
                    host=args.host, port=args.port, task_status=task_status
                )
            )
            print(f"chaos provider listening on {server.url}", flush=True)

    trio.run(run)


if __name__ == "__main__":
    main()
