"""resilient-actors: supervision policy — who decides what happens after a failure."""

from supervisors.backoff import Backoff
from supervisors.breaker import Breaker, BreakerConfig
from supervisors.budget import Budget, BudgetLimits, BudgetRequest, Dimension, Price
from supervisors.daemon import Daemon, open_daemon
from supervisors.deployment import Deployment, load_deployment
from supervisors.policy import (
    DEFAULT_BY_CLASS,
    DEFAULT_BY_CODE,
    RESTART_ON_ANY_CRASH,
    STOP_ON_ANY_CRASH,
    Directive,
    Policy,
    default_directive,
    directive_for,
)
from supervisors.policy import (
    decide as decide,  # deprecated alias of directive_for, importable, not in __all__
)
from supervisors.pool import (
    Abort,
    AllProvidersFailed,
    Attempt,
    Ledger,
    PoolStream,
    ProviderPool,
    RetryLater,
    Target,
    UseTarget,
)
from supervisors.ratelimit import Permit, RateLimit, RateLimiter
from supervisors.resilient import Resilience
from supervisors.retry import DEFAULT_RETRY, RetryPolicy, RetryRules, retrying
from supervisors.spec import ChildSpec, SupervisorSpec, load_spec
from supervisors.supervisor import ChildInfo, ChildState, Supervisor
from supervisors.tools import Tools, tool_hosts
from supervisors.tree import Tree, open_tree

__all__ = [
    "DEFAULT_BY_CLASS",
    "DEFAULT_BY_CODE",
    "DEFAULT_RETRY",
    "RESTART_ON_ANY_CRASH",
    "STOP_ON_ANY_CRASH",
    "Abort",
    "AllProvidersFailed",
    "Attempt",
    "Backoff",
    "Breaker",
    "BreakerConfig",
    "Budget",
    "BudgetLimits",
    "BudgetRequest",
    "ChildInfo",
    "ChildSpec",
    "ChildState",
    "Daemon",
    "Deployment",
    "Dimension",
    "Directive",
    "Ledger",
    "Permit",
    "Policy",
    "PoolStream",
    "Price",
    "ProviderPool",
    "RateLimit",
    "RateLimiter",
    "Resilience",
    "RetryLater",
    "RetryPolicy",
    "RetryRules",
    "Supervisor",
    "SupervisorSpec",
    "Target",
    "Tools",
    "Tree",
    "UseTarget",
    "default_directive",
    "directive_for",
    "load_deployment",
    "load_spec",
    "open_daemon",
    "open_tree",
    "retrying",
    "tool_hosts",
]
