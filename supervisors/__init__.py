"""resilient-actors: supervision policy — who decides what happens after a failure."""

from supervisors.backoff import Backoff
from supervisors.policy import (
    DEFAULT_BY_CLASS,
    DEFAULT_BY_CODE,
    Directive,
    Policy,
    decide,
    default_directive,
)
from supervisors.spec import ChildSpec, SupervisorSpec, load_spec
from supervisors.supervisor import ChildInfo, ChildState, Supervisor, Tree, open_tree

__all__ = [
    "DEFAULT_BY_CLASS",
    "DEFAULT_BY_CODE",
    "Backoff",
    "ChildInfo",
    "ChildSpec",
    "ChildState",
    "Directive",
    "Policy",
    "Supervisor",
    "SupervisorSpec",
    "Tree",
    "decide",
    "default_directive",
    "load_spec",
    "open_tree",
]
