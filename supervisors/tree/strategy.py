"""What a supervisor does, as tables: OTP's strategy clauses without the side effects.

Everything here is pure; the supervisor loop looks its answers up and acts on them.

* :func:`restart_plan` — which children a restart of one child affects under
  ``one_for_one`` / ``one_for_all`` / ``rest_for_one``: the siblings stopped first, in
  reverse start order, then the group started in start order.
* :data:`ON_EXIT` — what an incarnation's exit means, by restart type and exit kind.
* :data:`ON_DIRECTIVE` — what a decided directive does, by directive and restart type.
* :data:`AFTER_CRASH` — what the crashed cell does with its instance, by directive.
* :func:`shuts_down` — ``auto_shutdown``: whether a child staying down ends the
  supervisor.
* :data:`RESTARTABLE` — whether a restart type is ever restarted (``temporary`` never is,
  not even with its group) and :func:`restarts_in_place`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from actors.lowlevel import AfterCrash, ExitKind
from supervisors.tree.policy import Directive
from supervisors.tree.spec import AutoShutdown, RestartType, Strategy


class Outcome(enum.StrEnum):
    """What the supervisor does with a child after an exit or a decision."""

    DECIDE = "decide"  # a failure: the policy's directive says (then ON_DIRECTIVE)
    RESTART = "restart"  # restart per strategy, after the backoff delay (counted)
    STOPPED = "stopped"  # down for good; a temporary child's spec is dropped
    EXITED = "exited"  # down for good by its own exit: auto_shutdown is consulted
    ESCALATE = "escalate"  # the supervisor shuts its children down and fails with the error
    ABORTED = "aborted"  # the tree was aborted at the decision: only marked stopped


RESTARTABLE: Final[Mapping[RestartType, bool]] = {
    "permanent": True,
    "transient": True,
    "temporary": False,
}
"""Whether a child of that restart type is ever restarted — by a ``restart`` directive
or with its group under ``one_for_all`` / ``rest_for_one``."""

ON_EXIT: Final[Mapping[tuple[RestartType, ExitKind], Outcome]] = {
    # A normal exit (it stopped itself): restarted only if permanent — as a restart
    # directive without the policy, so it counts in the intensity window like a crash.
    ("permanent", ExitKind.NORMAL): Outcome.RESTART,
    ("transient", ExitKind.NORMAL): Outcome.EXITED,
    ("temporary", ExitKind.NORMAL): Outcome.EXITED,
    # A crash: the policy decides (in the child's own task, or in the loop for a nested
    # supervisor), whatever the restart type.
    ("permanent", ExitKind.CRASHED): Outcome.DECIDE,
    ("transient", ExitKind.CRASHED): Outcome.DECIDE,
    ("temporary", ExitKind.CRASHED): Outcome.DECIDE,
    # Cancelled (a kill, a cancel from outside the subtree): down, not an exit of its own.
    ("permanent", ExitKind.CANCELLED): Outcome.STOPPED,
    ("transient", ExitKind.CANCELLED): Outcome.STOPPED,
    ("temporary", ExitKind.CANCELLED): Outcome.STOPPED,
}
"""What an incarnation's own exit means (not one the supervisor asked for; a child that
stopped itself for good with ``ref.stop()`` is always ``STOPPED``)."""

ON_DIRECTIVE: Final[Mapping[tuple[Directive, RestartType], Outcome]] = {
    (Directive.RESTART, "permanent"): Outcome.RESTART,
    (Directive.RESTART, "transient"): Outcome.RESTART,
    (Directive.RESTART, "temporary"): Outcome.STOPPED,
    (Directive.STOP, "permanent"): Outcome.EXITED,
    (Directive.STOP, "transient"): Outcome.EXITED,
    (Directive.STOP, "temporary"): Outcome.EXITED,
    (Directive.ESCALATE, "permanent"): Outcome.ESCALATE,
    (Directive.ESCALATE, "transient"): Outcome.ESCALATE,
    (Directive.ESCALATE, "temporary"): Outcome.ESCALATE,
    (Directive.ABORT, "permanent"): Outcome.ABORTED,
    (Directive.ABORT, "transient"): Outcome.ABORTED,
    (Directive.ABORT, "temporary"): Outcome.ABORTED,
}
"""What a decided directive does to the child. ``resume`` has no entry: it keeps the
instance and leaves nothing for the loop to do."""

AFTER_CRASH: Final[Mapping[Directive, AfterCrash]] = {
    Directive.RESUME: AfterCrash.RESUME,
    Directive.RESTART: AfterCrash.RESTART,
    Directive.STOP: AfterCrash.STOP,
    Directive.ESCALATE: AfterCrash.STOP,
    Directive.ABORT: AfterCrash.STOP,
}
"""What the crashed cell does with its instance: keep serving, end it with
``on_restart(error)``, or end it with ``on_stop("crashed:<code>")``."""


def restarts_in_place(strategy: Strategy, restart: RestartType) -> bool:
    """Whether a crash decided ``restart`` with no backoff delay may restart in the
    child's own task: only under ``one_for_one`` (no sibling is touched) and only for a
    child that is ever restarted."""
    return strategy == "one_for_one" and RESTARTABLE[restart]


def rejoins(restart: RestartType, *, down: bool) -> bool:
    """Whether a sibling restarts with a failed child's group: not a temporary one, and
    not one stopped for good (terminated, or a transient child that exited normally)."""
    return RESTARTABLE[restart] and not down


AFFECTED: Final[Mapping[Strategy, Callable[[int, int], range]]] = {
    "one_for_one": lambda count, failed: range(failed, failed + 1),
    "one_for_all": lambda count, failed: range(count),
    "rest_for_one": lambda count, failed: range(failed, count),
}
"""The positions (in start order) a restart of the child at ``failed`` affects, out of
``count`` children."""


@attrs.frozen
class RestartPlan:
    """Positions in start order: ``stop`` the siblings (reverse start order, the failed
    child excluded — its incarnation has ended), then ``start`` the group in start order
    (the failed child and the affected siblings that rejoin)."""

    stop: tuple[int, ...]
    start: tuple[int, ...]


def restart_plan(strategy: Strategy, failed: int, rejoining: Sequence[bool]) -> RestartPlan:
    """The plan for restarting the child at position ``failed``; ``rejoining[i]`` says
    whether the sibling at ``i`` may restart with the group (see :func:`rejoins`)."""
    affected = AFFECTED[strategy](len(rejoining), failed)
    return RestartPlan(
        stop=tuple(i for i in reversed(affected) if i != failed),
        start=tuple(i for i in affected if i == failed or rejoining[i]),
    )


AUTO_SHUTDOWN: Final[Mapping[AutoShutdown, Callable[[bool], bool]]] = {
    "never": lambda all_significant_down: False,
    "any_significant": lambda all_significant_down: True,
    "all_significant": lambda all_significant_down: all_significant_down,
}
"""Given that a significant child stays down: whether the supervisor shuts down."""


def shuts_down(mode: AutoShutdown, *, significant: bool, all_significant_down: bool) -> bool:
    """Whether a child that exited and stays down ends the supervisor: only a
    ``significant`` one, then per ``mode`` (``all_significant_down`` counts the child
    itself as down)."""
    return significant and AUTO_SHUTDOWN[mode](all_significant_down)
