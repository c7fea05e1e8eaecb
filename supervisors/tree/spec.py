"""Supervisor tree specifications, built in code or loaded from a dict / TOML.

:class:`ChildSpec` says how to start one child — an actor (class or factory, with args) or
a nested :class:`SupervisorSpec` — and how to treat its exits:

* ``restart``: ``permanent`` restarts after any exit; ``transient`` only after an
  abnormal one (a crash; a normal exit or a shutdown is normal); ``temporary`` never —
  not even when a sibling's crash under ``one_for_all`` stops it — and its spec is dropped
  when it exits;
* ``shutdown``: seconds granted for a graceful stop before the child is cancelled
  (``inf``: as long as it takes), or ``"brutal"`` to cancel at once;
* ``significant`` (transient or temporary children only; rejected on a permanent one):
  its exit can shut the supervisor down, per ``auto_shutdown``;
* ``policy``: per-child overrides, consulted before the supervisor's.

:class:`SupervisorSpec` holds the children (started in order), the ``strategy``, the
intensity (``max_restarts`` within ``period`` seconds; default 3 in 5 s), the
``backoff`` between restarts, the ``policy``, ``auto_shutdown`` and ``max_children``.

A spec is checked when it is built, never later inside a running tree: a bad field raises
one ``config_invalid`` :class:`ActorError` naming every offending field (``invalid child
spec 'w': capacity must be an integer >= 1, got 0``). The rules: ``id`` a non-empty
string; ``actor`` callable; ``args`` a tuple; ``capacity`` an int >= 1 (not a bool);
``overflow``, ``restart``, ``strategy``, ``auto_shutdown`` one of their values;
``shutdown`` seconds >= 0 or ``"brutal"`` (never NaN); ``max_restarts`` an int >= 0;
``period`` finite seconds > 0; ``max_children`` ``None`` or an int >= 1; the backoff's
numbers finite and >= 0.

:func:`load_spec` structures untrusted input (a mapping or TOML) with cattrs under the same
rules; every problem is reported in one ``config_invalid`` error whose message names each
offending field by its path (``... @ $.children[1].restart``). Actors are named by import
path (``"package.module:Class"``).
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, get_args

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from actors import Actor, ActorError, Code
from actors.checks import (
    CHECK,
    Check,
    FieldProblem,
    as_float,
    checked,
    finite_non_negative,
    fraction,
    int_at_least,
    is_bool,
    is_tuple,
    non_empty_str,
    one_of,
    positive_finite,
    problems_of,
    str_keyed_mapping,
)
from actors.checks import shown as _show
from actors.lowlevel import DEFAULT_CAPACITY, Overflow
from supervisors.tree.backoff import Backoff
from supervisors.tree.policy import Policy

RestartType = Literal["permanent", "transient", "temporary"]
Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
AutoShutdown = Literal["never", "any_significant", "all_significant"]
Shutdown = float | Literal["brutal"]

DEFAULT_SHUTDOWN = 5.0

# --- field checks (the generic ones are actors.checks') ----------------------------
#
# Every field's rule lives in its attrs metadata under CHECK: a function returning what is
# wrong with a value ("must be ..., got ...") or None. Specs built in code run them all in
# __attrs_post_init__ and raise one config_invalid error naming every bad field;
# load_spec runs the same rule while structuring each field, so its message carries the
# field's path.


def _shutdown(value: Any) -> str | None:
    """Seconds >= 0 (``inf``: wait as long as it takes) or ``"brutal"``; never NaN."""
    if value == "brutal":
        return None
    number = as_float(value)
    if number is not None and number >= 0:  # NaN compares false
        return None
    return f"must be seconds >= 0 or 'brutal', got {_show(value)}"


def _optional_callable(value: Any) -> str | None:
    if value is None or callable(value):
        return None
    return f"must be an actor class or factory, got {_show(value)}"


def _optional_policy(value: Any) -> str | None:
    if value is None or isinstance(value, Policy):
        return None
    return f"must be a Policy or None, got {_show(value)}"


def _is_policy(value: Any) -> str | None:
    return None if isinstance(value, Policy) else f"must be a Policy, got {_show(value)}"


def _optional_supervisor(value: Any) -> str | None:
    if value is None or isinstance(value, SupervisorSpec):
        return None
    return f"must be a SupervisorSpec or None, got {_show(value)}"


def _children(value: Any) -> str | None:
    if not isinstance(value, tuple):
        return f"must be a sequence of ChildSpec, got {_show(value)}"
    for index, child in enumerate(value):
        if not isinstance(child, ChildSpec):
            return f"[{index}] must be a ChildSpec, got {_show(child)}"
    return None


def _backoff(value: Any) -> str | None:
    """A :class:`Backoff` (which checks its own numbers when it is built)."""
    if not isinstance(value, Backoff):
        return f"must be a Backoff, got {_show(value)}"
    return None


def _invalid(what: str, problems: list[str]) -> ActorError:
    return ActorError.from_code(Code.CONFIG_INVALID, f"invalid {what}: " + "; ".join(problems))


def _as_tuple(value: Iterable[ChildSpec]) -> tuple[ChildSpec, ...]:
    """``children`` as a tuple; anything but a list or tuple is left for the check to name."""
    if isinstance(value, list | tuple):
        return tuple(value)
    return value  # type: ignore[return-value]


# --- specs --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ChildSpec:
    """One child of a supervisor (see the module docstring).

    Raises ``config_invalid`` (:class:`ActorError`) naming every bad field.
    """

    id: str = attrs.field(metadata=checked(non_empty_str))
    actor: Callable[..., Actor] | None = attrs.field(
        default=None, metadata=checked(_optional_callable)
    )
    args: tuple[Any, ...] = attrs.field(default=(), metadata=checked(is_tuple))
    kwargs: Mapping[str, Any] = attrs.field(factory=dict, metadata=checked(str_keyed_mapping))
    supervisor: SupervisorSpec | None = attrs.field(
        default=None, metadata=checked(_optional_supervisor)
    )
    restart: RestartType = attrs.field(
        default="permanent", metadata=checked(one_of(get_args(RestartType)))
    )
    shutdown: Shutdown = attrs.field(default=DEFAULT_SHUTDOWN, metadata=checked(_shutdown))
    significant: bool = attrs.field(default=False, metadata=checked(is_bool))
    policy: Policy | None = attrs.field(default=None, metadata=checked(_optional_policy))
    capacity: int = attrs.field(default=DEFAULT_CAPACITY, metadata=checked(int_at_least(1)))
    overflow: Overflow = attrs.field(
        default="backpressure", metadata=checked(one_of(get_args(Overflow)))
    )

    def __attrs_post_init__(self) -> None:
        problems = problems_of(self)
        if not problems:  # the rules across fields need sound fields
            if (self.actor is None) == (self.supervisor is None):
                problems.append("give exactly one of 'actor' or 'supervisor'")
            if self.significant and self.restart == "permanent":
                problems.append("significant: a permanent child cannot be significant")
        if problems:
            raise _invalid(f"child spec {_show(self.id)}", problems)

    def factory(self) -> Callable[[], Actor]:
        """A zero-argument factory for the actor (a fresh instance per incarnation)."""
        actor, args, kwargs = self.actor, self.args, dict(self.kwargs)
        assert actor is not None
        if not args and not kwargs:
            return actor
        return lambda: actor(*args, **kwargs)


@attrs.frozen(kw_only=True)
class SupervisorSpec:
    """A supervisor: its children and how it treats their failures.

    Raises ``config_invalid`` (:class:`ActorError`) naming every bad field.
    """

    children: tuple[ChildSpec, ...] = attrs.field(
        default=(), converter=_as_tuple, metadata=checked(_children)
    )
    strategy: Strategy = attrs.field(
        default="one_for_one", metadata=checked(one_of(get_args(Strategy)))
    )
    max_restarts: int = attrs.field(default=3, metadata=checked(int_at_least(0)))
    period: float = attrs.field(default=5.0, metadata=checked(positive_finite))
    backoff: Backoff = attrs.field(factory=Backoff, metadata=checked(_backoff))
    policy: Policy = attrs.field(factory=Policy, metadata=checked(_is_policy))
    auto_shutdown: AutoShutdown = attrs.field(
        default="never", metadata=checked(one_of(get_args(AutoShutdown)))
    )
    max_children: int | None = attrs.field(
        default=None, metadata=checked(int_at_least(1, optional=True))
    )

    def __attrs_post_init__(self) -> None:
        problems = problems_of(self)
        if not problems:
            ids = [child.id for child in self.children]
            duplicates = sorted({i for i in ids if ids.count(i) > 1})
            if duplicates:
                problems.append(f"children: duplicate child ids {duplicates}")
        if problems:
            raise _invalid("supervisor spec", problems)


# --- loading from untrusted input ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class _BackoffConfig:
    """The loadable fields of :class:`Backoff` (its random source is code-only)."""

    kind: Literal["fixed", "linear", "exponential"] = attrs.field(
        default="exponential", metadata=checked(one_of(("fixed", "linear", "exponential")))
    )
    initial: float = attrs.field(default=0.1, metadata=checked(finite_non_negative))
    factor: float = attrs.field(default=2.0, metadata=checked(finite_non_negative))
    step: float = attrs.field(default=0.0, metadata=checked(finite_non_negative))
    max: float = attrs.field(default=30.0, metadata=checked(finite_non_negative))
    jitter: float = attrs.field(default=0.0, metadata=checked(fraction))
    reset_after: float = attrs.field(default=60.0, metadata=checked(finite_non_negative))

    def build(self) -> Backoff:
        return Backoff(**attrs.asdict(self))


def _import_actor(value: Any) -> Any:
    """An import path (``"package.module:Class"``) to what it names; anything else as is."""
    if not isinstance(value, str):
        return value
    module_name, colon, name = value.partition(":")
    if not colon or not module_name or not name:
        raise FieldProblem(f"must be an import path 'package.module:Class', got {_show(value)}")
    try:
        target = getattr(importlib.import_module(module_name), name)
    except (Exception, SystemExit) as exc:
        raise FieldProblem(f"cannot import {_show(value)}: {exc or type(exc).__name__}") from exc
    if not (isinstance(target, type) and issubclass(target, Actor)) or target is Actor:
        # A spec from a file may name only Actor classes: any other callable (os:system)
        # would run with the spec's args. Factories are for specs built in code.
        raise FieldProblem(f"{_show(value)} is not an Actor subclass")
    return target


def _list_as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _seconds_or_brutal(value: Any) -> Any:
    return value if value == "brutal" else float(value)


def _policy(value: Any, _: Any) -> Policy:
    if isinstance(value, Policy):
        return value
    if not isinstance(value, Mapping):
        raise FieldProblem(f"must be a table with by_code / by_class, got {_show(value)}")
    unknown = set(value) - {"by_code", "by_class"}
    if unknown:
        raise FieldProblem(f"unknown policy keys {sorted(unknown)} (by_exception is code-only)")
    return Policy(by_code=value.get("by_code", {}), by_class=value.get("by_class", {}))


# How a loaded value is prepared before its field's check, and after it passes.
_BEFORE: Final[dict[str, Callable[[Any], Any]]] = {
    "actor": _import_actor,
    "args": _list_as_tuple,
}
_AFTER: Final[dict[str, Callable[[Any], Any]]] = {
    "kwargs": dict,
    "shutdown": _seconds_or_brutal,
}
# Fields cattrs structures by type (nested specs, tables); their checks run at __init__.
_BY_TYPE: Final = frozenset({"children", "supervisor", "backoff", "policy"})


def _field_hook(name: str, check: Check) -> Callable[[Any, Any], Any]:
    before, after = _BEFORE.get(name), _AFTER.get(name)

    def hook(value: Any, _: Any) -> Any:
        if before is not None:
            value = before(value)
        problem = check(value)
        if problem is not None:
            raise FieldProblem(problem)
        return after(value) if after is not None else value

    return hook


def _overrides(cls: type[attrs.AttrsInstance]) -> dict[str, Any]:
    return {
        field.name: override(struct_hook=_field_hook(field.name, field.metadata[CHECK]))
        for field in attrs.fields(cls)
        if CHECK in field.metadata and field.name not in _BY_TYPE
    }


def _describe(exc: BaseException, type_: Any) -> str:
    """One problem for :func:`cattrs.transform_error` (which appends `` @ <path>``)."""
    if isinstance(exc, FieldProblem):
        return str(exc)
    if isinstance(exc, ActorError):  # a rule across fields, from a spec's __init__
        return exc.message
    described = cattrs.v.format_exception(exc, type_)
    if isinstance(exc, ValueError | TypeError) and str(exc):
        described = f"{described} ({exc})"
    return described


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(Policy, _policy)
    converter.register_structure_hook(Policy | None, _optional(_policy))
    converter.register_structure_hook(
        Backoff, lambda value, _: converter.structure(value, _BackoffConfig).build()
    )
    # Registered before any hook is generated, so nested specs resolve to these.
    hooks: dict[type, Callable[[Any, Any], Any]] = {}
    for cls in (ChildSpec, SupervisorSpec, _BackoffConfig):
        converter.register_structure_hook(
            cls, lambda value, type_, cls=cls: hooks[cls](value, type_)
        )
    for cls in (ChildSpec, SupervisorSpec, _BackoffConfig):
        hooks[cls] = make_dict_structure_fn(cls, converter, **_overrides(cls))
    return converter


def _optional(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda value, type_: None if value is None else hook(value, type_)


_CONVERTER = _converter()


def _non_string_key(value: Any, path: str) -> str | None:
    """The path of the first key that is not a string (JSON and TOML have none; a dict
    built in code may), else ``None``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}[{key!r:.40}]"
            found = _non_string_key(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _non_string_key(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def load_spec(data: Mapping[str, Any] | str) -> SupervisorSpec:
    """Structure a :class:`SupervisorSpec` from a mapping or a TOML document.

    Raises ``config_invalid`` naming every offending field by its path
    (``must be an integer >= 1, got 0 @ $.children[0].capacity``).
    """
    problems: list[str]
    cause: BaseException
    try:
        raw = tomllib.loads(data) if isinstance(data, str) else data
    except tomllib.TOMLDecodeError as exc:
        problems, cause = [f"not valid TOML: {exc}"], exc
    else:
        if not isinstance(raw, Mapping):
            raise _invalid("supervisor spec", [f"expected a table, got {_show(raw)}"])
        odd_key = _non_string_key(raw, "$")
        if odd_key is not None:
            raise _invalid("supervisor spec", [f"keys must be strings @ {odd_key}"])
        try:
            return _CONVERTER.structure(raw, SupervisorSpec)
        except cattrs.BaseValidationError as exc:
            problems, cause = cattrs.transform_error(exc, format_exception=_describe), exc
        except (ActorError, ValueError, TypeError) as exc:  # outside any field (defensive)
            problems, cause = [_describe(exc, None)], exc
    # A rule across a nested supervisor's fields arrives already prefixed.
    prefix = "invalid supervisor spec: "
    raise _invalid("supervisor spec", [p.removeprefix(prefix) for p in problems]) from cause
