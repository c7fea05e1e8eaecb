"""Pins of actors.http_status: every table entry, every detail text, every header edge.

Each test fails if one table row, one marker phrase, one boundary or one piece of the
detail changes (``make mutate MODULE=actors/http_status.py`` measures how well they do).
"""

from __future__ import annotations

import json
import time
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import httpx
import pytest

import actors
from actors import Code, Usage
from actors.http_status import (
    BODY_CODES,
    BY_STATUS,
    BY_STATUS_CLASS,
    CONTENT_MARKERS,
    CONTENT_WORDS,
    CONTEXT_MARKERS,
    DIALECTS,
    ERROR_FIELDS,
    INPUT_TOKENS,
    MARKER_STATUSES,
    MAX_DETAIL,
    OUTPUT_TOKENS,
    SHOULD_RETRY,
    SUCCESS_SHAPES,
    HttpAnswer,
    error_fields,
    malformed_success,
    read_answer,
    retry_after_from,
    should_retry,
    status_code,
    usage_from,
)

DATE = "Wed, 21 Oct 2026 07:28:00 GMT"
DATE_TS = parsedate_to_datetime(DATE).timestamp()
OAI_OK: dict[str, Any] = {"choices": [{"message": {"content": "hi"}}]}
ANT_OK: dict[str, Any] = {"type": "message", "content": [{"type": "text", "text": "hi"}]}


def body(type_: str | None = None, code: str | None = None, message: str | None = None) -> bytes:
    error = {k: v for k, v in (("type", type_), ("code", code), ("message", message)) if v}
    return json.dumps({"error": error}).encode()


def answer(
    status: int,
    content: bytes = b"",
    headers: dict[str, str] | None = None,
    dialect: str | None = None,
) -> HttpAnswer:
    return read_answer(httpx.Response(status, headers=headers or {}, content=content), dialect)


def heads(**values: str) -> httpx.Headers:
    return httpx.Headers({k.replace("_", "-"): v for k, v in values.items()})


# --- the tables, exactly ------------------------------------------------------------------


def test_tables_are_pinned() -> None:
    assert list(BODY_CODES.items()) == [
        ("overloaded_error", Code.UNAVAILABLE),
        ("insufficient_quota", Code.PAYMENT),
    ]
    assert frozenset({400, 413, 422}) == MARKER_STATUSES
    assert CONTEXT_MARKERS == (
        "context_length_exceeded",
        "prompt is too long",
        "maximum context length",
        "context window",
    )
    assert frozenset({"content_filter", "content_policy_violation"}) == CONTENT_MARKERS
    assert CONTENT_WORDS == ("content filtering policy", "content management policy")
    assert dict(BY_STATUS) == {
        400: Code.BAD_REQUEST,
        413: Code.BAD_REQUEST,
        422: Code.BAD_REQUEST,
        401: Code.AUTH,
        403: Code.AUTH,
        402: Code.PAYMENT,
        404: Code.MODEL_NOT_FOUND,
        408: Code.TIMEOUT,
        409: Code.UNAVAILABLE,
        429: Code.RATE_LIMITED,
        529: Code.UNAVAILABLE,
    }
    assert dict(BY_STATUS_CLASS) == {4: Code.BAD_REQUEST, 5: Code.UNAVAILABLE}
    assert dict(SHOULD_RETRY) == {"true": True, "false": False}
    assert ERROR_FIELDS == ("type", "code", "message")
    assert (INPUT_TOKENS, OUTPUT_TOKENS) == (
        ("prompt_tokens", "input_tokens"),
        ("completion_tokens", "output_tokens"),
    )
    assert MAX_DETAIL == 300
    assert frozenset({"openai", "anthropic"}) == DIALECTS
    assert {name: shape[1] for name, shape in SUCCESS_SHAPES.items()} == {
        "openai": "lacks 'choices'",
        "anthropic": "lacks 'type': 'message' or 'content'",
    }


def test_the_package_exports_the_same_retry_after_reader() -> None:
    assert actors.retry_after_from is retry_after_from


# --- rule 1: body codes decide on any status ----------------------------------------------

BODY_ROWS = list(BODY_CODES.items())


@pytest.mark.parametrize(("marker", "code"), BODY_ROWS)
@pytest.mark.parametrize("field", ["type", "code"])
@pytest.mark.parametrize("status", [400, 401, 404, 413, 429, 500, 529, 418, 302, 600])
def test_a_body_code_decides_whatever_the_status(
    marker: str, code: Code, field: str, status: int
) -> None:
    err_type, err_code = (marker, None) if field == "type" else (None, marker)
    assert answer(status, body(err_type, err_code, "x")).code is code
    assert status_code(status, err_type, err_code, "x") is code


@pytest.mark.parametrize("marker", list(BODY_CODES))
def test_a_body_code_in_the_message_only_decides_nothing(marker: str) -> None:
    assert status_code(429, None, None, marker) is Code.RATE_LIMITED
    assert status_code(500, "api_error", None, f"an {marker} happened") is Code.UNAVAILABLE


def test_the_first_body_code_wins() -> None:
    assert status_code(429, "insufficient_quota", "overloaded_error", None) is Code.UNAVAILABLE
    assert status_code(429, "overloaded_error", "insufficient_quota", None) is Code.UNAVAILABLE


def test_body_codes_are_case_sensitive() -> None:
    assert status_code(429, "Insufficient_Quota", None, None) is Code.RATE_LIMITED
    assert status_code(400, None, "OVERLOADED_ERROR", None) is Code.BAD_REQUEST


# --- rule 2: marker phrases on 400, 413, 422 ----------------------------------------------


@pytest.mark.parametrize("phrase", CONTEXT_MARKERS)
@pytest.mark.parametrize("status", sorted(MARKER_STATUSES))
def test_each_context_marker_on_each_marker_status(phrase: str, status: int) -> None:
    expected = Code.CONTEXT_WINDOW_EXCEEDED
    assert answer(status, body(message=f"Sorry: {phrase.upper()} (8192)")).code is expected
    assert answer(status, body(type_=phrase)).code is expected
    assert answer(status, body(code=phrase)).code is expected
    assert status_code(status, None, None, phrase.title()) is expected


@pytest.mark.parametrize("phrase", CONTEXT_MARKERS)
@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, Code.AUTH),
        (404, Code.MODEL_NOT_FOUND),
        (429, Code.RATE_LIMITED),
        (500, Code.UNAVAILABLE),
    ],
)
def test_context_markers_are_ignored_off_the_marker_statuses(
    phrase: str, status: int, code: Code
) -> None:
    assert answer(status, body(type_=phrase, code=phrase, message=phrase)).code is code


@pytest.mark.parametrize("marker", sorted(CONTENT_MARKERS))
@pytest.mark.parametrize("status", sorted(MARKER_STATUSES))
def test_each_content_marker_on_each_marker_status(marker: str, status: int) -> None:
    assert answer(status, body(type_=marker, message="no")).code is Code.CONTENT_FILTER
    assert answer(status, body(code=marker, message="no")).code is Code.CONTENT_FILTER


@pytest.mark.parametrize("marker", sorted(CONTENT_MARKERS))
def test_content_markers_are_exact_and_not_read_from_the_message(marker: str) -> None:
    assert status_code(400, None, None, marker) is Code.BAD_REQUEST
    assert status_code(400, marker.upper(), None, None) is Code.BAD_REQUEST
    assert status_code(400, None, f"{marker}_x", None) is Code.BAD_REQUEST
    assert status_code(500, marker, marker, None) is Code.UNAVAILABLE


@pytest.mark.parametrize("words", CONTENT_WORDS)
@pytest.mark.parametrize("status", sorted(MARKER_STATUSES))
def test_each_content_phrase_on_each_marker_status(words: str, status: int) -> None:
    text = f"The response was filtered due to our {words.upper()}."
    assert answer(status, body(type_="invalid_request_error", message=text)).code is (
        Code.CONTENT_FILTER
    )
    assert status_code(403, None, None, words) is Code.AUTH


def test_context_wins_over_content() -> None:
    assert status_code(400, "content_filter", None, "prompt is too long") is (
        Code.CONTEXT_WINDOW_EXCEEDED
    )


def test_marker_text_is_type_code_and_message_joined_by_spaces() -> None:
    # A phrase may span the fields: they are searched as one space-joined text.
    assert status_code(413, "context", None, "window") is Code.CONTEXT_WINDOW_EXCEEDED
    assert status_code(422, None, "maximum", "context length") is Code.CONTEXT_WINDOW_EXCEEDED
    assert status_code(400, "content", "filtering policy", None) is Code.CONTENT_FILTER
    assert status_code(400, "contextwindow", None, None) is Code.BAD_REQUEST


def test_no_error_text_on_a_marker_status_is_bad_request() -> None:
    assert status_code(400, None, None, None) is Code.BAD_REQUEST
    assert answer(413, b"request entity too large").code is Code.BAD_REQUEST
    assert answer(422, b"").code is Code.BAD_REQUEST


# --- rule 3 and 4: statuses -----------------------------------------------------------------


@pytest.mark.parametrize(("status", "code"), sorted(BY_STATUS.items()))
def test_each_status_row(status: int, code: Code) -> None:
    assert answer(status, body(type_="some_error", message="text")).code is code
    assert answer(status).code is code
    assert status_code(status, None, None, None) is code


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (405, Code.BAD_REQUEST),
        (410, Code.BAD_REQUEST),
        (418, Code.BAD_REQUEST),
        (451, Code.BAD_REQUEST),
        (499, Code.BAD_REQUEST),
        (500, Code.UNAVAILABLE),
        (501, Code.UNAVAILABLE),
        (502, Code.UNAVAILABLE),
        (503, Code.UNAVAILABLE),
        (504, Code.UNAVAILABLE),
        (599, Code.UNAVAILABLE),
    ],
)
def test_each_status_class(status: int, code: Code) -> None:
    assert answer(status, b"whatever").code is code


@pytest.mark.parametrize("status", [100, 101, 199, 300, 301, 302, 304, 399, 600, 700, 999])
def test_statuses_no_rule_places_have_no_code(status: int) -> None:
    assert status_code(status, None, None, None) is None
    result = answer(status, b"not json at all", dialect="openai")
    assert result.code is None
    assert result.detail == f"HTTP {status} (content-type none, 15 bytes)"


# --- 2xx -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_a_well_formed_2xx_has_no_code(status: int) -> None:
    result = answer(status, json.dumps(OAI_OK).encode(), dialect="openai")
    assert (result.code, result.http_status) == (None, status)
    assert result.detail == (
        f"classify() was given a well-formed HTTP {status}, which is not a failure"
    )


def test_the_2xx_range_ends_below_300() -> None:
    assert answer(299, b"garbage").code is Code.MALFORMED_RESPONSE
    assert answer(300, b"garbage").code is None
    assert answer(199, b"garbage").code is None


def test_a_2xx_that_is_not_json() -> None:
    result = answer(200, b"Hello, I am not JSON", {"content-type": "text/plain"}, "openai")
    assert (result.code, result.detail) == (
        Code.MALFORMED_RESPONSE,
        "HTTP 200 body is not JSON (content-type text/plain, 20 bytes)",
    )
    empty = answer(200)
    assert empty.detail == "HTTP 200 body is not JSON (content-type none, 0 bytes)"


def test_a_2xx_nested_too_deep_to_parse_is_not_json() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert answer(200, deep).detail == (
        "HTTP 200 body is not JSON (content-type none, 200000 bytes)"
    )


def test_a_2xx_that_is_not_an_object() -> None:
    result = answer(200, b"[1, 2, 3]", dialect="anthropic")
    assert (result.code, result.detail) == (
        Code.MALFORMED_RESPONSE,
        "HTTP 200 body is not a JSON object (content-type none, 9 bytes)",
    )
    assert malformed_success("text", None) == "is not a JSON object"
    assert malformed_success(None, "openai") == "is not a JSON object"


@pytest.mark.parametrize(
    ("content", "malformed"),
    [
        ({"choices": [{}]}, False),
        ({"choices": [{}, {"x": 1}]}, False),
        ({}, True),
        ({"choices": []}, True),
        ({"choices": [1]}, True),
        ({"choices": [{}, 1]}, True),
        ({"choices": "hi"}, True),
        ({"choices": {"0": {}}}, True),
        ({"choices": None}, True),
        (ANT_OK, True),
    ],
)
def test_the_openai_success_shape(content: dict[str, Any], malformed: bool) -> None:
    expected = "lacks 'choices'" if malformed else None
    assert malformed_success(content, "openai") == expected
    raw = json.dumps(content).encode()
    result = answer(200, raw, {"content-type": "application/json"}, "openai")
    if malformed:
        assert (result.code, result.detail) == (
            Code.MALFORMED_RESPONSE,
            f"HTTP 200 body lacks 'choices' (content-type application/json, {len(raw)} bytes)",
        )
    else:
        assert result.code is None


@pytest.mark.parametrize(
    ("content", "malformed"),
    [
        (ANT_OK, False),
        ({"type": "message", "content": []}, False),
        ({"type": "message"}, True),
        ({"type": "message", "content": "hi"}, True),
        ({"type": "error", "content": []}, True),
        ({"content": []}, True),
        (OAI_OK, True),
    ],
)
def test_the_anthropic_success_shape(content: dict[str, Any], malformed: bool) -> None:
    expected = "lacks 'type': 'message' or 'content'" if malformed else None
    assert malformed_success(content, "anthropic") == expected
    assert (answer(201, json.dumps(content).encode(), dialect="anthropic").code is None) is (
        not malformed
    )


@pytest.mark.parametrize("dialect", [None, "other", "OpenAI"])
def test_no_or_an_unknown_dialect_checks_only_json_and_object(dialect: str | None) -> None:
    assert malformed_success({}, dialect) is None
    assert answer(200, b"{}", dialect=dialect).code is None
    assert answer(200, b"[]", dialect=dialect).code is Code.MALFORMED_RESPONSE
    assert answer(200, b"<html>", dialect=dialect).code is Code.MALFORMED_RESPONSE


def test_a_2xx_error_body_is_only_malformed() -> None:
    overloaded = body(type_="overloaded_error", message="Overloaded")
    result = answer(200, overloaded, dialect="anthropic")
    assert result.code is Code.MALFORMED_RESPONSE
    assert result.detail.startswith("HTTP 200 body lacks 'type': 'message' or 'content' (")


# --- the detail of an error answer ---------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "content", "detail"),
    [
        (400, body("invalid_request_error", None, "bad"), "HTTP 400 invalid_request_error/-: bad"),
        (
            400,
            body(None, "context_length_exceeded", "long"),
            "HTTP 400 -/context_length_exceeded: long",
        ),
        (
            429,
            body("requests", "rate_limit_exceeded", "slow"),
            "HTTP 429 requests/rate_limit_exceeded: slow",
        ),
        (500, body("server_error"), "HTTP 500 server_error/-"),
        (500, body(None, "e42"), "HTTP 500 -/e42"),
        (500, body(message="oops"), "HTTP 500: oops"),
        (500, b'{"error": "boom"}', "HTTP 500: boom"),
        (500, b'{"error": {"type": "t", "code": 7, "message": "m"}}', "HTTP 500 t/7: m"),
        (500, b'{"error": {"code": false}}', "HTTP 500 -/False"),
        (503, b"{}", "HTTP 503"),
        (503, b'{"error": null}', "HTTP 503"),
        (503, b'{"error": ["x"]}', "HTTP 503"),
        (503, b"[1]", "HTTP 503"),
        (504, b"", "HTTP 504 (content-type none, 0 bytes)"),
        (502, b"<html>nginx</html>", "HTTP 502 (content-type none, 18 bytes)"),
    ],
)
def test_error_detail(status: int, content: bytes, detail: str) -> None:
    assert answer(status, content).detail == detail


def test_error_detail_names_the_content_type_of_a_body_that_is_not_json() -> None:
    html = b"<html><body>secret proxy page</body></html>"
    result = answer(502, html, {"Content-Type": "text/html; charset=utf-8"})
    assert result.detail == f"HTTP 502 (content-type text/html; charset=utf-8, {len(html)} bytes)"


def test_error_message_is_truncated_to_max_detail() -> None:
    message = "a" * MAX_DETAIL + "TAIL"
    assert answer(400, body(message=message)).detail == f"HTTP 400: {'a' * MAX_DETAIL}"


def test_an_unread_streaming_body_is_classified_by_status_and_headers() -> None:
    response = httpx.Response(
        429, headers={"retry-after": "4"}, stream=httpx.ByteStream(b'{"error": "x"}')
    )
    result = read_answer(response, "openai")
    assert (result.code, result.retry_after, result.usage) == (Code.RATE_LIMITED, 4.0, None)
    assert result.detail == "HTTP 429 (content-type none, 0 bytes)"


# --- error_fields -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parsed", "fields"),
    [
        ({"error": {"type": "t", "code": "c", "message": "m"}}, ("t", "c", "m")),
        ({"error": {"type": 1, "code": 2.5, "message": True}}, ("1", "2.5", "True")),
        ({"error": {"type": None, "code": "c"}}, (None, "c", None)),
        ({"error": {}}, (None, None, None)),
        ({"error": "boom"}, (None, None, "boom")),
        ({"error": 3}, (None, None, None)),
        ({"error": ["t"]}, (None, None, None)),
        ({"type": "t", "code": "c", "message": "m"}, (None, None, None)),
        (["error"], (None, None, None)),
        ("error", (None, None, None)),
        (None, (None, None, None)),
    ],
)
def test_error_fields(parsed: Any, fields: tuple[str | None, ...]) -> None:
    assert error_fields(parsed) == fields


def test_a_numeric_error_code_is_text_for_the_markers() -> None:
    content = b'{"error": {"type": 400, "code": 123, "message": "maximum context length"}}'
    result = answer(400, content)
    assert (result.code, result.detail) == (
        Code.CONTEXT_WINDOW_EXCEEDED,
        "HTTP 400 400/123: maximum context length",
    )


# --- usage -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 120, "completion_tokens": 7}, (120, 7)),
        ({"input_tokens": 30, "output_tokens": 4}, (30, 4)),
        ({"prompt_tokens": 5}, (5, 0)),
        ({"input_tokens": 0, "output_tokens": 0}, (0, 0)),
        (
            {"prompt_tokens": 1, "input_tokens": 99, "completion_tokens": 2, "output_tokens": 98},
            (1, 2),
        ),
        ({"prompt_tokens": 1, "output_tokens": 3}, (1, 3)),
        ({"completion_tokens": 3}, None),
        ({}, None),
        ({"prompt_tokens": -1}, None),
        ({"prompt_tokens": 1, "completion_tokens": -1}, None),
        ({"prompt_tokens": True}, None),
        ({"prompt_tokens": 1, "completion_tokens": False}, None),
        ({"prompt_tokens": 1.0}, None),
        ({"prompt_tokens": "1"}, None),
        ({"prompt_tokens": None, "input_tokens": 4}, None),
        ({"prompt_tokens": 1, "completion_tokens": None}, None),
    ],
)
def test_usage_from(usage: dict[str, Any], expected: tuple[int, int] | None) -> None:
    got = usage_from({"usage": usage})
    if expected is None:
        assert got is None
    else:
        assert got == Usage(input_tokens=expected[0], output_tokens=expected[1])


@pytest.mark.parametrize("parsed", [None, [], "usage", {"usage": [1]}, {"usage": None}, {}])
def test_no_usage(parsed: Any) -> None:
    assert usage_from(parsed) is None


def test_usage_of_a_failed_attempt_is_read_from_the_error_body() -> None:
    content = json.dumps(
        {"error": {"type": "server_error"}, "usage": {"input_tokens": 11, "output_tokens": 2}}
    ).encode()
    assert answer(500, content).usage == Usage(input_tokens=11, output_tokens=2)
    assert answer(200, json.dumps({**OAI_OK, "usage": {"prompt_tokens": 3}}).encode()).usage == (
        Usage(input_tokens=3, output_tokens=0)
    )
    assert answer(500, b"not json").usage is None


# --- x-should-retry ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "verdict"),
    [
        ("true", True),
        ("false", False),
        (" TRUE ", True),
        ("False", False),
        ("yes", None),
        ("1", None),
        ("0", None),
        ("", None),
    ],
)
def test_should_retry(value: str, verdict: bool | None) -> None:
    assert should_retry(httpx.Headers({"X-Should-Retry": value})) is verdict
    assert answer(500, headers={"x-should-retry": value}).retryable is verdict


def test_should_retry_absent_is_none() -> None:
    assert should_retry(httpx.Headers({"x-other": "true"})) is None
    assert answer(429).retryable is None


# --- retry_after_from -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("0.5", 0.5),
        ("1", 1.0),
        (" 7 ", 7.0),
        ("120", 120.0),
        ("-0.5", None),
        ("-5", None),
        ("inf", None),
        ("-inf", None),
        ("nan", None),
        ("", None),
        ("soon", None),
        ("1_0", None),
        ("1e3", None),
        ("+5", None),
        ("0x10", None),
        ("1.", None),
        ("9" * 400, None),
        ("1" + "0" * 20, 1e20),
    ],
)
def test_retry_after_seconds(value: str, seconds: float | None) -> None:
    assert retry_after_from(heads(retry_after=value), now=0.0) == seconds
    assert answer(429, headers={"Retry-After": value}).retry_after == seconds


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("0.5", 0.0005),
        ("500", 0.5),
        ("1500", 1.5),
        (" 250 ", 0.25),
    ],
)
def test_retry_after_ms_wins(value: str, seconds: float) -> None:
    assert retry_after_from(heads(retry_after_ms=value, retry_after="9"), now=0.0) == seconds
    assert retry_after_from(heads(retry_after_ms=value), now=0.0) == seconds
    assert answer(503, headers={"Retry-After-Ms": value}).retry_after == seconds


@pytest.mark.parametrize("value", ["-1", "inf", "nan", "soon", "", "1e3", "+5", "5_0", "9" * 400])
def test_an_invalid_retry_after_ms_falls_back_to_retry_after(value: str) -> None:
    assert retry_after_from(heads(retry_after_ms=value, retry_after="9"), now=0.0) == 9.0
    assert retry_after_from(heads(retry_after_ms=value), now=0.0) is None


def test_no_retry_after_is_none() -> None:
    assert retry_after_from(httpx.Headers(), now=0.0) is None
    assert retry_after_from(heads(date=DATE), now=0.0) is None


def test_a_retry_after_date_is_measured_from_the_date_header() -> None:
    later = format_datetime(parsedate_to_datetime(DATE).replace(minute=30), usegmt=True)
    assert retry_after_from(heads(retry_after=later, date=DATE), now=0.0) == 120.0
    assert retry_after_from(heads(retry_after=DATE, date=later), now=0.0) == 0.0


def test_a_retry_after_date_without_a_date_header_is_measured_from_now() -> None:
    assert retry_after_from(heads(retry_after=DATE), now=DATE_TS - 30.0) == 30.0
    assert retry_after_from(heads(retry_after=DATE), now=DATE_TS + 30.0) == 0.0


@pytest.mark.parametrize("date", ["", "yesterday", "XXXX", "Wed, 99 Oct 2026 07:28:00 GMT"])
def test_an_invalid_date_header_falls_back_to_now(date: str) -> None:
    assert retry_after_from(heads(retry_after=DATE, date=date), now=DATE_TS - 45.0) == 45.0


def test_a_retry_after_date_defaults_to_the_wall_clock() -> None:
    far = "Sat, 01 Jan 2100 00:00:00 GMT"
    when = parsedate_to_datetime(far).timestamp()
    before = time.time()
    waited = retry_after_from(heads(retry_after=far))
    after = time.time()
    assert waited is not None
    assert when - after <= waited <= when - before
    assert retry_after_from(heads(retry_after="Thu, 01 Jan 1970 00:00:10 GMT")) == 0.0
    assert answer(429, headers={"retry-after": "Thu, 01 Jan 1970 00:00:10 GMT"}).retry_after == 0.0


def test_an_invalid_retry_after_date_is_ignored() -> None:
    assert retry_after_from(heads(retry_after="Wed, 99 Oct 2026 07:28:00 GMT", date=DATE)) is None


# --- the answer carries every field -------------------------------------------------------------


def test_an_answer_carries_status_retry_after_usage_and_verdict() -> None:
    content = json.dumps(
        {"error": {"type": "rate_limit_error", "message": "slow"}, "usage": {"input_tokens": 9}}
    ).encode()
    result = answer(
        429, content, {"retry-after": "3", "x-should-retry": "false"}, dialect="anthropic"
    )
    assert result == HttpAnswer(
        code=Code.RATE_LIMITED,
        detail="HTTP 429 rate_limit_error/-: slow",
        http_status=429,
        retry_after=3.0,
        usage=Usage(input_tokens=9, output_tokens=0),
        retryable=False,
    )
