"""Structured logging: set-up, error expansion, redaction, event hooks.

Call :func:`configure_logging` once at daemon start. The pipeline, in order:

1. merge context bound with :func:`bind_context` (``run_id``, ``node_id``, ``actor``);
2. add level and an ISO-8601 UTC timestamp (wall clock: log stamps are for people;
   runtime decisions use ``trio.current_time()``);
3. :func:`expand_errors`: every :class:`ActorError` value (and ``exc_info`` holding one)
   becomes a dict of fields — ``code``, ``error_class``, ``retryable``, ``message``,
   ``correlation_id``, its context, and ``cause_chain`` (the codes, or type names, along
   ``__cause__``);
4. tracebacks rendered to text, then :func:`redact_processor` over *everything* (keys,
   nested values, the rendered traceback; unknown objects are ``repr``-ed first so a
   secret inside an object's repr is caught too);
5. event hooks (:func:`add_event_hook`), which see the redacted event — tests capture
   events this way (:func:`actors.testing.capture_events`), never by parsing log text;
6. JSON lines (daemons) or a console renderer (development).

Levels below the configured one are filtered by structlog's filtering logger: a disabled
``debug`` call does no formatting at all, which keeps the hot paths cheap.

**Redaction does not depend on this set-up.** The loggers :func:`get_logger` returns (the
runtime's own, and yours if you take them from here) run :func:`library_processor` —
context merge, error expansion, traceback rendering, :func:`redact_processor` — *before*
whatever processors structlog is configured with, read at each event: your own
``structlog.configure(...)``, structlog's defaults, or ``structlog.testing.capture_logs``.
So a secret (shape-matched or registered with :func:`actors.register_secret`) in a message,
a field, a nested value, an object's repr or a traceback never reaches your renderer. When
the pipeline of :func:`configure_logging` is in place it already redacts, and the step is
skipped (nothing is redacted twice). Events of loggers made with ``structlog.get_logger``
directly are yours: add :func:`redact_processor` to your chain for them.
"""

from __future__ import annotations

import enum
import itertools
import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from actors.error_types import ActorError
from actors.redact import redact_value

EventHook = Callable[[dict[str, Any]], None]

_hooks: list[EventHook] = []
_configured = False
_min_level = logging.INFO


def enabled(level: int) -> bool:
    """Whether an event at ``level`` would be emitted: check before building hot-path events."""
    return level >= _min_level


class EventName(enum.StrEnum):
    """Names of the structured events the runtime emits."""

    CLASSIFY_UNPLACED = "classify.unplaced"
    DEAD_LETTER = "dead_letter"
    ACTOR_STARTING = "actor.starting"
    ACTOR_STARTED = "actor.started"
    ACTOR_START_FAILED = "actor.start_failed"
    ACTOR_CRASHED = "actor.crashed"
    ACTOR_RESTARTING = "actor.restarting"
    ACTOR_STOPPING = "actor.stopping"
    ACTOR_STOPPED = "actor.stopped"
    CALL_LATE_REPLY = "actor.late_reply"
    SUPPRESSED = "error.suppressed"


@contextmanager
def bind_context(**values: Any) -> Iterator[None]:
    """Bind ``run_id`` / ``node_id`` / ``actor`` (or any field) for the enclosed code.

    Uses contextvars, so trio tasks spawned inside inherit the binding.
    """
    with structlog.contextvars.bound_contextvars(**values):
        yield


def add_event_hook(hook: EventHook) -> Callable[[], None]:
    """Call ``hook`` with every (redacted) event; returns a function that removes it."""
    _hooks.append(hook)

    def remove() -> None:
        if hook in _hooks:
            _hooks.remove(hook)

    return remove


def is_configured() -> bool:
    """Whether :func:`configure_logging` has run in this process."""
    return _configured


def error_fields(err: ActorError) -> dict[str, Any]:
    """The fields an :class:`ActorError` expands to in an event."""
    fields: dict[str, Any] = {
        "code": str(err.code),
        "error_class": str(err.error_class),
        "retryable": err.retryable,
        "message": err.message,
        "correlation_id": err.correlation_id,
    }
    fields.update(err.context())
    if err.usage is not None:
        fields["usage"] = {
            "input_tokens": err.usage.input_tokens,
            "output_tokens": err.usage.output_tokens,
            "cost": err.usage.cost,
        }
    chain = cause_chain(err)
    if chain:
        fields["cause_chain"] = chain
    if err.errors:
        fields["members"] = [str(m.code) for m in err.errors]
    return fields


def cause_chain(err: BaseException, *, limit: int = 10) -> list[str]:
    """Codes (or exception type names) along ``__cause__``, nearest first."""
    chain: list[str] = []
    seen = {id(err)}
    current = err.__cause__
    while current is not None and len(chain) < limit and id(current) not in seen:
        seen.add(id(current))
        chain.append(
            str(current.code) if isinstance(current, ActorError) else type(current).__name__
        )
        current = current.__cause__
    return chain


def expand_errors(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """Replace every :class:`ActorError` value with its fields (see :func:`error_fields`)."""
    for key, value in list(event_dict.items()):
        if isinstance(value, ActorError):
            event_dict[key] = error_fields(value)
    exc_info = event_dict.get("exc_info")
    if isinstance(exc_info, ActorError) and "error" not in event_dict:
        event_dict["error"] = error_fields(exc_info)
    return event_dict


def redact_processor(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """Redact secrets from every value of the event (see :mod:`actors.redact`); unknown
    objects are rendered with ``repr`` first, so the event is plain JSON-able data."""
    redacted: dict[str, Any] = redact_value(dict(event_dict))
    return redacted


def _dispatch_hooks(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    for hook in tuple(_hooks):
        hook(dict(event_dict))
    return event_dict


_timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
_merge_contextvars = structlog.contextvars.merge_contextvars
_format_exc_info = structlog.processors.format_exc_info


def _prepare(logger: WrappedLogger, name: str, event_dict: EventDict) -> EventDict:
    """Steps 1-5 of the pipeline in one processor (one call per event, not six)."""
    event_dict = _merge_contextvars(logger, name, event_dict)
    event_dict["level"] = name
    event_dict = _timestamper(logger, name, event_dict)
    event_dict = expand_errors(logger, name, event_dict)
    if "exc_info" in event_dict or "exception" in event_dict:
        event_dict = _format_exc_info(logger, name, event_dict)
    event_dict = redact_processor(logger, name, event_dict)
    return _dispatch_hooks(logger, name, event_dict)


def library_processor(logger: WrappedLogger, name: str, event_dict: EventDict) -> EventDict:
    """What the library's loggers do to an event before any configured processor sees it.

    Merges the context bound with :func:`bind_context` (so a later ``merge_contextvars``
    adds nothing unredacted), expands :class:`ActorError` values, renders ``exc_info`` to
    text, then redacts everything (:func:`redact_processor`). ``exc_info`` is consumed: no
    processor after this one can render the live exception (and its secrets) again.
    """
    event_dict = _merge_contextvars(logger, name, event_dict)
    event_dict = expand_errors(logger, name, event_dict)
    if "exc_info" in event_dict:
        event_dict = _format_exc_info(logger, name, event_dict)
        if name == "exception":
            # structlog's set_exc_info would put the live exception back for this method.
            event_dict["exc_info"] = False
    return redact_processor(logger, name, event_dict)


class _LibraryProcessors:
    """The processor chain of :func:`get_logger`'s loggers, read from structlog's
    configuration at each event: :func:`library_processor`, then the configured chain —
    or the configured chain alone when it is :func:`configure_logging`'s (it redacts)."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Processor]:
        configured: Iterable[Processor] = structlog.get_config()["processors"]
        if _prepare in configured:
            return iter(configured)
        return itertools.chain((library_processor,), configured)

    def __repr__(self) -> str:
        return "<library_processor, then structlog's configured processors>"


_LIBRARY_PROCESSORS = _LibraryProcessors()


def get_logger(name: str) -> Any:
    """The logger for ``name``: structlog's, configured as usual, whose events are redacted
    whatever that configuration is (see the module docstring)."""
    return structlog.wrap_logger(None, processors=_LIBRARY_PROCESSORS, logger_factory_args=(name,))


def _render_json(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> str:
    # Values are plain data after redaction: no fallback serializer is needed.
    return json.dumps(event_dict)


def configure_logging(
    *,
    mode: Literal["json", "console"] = "json",
    level: str | int = "info",
    stream: TextIO | None = None,
) -> None:
    """Configure structlog for a daemon (``json``) or for development (``console``).

    ``level`` is a name (``"debug"``) or a ``logging`` number. ``stream`` defaults to
    stdout. Safe to call again (tests do); the last call wins.
    """
    global _configured, _min_level
    numeric = level if isinstance(level, int) else logging.getLevelNamesMapping()[level.upper()]
    renderer: Processor = (
        _render_json if mode == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    processors: list[Processor] = [_prepare, renderer]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(stream if stream is not None else sys.stdout),
        cache_logger_on_first_use=False,
    )
    _configured = True
    _min_level = numeric
