"""Shared state for breakers, rate limiters and budgets.

:class:`StateBackend` is the protocol; :class:`MemoryState` (the default) keeps state in
the process; :class:`RedisState` (:func:`open_redis_state`, extra ``redis``) shares it
across a fleet of replicas. Each operation is **one atomic step** on the server (one Lua
script for Redis), so replicas share breakers, buckets and budgets exactly.
"""

from supervisors.state.base import (
    BreakerSnapshot,
    BucketSpec,
    Reservation,
    StateBackend,
    Transition,
)
from supervisors.state.memory import MemoryState
from supervisors.state.redis import RedisState
from supervisors.state.redis_open import open_redis_state

__all__ = [
    "BreakerSnapshot",
    "BucketSpec",
    "MemoryState",
    "RedisState",
    "Reservation",
    "StateBackend",
    "Transition",
    "open_redis_state",
]
