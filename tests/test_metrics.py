"""The Prometheus metrics after a chaos run: the endpoint is scraped over real HTTP and its
counters match the run's outcomes, the pool's ledger and the events exactly."""

from __future__ import annotations

import collections
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from actors import ActorError, Metrics, serve_metrics
from actors.events import RetryScheduled
from actors.providers import AnthropicProvider, LlmRequest, Message, OpenAIProvider, ProviderConfig
from actors.testing import capture_events
from actors.testing.chaos import Fault, FaultScript, chaos_server
from actors.tools import Grants, ToolGroup, tool
from supervisors import (
    Backoff,
    Breaker,
    BreakerConfig,
    ChildSpec,
    Price,
    ProviderPool,
    Resilience,
    RetryPolicy,
    SupervisorSpec,
    Target,
    Tools,
    open_tree,
    tool_hosts,
)
from supervisors.runs import Agent, NodeContext, Step, Workflow, open_runs


@tool
async def lookup(query: str) -> dict[str, Any]:
    """Find notes on a topic (the chaos model calls a tool with ``query``)."""
    return {"query": query, "notes": 2}


TOOLS = ToolGroup("notes", [lookup])


async def _boom(ctx: NodeContext) -> dict[str, Any]:
    raise ValueError("the step broke")


async def _slow(ctx: NodeContext) -> dict[str, Any]:
    await trio.sleep(60)
    return {}


AGENT = Workflow(
    name="agent",
    nodes=[
        Agent(
            id="ask",
            model="alpha-mini",
            messages=[("user", "call: {topic}")],
            grants=Grants.allow("lookup"),
            output="answer",
        )
    ],
)
BROKEN = Workflow(name="broken", nodes=[Step(id="boom", fn=_boom, writes=["x"])])
SLOW = Workflow(name="slow", nodes=[Step(id="wait", fn=_slow, writes=["y"])])


def _config(name: str, url: str) -> ProviderConfig:
    return ProviderConfig(name=name, base_url=url, api_key=f"sk-{name}-metrics", read_timeout=2)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_the_scraped_counters_match_the_chaos_run_exactly() -> None:
    metrics = Metrics()
    remove = metrics.install()
    script = FaultScript(
        faults=[
            Fault(kind="status", status=503, route="openai", times=3),  # opens alpha's breaker
            Fault(kind="status", status=429, route="anthropic", headers={"retry-after": "0"}),
        ]
    )
    retries: list[Any] = []
    try:
        with capture_events(RetryScheduled) as retries, serve_metrics(metrics, port=0) as url:
            async with chaos_server(script) as server:
                spec = SupervisorSpec(
                    children=[
                        ChildSpec(
                            id="alpha", actor=OpenAIProvider, args=(_config("alpha", server.url),)
                        ),
                        ChildSpec(
                            id="beta", actor=AnthropicProvider, args=(_config("beta", server.url),)
                        ),
                        *tool_hosts(TOOLS),
                    ]
                )
                async with open_tree(spec) as tree:
                    pool = ProviderPool(
                        [
                            Target(ref=tree.ref("alpha"), provider="alpha", model="alpha-mini"),
                            Target(ref=tree.ref("beta"), provider="beta", model="beta-sonnet"),
                        ],
                        resilience=Resilience(
                            retry=RetryPolicy(max_attempts=3, backoff=Backoff(initial=0.01)),
                            breaker=Breaker(BreakerConfig(failure_threshold=3)),
                        ),
                        prices={("*", "*"): Price(input_per_mtok=1.0, output_per_mtok=2.0)},
                    )
                    tools = await Tools.from_tree(tree, TOOLS)
                    for n in range(4):
                        request = LlmRequest(
                            model="alpha-mini",
                            messages=[Message(role="user", content=f"reply: {n}")],
                        )
                        await pool.complete(request)
                    async with open_runs(tree, pools=pool, tools=tools) as runs:
                        outcomes = [
                            await runs.run(AGENT, {"topic": "trio"}),
                            await runs.run(BROKEN),
                        ]
                        slow = await runs.start(SLOW)
                        await trio.sleep(0.1)
                        slow.cancel("operator")
                        outcomes.append(await slow.wait())
                        histories = [run.history for run in (slow,)]
                    async with httpx.AsyncClient() as client:
                        answer = await client.get(url)
    finally:
        remove()
    assert answer.status_code == 200
    samples = _samples(answer.text)

    # Attempts: exactly the ledger's, by provider, model, outcome and code.
    ledger = collections.Counter(
        (a.provider, a.model, a.outcome, "" if a.code is None else str(a.code)) for a in pool.ledger
    )
    scraped = {
        (
            dict(labels)["provider"],
            dict(labels)["model"],
            dict(labels)["outcome"],
            dict(labels)["code"],
        ): value
        for (name, labels), value in samples.items()
        if name == "ra_attempts_total"
    }
    assert scraped == {key: float(count) for key, count in ledger.items()}
    assert scraped[("alpha", "alpha-mini", "failed", "unavailable")] == 3.0
    tokens = sum(v for (name, _), v in samples.items() if name == "ra_tokens_total")
    assert tokens == pool.ledger.total.tokens
    cost = sum(v for (name, _), v in samples.items() if name == "ra_cost_dollars_total")
    assert cost == pytest.approx(pool.ledger.total.cost)
    requests = sum(v for (name, _), v in samples.items() if name == "ra_requests_total")
    assert requests == len({a.request_id for a in pool.ledger})

    # Runs: one completed, one failed (its node's error), one cancelled.
    assert [o.status for o in outcomes] == ["completed", "failed", "cancelled"]
    runs = {
        (dict(labels)["outcome"], dict(labels)["code"]): value
        for (name, labels), value in samples.items()
        if name == "ra_runs_total"
    }
    assert runs == {
        ("completed", ""): 1.0,
        ("failed", str(outcomes[1].code)): 1.0,
        ("cancelled", "cancelled"): 1.0,
    }
    assert histories[0][-1].name == "run:cancelled"

    # Tool calls of the agent's run, retries, the breaker that opened.
    assert samples[("ra_tool_calls_total", (("code", "ok"), ("tool", "lookup")))] == 1.0
    assert sum(v for (name, _), v in samples.items() if name == "ra_retries_total") == len(retries)
    assert samples[("ra_breaker_state", (("model", ""), ("provider", "alpha")))] == 2.0
    assert (
        samples[
            (
                "ra_breaker_transitions_total",
                (("model", ""), ("provider", "alpha"), ("state", "open")),
            )
        ]
        == 1.0
    )


async def test_the_endpoint_is_gone_after_the_block_and_a_taken_port_is_config_invalid() -> None:
    metrics = Metrics()
    with serve_metrics(metrics, port=0) as url:
        async with httpx.AsyncClient() as client:
            assert (await client.get(url)).status_code == 200
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with (
            pytest.raises(
                ActorError,
                match=rf"^\[config_invalid\] serve_metrics: cannot listen on 127.0.0.1:{port}",
            ),
            serve_metrics(metrics, port=port),
        ):
            pass
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(url)


def test_bad_arguments_are_config_invalid() -> None:
    with pytest.raises(
        ActorError, match=r"^\[config_invalid\] Metrics: prefix must be an identifier"
    ):
        Metrics(prefix="not a name")
    with (
        pytest.raises(
            ActorError, match=r"^\[config_invalid\] serve_metrics: expected Metrics, got dict"
        ),
        serve_metrics({}),  # type: ignore[arg-type]
    ):
        pass


def test_two_metrics_do_not_share_a_registry() -> None:
    one, two = Metrics(), Metrics()
    assert one.registry is not two.registry


@pytest.mark.parametrize("port", [70000, -1, None, 1.5, True])
def test_a_port_that_is_not_a_port_is_config_invalid(port: Any) -> None:
    with (
        pytest.raises(
            ActorError,
            match=rf"^\[config_invalid\] serve_metrics: port must be an int from 0 to 65535, got {port!r}$",
        ),
        serve_metrics(Metrics(), port=port),
    ):
        pass


async def test_an_ipv6_host_is_bracketed_in_the_url() -> None:
    with serve_metrics(Metrics(), port=0, host="::1") as url:
        assert url.startswith("http://[::1]:") and url.endswith("/metrics")
        async with httpx.AsyncClient() as client:
            assert (await client.get(url)).status_code == 200


def test_a_run_a_shutdown_interrupted_is_counted_interrupted_not_cancelled() -> None:
    from actors.events import RunCancelled

    metrics = Metrics()
    common = {"seq": 3, "at": 1.0, "in_flight": ("n",), "duration": 2.0, "tokens": 0, "cost": 0.0}
    metrics.observe(RunCancelled(run_id="a", reason="sigterm", resumable=True, **common))
    metrics.observe(RunCancelled(run_id="b", reason="user", **common))
    runs = {
        tuple(sorted(sample.labels.items())): sample.value
        for family in metrics.registry.collect()
        if family.name == "ra_runs"
        for sample in family.samples
        if sample.name == "ra_runs_total"
    }
    assert runs == {
        (("code", "cancelled"), ("outcome", "interrupted")): 1.0,
        (("code", "cancelled"), ("outcome", "cancelled")): 1.0,
    }


def test_every_metric_its_help_and_labels_are_pinned() -> None:
    """One record of each kind the metrics read, then the whole exposition: names,
    help texts, types and label names, exactly."""
    from actors import ActorError as Error
    from actors.events import (
        BreakerTransition,
        PoolAttemptFailed,
        RetryScheduled,
        RunFailed,
        SupervisorDecision,
        ToolCalled,
        ToolCallFailed,
    )

    metrics = Metrics()
    error = Error.from_code("unavailable", "down")
    attempt = {
        "request_id": "q",
        "provider": "p",
        "model": "m",
        "latency": 0.25,
        "input_tokens": 3,
        "output_tokens": 4,
        "cost": 0.5,
        "usage_estimated": False,
        "hedge": False,
    }
    for event in (
        PoolAttemptFailed(number=1, outcome="failed", code="unavailable", **attempt),
        RetryScheduled(attempt=1, error=error, delay=1.0, source="schedule"),
        BreakerTransition(
            provider="p",
            model=None,
            before="closed",
            after="open",
            code="unavailable",
            cooldown=60.0,
            permanent=False,
        ),
        SupervisorDecision(
            supervisor="root",
            child="w",
            error=error,
            directive="restart",
            restarts=1,
            delay=0.0,
            at=1.0,
        ),
        RunFailed(
            run_id="r",
            seq=2,
            at=1.0,
            code="tool_failed",
            message="m",
            correlation_id="c",
            node_id="n",
            duration=2.0,
            tokens=7,
            cost=0.25,
        ),
        ToolCalled(run_id="r", seq=1, at=1.0, node_id="n", tool="t", index=0, key="k", code="ok"),
        ToolCallFailed(tool="t", code="tool_failed", attempts=2, key="k"),
    ):
        metrics.observe(event)
    families = {
        family.name: (
            family.documentation,
            family.type,
            sorted({(sample.name, tuple(sorted(sample.labels))) for sample in family.samples}),
        )
        for family in metrics.registry.collect()
    }
    hist = ("_bucket", "_count", "_sum")
    assert families == {
        "ra_attempts": (
            "Provider attempts",
            "counter",
            [
                ("ra_attempts_created", ("code", "model", "outcome", "provider")),
                ("ra_attempts_total", ("code", "model", "outcome", "provider")),
            ],
        ),
        "ra_requests": (
            "Requests sent by pools",
            "counter",
            [
                ("ra_requests_created", ("model", "provider")),
                ("ra_requests_total", ("model", "provider")),
            ],
        ),
        "ra_attempt_seconds": (
            "Provider attempt latency",
            "histogram",
            sorted(
                [
                    (
                        f"ra_attempt_seconds{s}",
                        ("le", "model", "provider") if s == "_bucket" else ("model", "provider"),
                    )
                    for s in hist
                ]
                + [("ra_attempt_seconds_created", ("model", "provider"))]
            ),
        ),
        "ra_tokens": (
            "Tokens of attempts",
            "counter",
            [
                ("ra_tokens_created", ("direction", "model", "provider")),
                ("ra_tokens_total", ("direction", "model", "provider")),
            ],
        ),
        "ra_cost_dollars": (
            "Dollars of attempts",
            "counter",
            [
                ("ra_cost_dollars_created", ("model", "provider")),
                ("ra_cost_dollars_total", ("model", "provider")),
            ],
        ),
        "ra_retries": (
            "Retries scheduled",
            "counter",
            [
                ("ra_retries_created", ("code", "source")),
                ("ra_retries_total", ("code", "source")),
            ],
        ),
        "ra_breaker_state": (
            "Breaker state: 0 closed, 1 half-open, 2 open",
            "gauge",
            [
                ("ra_breaker_state", ("model", "provider")),
            ],
        ),
        "ra_breaker_transitions": (
            "Breaker transitions",
            "counter",
            [
                ("ra_breaker_transitions_created", ("model", "provider", "state")),
                ("ra_breaker_transitions_total", ("model", "provider", "state")),
            ],
        ),
        "ra_restarts": (
            "Supervisor restarts",
            "counter",
            [
                ("ra_restarts_created", ("child", "code", "supervisor")),
                ("ra_restarts_total", ("child", "code", "supervisor")),
            ],
        ),
        "ra_runs": (
            "Ended runs",
            "counter",
            [
                ("ra_runs_created", ("code", "outcome")),
                ("ra_runs_total", ("code", "outcome")),
            ],
        ),
        "ra_run_seconds": (
            "Run duration",
            "histogram",
            sorted(
                [
                    (f"ra_run_seconds{s}", ("le", "outcome") if s == "_bucket" else ("outcome",))
                    for s in hist
                ]
                + [("ra_run_seconds_created", ("outcome",))]
            ),
        ),
        "ra_run_tokens": (
            "Tokens of ended runs",
            "counter",
            [
                ("ra_run_tokens_created", ("outcome",)),
                ("ra_run_tokens_total", ("outcome",)),
            ],
        ),
        "ra_run_cost_dollars": (
            "Dollars of ended runs",
            "counter",
            [
                ("ra_run_cost_dollars_created", ("outcome",)),
                ("ra_run_cost_dollars_total", ("outcome",)),
            ],
        ),
        "ra_tool_calls": (
            "Tool calls of runs",
            "counter",
            [
                ("ra_tool_calls_created", ("code", "tool")),
                ("ra_tool_calls_total", ("code", "tool")),
            ],
        ),
        "ra_tool_failures": (
            "Failed front-door tool calls",
            "counter",
            [
                ("ra_tool_failures_created", ("code", "tool")),
                ("ra_tool_failures_total", ("code", "tool")),
            ],
        ),
    }
    values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name.endswith("_total") or sample.name == "ra_breaker_state"
    }
    assert values == {
        (
            "ra_attempts_total",
            (("code", "unavailable"), ("model", "m"), ("outcome", "failed"), ("provider", "p")),
        ): 1.0,
        ("ra_requests_total", (("model", "m"), ("provider", "p"))): 1.0,
        ("ra_tokens_total", (("direction", "input"), ("model", "m"), ("provider", "p"))): 3.0,
        ("ra_tokens_total", (("direction", "output"), ("model", "m"), ("provider", "p"))): 4.0,
        ("ra_cost_dollars_total", (("model", "m"), ("provider", "p"))): 0.5,
        ("ra_retries_total", (("code", "unavailable"), ("source", "schedule"))): 1.0,
        ("ra_breaker_state", (("model", ""), ("provider", "p"))): 2.0,
        (
            "ra_breaker_transitions_total",
            (("model", ""), ("provider", "p"), ("state", "open")),
        ): 1.0,
        (
            "ra_restarts_total",
            (("child", "w"), ("code", "unavailable"), ("supervisor", "root")),
        ): 1.0,
        ("ra_runs_total", (("code", "tool_failed"), ("outcome", "failed"))): 1.0,
        ("ra_run_tokens_total", (("outcome", "failed"),)): 7.0,
        ("ra_run_cost_dollars_total", (("outcome", "failed"),)): 0.25,
        ("ra_tool_calls_total", (("code", "ok"), ("tool", "t"))): 1.0,
        ("ra_tool_failures_total", (("code", "tool_failed"), ("tool", "t"))): 1.0,
    }


def test_without_prometheus_client_it_is_config_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(
        ActorError,
        match=r"^\[config_invalid\] Metrics needs prometheus-client: install the 'prometheus' extra$",
    ) as caught:
        Metrics()
    assert isinstance(caught.value.__cause__, ImportError)


def test_a_cancelled_pool_attempt_is_counted_as_cancelled_not_failed() -> None:
    from actors.events import PoolAttemptCancelled

    metrics = Metrics()
    metrics.observe(
        PoolAttemptCancelled(
            request_id="q",
            number=1,
            provider="p",
            model="m",
            outcome="cancelled",
            code=None,
            latency=1.0,
            input_tokens=None,
            output_tokens=None,
            cost=None,
            usage_estimated=False,
            hedge=False,
        )
    )
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name.endswith("attempts_total")
    }
    assert list(samples.values()) == [1.0]
    [(_, labels)] = samples
    assert dict(labels)["outcome"] == "cancelled" and dict(labels)["code"] == ""
