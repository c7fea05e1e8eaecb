"""Shared state for breakers, rate limiters and budgets.

:class:`StateBackend` is the protocol; :class:`MemoryState` (the default) keeps state in
the process. Each operation is designed to be **one atomic step** on a server, so a Redis
backend can run it as one Lua script and replicas share breakers, buckets and budgets.
"""

from supervisors.state.base import (
    BreakerSnapshot,
    BucketSpec,
    Reservation,
    StateBackend,
    Transition,
)
from supervisors.state.memory import MemoryState

__all__ = [
    "BreakerSnapshot",
    "BucketSpec",
    "MemoryState",
    "Reservation",
    "StateBackend",
    "Transition",
]
