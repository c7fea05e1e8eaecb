"""Run state values: copied when they enter the state, read-only where nodes read them.

A node changes the run state only by what it returns (checked against its ``writes``);
what it reads is shared with other nodes and with the stream's records. So:

* **copied in** — the run's inputs when it starts, and each node's updates when they
  are written, are deep copies of their ``dict``, ``list``, ``tuple`` and ``set``
  containers (:func:`copied_inputs`, :func:`copied_updates`): changing the dict you
  passed, or the one a node returned, changes nothing afterwards. A list stays a
  list, a tuple a tuple (a named tuple keeps its class), a set its set type, and any
  other mapping becomes a ``dict``: equality, ``json.dumps``, ``pickle`` and prompts
  see what you wrote. Sub-values shared inside one value are copied once (linear, however much
  they are shared). A cycle, or a nesting deeper than :data:`MAX_DEPTH`, is refused.
  Other objects are kept as they are (an object a node made is its own business).
* **read-only views out** — a node's ``ctx.state`` and a Python edge predicate's state
  are :class:`ReadOnlyMapping` views, whose containers come out as read-only views in
  turn (:func:`view`; a set as a ``frozenset``, a named tuple as itself). They compare
  equal to what they show (``ctx.state["tags"] == ["urgent"]``), print as it, and have
  no method that changes anything — not even through ``dict.__setitem__``, as they are
  not dicts.
  ``copy.deepcopy(view)`` gives a plain, changeable copy. This guards against
  mistakes and clever shortcuts, not against code that reaches into private
  attributes: nodes run in the daemon's own process.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from actors import ActorError, Code

#: How deep a state value may nest.
MAX_DEPTH: Final = 100

_SCALARS: Final = (str, int, float, bool, bytes, type(None))


class _Refused(Exception):
    """A value with a cycle, or nested deeper than :data:`MAX_DEPTH`."""


def _copy(value: Any, depth: int, memo: dict[int, Any], open_: set[int]) -> Any:
    if type(value) in _SCALARS:
        return value
    if type(value) is ReadOnlySequence:  # a node passing on what it read: the data again
        value = value._data
    if not isinstance(value, Mapping | list | tuple | set | frozenset):
        return value
    key = id(value)
    done = memo.get(key)
    if done is not None:
        return done
    if key in open_ or depth >= MAX_DEPTH:
        raise _Refused
    open_.add(key)
    try:
        if isinstance(value, Mapping):
            made: Any = {k: _copy(v, depth + 1, memo, open_) for k, v in value.items()}
        elif isinstance(value, list):
            made = [_copy(v, depth + 1, memo, open_) for v in value]
        elif isinstance(value, tuple):
            items = [_copy(v, depth + 1, memo, open_) for v in value]
            made = type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        else:
            made = type(value)(_copy(v, depth + 1, memo, open_) for v in value)
    finally:
        open_.discard(key)
    memo[key] = made
    return made


def copied_updates(updates: Mapping[str, Any], node_id: str) -> dict[str, Any]:
    """A node's updates, copied in (see the module docstring); a cycle or a nesting too
    deep is ``output_validation`` naming the node and the key."""
    copied: dict[str, Any] = {}
    memo: dict[int, Any] = {}
    for key, value in updates.items():
        try:
            copied[key] = _copy(value, 0, memo, set())
        except _Refused:
            raise ActorError.from_code(
                Code.OUTPUT_VALIDATION,
                f"node {node_id!r}: {str(key)[:64]!r} nests deeper than {MAX_DEPTH} "
                "levels (or has a cycle)",
                node_id=node_id,
            ) from None
    return copied


def copied_inputs(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's inputs copied in; ``None`` when a value has a cycle or nests too deep,
    or when reading the mapping fails."""
    memo: dict[int, Any] = {}
    try:
        return {key: _copy(value, 0, memo, set()) for key, value in inputs.items()}
    except _Refused:
        return None


def view(value: Any) -> Any:
    """``value`` as a node may read it (see the module docstring)."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return ReadOnlyMapping(value)
    if isinstance(value, list) or type(value) is tuple:
        return ReadOnlySequence(value)
    if isinstance(value, set):
        return frozenset(value)
    return value


class _View:
    """What both views share: the data they show, equality and ``repr`` as that data,
    no hash (the data may be a dict or list), and a deep copy that is the plain data."""

    __slots__ = ("_data",)

    def __init__(self, data: Any) -> None:
        self._data = data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _View):
            return bool(self._data == other._data)
        return bool(self._data == other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._data)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy.deepcopy(self._data, memo)


class ReadOnlyMapping(_View, Mapping[str, Any]):
    """A read-only view of a mapping of the run state (see the module docstring)."""

    __slots__ = ()
    _data: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return view(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data


class ReadOnlySequence(_View, Sequence[Any]):
    """A read-only view of a list or tuple of the run state."""

    __slots__ = ()
    _data: list[Any] | tuple[Any, ...]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ReadOnlySequence(self._data[index])
        return view(self._data[index])

    def __len__(self) -> int:
        return len(self._data)
