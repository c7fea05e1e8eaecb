"""What the chaos server sends for one routed request and its fault (if any).

:func:`respond` plays a fault on both kinds of request as tabled in
:mod:`actors.testing.chaos` — every fault it is given applies to the request (the script
only hands out faults that fit). On a streaming request the stream-shaped faults act on
the events of :class:`~actors.testing.chaos.dialects.StreamPlan`, never past its
``finish``, so a stream they break is never a complete answer:

* ``cut_stream`` / ``stream_error``: ``after`` events are sent (at most up to the
  finish), then the close or the error event;
* ``malformed_json``: the middle one of the events that carry JSON before the finish is
  sent with its JSON cut in half; the rest of the stream follows;
* ``reset_mid``: half the events (at most up to the finish), then a reset.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

import trio

from actors.testing.chaos.dialects import (
    DIALECTS,
    StreamPlan,
    WireDialect,
    answer_for,
    is_json_event,
    truncate_event,
)
from actors.testing.chaos.script import Fault
from actors.testing.chaos.wire import Exchange

#: What the ``html`` fault sends.
HTML_PAGE: Final = b"<html><head><title>502 Bad Gateway</title></head><body>proxy</body></html>"


async def respond(
    exchange: Exchange, route: str, payload: dict[str, Any], fault: Fault | None
) -> bool:
    """Answer one request on ``exchange``; ``True`` when the connection was reset (it
    must not be used again)."""
    dialect = DIALECTS[route]
    kind = fault.kind if fault else None
    if fault is not None and fault.kind in ("latency", "hang"):
        forever = fault.kind == "hang" and not fault.seconds
        await trio.sleep(math.inf if forever else fault.seconds)
    if kind == "reset_before":
        exchange.reset()
        return True
    answer = answer_for(payload)
    if fault is not None and fault.kind == "status":
        body = fault.body.encode() if fault.body else dialect.error_body(fault.status, answer.model)
        await exchange.respond(fault.status, body, fault.headers)
        return False
    if fault is not None and fault.kind == "html":
        status = fault.status if fault.status != 500 else 502
        await exchange.respond(status, HTML_PAGE, {"content-type": "text/html"})
        return False
    if kind == "content_filter":
        await exchange.respond(400, dialect.content_filter_body())
        return False
    if kind == "context_length":
        await exchange.respond(400, dialect.context_length_body())
        return False
    if payload.get("stream") is True:
        return await _stream(exchange, dialect, dialect.stream(answer, payload), fault)
    return await _complete(exchange, json.dumps(dialect.completion(answer)).encode(), kind)


async def _complete(exchange: Exchange, body: bytes, kind: str | None) -> bool:
    if kind == "malformed_json":
        body = body[: len(body) // 2]
    if kind == "reset_mid":
        await exchange.start(
            200, {"content-type": "application/json", "content-length": str(len(body))}
        )
        await exchange.data(body[: len(body) // 2])
        exchange.reset()
        return True
    await exchange.respond(200, body)
    return False


async def _stream(
    exchange: Exchange, dialect: WireDialect, plan: StreamPlan, fault: Fault | None
) -> bool:
    events = list(plan.events)
    stop = len(events)  # events sent before the fault's ending (all: none)
    kind = fault.kind if fault else None
    if fault is not None and kind in ("cut_stream", "stream_error"):
        stop = min(fault.after, plan.finish)
    elif kind == "reset_mid":
        stop = min(len(events) // 2, plan.finish)
    elif kind == "malformed_json":
        carrying = [i for i in range(plan.finish) if is_json_event(events[i])]
        target = carrying[len(carrying) // 2]
        events[target] = truncate_event(events[target])
    await exchange.start(200, {"content-type": "text/event-stream", "cache-control": "no-cache"})
    for event in events[:stop]:
        await exchange.data(event)
        if fault is not None and kind == "slow_stream":
            await trio.sleep(fault.seconds)
    if kind == "reset_mid" or (fault is not None and kind == "cut_stream" and not fault.clean):
        exchange.reset()
        return True
    await exchange.end(dialect.stream_error() if kind == "stream_error" else b"")
    return False
