"""Supervisor tree specifications, built in code or loaded from a dict / TOML.

:class:`ChildSpec` says how to start one child — an actor (class or factory, with args) or
a nested :class:`SupervisorSpec` — and how to treat its exits:

* ``restart``: ``permanent`` restarts after any exit; ``transient`` only after an
  abnormal one (a crash; a normal exit or a shutdown is normal); ``temporary`` never —
  not even when a sibling's crash under ``one_for_all`` stops it — and its spec is dropped
  when it exits;
* ``shutdown``: seconds granted for a graceful stop before the child is cancelled, or
  ``"brutal"`` to cancel at once;
* ``significant`` (transient or temporary children only; rejected on a permanent one):
  its exit can shut the supervisor down, per ``auto_shutdown``;
* ``policy``: per-child overrides, consulted before the supervisor's.

:class:`SupervisorSpec` holds the children (started in order), the ``strategy``, the
intensity (``max_restarts`` within ``period`` seconds; default 3 in 5 s), the
``backoff`` between restarts, the ``policy``, ``auto_shutdown`` and ``max_children``.

:func:`load_spec` structures untrusted input with cattrs; every problem is reported in
one ``config_invalid`` error whose message names each offending field (``$.children[1].
restart``). Actors are named by import path (``"package.module:Class"``).
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import cattrs

from actors import Actor, ActorError, Code
from actors.mailbox import DEFAULT_CAPACITY, Overflow
from supervisors.backoff import Backoff
from supervisors.policy import Policy

RestartType = Literal["permanent", "transient", "temporary"]
Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
AutoShutdown = Literal["never", "any_significant", "all_significant"]
Shutdown = float | Literal["brutal"]

DEFAULT_SHUTDOWN = 5.0


def _check_shutdown(_: object, __: object, value: Shutdown) -> None:
    if value == "brutal":
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"shutdown must be seconds >= 0 or 'brutal', got {value!r}")


@attrs.frozen(kw_only=True)
class ChildSpec:
    """One child of a supervisor (see the module docstring)."""

    id: str
    actor: Callable[..., Actor] | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    supervisor: SupervisorSpec | None = None
    restart: RestartType = "permanent"
    shutdown: Shutdown = attrs.field(default=DEFAULT_SHUTDOWN, validator=_check_shutdown)
    significant: bool = False
    policy: Policy | None = None
    capacity: int = DEFAULT_CAPACITY
    overflow: Overflow = "backpressure"

    def __attrs_post_init__(self) -> None:
        if (self.actor is None) == (self.supervisor is None):
            raise ValueError(f"child {self.id!r}: give exactly one of 'actor' or 'supervisor'")
        if self.significant and self.restart == "permanent":
            raise ValueError(f"child {self.id!r}: a permanent child cannot be significant")
        if self.restart not in ("permanent", "transient", "temporary"):
            raise ValueError(f"child {self.id!r}: unknown restart type {self.restart!r}")

    def factory(self) -> Callable[[], Actor]:
        """A zero-argument factory for the actor (a fresh instance per incarnation)."""
        actor, args, kwargs = self.actor, self.args, dict(self.kwargs)
        assert actor is not None
        if not args and not kwargs:
            return actor
        return lambda: actor(*args, **kwargs)


@attrs.frozen(kw_only=True)
class SupervisorSpec:
    """A supervisor: its children and how it treats their failures."""

    children: tuple[ChildSpec, ...] = attrs.field(default=(), converter=tuple)
    strategy: Strategy = "one_for_one"
    max_restarts: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    period: float = attrs.field(default=5.0, validator=attrs.validators.gt(0))
    backoff: Backoff = attrs.field(factory=Backoff)
    policy: Policy = attrs.field(factory=Policy)
    auto_shutdown: AutoShutdown = "never"
    max_children: int | None = None

    def __attrs_post_init__(self) -> None:
        ids = [child.id for child in self.children]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate child ids: {duplicates}")
        if self.strategy not in ("one_for_one", "one_for_all", "rest_for_one"):
            raise ValueError(f"unknown strategy {self.strategy!r}")
        if self.auto_shutdown not in ("never", "any_significant", "all_significant"):
            raise ValueError(f"unknown auto_shutdown {self.auto_shutdown!r}")


# --- loading from untrusted input ---------------------------------------------------------


def _import_actor(value: Any, _: Any) -> Callable[..., Actor]:
    if callable(value):
        return value  # type: ignore[no-any-return]
    if not isinstance(value, str) or ":" not in value:
        raise ValueError(f"expected 'package.module:Class', got {value!r}")
    module_name, _, attr = value.partition(":")
    target = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(target, type) and issubclass(target, Actor)) and not callable(target):
        raise TypeError(f"{value!r} is not an actor class or factory")
    return target  # type: ignore[no-any-return]


def _shutdown(value: Any, _: Any) -> Shutdown:
    if value == "brutal":
        return "brutal"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected seconds or 'brutal', got {value!r}")
    return float(value)


@attrs.frozen(kw_only=True)
class _BackoffConfig:
    """The loadable fields of :class:`Backoff` (its random source is code-only)."""

    kind: Literal["fixed", "linear", "exponential"] = "exponential"
    initial: float = 0.1
    factor: float = 2.0
    step: float = 0.0
    max: float = 30.0
    jitter: float = 0.0
    reset_after: float = 60.0

    def build(self) -> Backoff:
        return Backoff(**attrs.asdict(self))


def _policy(value: Any, _: Any) -> Policy:
    if isinstance(value, Policy):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a table with by_code / by_class, got {value!r}")
    unknown = set(value) - {"by_code", "by_class"}
    if unknown:
        raise ValueError(f"unknown policy keys {sorted(unknown)} (by_exception is code-only)")
    return Policy(by_code=value.get("by_code", {}), by_class=value.get("by_class", {}))


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(Callable[..., Actor] | None, _optional(_import_actor))
    converter.register_structure_hook(Shutdown, _shutdown)
    converter.register_structure_hook(Policy, _policy)
    converter.register_structure_hook(Policy | None, _optional(_policy))
    converter.register_structure_hook(
        Backoff, lambda value, _: converter.structure(value, _BackoffConfig).build()
    )
    return converter


def _optional(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda value, type_: None if value is None else hook(value, type_)


_CONVERTER = _converter()


def load_spec(data: Mapping[str, Any] | str) -> SupervisorSpec:
    """Structure a :class:`SupervisorSpec` from a mapping or a TOML document.

    Raises ``config_invalid`` naming every offending field.
    """
    try:
        raw = tomllib.loads(data) if isinstance(data, str) else data
        return _CONVERTER.structure(raw, SupervisorSpec)
    except (cattrs.BaseValidationError, tomllib.TOMLDecodeError, ValueError, TypeError) as exc:
        problems = (
            cattrs.transform_error(exc)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "invalid supervisor spec: " + "; ".join(problems)
        ) from exc
