"""Names to actor refs, scoped to one runtime (never a process global)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from actors.errors import ActorError, Code

if TYPE_CHECKING:
    from actors.actor import ActorRef


class Registry:
    """A name → :class:`~actors.actor.ActorRef` map; register and unregister are O(1).

    A name is held from spawn until the actor has fully stopped; registering a held name
    raises ``name_taken``. Unregistering checks identity, so a stale unregister never
    removes a newer actor that reused the name.
    """

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[str, ActorRef] = {}

    def register(self, name: str, ref: ActorRef) -> None:
        """Name ``ref``; ``name_taken`` when the name is in use."""
        if name in self._names:
            raise ActorError.from_code(Code.NAME_TAKEN, f"name {name!r} is already registered")
        self._names[name] = ref

    def unregister(self, name: str, ref: ActorRef) -> None:
        """Drop ``name`` if it still names ``ref`` (a later holder of the name is kept)."""
        if self._names.get(name) is ref:
            del self._names[name]

    def whereis(self, name: str) -> ActorRef | None:
        """The live ref registered under ``name``, or ``None``."""
        return self._names.get(name)

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))
