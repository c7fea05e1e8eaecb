"""A canary secret never reaches a log line, an error message, a user message or an event."""

from __future__ import annotations

import ast
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import structlog
import structlog.testing

from actors import ActorError, Code, bind_context, classify, get_logger, observe, register_secret
from actors.observe import configure_logging
from actors.redact import REDACTED, redact_text, redact_value
from actors.testing import capture_events

CANARY = "sk-test-CANARY-1234567890"
# A registered secret of no recognisable shape: only registration can hide it.
SHAPELESS = "hunter2-CANARY-shapeless"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _register() -> None:
    register_secret(SHAPELESS)


def _failing_exchange() -> tuple[httpx.Request, httpx.Response]:
    request = httpx.Request(
        "POST",
        "http://127.0.0.1:9/v1/chat/completions",
        headers={"Authorization": f"Bearer {CANARY}", "x-api-key": SHAPELESS},
        json={"model": "m"},
    )
    body = {
        "error": {
            "message": f"Incorrect API key provided: {CANARY}. Also {SHAPELESS}.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    return request, httpx.Response(401, json=body, request=request)


def test_canary_never_leaks(log_stream: io.StringIO) -> None:
    log = get_logger("test")
    request, response = _failing_exchange()
    with capture_events() as events, bind_context(run_id="run-1", api_key=CANARY):
        log.info("provider.request", headers=dict(request.headers), url=str(request.url))
        from_body = classify(response, provider="openai")
        log.warning("provider.failed", error=from_body)

        from_exc: ActorError | None = None
        try:
            try:
                raise ValueError(f"client blew up using {CANARY} and {SHAPELESS}")
            except ValueError as exc:
                from_exc = classify(exc, provider="openai")
                raise from_exc from exc
        except ActorError:
            log.exception("provider.crashed")
        log.info("free.text", note=f"Authorization: Bearer {CANARY}", obj=object())

    assert from_exc is not None
    assert from_body.code is Code.AUTH
    lines = log_stream.getvalue()
    assert [json.loads(line)["event"] for line in lines.splitlines()] == [
        "provider.request",
        "provider.failed",
        "classify.unplaced",
        "provider.crashed",
        "free.text",
    ]
    surfaces = [
        lines,
        json.dumps(events, default=str),
        from_body.message,
        from_body.user_message,
        str(from_body),
        from_exc.message,
        from_exc.user_message,
        str(from_exc),
    ]
    for text in surfaces:
        assert CANARY not in text
        assert SHAPELESS not in text
    assert REDACTED in lines
    assert "Traceback" in lines  # the traceback was rendered, then scrubbed


def test_shapes_are_redacted() -> None:
    text = "key sk-ant-api03-abcdefgh, Bearer abc.def-ghi, api_key=xyz123 x-api-key: qqq"
    out = redact_text(text)
    for secret in ("sk-ant-api03-abcdefgh", "abc.def-ghi", "xyz123", "qqq"):
        assert secret not in out
    assert "api_key=[REDACTED]" in out


def test_sensitive_keys_are_replaced_whole() -> None:
    value = {"Authorization": "anything", "nested": [{"x-api-key": "k"}], "ok": "fine"}
    assert redact_value(value) == {
        "Authorization": REDACTED,
        "nested": [{"x-api-key": REDACTED}],
        "ok": "fine",
    }


def test_short_secrets_are_refused() -> None:
    with pytest.raises(ValueError, match="shorter than 4"):
        register_secret("abc")


# --- library events under the user's own structlog configuration (issue #9, item 20) ------


@pytest.fixture
def user_structlog() -> Iterator[None]:
    """The test configures structlog itself; the next test gets the suite's set-up back."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    configure_logging(mode="json", level="debug", stream=io.StringIO())


def _json_config(buf: io.StringIO) -> None:
    """A user's plain JSON set-up: no redact_processor, not even a context merge."""
    structlog.configure(
        processors=[structlog.processors.JSONRenderer()],
        logger_factory=structlog.WriteLoggerFactory(file=buf),
    )


def _default_processors(buf: io.StringIO) -> None:
    """structlog's default processors (context merge, exc_info, console renderer)."""
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=buf))


def _emit_everything() -> None:
    """The canary in the event, a field, a nested dict, an exception's repr, an error's
    context, bound context, and a traceback — through the library's logger factory."""
    log = get_logger("actors.test")
    with bind_context(run_id="run-1", api_key=CANARY, note=f"token {SHAPELESS}"):
        log.error(f"failed with {CANARY}")
        log.warning("field", detail=CANARY, shapeless=SHAPELESS)
        log.info("nested", request={"headers": {"x": [f"Bearer {CANARY}"]}, "n": [SHAPELESS]})
        log.warning("repr", error=ValueError(f"key {CANARY}"), obj=_Leaky())
        log.warning("actor_error", error=ActorError.from_code(Code.TOOL_FAILED, model=CANARY))
        try:
            raise RuntimeError(f"boom {CANARY} {SHAPELESS}")
        except RuntimeError:
            log.exception("traceback")
        log.error("exc_info", exc_info=ValueError(SHAPELESS))


class _Leaky:
    def __repr__(self) -> str:
        return f"<Leaky {SHAPELESS}>"


EMITTED = ["failed with", "field", "nested", "repr", "actor_error", "traceback", "exc_info"]


@pytest.mark.parametrize("configure", [_json_config, _default_processors])
@pytest.mark.usefixtures("user_structlog")
def test_library_events_are_redacted_under_a_user_config(
    configure: Callable[[io.StringIO], None],
) -> None:
    buf = io.StringIO()
    configure(buf)
    _emit_everything()
    out = buf.getvalue()
    for name in EMITTED:
        assert name in out  # every event was rendered by the user's chain
    assert REDACTED in out
    assert "RuntimeError" in out  # the traceback was rendered, then scrubbed
    assert CANARY not in out
    assert SHAPELESS not in out


@pytest.mark.usefixtures("user_structlog")
def test_library_events_are_redacted_under_capture_logs() -> None:
    with structlog.testing.capture_logs() as logs:
        _emit_everything()
    assert [entry["event"] for entry in logs][1:] == EMITTED[1:]
    text = json.dumps(logs)  # plain data: no fallback serializer needed
    assert CANARY not in text
    assert SHAPELESS not in text


def test_capture_logs_over_configure_logging_is_redacted(log_stream: io.StringIO) -> None:
    # capture_logs empties the configured list in place and puts its collector in it.
    with structlog.testing.capture_logs() as logs:
        _emit_everything()
    assert len(logs) == len(EMITTED)
    assert CANARY not in json.dumps(logs)
    assert SHAPELESS not in json.dumps(logs)


@pytest.mark.usefixtures("user_structlog")
def test_a_real_library_event_is_redacted_under_a_user_config() -> None:
    buf = io.StringIO()
    _json_config(buf)
    err = classify(_Leaky(), provider="openai", model=CANARY, node_id=SHAPELESS)
    assert err.code is Code.INTERNAL
    (line,) = buf.getvalue().splitlines()
    event = json.loads(line)
    assert event["event"] == "classify.unplaced"
    assert event["error"]["model"] == REDACTED
    assert CANARY not in line
    assert SHAPELESS not in line


@pytest.mark.parametrize("mine", [True, False])
@pytest.mark.usefixtures("user_structlog")
def test_events_are_redacted_once(mine: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def counting(value: object) -> object:
        calls.append(value)
        return redact_value(value)

    monkeypatch.setattr(observe, "redact_value", counting)
    buf = io.StringIO()
    if mine:
        configure_logging(mode="json", level="info", stream=buf)
    else:
        _json_config(buf)
    get_logger("actors.test").info("once", secret_ish=CANARY)
    assert len(calls) == 1
    assert CANARY not in buf.getvalue()


def test_the_library_takes_its_loggers_from_observe() -> None:
    """Only actors.observe may make structlog loggers: the others would not redact."""
    offenders = []
    for path in sorted(
        [*ROOT.joinpath("actors").rglob("*.py"), *ROOT.joinpath("supervisors").rglob("*.py")]
    ):
        if path.name == "observe.py" and path.parent.name == "actors":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "structlog"
                and node.attr in {"get_logger", "getLogger", "wrap_logger"}
            ) or (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("structlog")
                and {a.name for a in node.names} & {"get_logger", "getLogger", "wrap_logger"}
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
