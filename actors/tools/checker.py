"""The compiled checker of a JSON Schema (draft 2020-12): :func:`compile_schema` checks
a schema against its metaschema once and returns a :class:`Checker`;
:meth:`Checker.check` raises the given code naming the JSON path of the best-matching
error and the failed keyword, never the checked value (jsonschema's own messages embed
it, so they are not used), the tool in the error's ``tool`` field. Object keys do show
(path segments, unexpected keys), clipped to 64 characters. A ``bool`` is never an
integer or number; ``1.0`` is an integer (the draft's rules). ``format`` is not
asserted. A ``false`` subschema's failure is reported at its parent. jsonschema-rs says
"valid" fast; jsonschema names what failed."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import jsonschema.exceptions
import jsonschema_rs
import referencing.exceptions
from jsonschema import Draft202012Validator, validators
from jsonschema.protocols import Validator

from actors.codes import Code
from actors.error_types import ActorError

_LIMITS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def config_error(where: str, text: str) -> ActorError:
    """``config_invalid``: ``where`` (a schema, a parameter) is wrong, as ``text`` says."""
    return ActorError.from_code(Code.CONFIG_INVALID, f"{where}: {text}" if where else text)


# --- checking -------------------------------------------------------------------------


def _clip(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def names_shown(names: list[str]) -> str:
    """Up to three names, clipped, and how many more."""
    shown = ", ".join(repr(_clip(str(n))) for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _json_path(parts: Iterable[str | int]) -> str:
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENT.match(part):
            out.append("." + _clip(part))
        else:
            out.append(f"[{json.dumps(_clip(part))}]")
    return "".join(out)


def _json_type(value: object) -> str:
    for python, name in ((bool, "boolean"), (int, "integer"), (float, "number")):
        if isinstance(value, python):
            return name
    kinds = ((str, "string"), (type(None), "null"), (list, "array"), (Mapping, "object"))
    return next((name for python, name in kinds if isinstance(value, python)), "unknown")


def _detail(error: jsonschema.exceptions.ValidationError) -> str:
    """The failed keyword with what the schema wanted: never the instance's content."""
    keyword, instance = error.validator, error.instance
    wanted: Any = error.validator_value  # the stubs add an ``Unset`` never seen here
    if not isinstance(keyword, str):  # a ``false`` subschema: no keyword, and jsonschema
        return "false schema: a part of this value is not allowed"  # reports the parent
    if keyword == "type":
        expected = wanted if isinstance(wanted, str) else " or ".join(map(str, wanted))
        return f"type: expected {expected}, got {_json_type(instance)}"
    if keyword == "required" and isinstance(instance, Mapping):
        return f"required: missing {names_shown([n for n in wanted if n not in instance])}"
    if keyword == "additionalProperties" and isinstance(instance, Mapping):
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        known, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        extra = [
            k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)
        ]
        return f"additionalProperties: unexpected {names_shown(extra)}"
    if keyword == "anyOf":
        return f"anyOf: no member accepts this {_json_type(instance)}"
    if keyword == "oneOf":
        return f"oneOf: not exactly one member accepts this {_json_type(instance)}"
    if keyword in _LIMITS and isinstance(wanted, int | float) and not isinstance(wanted, bool):
        return f"{keyword}: limit {wanted}"
    return str(keyword)


def _unresolvable(what: str, err: Exception) -> ActorError:
    return config_error(what, f"unresolvable $ref ({type(err).__name__})")


@attrs.frozen(eq=False)
class Checker:
    """A schema compiled once (by :func:`compile_schema`); ``check`` is cheap when valid."""

    schema: dict[str, Any]
    what: str
    _validator: Validator = attrs.field(repr=False, alias="validator")
    #: The same schema compiled by jsonschema-rs (about 70 times faster on a valid
    #: value), used to say "valid" first; ``None`` when it could not compile it. The
    #: reference implementation (jsonschema) has the last word on an invalid value.
    _fast: Any = attrs.field(default=None, repr=False, alias="fast")

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` is valid (an unresolvable ``$ref`` is ``config_invalid``; a
        value that is not JSON — a non-string key, a set — is ``input_validation``)."""
        return self._valid(value, Code.INPUT_VALIDATION, None)

    def _valid(self, value: Any, code: Code, tool: str | None) -> bool:
        fast = self._fast
        try:
            if fast is not None and fast.is_valid(value):
                return True
            return bool(self._validator.is_valid(value))
        except referencing.exceptions.Unresolvable as err:
            raise _unresolvable(self.what, err) from err
        except (ValueError, TypeError, OverflowError) as err:
            # The validators cannot read it: not JSON (never a value in the message).
            raise ActorError.from_code(
                code, f"$: not a JSON value ({type(err).__name__})", tool=tool
            ) from None

    def check(self, value: Any, *, code: Code, tool: str) -> None:
        """Return if ``value`` is valid; else raise ``code`` naming path and keyword.

        The message is ``"<JSON path>: <keyword>[: what the schema wanted]"``, e.g.
        ``$.items[2].url: type: expected string, got integer``; ``tool`` goes into the
        error's ``tool`` field. An unresolvable ``$ref`` is ``config_invalid``.
        """
        fast = self._fast
        if fast is not None:
            try:
                if fast.is_valid(value):
                    return  # the hot path: one call into jsonschema-rs
            except (ValueError, TypeError, OverflowError):
                pass  # not JSON: _valid says so, typed
        if self._valid(value, code, tool):
            return
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        except referencing.exceptions.Unresolvable as err:
            raise _unresolvable(self.what, err) from err
        path = _json_path(error.absolute_path) if error is not None else "$"
        detail = _detail(error) if error is not None else "invalid"
        raise ActorError.from_code(code, f"{path}: {detail}", tool=tool)


def compile_schema(schema: Mapping[str, Any], *, what: str) -> Checker:
    """Check ``schema`` against its metaschema (``$schema``, else 2020-12) and compile it.

    The schema is deep-copied first, so later changes to the caller's dict do not leak in.
    A bad schema is ``config_invalid`` naming ``what``, the location in the schema and the
    metaschema keyword that failed (not the schema's content).
    """
    frozen = copy.deepcopy(dict(schema))
    cls = validators.validator_for(frozen, default=Draft202012Validator)
    try:
        cls.check_schema(frozen)
    except jsonschema.exceptions.SchemaError as err:
        where = _json_path(err.absolute_path)
        text = f"invalid JSON Schema at {where} (metaschema keyword {err.validator!r})"
        raise config_error(what, text) from err
    return Checker(schema=frozen, what=what, validator=cls(frozen), fast=_fast_validator(frozen))


def _fast_validator(schema: dict[str, Any]) -> Any:
    """jsonschema-rs's validator of ``schema`` — offline: a remote ``$ref`` is never
    fetched — or ``None`` when it cannot compile it (jsonschema alone then decides)."""
    try:
        return jsonschema_rs.validator_for(schema, offline=True)
    except (jsonschema_rs.ValidationError, ValueError, TypeError):
        return None
