"""The cancel under way for a supervisor's subtree, chained to its parent's.

"Cancellation always wins" (``docs/supervision.md``): once a cancel is requested for a
subtree, no policy runs inside it and nothing starts. Each supervisor holds one
:class:`CancelState`, linked to its parent's, so a question about a subtree is answered
by walking up to the root:

* a **hard** cancel (a kill, an abort, a trio scope around the tree) trio-cancels tasks;
  the nearest one wins;
* a **graceful** shutdown only stops children; it is answered when no hard cancel covers
  the subtree (the nearest one);
* a trio scope around the tree (:meth:`CancelState.note`) is a hard cancel of the whole
  tree: it replaces the reason of a graceful shutdown under way, never a hard cancel's.
"""

from __future__ import annotations


class CancelState:
    """One supervisor's requested cancel: its reason (``None``: none) and whether hard."""

    __slots__ = ("hard", "parent", "reason")

    def __init__(self, parent: CancelState | None) -> None:
        self.parent = parent
        self.reason: str | None = None
        self.hard = False

    def in_effect(self) -> str | None:
        """The reason of a cancel under way for this subtree or any enclosing one: the
        nearest hard cancel's, else the nearest graceful shutdown's."""
        graceful: str | None = None
        node: CancelState | None = self
        while node is not None:
            if node.reason is not None:
                if node.hard:
                    return node.reason
                if graceful is None:
                    graceful = node.reason
            node = node.parent
        return graceful

    def hard_in_effect(self) -> str | None:
        """The reason of the nearest hard cancel covering this subtree, if any."""
        node: CancelState | None = self
        while node is not None:
            if node.hard:
                return node.reason
            node = node.parent
        return None

    def request(self, reason: str, *, hard: bool = False) -> None:
        """Ask for a cancel of this subtree; a reason already given is kept."""
        if self.reason is None:
            self.reason = reason
        if hard:
            self.hard = True

    def note(self, reason: str) -> str:
        """A ``trio.Cancelled`` reached a task of this subtree: returns the reason in
        effect. If no hard cancel covers the subtree, it came from a scope around the
        tree: the whole tree is hard-cancelled with ``reason``."""
        hard = self.hard_in_effect()
        if hard is not None:
            return hard
        root = self
        while root.parent is not None:
            root = root.parent
        root.reason, root.hard = reason, True
        return reason

    def clear(self) -> None:
        self.reason, self.hard = None, False
