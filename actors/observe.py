"""Structured logging and events: set-up, error expansion, redaction, event hooks.

**Events** are typed records (:mod:`actors.events`). :func:`emit` hands a record to every
hook (:func:`add_event_hook`) — instrumentation, whatever the log level — then logs it
through structlog, the default sink, if the configured level lets it through: the event
name, the level, the record's fields (:meth:`Event.fields`). Call sites build a
debug-level record only when :func:`enabled` says someone would see it.

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
5. JSON lines (daemons) or a console renderer (development).

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
directly are yours: add :func:`redact_processor` to your chain for them. Hooks get each
record redacted (:meth:`actors.events.Event.redacted`).
"""

from __future__ import annotations

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
from actors.events._base import Event, EventHook, RedactedCause
from actors.events.diagnostics import HookFailed
from actors.redact import redact_value

__all__ = [
    "EventHook",
    "add_event_hook",
    "bind_context",
    "cause_chain",
    "configure_logging",
    "emit",
    "enabled",
    "error_fields",
    "expand_errors",
    "get_logger",
    "is_configured",
    "library_processor",
    "redact_processor",
]

# Copy-on-write: emit iterates the tuple it finds, adding or removing a hook meanwhile
# (even from inside a hook) takes effect from the next event.
_hooks: tuple[EventHook, ...] = ()
_configured = False
_min_level = logging.INFO
# enabled() compares against this one number: the log level, or NOTSET while any hook
# is installed (hooks want every event, whatever the log level).
_enabled_from = _min_level


def enabled(level: int) -> bool:
    """Whether an event at ``level`` would be seen: its level passes the log filter, or a
    hook is installed. Check it before building a debug-level record on a hot path."""
    return level >= _enabled_from


def _update_enabled() -> None:
    global _enabled_from
    _enabled_from = logging.NOTSET if _hooks else _min_level


@contextmanager
def bind_context(**values: Any) -> Iterator[None]:
    """Bind ``run_id`` / ``node_id`` / ``actor`` (or any field) for the enclosed code.

    Uses contextvars, so trio tasks spawned inside inherit the binding.
    """
    with structlog.contextvars.bound_contextvars(**values):
        yield


def add_event_hook(hook: EventHook) -> Callable[[], None]:
    """Call ``hook`` with every event record from now on, whatever the log level.

    Returns a function that removes this registration; calling it again does nothing.
    A hook added twice is called twice per event until both are removed. A hook runs in
    the emitting task, after the event is logged, with the record's redacted copy; an
    ``Exception`` it raises is logged as ``event_hook.failed`` (with its traceback) and
    never reaches the emitter. ``TypeError`` if ``hook`` is not callable.
    """
    global _hooks
    if not callable(hook):
        raise TypeError(f"an event hook is called with each record, not {type(hook).__name__}")
    _hooks = (*_hooks, hook)
    _update_enabled()
    removed = False

    def remove() -> None:
        global _hooks
        nonlocal removed
        if removed:
            return
        removed = True
        # By identity: two equal hooks (dataclass instances) are two registrations.
        index = next(i for i, installed in enumerate(_hooks) if installed is hook)
        _hooks = _hooks[:index] + _hooks[index + 1 :]
        _update_enabled()

    return remove


def emit(event: Event) -> None:
    """Report ``event``: to the log if its level passes the filter, then to every hook.

    The log line is written first, so nothing a hook does to the record's (mutable) error
    snapshot reaches it. Build a debug-level record only when :func:`enabled` is true
    (the check is one comparison; building a record is not free).
    """
    if event.level >= _min_level:
        try:
            _log_record(event)
        except Exception as exc:  # noqa: BLE001 - reported; the emitter must go on
            # A value the log cannot render (a cycle, a broken __repr__): the record still
            # reaches the hooks, and the failure is logged as the sink's own.
            _sink_failed(event, exc)
    _dispatch(event)


def _log_record(event: Event, **extra: Any) -> None:
    getattr(_sink_logger(), _method_for(event.level))(event.name, **event.fields(), **extra)


# The sink's bound logger, and the structlog configuration it was bound under.
_bound: tuple[tuple[object, ...], Any] | None = None


def _sink_logger() -> Any:
    """:data:`_sink` bound once per structlog configuration, not once per event.

    Binding makes a logger with the configured factory (a new ``PrintLogger`` each time);
    the processors stay :data:`_LIBRARY_PROCESSORS`, read at each event. A new
    ``structlog.configure`` (or :func:`configure_logging`) brings a new factory, wrapper
    or context class, and the next event binds again.
    """
    global _bound
    config = structlog.get_config()
    key = (config["logger_factory"], config["wrapper_class"], config["context_class"])
    if _bound is None or any(a is not b for a, b in zip(_bound[0], key, strict=True)):
        _bound = (key, _sink.bind())
    return _bound[1]


def _dispatch(event: Event) -> None:
    hooks = _hooks
    if not hooks:
        return
    event = event.redacted()
    for hook in hooks:
        try:
            hook(event)
        except Exception as exc:  # noqa: BLE001 - logged; the emitter must go on
            failed = HookFailed(
                hook=_hook_name(hook), failed_event=event.name, error=_exception_text(exc)
            )
            if failed.level >= _min_level:
                _log_record(failed, exc_info=exc)


def _sink_failed(event: Event, exc: Exception) -> None:
    failed = HookFailed(hook="log", failed_event=event.name, error=_exception_text(exc))
    if failed.level >= _min_level:
        try:
            _log_record(failed)
        except Exception as broken:  # noqa: BLE001 - the log itself is broken: say so plainly
            print(
                f"resilient-actors: the log cannot write {event.name}: {type(broken).__name__}",
                file=sys.stderr,
            )


def _hook_name(hook: object) -> str:
    """A hook's name for :class:`HookFailed`, without calling anything of the hook's
    (its ``__repr__`` may be what is broken)."""
    name = getattr(hook, "__qualname__", None)
    return name if isinstance(name, str) else type(hook).__qualname__


def _exception_text(exc: BaseException) -> str:
    """``Type: text`` of a hook's exception; a broken ``__str__`` gives its type only."""
    try:
        text = str(exc)
    except Exception as broken:  # noqa: BLE001 - classified: the text is unavailable
        text = f"<str() raised {type(broken).__name__}>"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_METHODS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


def _method_for(level: int) -> str:
    """The logger method for ``level``: the highest standard level not above it."""
    method = _METHODS.get(level)
    if method is None:
        standard = [known for known in _METHODS if known <= level]
        method = _METHODS[max(standard)] if standard else "debug"
    return method


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
    """Codes (or exception type names) along ``__cause__``, nearest first.

    A :class:`~actors.events.RedactedCause` (in a record's error) counts as the type it
    stands for."""
    chain: list[str] = []
    seen = {id(err)}
    current = err.__cause__
    while current is not None and len(chain) < limit and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ActorError):
            chain.append(str(current.code))
        elif isinstance(current, RedactedCause):  # in a record's error snapshot
            chain.append(current.type_name)
        else:
            chain.append(type(current).__name__)
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


_timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
_merge_contextvars = structlog.contextvars.merge_contextvars
_format_exc_info = structlog.processors.format_exc_info


def _prepare(logger: WrappedLogger, name: str, event_dict: EventDict) -> EventDict:
    """Steps 1-4 of the pipeline in one processor (one call per event, not five)."""
    event_dict = _merge_contextvars(logger, name, event_dict)
    event_dict["level"] = name
    event_dict = _timestamper(logger, name, event_dict)
    event_dict = expand_errors(logger, name, event_dict)
    if "exc_info" in event_dict or "exception" in event_dict:
        event_dict = _format_exc_info(logger, name, event_dict)
    return redact_processor(logger, name, event_dict)


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


# The structlog sink of emit() (hooks get the record itself, in emit).
_sink: Any = structlog.wrap_logger(
    None, processors=_LIBRARY_PROCESSORS, logger_factory_args=("actors.events",)
)


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
    _update_enabled()
