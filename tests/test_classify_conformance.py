"""Provider conformance table: (dialect, status, headers, body) -> (code, retryable, retry_after)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from actors import Code, classify

DATE = "Wed, 21 Oct 2026 07:28:00 GMT"
DATE_PLUS_120 = "Wed, 21 Oct 2026 07:30:00 GMT"
DATE_MINUS_60 = "Wed, 21 Oct 2026 07:27:00 GMT"


def oai_error(message: str, type_: str | None = None, code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "code": code}}).encode()


def ant_error(type_: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": type_, "message": message}}).encode()


OAI_OK = json.dumps(
    {"id": "x", "choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 1}}
).encode()
ANT_OK = json.dumps({"type": "message", "content": [{"type": "text", "text": "hi"}]}).encode()
HTML = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"

# (id, dialect, status, headers, body, expected code, retryable, retry_after)
ROWS: list[tuple[str, str, int, dict[str, str], bytes, Code, bool, float | None]] = [
    # --- OpenAI-compatible ---
    (
        "oai-400",
        "openai",
        400,
        {},
        oai_error("bad", "invalid_request_error"),
        Code.BAD_REQUEST,
        False,
        None,
    ),
    (
        "oai-400-context",
        "openai",
        400,
        {},
        oai_error(
            "This model's maximum context length is 8192",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        Code.CONTEXT_WINDOW_EXCEEDED,
        False,
        None,
    ),
    (
        "oai-400-content-filter",
        "openai",
        400,
        {},
        oai_error("filtered", "invalid_request_error", "content_filter"),
        Code.CONTENT_FILTER,
        False,
        None,
    ),
    (
        "oai-400-content-policy",
        "openai",
        400,
        {},
        oai_error("policy", "invalid_request_error", "content_policy_violation"),
        Code.CONTENT_FILTER,
        False,
        None,
    ),
    (
        "oai-401",
        "openai",
        401,
        {},
        oai_error("Incorrect API key", "invalid_request_error", "invalid_api_key"),
        Code.AUTH,
        False,
        None,
    ),
    ("oai-403", "openai", 403, {}, oai_error("region not supported"), Code.AUTH, False, None),
    ("oai-402", "openai", 402, {}, oai_error("pay"), Code.PAYMENT, False, None),
    (
        "oai-404",
        "openai",
        404,
        {},
        oai_error("model does not exist", "invalid_request_error", "model_not_found"),
        Code.MODEL_NOT_FOUND,
        False,
        None,
    ),
    ("oai-408", "openai", 408, {}, b"", Code.TIMEOUT, True, None),
    ("oai-409", "openai", 409, {}, oai_error("conflict"), Code.UNAVAILABLE, True, None),
    ("oai-413", "openai", 413, {}, b"too large", Code.BAD_REQUEST, False, None),
    ("oai-422", "openai", 422, {}, oai_error("unprocessable"), Code.BAD_REQUEST, False, None),
    (
        "oai-429",
        "openai",
        429,
        {},
        oai_error("slow down", "requests", "rate_limit_exceeded"),
        Code.RATE_LIMITED,
        True,
        None,
    ),
    (
        "oai-429-retry-after-seconds",
        "openai",
        429,
        {"retry-after": "20"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        20.0,
    ),
    (
        "oai-429-retry-after-fraction",
        "openai",
        429,
        {"retry-after": "1.5"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        1.5,
    ),
    (
        "oai-429-retry-after-ms",
        "openai",
        429,
        {"retry-after-ms": "250"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        0.25,
    ),
    (
        "oai-429-ms-beats-seconds",
        "openai",
        429,
        {"retry-after-ms": "1500", "retry-after": "90"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        1.5,
    ),
    (
        "oai-429-bad-ms-falls-back",
        "openai",
        429,
        {"retry-after-ms": "soon", "retry-after": "3"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        3.0,
    ),
    (
        "oai-429-http-date",
        "openai",
        429,
        {"date": DATE, "retry-after": DATE_PLUS_120},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        120.0,
    ),
    (
        "oai-429-http-date-past",
        "openai",
        429,
        {"date": DATE, "retry-after": DATE_MINUS_60},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        0.0,
    ),
    (
        "oai-429-garbage-retry-after",
        "openai",
        429,
        {"retry-after": "tomorrow-ish"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        None,
    ),
    (
        "oai-429-negative-retry-after",
        "openai",
        429,
        {"retry-after": "-5"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        True,
        None,
    ),
    (
        "oai-429-insufficient-quota",
        "openai",
        429,
        {},
        oai_error("You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
        Code.PAYMENT,
        False,
        None,
    ),
    (
        "oai-429-should-retry-false",
        "openai",
        429,
        {"x-should-retry": "false", "retry-after": "5"},
        oai_error("slow"),
        Code.RATE_LIMITED,
        False,
        5.0,
    ),
    (
        "oai-500",
        "openai",
        500,
        {},
        oai_error("server error", "server_error"),
        Code.UNAVAILABLE,
        True,
        None,
    ),
    (
        "oai-502-html-proxy",
        "openai",
        502,
        {"content-type": "text/html"},
        HTML,
        Code.UNAVAILABLE,
        True,
        None,
    ),
    (
        "oai-503",
        "openai",
        503,
        {"retry-after": "30"},
        oai_error("overloaded"),
        Code.UNAVAILABLE,
        True,
        30.0,
    ),
    (
        "oai-503-should-retry-false",
        "openai",
        503,
        {"x-should-retry": "false"},
        oai_error("down"),
        Code.UNAVAILABLE,
        False,
        None,
    ),
    ("oai-504", "openai", 504, {}, b"", Code.UNAVAILABLE, True, None),
    (
        "oai-400-should-retry-true",
        "openai",
        400,
        {"x-should-retry": "true"},
        oai_error("bad"),
        Code.BAD_REQUEST,
        True,
        None,
    ),
    (
        "oai-200-not-json",
        "openai",
        200,
        {"content-type": "text/plain"},
        b"Hello, I am not JSON",
        Code.MALFORMED_RESPONSE,
        True,
        None,
    ),
    (
        "oai-200-html-proxy",
        "openai",
        200,
        {"content-type": "text/html"},
        HTML,
        Code.MALFORMED_RESPONSE,
        True,
        None,
    ),
    (
        "oai-200-no-choices",
        "openai",
        200,
        {},
        b'{"id": "x", "usage": {}}',
        Code.MALFORMED_RESPONSE,
        True,
        None,
    ),
    ("oai-200-json-array", "openai", 200, {}, b"[1, 2, 3]", Code.MALFORMED_RESPONSE, True, None),
    ("oai-200-truncated-json", "openai", 200, {}, OAI_OK[:-7], Code.MALFORMED_RESPONSE, True, None),
    ("oai-200-well-formed", "openai", 200, {}, OAI_OK, Code.INTERNAL, False, None),
    ("oai-418", "openai", 418, {}, b"teapot", Code.BAD_REQUEST, False, None),
    ("oai-302", "openai", 302, {"location": "/elsewhere"}, b"", Code.INTERNAL, False, None),
    # --- Anthropic ---
    (
        "ant-400",
        "anthropic",
        400,
        {},
        ant_error("invalid_request_error", "messages: field required"),
        Code.BAD_REQUEST,
        False,
        None,
    ),
    (
        "ant-400-prompt-too-long",
        "anthropic",
        400,
        {},
        ant_error("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
        Code.CONTEXT_WINDOW_EXCEEDED,
        False,
        None,
    ),
    (
        "ant-401",
        "anthropic",
        401,
        {},
        ant_error("authentication_error", "invalid x-api-key"),
        Code.AUTH,
        False,
        None,
    ),
    (
        "ant-403",
        "anthropic",
        403,
        {},
        ant_error("permission_error", "no access"),
        Code.AUTH,
        False,
        None,
    ),
    (
        "ant-404",
        "anthropic",
        404,
        {},
        ant_error("not_found_error", "model: claude-x"),
        Code.MODEL_NOT_FOUND,
        False,
        None,
    ),
    (
        "ant-413",
        "anthropic",
        413,
        {},
        ant_error("request_too_large", "too big"),
        Code.BAD_REQUEST,
        False,
        None,
    ),
    (
        "ant-429",
        "anthropic",
        429,
        {"retry-after": "7"},
        ant_error("rate_limit_error", "slow"),
        Code.RATE_LIMITED,
        True,
        7.0,
    ),
    ("ant-500", "anthropic", 500, {}, ant_error("api_error", "oops"), Code.UNAVAILABLE, True, None),
    (
        "ant-529",
        "anthropic",
        529,
        {},
        ant_error("overloaded_error", "Overloaded"),
        Code.UNAVAILABLE,
        True,
        None,
    ),
    ("ant-529-no-body", "anthropic", 529, {}, b"", Code.UNAVAILABLE, True, None),
    (
        "ant-200-overloaded-body",
        "anthropic",
        200,
        {},
        ant_error("overloaded_error", "Overloaded"),
        Code.MALFORMED_RESPONSE,
        True,
        None,
    ),
    (
        "ant-400-overloaded-type",
        "anthropic",
        400,
        {},
        ant_error("overloaded_error", "Overloaded"),
        Code.UNAVAILABLE,
        True,
        None,
    ),
    (
        "ant-529-should-retry-false",
        "anthropic",
        529,
        {"x-should-retry": "false"},
        ant_error("overloaded_error", "x"),
        Code.UNAVAILABLE,
        False,
        None,
    ),
    ("ant-200-wrong-shape", "anthropic", 200, {}, OAI_OK, Code.MALFORMED_RESPONSE, True, None),
    ("ant-200-well-formed", "anthropic", 200, {}, ANT_OK, Code.INTERNAL, False, None),
    (
        "ant-502-html-proxy",
        "anthropic",
        502,
        {"content-type": "text/html"},
        HTML,
        Code.UNAVAILABLE,
        True,
        None,
    ),
]


@pytest.mark.parametrize(
    ("dialect", "status", "headers", "body", "code", "retryable", "retry_after"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_conformance_row(
    dialect: str,
    status: int,
    headers: dict[str, str],
    body: bytes,
    code: Code,
    retryable: bool,
    retry_after: float | None,
) -> None:
    response = httpx.Response(status, headers=headers, content=body)
    err = classify(response, provider=dialect, model="m-1")
    assert (err.code, err.retryable, err.retry_after) == (code, retryable, retry_after)
    assert err.http_status == status
    assert err.provider == dialect
    assert err.model == "m-1"


def test_table_has_at_least_forty_rows() -> None:
    assert len(ROWS) >= 40
    assert len({row[0] for row in ROWS}) == len(ROWS)


def test_http_status_error_keeps_the_httpx_exception_as_cause() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(429, headers={"retry-after": "2"}, request=request)
    exc = httpx.HTTPStatusError("429", request=request, response=response)
    err = classify(exc, provider="openai")
    assert (err.code, err.retry_after) == (Code.RATE_LIMITED, 2.0)
    assert err.__cause__ is exc


def test_usage_reported_in_an_error_body_is_kept() -> None:
    body: dict[str, Any] = {
        "error": {"message": "x", "type": "server_error"},
        "usage": {"prompt_tokens": 120, "completion_tokens": 7},
    }
    err = classify(httpx.Response(500, json=body), provider="openai")
    assert err.usage is not None
    assert (err.usage.input_tokens, err.usage.output_tokens) == (120, 7)


def test_html_body_is_described_never_copied() -> None:
    err = classify(httpx.Response(502, headers={"content-type": "text/html"}, content=HTML))
    assert "nginx" not in err.message
    assert "text/html" in err.message
    assert f"{len(HTML)} bytes" in err.message


def test_dialect_can_differ_from_provider_name() -> None:
    err = classify(httpx.Response(200, content=ANT_OK), provider="beta", dialect="openai")
    assert (err.code, err.provider) == (Code.MALFORMED_RESPONSE, "beta")


def test_unread_streaming_response_classifies_by_status() -> None:
    async def never() -> Any:
        yield b""  # pragma: no cover

    response = httpx.Response(503, headers={"retry-after": "4"}, stream=httpx.ByteStream(b"x"))
    err = classify(response, provider="openai")
    assert (err.code, err.retry_after) == (Code.UNAVAILABLE, 4.0)
