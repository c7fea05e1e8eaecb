"""JSON Schemas (draft 2020-12) for tool functions, and structuring.

- :func:`schema_from_function` — the input schema of a tool function from its annotations
  (``typing.get_type_hints``, so ``from __future__ import annotations`` works; names must
  resolve at module level). Parameters in ``skip`` (the context argument) are left out;
  ``*args``, ``**kwargs``, positional-only and unannotated parameters are
  ``config_invalid``. A parameter with a default is not required; the default goes into
  the property as ``"default"`` when it is JSON (an enum member as its value).
  ``Annotated[T, "text"]`` gives the property a ``"description"`` (the first str).
- :func:`schema_from_type` — ``str``, ``int`` (``integer``), ``float`` (``number``),
  ``bool``, ``None``, ``list[T]``/``Sequence[T]``, ``tuple[T, ...]`` and fixed
  ``tuple[A, B]``, ``dict[str, T]``/``Mapping[str, T]``, unions and ``Optional``
  (``anyOf`` in declared order), ``Literal`` of JSON scalars and enums (``enum``),
  ``Any`` (``{}``), and attrs classes (an object of their init fields keyed by attribute
  name, required = no default, no other keys). A class that contains itself, directly or
  not, is ``config_invalid`` (no ``$defs``); so is any other type, named in the message.
- :func:`output_schema_from_function` — the schema of the return annotation, ``None``
  when it is missing, ``Any`` or unsupported (the result is then not checked).
- the compiled checker of a schema (:func:`~actors.tools.checker.compile_schema`) is in
  :mod:`actors.tools.checker`.
- :func:`structure_arguments` turns validated JSON arguments into the annotated values
  (attrs instances, tuples, enums; ``int`` from ``1.0``; a ``Sequence[T]`` arrives as a
  tuple) with one cattrs converter; a union takes the first member whose schema accepts
  the value. A failure is ``input_validation`` naming the parameter, its cause dropped
  (foreign messages may carry the value).
"""

from __future__ import annotations

import collections.abc
import enum
import functools
import inspect
import json
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Annotated, Any, Final, Literal, Union

import attrs
import cattrs
from jsonschema import Draft202012Validator

from actors.codes import Code
from actors.error_types import ActorError
from actors.tools.checker import config_error, names_shown

_NONE, _EMPTY = type(None), inspect.Parameter.empty
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", _NONE: "null"}
_ARRAYS = frozenset({list, collections.abc.Sequence, collections.abc.MutableSequence})
_OBJECTS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})


def _type_name(tp: Any) -> str:
    return tp.__qualname__ if isinstance(tp, type) else repr(tp)


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _hints(obj: Any, where: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except (NameError, TypeError, AttributeError, SyntaxError) as err:
        raise config_error(where, f"annotations cannot be resolved ({type(err).__name__})") from err


def _with_default(prop: dict[str, Any], default: Any) -> None:
    """Add ``"default"`` to ``prop`` when ``default`` is JSON (an enum member: its value)."""
    if isinstance(default, enum.Enum):
        default = default.value
    try:
        text = json.dumps(default, allow_nan=False)
    except (TypeError, ValueError):
        return  # not JSON (a Factory, an object, NaN): the default stays Python-side
    prop["default"] = json.loads(text)


def _object(
    rows: Iterable[tuple[str, Any, Any]], place: Callable[[str], str], stack: tuple[type, ...]
) -> dict[str, Any]:
    """A closed object of ``(name, annotation, default)`` rows (``_EMPTY``: required)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, hint, default in rows:
        properties[name] = prop = _schema(hint, place(name), stack)
        if default is _EMPTY:
            required.append(name)
        else:
            _with_default(prop, default)
    out = {"type": "object", "properties": properties, "required": required}
    return {**out, "additionalProperties": False}


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is Union or origin is types.UnionType


def _json_scalar(value: object) -> bool:
    return value is None or (
        isinstance(value, str | int | float) and not isinstance(value, enum.Enum)
    )


def _schema(tp: Any, where: str, stack: tuple[type, ...]) -> dict[str, Any]:
    """A fresh schema dict for ``tp`` (callers may add keys to it)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        out = _schema(args[0], where, stack)
        notes = [m for m in tp.__metadata__ if isinstance(m, str)]
        return {**out, "description": notes[0]} if notes else out
    if tp is Any:
        return {}
    if tp is None or (isinstance(tp, type) and tp in _SCALARS):
        return {"type": _SCALARS[_NONE if tp is None else tp]}
    if _is_union(tp):
        return {"anyOf": [_schema(arm, where, stack) for arm in args]}
    if origin is Literal:
        if not all(_json_scalar(v) for v in args):
            raise config_error(where, f"unsupported type {_type_name(tp)} (Literal of non-JSON)")
        return {"enum": list(args)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
        if not all(_json_scalar(v) for v in values):
            raise config_error(
                where, f"unsupported type {_type_name(tp)} (enum of non-JSON values)"
            )
        return {"enum": values}
    if isinstance(tp, type) and attrs.has(tp):
        return _attrs_schema(tp, where, stack)
    if tp in _ARRAYS or origin in _ARRAYS:
        return {"type": "array", "items": _schema(args[0], where, stack) if args else {}}
    if tp is tuple or origin is tuple:
        return _tuple_schema(tp, args, where, stack)
    if tp in _OBJECTS or origin in _OBJECTS:
        if args and args[0] is not str:
            raise config_error(where, f"unsupported type {_type_name(tp)} (keys must be str)")
        each = _schema(args[1], where, stack) if args else {}
        return {"type": "object", "additionalProperties": each}
    raise config_error(where, f"unsupported type {_type_name(tp)}")


def _tuple_schema(tp: Any, args: tuple[Any, ...], where: str, stack: Any) -> dict[str, Any]:
    if tp is tuple or (len(args) == 2 and args[1] is Ellipsis):
        return {"type": "array", "items": _schema(args[0], where, stack) if args else {}}
    if not args:  # tuple[()]
        return {"type": "array", "maxItems": 0}
    prefix = [_schema(arm, where, stack) for arm in args]
    return {"type": "array", "prefixItems": prefix, "items": False, "minItems": len(args)}


def _attrs_schema(cls: type, where: str, stack: tuple[type, ...]) -> dict[str, Any]:
    name = cls.__qualname__
    if cls in stack:
        chain = " -> ".join(c.__qualname__ for c in (*stack, cls))
        raise config_error(where, f"unsupported type {name}: recursive attrs class ({chain})")
    hints = _hints(cls, f"{where}, class {name}" if where else f"class {name}")

    def place(field: str) -> str:
        return f"{where}, field {name}.{field}" if where else f"field {name}.{field}"

    rows = []
    for field in (f for f in attrs.fields(cls) if f.init):
        hint = hints.get(field.name, field.type)
        if hint is None or isinstance(hint, str):
            raise config_error(place(field.name), "no annotation")
        default = _EMPTY if field.default is attrs.NOTHING else field.default
        rows.append((field.name, hint, default))
    return _object(rows, place, (*stack, cls))


def schema_from_type(tp: Any) -> dict[str, Any]:
    """The JSON Schema of ``tp`` (see the module docstring); ``config_invalid`` otherwise."""
    return _schema(tp, "", ())


@functools.lru_cache(maxsize=1024)
def _plan(fn: Callable[..., Any], skip: frozenset[str]) -> tuple[tuple[str, Any, Any], ...]:
    """``(name, annotation, default)`` per tool parameter; ``default`` may be ``empty``."""
    where = f"tool function {_fn_name(fn)}"
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise config_error(where, f"no signature ({type(err).__name__})") from err
    hints = _hints(fn, where)
    plan = []
    for p in signature.parameters.values():
        if p.name in skip:
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise config_error(where, f"parameter {p.name!r}: *args and **kwargs are not supported")
        if p.kind is p.POSITIONAL_ONLY:
            raise config_error(where, f"parameter {p.name!r}: positional-only is not supported")
        if p.name not in hints:
            raise config_error(where, f"parameter {p.name!r}: no annotation")
        plan.append((p.name, hints[p.name], p.default))
    return tuple(plan)


def _skip_set(skip: Collection[str]) -> frozenset[str]:
    return frozenset((skip,) if isinstance(skip, str) else skip)


def schema_from_function(
    fn: Callable[..., Any], *, skip: Collection[str] = ("context",)
) -> dict[str, Any]:
    """The input schema of tool function ``fn``: an object of its parameters."""
    where = f"tool function {_fn_name(fn)}"
    return _object(_plan(fn, _skip_set(skip)), lambda name: f"{where}, parameter {name!r}", ())


def output_schema_from_function(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The schema of ``fn``'s return annotation when it is a supported type, else ``None``.

    ``None`` also when there is no return annotation or it is ``Any`` (a tool may return
    anything, e.g. a ``Partial``); ``-> None`` is ``{"type": "null"}``. Annotations that
    cannot be resolved are ``config_invalid``.
    """
    where = f"tool function {_fn_name(fn)}"
    hint = _hints(fn, where).get("return", Any)
    if hint is Any:
        return None
    try:
        return _schema(hint, f"{where}, return", ())
    except ActorError as err:
        if err.code is Code.CONFIG_INVALID:
            return None  # an unsupported result type: the result is not checked
        raise


# --- structuring ----------------------------------------------------------------------

_CONVERTER = cattrs.Converter()


def _union_hook(tp: Any) -> Callable[[Any, Any], Any]:
    arms = [(Draft202012Validator(schema_from_type(arm)), arm) for arm in typing.get_args(tp)]

    def structure(value: Any, _: Any) -> Any:
        for validator, arm in arms:
            if validator.is_valid(value):
                return None if arm is _NONE else _CONVERTER.structure(value, arm)
        raise ValueError("no member of the union accepts the value")

    return structure


_CONVERTER.register_structure_hook_factory(_is_union, _union_hook)

_STRUCTURE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, cattrs.BaseValidationError)


def structure_arguments(
    fn: Callable[..., Any], arguments: Mapping[str, Any], *, skip: Collection[str] = ("context",)
) -> dict[str, Any]:
    """Keyword arguments for ``fn`` built from validated JSON ``arguments``.

    Omitted parameters with defaults are left out (Python fills them). An unknown or a
    missing required argument, or a value that does not structure, is ``input_validation``.
    """
    where = f"tool function {_fn_name(fn)}"
    plan = _plan(fn, _skip_set(skip))
    known = {name for name, _, _ in plan}
    unexpected = [key for key in arguments if key not in known]
    if unexpected:
        text = f"{where}: unexpected argument {names_shown(unexpected)}"
        raise ActorError.from_code(Code.INPUT_VALIDATION, text)
    out: dict[str, Any] = {}
    for name, hint, default in plan:
        if name not in arguments:
            if default is _EMPTY:
                text = f"{where}: missing argument {name!r}"
                raise ActorError.from_code(Code.INPUT_VALIDATION, text)
            continue
        try:
            out[name] = _CONVERTER.structure(arguments[name], hint)
        except _STRUCTURE_ERRORS as err:
            text = f"{where}: argument {name!r} is not a {_type_name(hint)} ({type(err).__name__})"
            raise ActorError.from_code(Code.INPUT_VALIDATION, text) from None
    return out


def needs_structuring(fn: Callable[..., Any], *, skip: Collection[str] = ("context",)) -> bool:
    """Whether :func:`structure_arguments` would change validated JSON arguments of
    ``fn``: ``False`` when every parameter is of a JSON type (str, int, float, bool,
    ``None``, ``Any``, ``Literal``, lists and ``dict[str, …]`` of those, unions of those),
    so a host may pass the arguments as they are; ``True`` for attrs classes, enums,
    tuples and anything else."""
    return not all(_json_native(hint) for _, hint, _ in _plan(fn, _skip_set(skip)))


_NATIVE: Final = frozenset({str, int, float, bool, type(None), typing.Any})


def _json_native(hint: Any) -> bool:
    """A value of ``hint`` is its JSON value as is (see :func:`needs_structuring`)."""
    if hint in _NATIVE:
        return True
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin is Annotated:
        return _json_native(arguments[0])
    if origin is Literal:
        return all(isinstance(value, str | int | float | bool | None) for value in arguments)
    if origin in (Union, types.UnionType):
        return all(_json_native(arm) for arm in arguments)
    if origin in (list, collections.abc.Sequence) and len(arguments) == 1:
        return _json_native(arguments[0])
    if origin in (dict, collections.abc.Mapping) and len(arguments) == 2:
        return arguments[0] is str and _json_native(arguments[1])
    return False
