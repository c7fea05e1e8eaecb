"""What :mod:`supervisors` uses to drive actor slots — the ``trio.lowlevel`` pattern.

Users write code against :mod:`actors` (actors, refs, errors, observation). A supervisor
(ours, or one a user writes) drives *slots*: it builds an :class:`ActorCell`, runs its
incarnations, answers the :class:`Supervision` protocol and reads each :class:`Exit`.
Those names live here, apart from the user-facing namespace. They are stable enough to
build a supervisor on, but expect them to change more often than :mod:`actors`.
"""

from actors.actor import DEFAULT_CALL_TIMEOUT
from actors.cell import DEFAULT_CLEANUP_BUDGET, ActorCell, AfterCrash, Exit, ExitKind, Supervision
from actors.errors import cancel_in_effect, current_cancel_reason
from actors.mailbox import DEFAULT_CAPACITY, Overflow
from actors.nursery import open_nursery_unwrapped, run_to_completion
from actors.observe import EventName, enabled, get_logger

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CAPACITY",
    "DEFAULT_CLEANUP_BUDGET",
    "ActorCell",
    "AfterCrash",
    "EventName",
    "Exit",
    "ExitKind",
    "Overflow",
    "Supervision",
    "cancel_in_effect",
    "current_cancel_reason",
    "enabled",
    "get_logger",
    "open_nursery_unwrapped",
    "run_to_completion",
]
