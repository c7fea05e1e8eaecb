"""Helpers for testing code built on the runtime: event capture (and, later, chaos)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from actors import observe

__all__ = ["capture_events"]


@contextmanager
def capture_events(*names: str) -> Iterator[list[dict[str, Any]]]:
    """Collect the redacted events emitted inside the block (only ``names``, if given).

    Needs :func:`actors.observe.configure_logging` to have run (at a level that lets the
    events through): events are captured after redaction, exactly as a sink would see them.
    """
    if not observe.is_configured():
        raise RuntimeError("capture_events() needs actors.observe.configure_logging() first")
    captured: list[dict[str, Any]] = []
    wanted = frozenset(names)

    def hook(event: dict[str, Any]) -> None:
        if not wanted or event.get("event") in wanted:
            captured.append(event)

    remove = observe.add_event_hook(hook)
    try:
        yield captured
    finally:
        remove()
