"""Run state values that nodes cannot change in place.

A node writes the run state only by what it returns (checked against its ``writes``);
what it reads is shared with every other node and with the stream's records. So the
values that go into the state — the inputs, each node's updates — are frozen copies:
a ``dict`` becomes a :class:`FrozenDict` (still a ``dict``: ``json.dumps`` and
``isinstance(x, dict)`` work), a ``list`` or ``tuple`` a ``tuple``, a ``set`` a
``frozenset``, recursively; anything else is kept as it is (an object the node made is
its own business). A value with a cycle, or nested deeper than :data:`MAX_DEPTH`, is
refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NoReturn

from actors import ActorError, Code

#: How deep a state value may nest.
MAX_DEPTH: Final = 100


class FrozenDict(dict[str, Any]):
    """A ``dict`` whose contents cannot change (every mutating method raises
    ``TypeError``)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("run state is read-only: return updates instead")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)

    def __reduce__(self) -> Any:
        return (FrozenDict, (dict(self),))


class _TooDeep(Exception):
    pass


def freeze(value: Any, depth: int = 0) -> Any:
    """A frozen copy of ``value`` (see the module docstring); raises ``_TooDeep`` past
    :data:`MAX_DEPTH`, which a cycle always reaches."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if depth >= MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, Mapping):
        return FrozenDict({key: freeze(item, depth + 1) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(item, depth + 1) for item in value)
    if isinstance(value, set | frozenset):
        return frozenset(freeze(item, depth + 1) for item in value)
    return value


def frozen_updates(updates: Mapping[str, Any], node_id: str) -> dict[str, Any]:
    """A node's updates, each value frozen; a cycle or a nesting too deep is
    ``output_validation`` naming the node and the key."""
    frozen: dict[str, Any] = {}
    for key, value in updates.items():
        try:
            frozen[key] = freeze(value)
        except _TooDeep:
            raise ActorError.from_code(
                Code.OUTPUT_VALIDATION,
                f"node {node_id!r}: {str(key)[:64]!r} nests deeper than {MAX_DEPTH} "
                "levels (or has a cycle)",
                node_id=node_id,
            ) from None
    return frozen


def frozen_inputs(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's inputs frozen (``None`` when a value has a cycle or nests too deep)."""
    try:
        return {key: freeze(value) for key, value in inputs.items()}
    except _TooDeep:
        return None
