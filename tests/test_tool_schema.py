"""actors.tools.schema: schemas from annotations, the compiled checker, structuring.

Schemas are pinned as whole dicts, messages as whole strings. The checker never shows the
checked value: every message test carries canaries in the instance.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Optional

import attrs
import jsonschema
import jsonschema.exceptions
import pytest

from actors import ActorError, Code
from actors.tools.checker import Checker, compile_schema
from actors.tools.schema import (
    output_schema_from_function,
    schema_from_function,
    schema_from_type,
    structure_arguments,
)

CANARY = "canary-4f1e-value"  # not secret-shaped: redaction would hide an sk- key anyway
SECRET_PATH = "/home/secret/path"

STR = {"type": "string"}
INT = {"type": "integer"}
NULL = {"type": "null"}


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Opaque(enum.Enum):
    THING = object()


@attrs.define
class Link:
    url: str
    weight: float = 1.0


@attrs.define
class Page:
    title: str
    links: list[Link]
    color: Color = Color.RED
    tags: tuple[str, ...] = ()
    note: Link | None = None
    extra: list[str] = attrs.field(factory=list)
    hidden: int = attrs.field(default=0, init=False)


@attrs.define
class Person:
    name: str


@attrs.define
class Node:
    value: int
    children: list[Node]


@attrs.define
class Ping:
    pong: Pong | None


@attrs.define
class Pong:
    ping: Ping


@attrs.define(auto_attribs=False)
class Bare:
    x = attrs.field()


LINK = {
    "type": "object",
    "properties": {"url": STR, "weight": {"type": "number", "default": 1.0}},
    "required": ["url"],
    "additionalProperties": False,
}


def config_error(excinfo: pytest.ExceptionInfo[ActorError]) -> str:
    assert excinfo.value.code is Code.CONFIG_INVALID
    return excinfo.value.message


# --- schema_from_type ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "schema"),
    [
        (str, STR),
        (int, INT),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, NULL),
        (type(None), NULL),
        (Any, {}),
        (list[int], {"type": "array", "items": INT}),
        (Sequence[str], {"type": "array", "items": STR}),
        (list, {"type": "array", "items": {}}),
        (tuple[int, ...], {"type": "array", "items": INT}),
        (tuple, {"type": "array", "items": {}}),
        (
            tuple[int, str],
            {"type": "array", "prefixItems": [INT, STR], "items": False, "minItems": 2},
        ),
        (tuple[()], {"type": "array", "maxItems": 0}),
        (dict[str, int], {"type": "object", "additionalProperties": INT}),
        (
            Mapping[str, list[str]],
            {"type": "object", "additionalProperties": {"type": "array", "items": STR}},
        ),
        (dict, {"type": "object", "additionalProperties": {}}),
        (Optional[int], {"anyOf": [INT, NULL]}),  # noqa: UP045 - the spelling under test
        (int | None, {"anyOf": [INT, NULL]}),
        (str | int, {"anyOf": [STR, INT]}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (Literal[1, True, None], {"enum": [1, True, None]}),
        (Color, {"enum": ["red", "blue"]}),
        (Level, {"enum": [1, 2]}),
        (Annotated[int, "how many", 3], {"type": "integer", "description": "how many"}),
        (Annotated[int, 3], INT),
        (Link, LINK),
    ],
)
def test_schema_from_type(tp: Any, schema: dict[str, Any]) -> None:
    assert schema_from_type(tp) == schema
    jsonschema.Draft202012Validator.check_schema(schema)


def test_nested_attrs_class_schema() -> None:
    assert schema_from_type(Page) == {
        "type": "object",
        "properties": {
            "title": STR,
            "links": {"type": "array", "items": LINK},
            "color": {"enum": ["red", "blue"], "default": "red"},
            "tags": {"type": "array", "items": STR, "default": []},
            "note": {"anyOf": [LINK, NULL], "default": None},
            "extra": {"type": "array", "items": STR},  # a factory is not a JSON default
        },
        "required": ["title", "links"],
        "additionalProperties": False,
    }


def test_each_call_returns_a_fresh_dict() -> None:
    first = schema_from_type(Link)
    first["properties"]["url"]["type"] = "integer"
    assert schema_from_type(Link) == LINK


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (set[int], "unsupported type set[int]"),
        (bytes, "unsupported type bytes"),
        (dict[int, str], "unsupported type dict[int, str] (keys must be str)"),
        (
            Literal[Color.RED],
            "unsupported type typing.Literal[<Color.RED: 'red'>] (Literal of non-JSON)",
        ),
        (Opaque, "unsupported type Opaque (enum of non-JSON values)"),
        (list[complex], "unsupported type complex"),
        (
            Node,
            "field Node.children: unsupported type Node: recursive attrs class (Node -> Node)",
        ),
        (
            Ping,
            "field Ping.pong, field Pong.ping: unsupported type Ping: recursive attrs class "
            "(Ping -> Pong -> Ping)",
        ),
        (Bare, "field Bare.x: no annotation"),
    ],
)
def test_unsupported_types_are_config_invalid(tp: Any, message: str) -> None:
    with pytest.raises(ActorError) as excinfo:
        schema_from_type(tp)
    assert config_error(excinfo) == message


# --- schema_from_function ----------------------------------------------------------------


async def search(
    context: object,
    query: Annotated[str, "what to look for"],
    limit: int = 10,
    color: Color = Color.BLUE,
    page: Page | None = None,
    mode: Literal["fast", "slow"] = "fast",
    ratio: float = math.nan,
) -> list[str]:
    return []


def test_schema_from_function() -> None:
    page = schema_from_type(Page)
    assert schema_from_function(search) == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "limit": {"type": "integer", "default": 10},
            "color": {"enum": ["red", "blue"], "default": "blue"},
            "page": {"anyOf": [page, NULL], "default": None},
            "mode": {"enum": ["fast", "slow"], "default": "fast"},
            "ratio": {"type": "number"},  # NaN is not JSON: no default
        },
        "required": ["query"],
        "additionalProperties": False,
    }


async def two(ctx: int, name: str) -> None:
    return None


async def no_params() -> None:
    return None


def test_skip_names_the_context_parameter() -> None:
    assert schema_from_function(two, skip=("ctx",)) == {
        "type": "object",
        "properties": {"name": STR},
        "required": ["name"],
        "additionalProperties": False,
    }
    assert schema_from_function(two, skip="ctx") == schema_from_function(two, skip=("ctx",))
    assert schema_from_function(two)["required"] == ["ctx", "name"]
    assert schema_from_function(no_params) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


async def star_args(*items: str) -> None:
    return None


async def star_kwargs(**items: str) -> None:
    return None


async def positional(name: str, /) -> None:
    return None


async def unannotated(name) -> None:  # type: ignore[no-untyped-def]
    return None


async def unresolvable(name: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
    return None


async def bad_type(tags: set[str]) -> None:
    return None


async def bad_default(name: str, sink: object = None) -> None:
    return None


async def recursive(tree: Node) -> None:
    return None


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (
            star_args,
            "tool function star_args: parameter 'items': *args and **kwargs are not supported",
        ),
        (
            star_kwargs,
            "tool function star_kwargs: parameter 'items': *args and **kwargs are not supported",
        ),
        (
            positional,
            "tool function positional: parameter 'name': positional-only is not supported",
        ),
        (unannotated, "tool function unannotated: parameter 'name': no annotation"),
        (unresolvable, "tool function unresolvable: annotations cannot be resolved (NameError)"),
        (bad_type, "tool function bad_type, parameter 'tags': unsupported type set[str]"),
        (
            recursive,
            "tool function recursive, parameter 'tree', field Node.children: unsupported type "
            "Node: recursive attrs class (Node -> Node)",
        ),
        (bad_default, "tool function bad_default, parameter 'sink': unsupported type object"),
    ],
)
def test_bad_tool_functions_are_config_invalid(fn: Any, message: str) -> None:
    with pytest.raises(ActorError) as excinfo:
        schema_from_function(fn)
    assert config_error(excinfo) == message


# --- output_schema_from_function ----------------------------------------------------------


async def returns_nothing_said(x: int):  # type: ignore[no-untyped-def]
    return x


async def returns_any(x: int) -> Any:
    return x


async def returns_none(x: int) -> None:
    return None


async def returns_bytes(x: int) -> bytes:
    return b""


async def returns_page(x: int) -> Page | None:
    return None


async def returns_unknown(x: int) -> NoSuchType:  # type: ignore[name-defined]  # noqa: F821
    return x


def test_output_schema_from_function() -> None:
    assert output_schema_from_function(returns_nothing_said) is None
    assert output_schema_from_function(returns_any) is None
    assert output_schema_from_function(returns_bytes) is None  # unsupported: not checked
    assert output_schema_from_function(returns_none) == NULL
    assert output_schema_from_function(search) == {"type": "array", "items": STR}
    assert output_schema_from_function(returns_page) == {"anyOf": [schema_from_type(Page), NULL]}
    with pytest.raises(ActorError) as excinfo:
        output_schema_from_function(returns_unknown)
    assert config_error(excinfo) == (
        "tool function returns_unknown: annotations cannot be resolved (NameError)"
    )


# --- the checker ---------------------------------------------------------------------------

TWO_CHECKER = compile_schema(schema_from_function(two), what="the input schema of 'two'")
SCHEMA = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": LINK},
        "count": {"type": "integer", "minimum": 0},
        "name": {"type": "string", "maxLength": 4},
        "color": {"enum": ["red", "blue"]},
        "either": {"anyOf": [INT, NULL]},
        "one": {"oneOf": [INT, {"type": "number"}]},
        "nothing": False,
        "map": {"type": "object", "additionalProperties": INT},
        "pair": schema_from_type(tuple[int, str]),
    },
    "required": ["items"],
    "additionalProperties": False,
}


def first_error(value: Any, code: Code = Code.INPUT_VALIDATION) -> ActorError:
    checker = compile_schema(SCHEMA, what="the input schema of 'fetch'")
    with pytest.raises(ActorError) as excinfo:
        checker.check(value, code=code, tool="fetch")
    err = excinfo.value
    assert err.code is code
    assert err.tool == "fetch"
    for text in (str(err), repr(err)):
        assert CANARY not in text
        assert SECRET_PATH not in text
    assert err.__cause__ is None
    assert err.__context__ is None
    return err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"items": [{"url": SECRET_PATH}, {"url": CANARY}, {"url": 7, "weight": 2.0}]},
            "$.items[2].url: type: expected string, got integer",
        ),
        (
            {"items": [{"url": CANARY}, {"weight": 2.0}]},
            "$.items[1]: required: missing 'url'",
        ),
        ({"count": CANARY}, "$: required: missing 'items'"),
        (
            {"items": [], "x": CANARY, SECRET_PATH[:5]: CANARY},
            "$: additionalProperties: unexpected 'x', '/home'",
        ),
        ({"items": [], "color": CANARY}, "$.color: enum"),
        ({"items": [], "count": -5}, "$.count: minimum: limit 0"),
        ({"items": [], "name": CANARY}, "$.name: maxLength: limit 4"),
        (
            {"items": [], "either": CANARY},
            "$.either: anyOf: no member accepts this string",
        ),
        (
            {"items": [], "one": 3},
            "$.one: oneOf: not exactly one member accepts this integer",
        ),
        (
            {"items": [], "nothing": CANARY},  # jsonschema 4.26 gives a false subschema
            "$: false schema: a part of this value is not allowed",
        ),
        (
            {"items": [], "map": {"a b": CANARY}},
            '$.map["a b"]: type: expected integer, got string',
        ),
        (
            {"items": [], "map": {"k" * 100: CANARY}},
            f"$.map.{'k' * 61}...: type: expected integer, got string",
        ),
        (
            {"items": [], "pair": [1, CANARY, SECRET_PATH]},
            "$.pair: items",
        ),
        (
            {"items": [], "pair": [CANARY, CANARY]},
            "$.pair[0]: type: expected integer, got string",
        ),
        (CANARY, "$: type: expected object, got string"),
    ],
)
def test_check_names_path_and_keyword_never_the_value(value: Any, message: str) -> None:
    err = first_error(value)
    assert err.message == message
    assert str(err) == f"[input_validation] {message}"


def test_check_unexpected_keys_are_listed_three_at_most() -> None:
    err = first_error({"items": [], "a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert err.message == ("$: additionalProperties: unexpected 'a', 'b', 'c' and 2 more")


def test_check_raises_the_code_it_is_given() -> None:
    err = first_error({"items": 3}, code=Code.OUTPUT_VALIDATION)
    assert err.message == "$.items: type: expected array, got integer"


def test_bool_is_neither_integer_nor_number_but_integral_float_is_integer() -> None:
    integer = compile_schema(INT, what="int")
    number = compile_schema({"type": "number"}, what="number")
    for checker, expected in ((integer, "integer"), (number, "number")):
        with pytest.raises(
            ActorError, match=re.escape(f"expected {expected}, got boolean")
        ) as excinfo:
            checker.check(True, code=Code.INPUT_VALIDATION, tool="t")
        assert excinfo.value.code is Code.INPUT_VALIDATION
        assert not checker.is_valid(False)
    assert integer.is_valid(1.0)
    assert integer.is_valid(3)
    assert not integer.is_valid(1.5)
    assert number.is_valid(1.5)


def test_valid_values_pass_silently() -> None:
    checker = compile_schema(SCHEMA, what="s")
    value = {"items": [{"url": "u", "weight": 2}], "either": None, "pair": [1, "a"]}
    assert checker.check(value, code=Code.INPUT_VALIDATION, tool="t") is None
    assert checker.is_valid(value)
    assert TWO_CHECKER.is_valid({"ctx": 1, "name": "n"})
    assert not TWO_CHECKER.is_valid({"ctx": 1})


def test_a_bad_schema_is_config_invalid_naming_what_not_the_content() -> None:
    bad = {"type": "object", "properties": {"url": {"type": CANARY}}}
    with pytest.raises(ActorError) as excinfo:
        compile_schema(bad, what="the input schema of 'fetch'")
    assert config_error(excinfo) == (
        "the input schema of 'fetch': invalid JSON Schema at $.properties.url.type "
        "(metaschema keyword 'anyOf')"
    )
    assert CANARY not in str(excinfo.value)
    with pytest.raises(
        ActorError, match=r"^\[config_invalid\] g: invalid JSON Schema at \$\.minimum "
    ):
        compile_schema({"minimum": "zero"}, what="g")


def test_an_unresolvable_ref_is_config_invalid_naming_what() -> None:
    checker = compile_schema({"$ref": "#/$defs/Missing"}, what="the grant of 'fetch'")
    for call in (
        lambda: checker.check(CANARY, code=Code.INPUT_VALIDATION, tool="fetch"),
        lambda: checker.is_valid(CANARY),
    ):
        with pytest.raises(ActorError) as excinfo:
            call()
        assert config_error(excinfo) == (
            "the grant of 'fetch': unresolvable $ref (_WrappedReferencingError)"
        )


def test_the_schema_is_copied_at_compile() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": INT | {}}}
    checker = compile_schema(schema, what="s")
    schema["properties"]["a"]["type"] = "string"
    assert checker.schema == {"type": "object", "properties": {"a": INT}}
    assert checker.is_valid({"a": 1})
    assert isinstance(checker, Checker)


def test_compile_happens_once_and_valid_values_take_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = {"check_schema": 0, "best_match": 0}
    real_check = jsonschema.Draft202012Validator.check_schema.__func__  # type: ignore[attr-defined]
    real_best = jsonschema.exceptions.best_match

    def check_schema(cls: Any, schema: Any, *args: Any, **kwargs: Any) -> None:
        counts["check_schema"] += 1
        real_check(cls, schema, *args, **kwargs)

    def best_match(errors: Any, *args: Any, **kwargs: Any) -> Any:
        counts["best_match"] += 1
        return real_best(errors, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(check_schema))
    monkeypatch.setattr(jsonschema.exceptions, "best_match", best_match)
    checker = compile_schema(SCHEMA, what="s")
    assert counts == {"check_schema": 1, "best_match": 0}
    for i in range(10_000):
        checker.check({"items": [], "count": i}, code=Code.INPUT_VALIDATION, tool="t")
    assert counts == {"check_schema": 1, "best_match": 0}
    with pytest.raises(ActorError, match=r"minimum: limit 0$"):
        checker.check({"items": [], "count": -1}, code=Code.INPUT_VALIDATION, tool="t")
    assert counts == {"check_schema": 1, "best_match": 1}


# --- structure_arguments -------------------------------------------------------------------


async def publish(
    context: object,
    page: Page,
    level: Level,
    pair: tuple[int, str],
    count: int,
    either: Person | Link | int,
    maybe: Link | None = None,
    names: Sequence[str] = (),
    raw: Any = None,
) -> None:
    return None


def test_structure_arguments_builds_nested_values() -> None:
    arguments = {
        "page": {
            "title": "t",
            "links": [{"url": "a"}, {"url": "b", "weight": 2}],
            "color": "blue",
            "tags": ["x", "y"],
            "note": {"url": "n"},
        },
        "level": 2,
        "pair": [1, "one"],
        "count": 3.0,
        "either": {"url": "e"},
        "names": ["p", "q"],
        "raw": {"free": [1]},
    }
    compile_schema(schema_from_function(publish), what="s").check(
        arguments, code=Code.INPUT_VALIDATION, tool="publish"
    )
    out = structure_arguments(publish, arguments)
    assert out == {
        "page": Page(
            title="t",
            links=[Link("a"), Link("b", 2.0)],
            color=Color.BLUE,
            tags=("x", "y"),
            note=Link("n"),
        ),
        "level": Level.HIGH,
        "pair": (1, "one"),
        "count": 3,
        "either": Link("e"),
        "names": ("p", "q"),
        "raw": {"free": [1]},
    }
    assert type(out["count"]) is int
    assert type(out["page"].links[1].weight) is float
    assert type(out["level"]) is Level
    assert "maybe" not in out  # omitted: Python fills the default


def test_structure_arguments_unions_take_the_first_accepting_member() -> None:
    base = {"page": {"title": "t", "links": []}, "level": 1, "pair": [0, ""], "count": 0}
    picks = [
        ({"name": "n"}, Person("n")),
        ({"url": "u"}, Link("u")),
        (5, 5),
    ]
    for value, expected in picks:
        out = structure_arguments(publish, {**base, "either": value, "maybe": None})
        assert out["either"] == expected
        assert out["maybe"] is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {
                "page": {"title": "t", "links": []},
                "level": 1,
                "pair": [0, ""],
                "count": 0,
                "either": 1,
                CANARY[:2]: 1,
            },
            "tool function publish: unexpected argument 'ca'",
        ),
        ({"level": 1}, "tool function publish: missing argument 'page'"),
        (
            {
                "page": {"title": "t", "links": [], "color": CANARY},
                "level": 1,
                "pair": [0, ""],
                "count": 0,
                "either": 1,
            },
            "tool function publish: argument 'page' is not a Page (ClassValidationError)",
        ),
        (
            {
                "page": {"title": "t", "links": []},
                "level": 7,
                "pair": [0, ""],
                "count": 0,
                "either": 1,
            },
            "tool function publish: argument 'level' is not a Level (ValueError)",
        ),
        (
            {
                "page": {"title": "t", "links": []},
                "level": 1,
                "pair": [0, ""],
                "count": 0,
                "either": CANARY,
            },
            "tool function publish: argument 'either' is not a "
            "tests.test_tool_schema.Person | tests.test_tool_schema.Link | int (ValueError)",
        ),
    ],
)
def test_structure_arguments_failures_name_the_parameter(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ActorError) as excinfo:
        structure_arguments(publish, arguments)
    err = excinfo.value
    assert err.code is Code.INPUT_VALIDATION
    assert err.message == message
    assert CANARY not in str(err) and CANARY not in repr(err)
    assert err.__cause__ is None
    assert err.__suppress_context__ or err.__context__ is None


def test_structure_arguments_rejects_a_bad_function_like_the_schema() -> None:
    with pytest.raises(ActorError) as excinfo:
        structure_arguments(star_args, {})
    assert config_error(excinfo) == (
        "tool function star_args: parameter 'items': *args and **kwargs are not supported"
    )
