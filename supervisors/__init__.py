"""resilient-actors: supervision policy — who decides what happens after a failure."""

from supervisors.daemon import Daemon, open_daemon
from supervisors.deployment import Deployment, load_deployment
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
from supervisors.resilience.breaker import Breaker, BreakerConfig
from supervisors.resilience.budget import Budget, BudgetLimits, BudgetRequest, Dimension, Price
from supervisors.resilience.ratelimit import Permit, RateLimit, RateLimiter
from supervisors.resilience.resilient import Resilience
from supervisors.resilience.retry import DEFAULT_RETRY, RetryPolicy, RetryRules, retrying
from supervisors.tools import Tools, tool_hosts
from supervisors.tree import Tree, open_tree
from supervisors.tree.backoff import Backoff
from supervisors.tree.policy import (
    DEFAULT_BY_CLASS,
    DEFAULT_BY_CODE,
    RESTART_ON_ANY_CRASH,
    STOP_ON_ANY_CRASH,
    Directive,
    Policy,
    default_directive,
    directive_for,
)
from supervisors.tree.policy import (
    decide as decide,  # deprecated alias of directive_for, importable, not in __all__
)
from supervisors.tree.spec import ChildSpec, SupervisorSpec, load_spec
from supervisors.tree.supervisor import ChildInfo, ChildState, Supervisor

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
