"""Dead letters: messages that could not be delivered, made visible instead of lost.

Every dead letter goes to the hooks (tests read them) and to a ``dead_letter`` event
(target, message type, reason). Events are throttled per runtime: at most
``log_limit`` per second of trio time; the rest are counted and reported in one
``dead_letter.throttled`` event (with ``suppressed``) when the next window opens.
Hooks are never throttled, and ``total`` counts every letter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import trio

from actors.events import DeadLetterReported, DeadLettersThrottled
from actors.observe import emit


@attrs.frozen
class DeadLetter:
    """One undeliverable message."""

    target: str
    message: Any
    reason: str
    at: float


DeadLetterHook = Callable[[DeadLetter], None]


class DeadLetters:
    """The dead-letter office of one runtime."""

    def __init__(self, *, log_limit: int = 10, window: float = 1.0) -> None:
        self.total = 0
        self._hooks: list[DeadLetterHook] = []
        self._log_limit = log_limit
        self._window = window
        self._window_start = -float("inf")
        self._logged = 0
        self._suppressed = 0

    def add_hook(self, hook: DeadLetterHook) -> Callable[[], None]:
        """Call ``hook`` with every dead letter; returns a function that removes it."""
        self._hooks.append(hook)

        def remove() -> None:
            if hook in self._hooks:
                self._hooks.remove(hook)

        return remove

    def record(self, target: str, message: Any, reason: str) -> None:
        """Count a message that reached nobody and hand it to the hooks (``target``: the
        actor it was for; ``reason``: why it was not delivered)."""
        now = trio.current_time()
        letter = DeadLetter(target=target, message=message, reason=reason, at=now)
        self.total += 1
        for hook in tuple(self._hooks):
            hook(letter)
        if now - self._window_start >= self._window:
            if self._suppressed:
                emit(DeadLettersThrottled(suppressed=self._suppressed))
            self._window_start = now
            self._logged = 0
            self._suppressed = 0
        if self._logged < self._log_limit:
            self._logged += 1
            emit(
                DeadLetterReported(
                    target=target, message_type=type(message).__name__, reason=reason
                )
            )
        else:
            self._suppressed += 1
