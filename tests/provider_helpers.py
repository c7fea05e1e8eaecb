"""Helpers for provider tests over ``httpx.MockTransport``."""

from __future__ import annotations

import json
from typing import Any


def sse(*events: tuple[str | None, Any]) -> bytes:
    """A ``text/event-stream`` body: one event per ``(name, data)``; ``data`` that is not a
    string is JSON-encoded, a ``None`` name writes no ``event:`` line."""
    lines = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
        lines.append("")
    return ("\n".join(lines) + "\n").encode()
