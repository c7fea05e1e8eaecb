"""Actor lifecycle records: an incarnation starts, crashes, restarts, stops; replies and
cleanup that went wrong; failures that lost to a cancel.

``actor`` is always the actor's path (``/root/name``), redacted like any free text.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import attrs

from actors.error_types import ActorError
from actors.events._base import Event


@attrs.frozen(kw_only=True)
class ActorStarted(Event):
    """An incarnation's ``on_start`` returned (or it has none): it serves messages now."""

    name: ClassVar[str] = "actor.started"
    level: ClassVar[int] = logging.DEBUG

    actor: str
    #: Restarts before this incarnation (0 for the first).
    restarts: int


@attrs.frozen(kw_only=True)
class ActorStartFailed(Event):
    """Building the instance or its ``on_start`` failed; ``error`` is the classified
    failure (its ``actor`` set)."""

    name: ClassVar[str] = "actor.start_failed"
    level: ClassVar[int] = logging.WARNING

    actor: str
    error: ActorError


@attrs.frozen(kw_only=True)
class ActorCrashed(Event):
    """A handler raised, under the runtime's own restart rule (actors of a supervisor
    tree report a crash in ``supervisor.decision`` instead)."""

    name: ClassVar[str] = "actor.crashed"
    level: ClassVar[int] = logging.WARNING

    actor: str
    error: ActorError
    #: Restarts so far, not counting the one this crash may cause.
    restarts: int


@attrs.frozen(kw_only=True)
class ActorRestarting(Event):
    """The runtime's restart rule restarts a crashed actor."""

    name: ClassVar[str] = "actor.restarting"
    level: ClassVar[int] = logging.INFO

    actor: str
    #: Restarts including this one.
    restarts: int


@attrs.frozen(kw_only=True)
class ActorStopped(Event):
    """An actor's slot closed for good: its queued messages became dead letters."""

    name: ClassVar[str] = "actor.stopped"
    level: ClassVar[int] = logging.DEBUG

    actor: str
    #: Why (``"normal"``, ``"crashed:<code>"``, a cancel reason …).
    reason: str


@attrs.frozen(kw_only=True)
class ActorLateReply(Event):
    """A handler returned for a call whose caller had already gone (timed out,
    cancelled): the value is dropped."""

    name: ClassVar[str] = "actor.late_reply"
    level: ClassVar[int] = logging.DEBUG

    actor: str


@attrs.frozen(kw_only=True)
class ActorCastFailed(Event):
    """Handling a cast returned a failure value: no caller to hand it to."""

    name: ClassVar[str] = "actor.cast_failed"
    level: ClassVar[int] = logging.WARNING

    actor: str
    error: ActorError


@attrs.frozen(kw_only=True)
class ActorCleanupFailed(Event):
    """A cleanup hook raised; the instance goes away regardless."""

    name: ClassVar[str] = "actor.cleanup_failed"
    level: ClassVar[int] = logging.ERROR

    actor: str
    #: ``"on_stop"`` or ``"on_restart"``.
    hook: str
    error: ActorError


@attrs.frozen(kw_only=True)
class ActorCleanupTimeout(Event):
    """A cleanup hook overran the actor's cleanup budget and was cancelled."""

    name: ClassVar[str] = "actor.cleanup_timeout"
    level: ClassVar[int] = logging.WARNING

    actor: str
    #: ``"on_stop"`` or ``"on_restart"``.
    hook: str


@attrs.frozen(kw_only=True)
class ErrorSuppressed(Event):
    """A failure lost to a cancel: the callers get ``cancelled`` (with the failure as its
    cause), no policy is consulted, and the failure is reported here.

    From an actor: ``actor`` is set. From a supervisor deciding on a child's failure
    while its subtree is cancelled: ``supervisor`` and ``child`` are set. Unset location
    fields are left out of the log line.
    """

    name: ClassVar[str] = "error.suppressed"
    level: ClassVar[int] = logging.INFO

    actor: str | None = None
    supervisor: str | None = None
    child: str | None = None
    #: The cancel's reason.
    reason: str
    #: The failure that was superseded.
    suppressed: ActorError

    def fields(self) -> dict[str, Any]:
        """The log fields: the set location fields, then ``reason`` and ``suppressed``."""
        fields = super().fields()
        for key in ("actor", "supervisor", "child"):
            if fields[key] is None:
                del fields[key]
        return fields
