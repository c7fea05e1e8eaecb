"""What a failed attempt does to the rest of a pool's chain, by error code.

* ``retry`` — every *retryable* code not named below: the target waits its retry delay
  (the retry rules' schedule, or ``retry_after`` exactly) or, its retries used up, drops
  out; the chain rotates to the next admissible target at once.
* ``next_model`` — ``model_not_found``: the model drops out (its breaker opens per
  model); the same provider's next model is tried next; none left: the request ends
  ``model_not_found``.
* ``larger_window`` — ``context_window_exceeded``: only a target marked with a larger
  ``context_window`` may take it; none: the request ends with the error.
* ``opt_in`` — ``content_filter``: only a target with ``content_filter_fallback`` may
  take it; none: the request ends with the error.
* ``skip`` — ``capability_missing``, and the target actor's own plumbing
  (``actor_stopped``, ``outcome_unknown``, ``call_timeout``, ``start_failed``,
  ``restart_intensity_exceeded``, ``child_restarting``): the target cannot serve this
  request; it drops out and the chain rotates.
* ``stop`` — every other non-retryable code (``auth``, ``payment``, ``bad_request``,
  ``budget_exceeded``, ``internal``, ``cancelled`` …): the request ends with this error.
  A fatal error never falls through to another target, where it would hide a bug.

``auth`` and ``payment`` also open the provider's breaker permanently (the breaker's own
rule), so later requests skip that provider until an operator resets it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from actors import ActorError, Code


class Move(enum.StrEnum):
    RETRY = "retry"
    NEXT_MODEL = "next_model"
    LARGER_WINDOW = "larger_window"
    OPT_IN = "opt_in"
    SKIP = "skip"
    STOP = "stop"


#: The codes whose move is not decided by ``retryable`` alone.
MOVES: Final[Mapping[Code, Move]] = MappingProxyType(
    {
        Code.MODEL_NOT_FOUND: Move.NEXT_MODEL,
        Code.CONTEXT_WINDOW_EXCEEDED: Move.LARGER_WINDOW,
        Code.CONTENT_FILTER: Move.OPT_IN,
        Code.CAPABILITY_MISSING: Move.SKIP,
        Code.ACTOR_STOPPED: Move.SKIP,
        Code.OUTCOME_UNKNOWN: Move.SKIP,
        Code.CALL_TIMEOUT: Move.SKIP,
        Code.START_FAILED: Move.SKIP,
        Code.RESTART_INTENSITY_EXCEEDED: Move.SKIP,
        Code.CHILD_RESTARTING: Move.SKIP,
    }
)


def move_for(error: ActorError) -> Move:
    """The move for ``error``: the table's, else ``retry`` when it is retryable, else
    ``stop``."""
    move = MOVES.get(error.code)
    if move is not None:
        return move
    return Move.RETRY if error.retryable else Move.STOP
