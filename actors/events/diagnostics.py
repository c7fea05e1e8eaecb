"""Runtime diagnostics: background tasks that failed unseen, dead letters, failures no
classification rule places, and event hooks that raised."""

from __future__ import annotations

import logging
from typing import ClassVar

import attrs

from actors.error_types import ActorError
from actors.events._base import Event


@attrs.frozen(kw_only=True)
class TaskFailed(Event):
    """Work that must complete (``run_to_completion``: a stop, a terminate) raised after
    the task that asked for it had left, so nobody else sees the failure."""

    name: ClassVar[str] = "task.failed"
    level: ClassVar[int] = logging.ERROR

    #: The function's ``__name__`` (or its ``repr``).
    task: str
    #: What it raised: the :class:`ActorError` (a snapshot), or the ``repr`` of any
    #: other exception.
    error: ActorError | str


@attrs.frozen(kw_only=True)
class DeadLetterReported(Event):
    """A message could not be delivered (throttled: see ``dead_letter.throttled``)."""

    name: ClassVar[str] = "dead_letter"
    level: ClassVar[int] = logging.WARNING

    #: The path of the actor it was sent to.
    target: str
    #: The message's type name (never the message: it may hold anything).
    message_type: str
    #: ``"actor_stopped"`` or ``"mailbox_overflow"``.
    reason: str


@attrs.frozen(kw_only=True)
class DeadLettersThrottled(Event):
    """Dead-letter events past a runtime's limit per window were not emitted; this one
    counts them, when the next window opens."""

    name: ClassVar[str] = "dead_letter.throttled"
    level: ClassVar[int] = logging.WARNING

    #: Dead letters of the last window without a ``dead_letter`` event.
    suppressed: int


@attrs.frozen(kw_only=True)
class ClassifyUnplaced(Event):
    """Something no classification rule places became ``internal``: a gap in the rules."""

    name: ClassVar[str] = "classify.unplaced"
    level: ClassVar[int] = logging.ERROR

    #: The type name of what was classified.
    kind: str
    provider: str | None
    #: The ``internal`` error it became.
    error: ActorError


@attrs.frozen(kw_only=True)
class HookFailed(Event):
    """An event hook raised. Logged with the traceback, and never handed to the hooks
    (a failing hook must not cause more hook calls)."""

    name: ClassVar[str] = "event_hook.failed"
    level: ClassVar[int] = logging.ERROR

    #: The hook's qualified name (or its ``repr``).
    hook: str
    #: The name of the event it was handed.
    failed_event: str
    #: The ``repr`` of what it raised.
    error: str
