"""TEMPORARY stub (replaced by the real module): JSON Schema derivation and checking."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

import jsonschema

from actors.codes import Code
from actors.error_types import ActorError

_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def schema_from_type(tp: Any) -> dict[str, Any]:
    return {"type": _TYPES[tp]} if tp in _TYPES else {}


def schema_from_function(
    fn: Callable[..., Any], *, skip: Collection[str] = ("context",)
) -> dict[str, Any]:
    import typing

    hints = typing.get_type_hints(fn)
    props, required = {}, []
    for name, p in inspect.signature(fn).parameters.items():
        if name in skip:
            continue
        props[name] = schema_from_type(hints.get(name))
        if p.default is inspect.Parameter.empty:
            required.append(name)
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def output_schema_from_function(fn: Callable[..., Any]) -> dict[str, Any] | None:
    return None


def structure_arguments(
    fn: Callable[..., Any], arguments: Mapping[str, Any], *, skip: Collection[str] = ("context",)
) -> dict[str, Any]:
    return dict(arguments)


class Checker:
    def __init__(self, schema: Mapping[str, Any], what: str) -> None:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        self.schema = schema
        self._validator = cls(schema)

    def is_valid(self, value: Any) -> bool:
        return bool(self._validator.is_valid(value))

    def check(self, value: Any, *, code: Code, tool: str) -> None:
        if self._validator.is_valid(value):
            return
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        path = "$" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
        )
        raise ActorError.from_code(code, f"{path}: {error.validator}", tool=tool)


def compile_schema(schema: Mapping[str, Any], *, what: str) -> Checker:
    return Checker(schema, what)
