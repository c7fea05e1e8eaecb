"""A canary secret never reaches a log line, an error message, a user message or an event."""

from __future__ import annotations

import io
import json

import httpx
import pytest

from actors import ActorError, Code, bind_context, classify, get_logger, register_secret
from actors.redact import REDACTED, redact_text, redact_value
from actors.testing import capture_events

CANARY = "sk-test-CANARY-1234567890"
# A registered secret of no recognisable shape: only registration can hide it.
SHAPELESS = "hunter2-CANARY-shapeless"


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
