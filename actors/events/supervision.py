"""Supervisor records: decisions on failures, escalations, and children's progress.

``supervisor`` is the supervisor's path, ``child`` the child's id, both redacted like
any free text.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import attrs

from actors.error_types import ActorError
from actors.events._base import Event


@attrs.frozen(kw_only=True)
class SupervisorDecision(Event):
    """The supervisor decided what a child's failure leads to (never for a cancel).

    The log line carries the error flattened, as it always has: ``code``,
    ``error_class``, ``message`` and ``correlation_id`` in place of ``error``.
    """

    name: ClassVar[str] = "supervisor.decision"
    level: ClassVar[int] = logging.INFO

    supervisor: str
    child: str
    #: The failure decided on (``restart_intensity_exceeded`` when a restart was refused).
    error: ActorError
    #: ``resume``, ``restart``, ``stop``, ``escalate`` or ``abort``.
    directive: str = attrs.field(converter=str)
    #: Failures counted in the intensity window (this one included if it asked a restart).
    restarts: int
    #: Backoff before the restart, in seconds (0.0 when none or not a restart).
    delay: float
    #: When, in trio time.
    at: float

    def fields(self) -> dict[str, Any]:
        """The log fields: the error flattened (see the class docstring)."""
        error = self.error
        return {
            "supervisor": self.supervisor,
            "child": self.child,
            "code": str(error.code),
            "error_class": str(error.error_class),
            "directive": self.directive,
            "restarts": self.restarts,
            "delay": self.delay,
            "at": self.at,
            "message": error.message,
            "correlation_id": error.correlation_id,
        }


@attrs.frozen(kw_only=True)
class SupervisorEscalated(Event):
    """A child's failure is escalated: the supervisor fails with ``error``."""

    name: ClassVar[str] = "supervisor.escalated"
    level: ClassVar[int] = logging.WARNING

    supervisor: str
    child: str
    error: ActorError


@attrs.frozen(kw_only=True)
class ChildStarted(Event):
    """A child (worker or sub-supervisor) is running: first start or a restart."""

    name: ClassVar[str] = "child.started"
    level: ClassVar[int] = logging.DEBUG

    supervisor: str
    child: str
    #: Restarts of the child so far (0 for the first start).
    restarts: int


@attrs.frozen(kw_only=True)
class ChildStopped(Event):
    """A child is down for good: its slot (or its subtree's slots) closed."""

    name: ClassVar[str] = "child.stopped"
    level: ClassVar[int] = logging.DEBUG

    supervisor: str
    child: str
    #: Why: its exit reason, ``"crashed:<code>"``, ``"start_failed:<code>"``,
    #: ``"restart:<sibling>"``, a terminate or shutdown reason …
    reason: str
