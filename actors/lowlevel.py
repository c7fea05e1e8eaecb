"""What :mod:`supervisors` uses to drive actor slots — the ``trio.lowlevel`` pattern.

Users write code against :mod:`actors` (actors, refs, errors, observation). A supervisor
(ours, or one a user writes) drives *slots*: it builds an :class:`ActorCell`, runs its
incarnations, answers the :class:`Supervision` protocol and reads each :class:`Exit`.
Those names live here, apart from the user-facing namespace. They are stable enough to
build a supervisor on, but expect them to change more often than :mod:`actors`.

A slot's :class:`CellState` and the runtime's name :class:`Registry` are here as well.
The two protocols around a slot are here too, for fakes and alternative runtimes: an
:class:`ActorAddress` is what an :class:`~actors.actor.ActorRef` needs of its slot, a
:class:`CellHost` what a slot needs of its runtime.
"""

from actors.actor import DEFAULT_CALL_TIMEOUT, ActorAddress, ActorRef, CellState, address_of
from actors.cell import ActorCell, CellHost, Supervision
from actors.cleanup import DEFAULT_CLEANUP_BUDGET
from actors.errors import (
    cancel_in_effect,
    cancel_supersedes,
    cancellation_reason,
    cancelled_around,
    current_cancel_reason,
)
from actors.exits import AfterCrash, Exit, ExitKind
from actors.mailbox import DEFAULT_CAPACITY, Overflow
from actors.nursery import open_nursery_unwrapped, run_to_completion
from actors.observe import emit, enabled
from actors.registry import Registry


def cell_of(ref: ActorRef) -> ActorCell:
    """The slot behind ``ref`` (what its supervisor drives). ``TypeError`` if ``ref``
    addresses something else (a fake :class:`ActorAddress` in a test)."""
    if not isinstance(ref, ActorRef):
        raise TypeError(f"cell_of() takes an ActorRef, not {type(ref).__name__}")
    address = address_of(ref)
    if not isinstance(address, ActorCell):
        raise TypeError(f"{ref!r} is not backed by an ActorCell but {type(address).__name__}")
    return address


__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CAPACITY",
    "DEFAULT_CLEANUP_BUDGET",
    "ActorAddress",
    "ActorCell",
    "AfterCrash",
    "CellHost",
    "CellState",
    "Exit",
    "ExitKind",
    "Overflow",
    "Registry",
    "Supervision",
    "cancel_in_effect",
    "cancel_supersedes",
    "cancellation_reason",
    "cancelled_around",
    "cell_of",
    "current_cancel_reason",
    "emit",
    "enabled",
    "open_nursery_unwrapped",
    "run_to_completion",
]
