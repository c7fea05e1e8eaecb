"""A bridge for call sites that still log an event by name (temporary).

Some modules still emit with ``_log.<level>("actor.crashed", actor=…, error=…)`` rather
than :func:`actors.observe.emit`. While they do, :func:`record_from_log` builds the record
from the raw keywords of such a call (before any processor touched them), so the hooks
get the same record either way. Limits: only a call that passes the log level reaches the
bridge (a record passed to ``emit`` reaches the hooks at any level), and only the names
below are bridged. Delete this module once no call site logs these names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from actors.error_types import ActorError
from actors.events._base import Event
from actors.events.diagnostics import ClassifyUnplaced
from actors.events.lifecycle import (
    ActorCastFailed,
    ActorCleanupFailed,
    ActorCleanupTimeout,
    ActorCrashed,
    ActorLateReply,
    ActorRestarting,
    ActorStarted,
    ActorStartFailed,
    ActorStopped,
    ErrorSuppressed,
)
from actors.events.supervision import (
    ChildStarted,
    ChildStopped,
    SupervisorDecision,
    SupervisorEscalated,
)


def _by_fields(cls: type[Event]) -> Callable[[Mapping[str, Any]], Event]:
    names = tuple(field.name for field in attrs.fields(cls))

    def build(values: Mapping[str, Any]) -> Event:
        return cls(**{name: values[name] for name in names if name in values})

    return build


def _decision(values: Mapping[str, Any]) -> Event:
    # The call site logs the error flattened; rebuild an error with what it logs.
    error = ActorError.from_code(
        values["code"],
        values["message"],
        error_class=values["error_class"],
        correlation_id=values["correlation_id"],
    )
    return SupervisorDecision(
        supervisor=values["supervisor"],
        child=values["child"],
        error=error,
        directive=values["directive"],
        restarts=values["restarts"],
        delay=values["delay"],
        at=values["at"],
    )


_BUILDERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    cls.name: _by_fields(cls)
    for cls in (
        ActorStarted,
        ActorStartFailed,
        ActorCrashed,
        ActorRestarting,
        ActorStopped,
        ActorLateReply,
        ActorCastFailed,
        ActorCleanupFailed,
        ActorCleanupTimeout,
        ErrorSuppressed,
        SupervisorEscalated,
        ChildStarted,
        ChildStopped,
        ClassifyUnplaced,
    )
}
_BUILDERS[SupervisorDecision.name] = _decision


def record_from_log(values: Mapping[str, Any]) -> Event | None:
    """The record for a by-name log call's keywords (``event`` holds the name), or
    ``None`` if that name is not bridged."""
    build = _BUILDERS.get(str(values.get("event")))
    return None if build is None else build(values)
