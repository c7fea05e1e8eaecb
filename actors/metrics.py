"""Prometheus metrics fed by the events (extra ``prometheus``: prometheus-client).

:class:`Metrics` is an event hook (:func:`~actors.add_event_hook`): each typed event
record the runtime emits updates the counters, gauges and histograms below, in a
registry of its own (``metrics.registry``; not prometheus-client's global one, so two
daemons in one process, or tests, do not mix). :func:`serve_metrics` serves that registry
on ``http://HOST:PORT/metrics`` for the block's duration (prometheus-client's own
exposition server, in a thread of its own). The metrics, with their labels:

=========================================  =============================================
``ra_attempts_total``                      provider attempts: ``provider``, ``model``,
                                           ``outcome`` (ok, failed, cancelled), ``code``
                                           (empty when ok) — every attempt, failed ones
                                           included (``pool.attempt`` events)
``ra_requests_total``                      requests a pool sent: ``provider``, ``model``
                                           of the target that got the first attempt
``ra_attempt_seconds``                     attempt latency histogram: ``provider``,
                                           ``model``
``ra_tokens_total``                        tokens of the attempts: ``provider``, ``model``,
                                           ``direction`` (input, output)
``ra_cost_dollars_total``                  dollars of the attempts: ``provider``, ``model``
``ra_retries_total``                       retries scheduled: ``code``, ``source``
                                           (``retry.scheduled``)
``ra_breaker_state``                       0 closed, 1 half-open, 2 open: ``provider``,
                                           ``model`` (empty for a provider's breaker)
``ra_breaker_transitions_total``           ``provider``, ``model``, ``state`` (the new one)
``ra_restarts_total``                      supervisor restarts: ``supervisor``, ``child``,
                                           ``code`` (``supervisor.decision`` = restart)
``ra_runs_total``                          ended runs: ``outcome`` (completed, failed,
                                           cancelled, or interrupted — by a shutdown,
                                           resumed by the next daemon), ``code``
                                           (``cancelled`` for a cancel or an
                                           interruption, empty when completed)
``ra_run_seconds``                         run duration histogram: ``outcome``
``ra_run_tokens_total``, ``…cost…``        tokens and dollars of ended runs: ``outcome``
``ra_tool_calls_total``                    tool calls of runs: ``tool``, ``code`` (``ok``
                                           or the error's; ``tool:called`` records)
``ra_tool_failures_total``                 failed front-door calls: ``tool``, ``code``
                                           (``tool.call_failed``)
=========================================  =============================================

Label values come from the events, which are already redacted; none carries a run id or
a request id (the series stay bounded). Installing the hook makes every event be built,
debug ones included (``actors.observe.enabled``): a few microseconds per provider
attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from actors.errors import ActorError, Code
from actors.events import (
    BreakerTransition,
    Event,
    PoolAttempt,
    PoolAttemptCancelled,
    PoolAttemptFailed,
    RetryScheduled,
    RunCancelled,
    RunCompleted,
    RunFailed,
    SupervisorDecision,
    ToolCalled,
    ToolCallFailed,
    run_outcome,
)

_BREAKER = {"closed": 0.0, "half_open": 1.0, "open": 2.0}


class Metrics:
    """The runtime's metrics in a registry of their own (see the module docstring).
    ``config_invalid`` when prometheus-client is not installed (extra ``prometheus``).
    Call :meth:`install` to start counting; the function it returns stops."""

    def __init__(self, prefix: str = "ra") -> None:
        try:
            import prometheus_client as prom
        except ImportError as exc:
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                "Metrics needs prometheus-client: install the 'prometheus' extra",
                cause=exc,
            ) from exc
        if type(prefix) is not str or not prefix.isidentifier():
            raise ActorError.from_code(
                Code.CONFIG_INVALID, "Metrics: prefix must be an identifier, like 'ra'"
            )
        #: The registry every metric below is in (serve it, or merge it into yours).
        self.registry = prom.CollectorRegistry()

        def counter(name: str, doc: str, *labels: str) -> Any:
            return prom.Counter(f"{prefix}_{name}", doc, labels, registry=self.registry)

        def histogram(name: str, doc: str, *labels: str) -> Any:
            return prom.Histogram(f"{prefix}_{name}", doc, labels, registry=self.registry)

        self.attempts = counter(
            "attempts", "Provider attempts", "provider", "model", "outcome", "code"
        )
        self.requests = counter("requests", "Requests sent by pools", "provider", "model")
        self.attempt_seconds = histogram(
            "attempt_seconds", "Provider attempt latency", "provider", "model"
        )
        self.tokens = counter("tokens", "Tokens of attempts", "provider", "model", "direction")
        self.cost = counter("cost_dollars", "Dollars of attempts", "provider", "model")
        self.retries = counter("retries", "Retries scheduled", "code", "source")
        self.breaker_state = prom.Gauge(
            f"{prefix}_breaker_state",
            "Breaker state: 0 closed, 1 half-open, 2 open",
            ("provider", "model"),
            registry=self.registry,
        )
        self.breaker_transitions = counter(
            "breaker_transitions", "Breaker transitions", "provider", "model", "state"
        )
        self.restarts = counter("restarts", "Supervisor restarts", "supervisor", "child", "code")
        self.runs = counter("runs", "Ended runs", "outcome", "code")
        self.run_seconds = histogram("run_seconds", "Run duration", "outcome")
        self.run_tokens = counter("run_tokens", "Tokens of ended runs", "outcome")
        self.run_cost = counter("run_cost_dollars", "Dollars of ended runs", "outcome")
        self.tool_calls = counter("tool_calls", "Tool calls of runs", "tool", "code")
        self.tool_failures = counter(
            "tool_failures", "Failed front-door tool calls", "tool", "code"
        )

    def install(self) -> Callable[[], None]:
        """Start counting (an event hook); returns the function that stops."""
        from actors.observe import add_event_hook

        return add_event_hook(self.observe)

    def observe(self, event: Event) -> None:
        """Update the metrics an event feeds (others are ignored)."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:  # prometheus-client's metrics are thread-safe themselves
            handler(self, event)

    # -- one method per event kind ---------------------------------------------------

    def _attempt(self, event: Any) -> None:
        provider, model = event.provider, event.model
        code = "" if event.code is None else str(event.code)
        self.attempts.labels(provider, model, event.outcome, code).inc()
        if event.number == 1 and not event.hedge:
            self.requests.labels(provider, model).inc()
        self.attempt_seconds.labels(provider, model).observe(event.latency)
        if event.input_tokens:
            self.tokens.labels(provider, model, "input").inc(event.input_tokens)
        if event.output_tokens:
            self.tokens.labels(provider, model, "output").inc(event.output_tokens)
        if event.cost:
            self.cost.labels(provider, model).inc(event.cost)

    def _retry(self, event: Any) -> None:
        self.retries.labels(_code(event.error), event.source).inc()

    def _breaker(self, event: Any) -> None:
        model = event.model or ""
        self.breaker_state.labels(event.provider, model).set(_BREAKER.get(str(event.after), -1))
        self.breaker_transitions.labels(event.provider, model, str(event.after)).inc()

    def _decision(self, event: Any) -> None:
        if str(event.directive) == "restart":
            self.restarts.labels(event.supervisor, event.child, _code(event.error)).inc()

    def _run(self, event: Any) -> None:
        outcome, code = run_outcome(event)
        self.runs.labels(outcome, code).inc()
        self.run_seconds.labels(outcome).observe(event.duration)
        if event.tokens:
            self.run_tokens.labels(outcome).inc(event.tokens)
        if event.cost:
            self.run_cost.labels(outcome).inc(event.cost)

    def _tool_called(self, event: Any) -> None:
        self.tool_calls.labels(event.tool, event.code).inc()

    def _tool_failed(self, event: Any) -> None:
        self.tool_failures.labels(event.tool, str(event.code)).inc()


def _code(error: ActorError) -> str:
    """An event's error as its code."""
    return str(error.code)


_HANDLERS: dict[type, Callable[[Metrics, Any], None]] = {
    PoolAttempt: Metrics._attempt,
    PoolAttemptFailed: Metrics._attempt,
    PoolAttemptCancelled: Metrics._attempt,
    RetryScheduled: Metrics._retry,
    BreakerTransition: Metrics._breaker,
    SupervisorDecision: Metrics._decision,
    RunCompleted: Metrics._run,
    RunFailed: Metrics._run,
    RunCancelled: Metrics._run,
    ToolCalled: Metrics._tool_called,
    ToolCallFailed: Metrics._tool_failed,
}


@contextmanager
def serve_metrics(metrics: Metrics, *, port: int = 9464, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``metrics`` on ``http://host:port/metrics`` for the block's duration (``port``
    0: a free one); yields the URL. prometheus-client's exposition server runs in a
    thread of its own, so a scrape never waits for the trio loop. ``config_invalid`` when
    the port cannot be bound (in use, not allowed), naming it."""
    from prometheus_client import start_http_server

    if not isinstance(metrics, Metrics):
        raise ActorError.from_code(
            Code.CONFIG_INVALID, f"serve_metrics: expected Metrics, got {type(metrics).__name__}"
        )
    if type(port) is not int or not 0 <= port <= 65535:
        raise ActorError.from_code(
            Code.CONFIG_INVALID, f"serve_metrics: port must be an int from 0 to 65535, got {port!r}"
        )
    try:
        server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"serve_metrics: cannot listen on {host}:{port} ({exc.strerror or exc})",
            cause=exc,
        ) from exc
    try:
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
        yield f"http://{shown}:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
