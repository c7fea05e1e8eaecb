"""OpenTelemetry spans fed by the events (extra ``otel``: opentelemetry-api; bring your
own SDK and exporter).

:class:`Tracing` is an event hook (:func:`~actors.add_event_hook`) that turns the records
the runtime emits into spans:

* **a run** — from ``run:started`` (or ``run:resumed``, in the daemon that resumes it)
  to its terminal record: ``run <workflow>``, attributes ``ra.run_id``,
  ``ra.outcome`` (completed, failed, cancelled, interrupted), ``ra.code``,
  ``ra.tokens``, ``ra.cost``; an error status for a failed run;
* **a node execution** — a child of its run's span, from ``node:started`` to
  ``node:completed`` or ``node:failed`` (``ra.code``, error status); a retry is an event
  on it; a node still open when its run ends (cancelled) ends with the run;
* **a provider attempt** — ``attempt <provider>/<model>``, from the ``pool.attempt`` /
  ``pool.attempt_failed`` record (its start is the record's time minus its latency),
  attributes provider, model, outcome, code, tokens, cost, hedge.

Times are the wall clock when the hook sees each record (a journalled run's records are
seen once durable: a few milliseconds late). Nothing else is traced, and nothing at all
unless a :class:`Tracing` is installed: the runtime has no dependency on OpenTelemetry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from actors.errors import ActorError, Code
from actors.events import (
    Event,
    NodeCompleted,
    NodeFailed,
    NodeRetrying,
    NodeStarted,
    PoolAttempt,
    PoolAttemptFailed,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunResumed,
    RunStarted,
    run_outcome,
)


class Tracing:
    """Spans of runs, node executions and provider attempts (see the module docstring).
    ``tracer``: an OpenTelemetry tracer (default: ``trace.get_tracer("resilient-actors")``
    of the global provider). ``config_invalid`` when opentelemetry-api is not installed.
    Call :meth:`install` to start; the function it returns stops."""

    def __init__(self, tracer: Any = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                "Tracing needs opentelemetry-api: install the 'otel' extra",
                cause=exc,
            ) from exc
        self._trace = trace
        self.tracer = tracer if tracer is not None else trace.get_tracer("resilient-actors")
        self._runs: dict[str, Any] = {}
        self._nodes: dict[tuple[str, str, int], Any] = {}

    def install(self) -> Callable[[], None]:
        """Start tracing (an event hook); returns the function that stops."""
        from actors.observe import add_event_hook

        return add_event_hook(self.observe)

    def observe(self, event: Event) -> None:
        """Start or end the spans an event marks (others are ignored)."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    # -- runs --------------------------------------------------------------------------

    def _run_started(self, event: Any) -> None:
        name = f"run {event.workflow}" if isinstance(event, RunStarted) else "run (resumed)"
        span = self.tracer.start_span(name, attributes={"ra.run_id": event.run_id})
        self._runs[event.run_id] = span

    def _run_ended(self, event: Any) -> None:
        span = self._runs.pop(event.run_id, None)
        if span is None:
            return
        for key in [key for key in self._nodes if key[0] == event.run_id]:
            self._nodes.pop(key).end()  # nodes the run's end caught (cancelled)
        outcome, code = run_outcome(event)
        span.set_attributes(
            {
                "ra.outcome": outcome,
                "ra.code": code,
                "ra.tokens": event.tokens,
                "ra.cost": event.cost,
            }
        )
        if isinstance(event, RunFailed):
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.code))
        span.end()

    # -- nodes -------------------------------------------------------------------------

    def _node_started(self, event: Any) -> None:
        key = (event.run_id, event.node_id, event.execution)
        if key in self._nodes:  # a retry's next attempt: the same execution
            self._nodes[key].set_attribute("ra.attempt", event.attempt)
            return
        parent = self._runs.get(event.run_id)
        context = None if parent is None else self._trace.set_span_in_context(parent)
        self._nodes[key] = self.tracer.start_span(
            f"node {event.node_id}",
            context=context,
            attributes={
                "ra.run_id": event.run_id,
                "ra.node_id": event.node_id,
                "ra.execution": event.execution,
                "ra.attempt": event.attempt,
                "ra.kind": event.kind,
            },
        )

    def _node_retrying(self, event: Any) -> None:
        span = self._nodes.get((event.run_id, event.node_id, event.execution))
        if span is not None:
            span.add_event("retry", {"ra.code": event.code, "ra.delay": event.delay})

    def _node_ended(self, event: Any) -> None:
        span = self._nodes.pop((event.run_id, event.node_id, event.execution), None)
        if span is None:
            return
        if isinstance(event, NodeFailed):
            span.set_attribute("ra.code", event.code)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.code))
        span.end()

    # -- provider attempts -------------------------------------------------------------

    def _attempt(self, event: Any) -> None:
        end = time.time_ns()
        span = self.tracer.start_span(
            f"attempt {event.provider}/{event.model}",
            start_time=end - int(event.latency * 1e9),
            attributes={
                "ra.provider": event.provider,
                "ra.model": event.model,
                "ra.outcome": event.outcome,
                "ra.code": event.code or "",
                "ra.number": event.number,
                "ra.hedge": event.hedge,
                "ra.input_tokens": event.input_tokens or 0,
                "ra.output_tokens": event.output_tokens or 0,
                "ra.cost": event.cost or 0.0,
            },
        )
        if event.outcome == "failed":
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.code or ""))
        span.end(end_time=end)


_HANDLERS: dict[type, Callable[[Tracing, Any], None]] = {
    RunStarted: Tracing._run_started,
    RunResumed: Tracing._run_started,
    RunCompleted: Tracing._run_ended,
    RunFailed: Tracing._run_ended,
    RunCancelled: Tracing._run_ended,
    NodeStarted: Tracing._node_started,
    NodeRetrying: Tracing._node_retrying,
    NodeCompleted: Tracing._node_ended,
    NodeFailed: Tracing._node_ended,
    PoolAttempt: Tracing._attempt,
    PoolAttemptFailed: Tracing._attempt,
}
