"""resilient-actors: supervision policy — who decides what happens after a failure."""

from supervisors.policy import DEFAULT_BY_CLASS, DEFAULT_BY_CODE, Directive, default_directive

__all__ = ["DEFAULT_BY_CLASS", "DEFAULT_BY_CODE", "Directive", "default_directive"]
