"""The provider pool: failover across providers and models (see :mod:`supervisors.pool.pool`)."""

from supervisors.pool.escalation import (
    Abort,
    AllProvidersFailed,
    Decision,
    OnExhausted,
    RetryLater,
    UseTarget,
)
from supervisors.pool.ledger import Attempt, Ledger, Totals
from supervisors.pool.pool import POOL_DEFAULT, ProviderPool
from supervisors.pool.routing import MOVES, Move, move_for
from supervisors.pool.stream import PoolStream
from supervisors.pool.target import Target

__all__ = [
    "MOVES",
    "POOL_DEFAULT",
    "Abort",
    "AllProvidersFailed",
    "Attempt",
    "Decision",
    "Ledger",
    "Move",
    "OnExhausted",
    "PoolStream",
    "ProviderPool",
    "RetryLater",
    "Target",
    "Totals",
    "UseTarget",
    "move_for",
]
