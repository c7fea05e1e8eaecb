"""Event records and hooks: dispatch independent of the log level, hook failures,
capture, and records that are frozen, distinctly named and free of secrets."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import attrs
import pytest
from trio.testing import MockClock

from actors import ActorError, Code, register_secret
from actors.events import (
    RECORDS,
    ActorCrashed,
    BreakerTransition,
    ChildStarted,
    DeadLettersThrottled,
    ErrorSuppressed,
    Event,
    RedactedCause,
    SupervisorDecision,
    TaskFailed,
)
from actors.observe import add_event_hook, cause_chain, configure_logging, emit, enabled
from actors.redact import REDACTED
from actors.testing import capture_events
from supervisors import Breaker

CANARY = "sk-test-CANARY-1234567890"
SHAPELESS = "hunter2-EVENTS-shapeless"


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _throttled(n: int = 3) -> DeadLettersThrottled:
    return DeadLettersThrottled(suppressed=n)


# --- dispatch ----------------------------------------------------------------------------


async def test_hooks_get_records_whatever_the_log_level(autojump_clock: MockClock) -> None:
    stream = io.StringIO()
    configure_logging(mode="json", level="error", stream=stream)
    breaker = Breaker()
    with capture_events(BreakerTransition) as events, pytest.raises(ActorError):
        async with breaker.guard("alpha"):
            raise ActorError.from_code(Code.AUTH, "refused")
    assert [(e.provider, e.before, e.after, e.permanent) for e in events] == [
        ("alpha", "closed", "open", True)
    ]
    assert stream.getvalue() == ""  # info is below the log level: only the hook saw it


def test_a_debug_record_is_logged_only_when_the_level_lets_it_through(
    log_stream: io.StringIO,
) -> None:
    seen: list[Event] = []
    remove = add_event_hook(seen.append)
    try:
        configure_logging(mode="json", level="info", stream=log_stream)
        emit(ChildStarted(supervisor="/root", child="w", restarts=0))
        configure_logging(mode="json", level="debug", stream=log_stream)
        emit(ChildStarted(supervisor="/root", child="w", restarts=1))
    finally:
        remove()
    assert [e.restarts for e in seen if isinstance(e, ChildStarted)] == [0, 1]
    assert [(d["event"], d["level"], d["restarts"]) for d in _lines(log_stream)] == [
        ("child.started", "debug", 1)
    ]


def test_enabled_is_true_below_the_log_level_while_a_hook_is_installed() -> None:
    configure_logging(mode="json", level="info", stream=io.StringIO())
    assert (enabled(logging.DEBUG), enabled(logging.INFO)) == (False, True)
    remove = add_event_hook(lambda event: None)
    assert enabled(logging.DEBUG) is True
    remove()
    assert enabled(logging.DEBUG) is False
    configure_logging(mode="json", level="debug", stream=io.StringIO())
    assert enabled(logging.DEBUG) is True


def test_remove_is_idempotent_and_removes_one_registration() -> None:
    seen: list[int] = []

    def hook(event: Event) -> None:
        seen.append(1)

    first = add_event_hook(hook)
    second = add_event_hook(hook)
    emit(_throttled())
    first()
    first()  # again: nothing more is removed
    emit(_throttled())
    second()
    emit(_throttled())
    assert seen == [1, 1, 1]


def test_a_raising_hook_is_logged_and_breaks_neither_the_emitter_nor_other_hooks(
    log_stream: io.StringIO,
) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError(f"hook broke holding {CANARY}")

    seen: list[Event] = []
    removes = [add_event_hook(broken), add_event_hook(seen.append)]
    try:
        emit(_throttled(7))  # does not raise
    finally:
        for remove in removes:
            remove()
    assert [type(e) for e in seen] == [DeadLettersThrottled]  # the failure is not a hook event
    logged, failed = _lines(log_stream)  # the event's line first: hooks run after the log
    assert (failed["event"], failed["level"], failed["failed_event"]) == (
        "event_hook.failed",
        "error",
        "dead_letter.throttled",
    )
    assert failed["hook"].endswith("broken")
    assert failed["error"] == "RuntimeError: hook broke holding [REDACTED]"
    assert "Traceback" in failed["exception"]
    assert CANARY not in log_stream.getvalue()
    assert (logged["event"], logged["suppressed"]) == ("dead_letter.throttled", 7)


def test_a_record_the_log_sink_cannot_render_still_reaches_the_hooks(
    log_stream: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unrenderable(self: Event) -> dict[str, Any]:
        raise RecursionError(f"too deep near {CANARY}")

    monkeypatch.setattr(DeadLettersThrottled, "fields", unrenderable)
    seen: list[Event] = []
    remove = add_event_hook(seen.append)
    try:
        emit(_throttled(3))  # does not raise
    finally:
        remove()
    assert [type(e) for e in seen] == [DeadLettersThrottled]
    (failed,) = _lines(log_stream)
    assert (failed["event"], failed["hook"], failed["failed_event"]) == (
        "event_hook.failed",
        "log",
        "dead_letter.throttled",
    )
    assert failed["error"] == "RecursionError: too deep near [REDACTED]"
    assert CANARY not in log_stream.getvalue()


def test_a_hook_that_adds_a_hook_takes_effect_from_the_next_event() -> None:
    late: list[Event] = []
    removes: list[Any] = []

    def adder(event: Event) -> None:
        if not removes[1:]:
            removes.append(add_event_hook(late.append))

    removes.append(add_event_hook(adder))
    try:
        emit(_throttled(1))
        emit(_throttled(2))
    finally:
        for remove in removes:
            remove()
    assert [e.suppressed for e in late if isinstance(e, DeadLettersThrottled)] == [2]


# --- capture -----------------------------------------------------------------------------


def test_capture_by_name_by_class_and_by_base_class() -> None:
    crash = ActorCrashed(actor="/root/a", error=ActorError.from_code(Code.TOOL_FAILED), restarts=0)
    with (
        capture_events("actor.crashed") as by_name,
        capture_events(DeadLettersThrottled) as by_class,
        capture_events(Event) as by_base,
        capture_events() as everything,
        capture_events("actor.crashed", DeadLettersThrottled) as mixed,
    ):
        emit(crash)
        emit(_throttled())
    assert [type(e) for e in by_name] == [ActorCrashed]
    assert [type(e) for e in by_class] == [DeadLettersThrottled]
    assert [type(e) for e in by_base] == [ActorCrashed, DeadLettersThrottled]
    assert [type(e) for e in everything] == [ActorCrashed, DeadLettersThrottled]
    assert [type(e) for e in mixed] == [ActorCrashed, DeadLettersThrottled]


def test_capturing_an_unknown_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no event record is named actor\.crashd"):
        capture_events("actor.crashd")  # refused at once, before the block


def test_capture_stops_at_the_end_of_the_block() -> None:
    with capture_events() as events:
        emit(_throttled(1))
    emit(_throttled(2))
    assert [e.suppressed for e in events if isinstance(e, DeadLettersThrottled)] == [1]


# --- records -----------------------------------------------------------------------------


def test_records_are_frozen() -> None:
    record = _throttled(1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.suppressed = 2  # type: ignore[misc]


def test_every_record_has_a_distinct_name_and_a_standard_level() -> None:
    names = [cls.name for cls in RECORDS]
    assert len(names) == len(set(names))
    assert {cls.level for cls in RECORDS} <= {
        logging.DEBUG,
        logging.INFO,
        logging.WARNING,
        logging.ERROR,
    }


def test_records_lists_every_record_class_of_actors_events() -> None:
    found: set[type[Event]] = set()
    pending: list[type[Event]] = [Event]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("actors.events.") and "name" in vars(cls):
            found.add(cls)
    assert {(c.__module__, c.__qualname__) for c in found} == {
        (c.__module__, c.__qualname__) for c in RECORDS
    }


def test_log_fields_keep_their_shape(log_stream: io.StringIO) -> None:
    error = ActorError.from_code(Code.RATE_LIMITED, "slow down", provider="alpha")
    emit(ErrorSuppressed(actor="/root/a", reason="cancelled", suppressed=error))
    emit(
        SupervisorDecision(
            supervisor="/root",
            child="a",
            error=error,
            directive="restart",
            restarts=1,
            delay=4.0,
            at=0.0,
        )
    )
    emit(TaskFailed(task="stop", error=repr(ValueError("x"))))
    suppressed, decision, task = _lines(log_stream)
    assert list(suppressed) == ["actor", "reason", "suppressed", "event", "level", "timestamp"]
    assert suppressed["suppressed"]["code"] == "rate_limited"
    assert {k: decision[k] for k in ("code", "error_class", "message", "correlation_id")} == {
        "code": "rate_limited",
        "error_class": "provider_transient",
        "message": "slow down",
        "correlation_id": error.correlation_id,
    }
    assert "error" not in decision
    assert task["error"] == "ValueError('x')"


# --- secrets -----------------------------------------------------------------------------


def _leaky_error() -> ActorError:
    register_secret(SHAPELESS)
    member = ActorError.from_code(Code.TOOL_FAILED, "member", model=SHAPELESS)
    try:
        try:
            raise ValueError(f"client blew up using {CANARY}")
        except ValueError as inner:
            raise KeyError(SHAPELESS) from inner
    except KeyError as exc:
        cause: BaseException = exc
    return ActorError.from_code(
        Code.UNAVAILABLE,
        f"failed with {CANARY}",
        cause=cause,
        model=CANARY,
        run_id=SHAPELESS,
        partial_text=f"model said {SHAPELESS}",
        errors=(member,),
    )


def _walk(value: Any, seen: set[int]) -> list[str]:
    """Every string reachable from ``value``: fields, exception attributes, causes."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    if isinstance(value, BaseException):
        assert value.__traceback__ is None  # no frames, no locals
        out += _walk(vars(value), seen) + _walk(value.args, seen)
        out += _walk(value.__cause__, seen) + _walk(value.__context__, seen)
    if attrs.has(type(value)):
        out += _walk({f.name: getattr(value, f.name) for f in attrs.fields(type(value))}, seen)
    elif isinstance(value, dict):
        out += [s for k, v in value.items() for s in _walk(k, seen) + _walk(v, seen)]
    elif isinstance(value, list | tuple):
        out += [s for v in value for s in _walk(v, seen)]
    return out


def test_no_secret_reaches_a_hook() -> None:
    original = _leaky_error()
    with capture_events() as events:
        emit(ActorCrashed(actor=f"/root/{CANARY}", error=original, restarts=0))
        emit(TaskFailed(task="t", error=repr(ValueError(CANARY))))
    texts = [text for event in events for text in _walk(event, set())]
    texts += [repr(event) for event in events]
    assert any(REDACTED in text for text in texts)
    for text in texts:
        assert CANARY not in text
        assert SHAPELESS not in text


def test_a_records_error_is_a_faithful_snapshot() -> None:
    original = _leaky_error()
    record = ActorCrashed(actor="/root/a", error=original, restarts=0)
    snap = record.redacted().error  # what a hook gets
    assert snap is not original
    assert type(snap) is type(original)
    assert (snap.code, snap.correlation_id, snap.retryable, snap.partial_text) == (
        original.code,
        original.correlation_id,
        original.retryable,
        None,
    )
    assert snap.model == REDACTED
    assert [m.code for m in snap.errors] == [Code.TOOL_FAILED]
    assert cause_chain(snap) == cause_chain(original) == ["KeyError", "ValueError"]
    assert isinstance(snap.__cause__, RedactedCause)
    assert snap.__cause__.type_name == "KeyError"
    assert original.model == CANARY  # the live error is untouched


def test_run_outcome_of_each_terminal_record() -> None:
    from actors.events import RunCancelled, RunCompleted, RunFailed, run_outcome

    common = {"run_id": "r", "seq": 1, "at": 0.0, "duration": 1.0, "tokens": 0, "cost": 0.0}
    cancel = {"reason": "x", "in_flight": (), **common}
    assert run_outcome(RunCompleted(state={}, **common)) == ("completed", "")
    failed = RunFailed(code="tool_failed", message="m", correlation_id="c", node_id=None, **common)
    assert run_outcome(failed) == ("failed", "tool_failed")
    assert run_outcome(RunCancelled(**cancel)) == ("cancelled", "cancelled")
    assert run_outcome(RunCancelled(resumable=True, **cancel)) == ("interrupted", "cancelled")
