"""Property: classify() is total over arbitrary HTTP answers and transport errors."""

from __future__ import annotations

import json
import math

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import ActorError, Code, classify
from actors.classify import retry_after_from

header_names = st.sampled_from(
    ["retry-after", "retry-after-ms", "x-should-retry", "date", "content-type", "x-other"]
) | st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"),
    min_size=1,
    max_size=12,
)
header_values = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=40
).map(str.strip)
json_bodies = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["error", "type", "code", "message", "usage", "choices", "content"])
            | st.text(max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    return json.dumps(draw(json_bodies)).encode()


@settings(max_examples=400, deadline=None)
@given(
    status=st.integers(min_value=100, max_value=999),
    headers=st.lists(st.tuples(header_names, header_values), max_size=6),
    body=bodies(),
    dialect=st.sampled_from([None, "openai", "anthropic", "other"]),
)
def test_classify_is_total(
    status: int, headers: list[tuple[str, str]], body: bytes, dialect: str | None
) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    response = httpx.Response(status, headers=raw, content=body)
    err = classify(response, provider=dialect)
    assert isinstance(err, ActorError)
    assert isinstance(err.code, Code)
    assert err.http_status == status
    if err.retry_after is not None:
        assert math.isfinite(err.retry_after)
        assert err.retry_after >= 0


@settings(max_examples=200, deadline=None)
@given(headers=st.lists(st.tuples(header_names, header_values), max_size=6))
def test_retry_after_is_never_negative_or_infinite(headers: list[tuple[str, str]]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    value = retry_after_from(httpx.Headers(raw), now=0.0)
    assert value is None or (math.isfinite(value) and value >= 0)


@settings(max_examples=100, deadline=None)
@given(message=st.text(max_size=50))
def test_any_exception_message_classifies(message: str) -> None:
    for exc in (ValueError(message), httpx.ReadError(message), httpx.ReadTimeout(message)):
        assert isinstance(classify(exc), ActorError)
