"""Resilience around one call: the one attempt primitive (:mod:`.attempt`).

The breaker, the rate limiter, the budget, the retry schedules and
:class:`~supervisors.Resilience` will move into this package; for now it holds the
attempt that all of them are composed in.
"""
