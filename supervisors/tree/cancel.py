"""The cancel under way for a supervisor's subtree, chained to its parent's.

"Cancellation always wins" (``docs/supervision.md``): once a cancel is requested for a
subtree, no policy runs inside it and nothing starts. Each supervisor holds one
:class:`CancelState`, linked to its parent's, so a question about a subtree is answered
by walking up to the root:

* a **hard** cancel (a kill, an abort, a trio scope around the tree) trio-cancels tasks;
  the nearest one wins;
* a **graceful** shutdown only stops children; it is answered when no hard cancel covers
  the subtree (the nearest one);
* a trio scope around the tree is a hard cancel of the whole tree: it replaces the
  reason of a graceful shutdown under way, never a hard cancel's.

**Whose cancel is it?** :meth:`CancelState.note` is the one place that tells "a scope
*around* the tree was cancelled" from "a scope *of* the tree ended". Every task of the
tree that sees a ``trio.Cancelled`` its own scopes did not ask for (an incarnation, a
supervisor's run, the block of ``open_tree``) asks it. A supervisor cancels its run's
scope (its nursery's) only through :meth:`CancelState.cancel_run` — a kill, an abort, the
end of the run — which records it first; walking up, the first supervisor that did owns
the cancel. Only when none did, the cancel came from around the tree. (The scope's
``cancel_called`` cannot tell: trio sets it too when a task of the nursery ends with the
``Cancelled`` of a scope around it.)
"""

from __future__ import annotations

import trio

from actors.lowlevel import cancelled_around


class CancelState:
    """One supervisor's requested cancel: its reason (``None``: none) and whether hard,
    and the scope its run's tasks live in (``None`` between runs)."""

    __slots__ = ("ended", "hard", "parent", "reason", "scope")

    def __init__(self, parent: CancelState | None) -> None:
        self.parent = parent
        self.reason: str | None = None
        self.hard = False
        #: The cancel scope of the supervisor's run (its nursery's), while it runs.
        self.scope: trio.CancelScope | None = None
        #: The reason the supervisor cancelled that scope with (:meth:`cancel_run`).
        self.ended: str | None = None

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
        """Ask for a cancel of this subtree; a reason already given is kept. A hard one
        (a kill, an abort) made in the instant a scope around the running tree was
        cancelled — the ``trio.Cancelled`` on its way, not yet seen by any task — came
        second: that scope's reason is kept (the first cancel wins)."""
        if self.reason is None:
            if hard and self.scope is not None and self.ended is None:
                reason = cancelled_around(self.scope) or reason
            self.reason = reason
        if hard:
            self.hard = True

    def cancel_run(self, reason: str) -> bool:
        """Cancel the supervisor's run (its scope) with ``reason``, recorded first: what
        its tasks see from now on is its own cancel, not one around the tree. ``False``
        if it is not running (no scope)."""
        if self.ended is None:
            self.ended = reason
        if self.scope is None:
            return False
        self.scope.cancel(reason=reason)
        return True

    def note(self, reason: str) -> str:
        """A ``trio.Cancelled`` that its own scopes did not ask for reached a task of this
        supervisor's run (a task of its nursery, or the run itself; ``reason``: trio's):
        the reason in effect, decided here and nowhere else.

        1. A hard cancel covering the subtree (a kill, an abort, one noted before) → its
           reason.
        2. Else, walking up from this supervisor, the first that cancelled its run's
           scope (:meth:`cancel_run`) owns the cancel — the end of its run, say, in the
           instant a start was killed — and nothing is recorded: the reason in effect
           there (its shutdown's), else the one it cancelled with.
        3. Else no scope of the tree was cancelled: a scope *around* the tree was. The
           whole tree is hard-cancelled with ``reason`` (:meth:`outside`).
        """
        hard = self.hard_in_effect()
        if hard is not None:
            return hard
        node: CancelState | None = self
        while node is not None:
            if node.ended is not None:
                return node.in_effect() or node.ended
            node = node.parent
        return self.outside(reason)

    def outside(self, reason: str) -> str:
        """A scope around the tree was cancelled with ``reason``: the root is
        hard-cancelled with it, unless a hard cancel is in effect (its reason is kept and
        returned)."""
        root = self
        while root.parent is not None:
            root = root.parent
        if not root.hard:
            root.reason, root.hard = reason, True
        return root.reason or reason

    def clear(self) -> None:
        """Forget the cancel requested (a fresh run starts without one)."""
        self.reason, self.hard, self.ended = None, False, None
