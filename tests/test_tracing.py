"""OpenTelemetry spans from the events: a run with its nodes as children, a failed and a
cancelled run, a retried node, provider attempts against the chaos provider — collected
with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from actors import ActorError, fail
from actors.errors import Code
from actors.providers import LlmRequest, Message, OpenAIProvider, ProviderConfig
from actors.testing.chaos import Fault, FaultScript, chaos_server
from actors.tracing import Tracing
from supervisors import (
    Backoff,
    ChildSpec,
    ProviderPool,
    Resilience,
    RetryPolicy,
    SupervisorSpec,
    Target,
    open_tree,
)
from supervisors.runs import Edge, NodeContext, NodeRetry, Step, Workflow, open_runs
from tests.journal_helpers import journalled


@pytest.fixture
def spans() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    remove = Tracing(provider.get_tracer("test")).install()
    yield exporter
    remove()


FLAKY: list[int] = []


async def first(ctx: NodeContext) -> dict[str, Any]:
    return {"a": 1}


async def flaky(ctx: NodeContext) -> Any:
    FLAKY.append(ctx.attempt)
    if ctx.attempt == 1:
        return fail(Code.UNAVAILABLE, "try again", retryable=True)
    return {"b": 2}


async def broken(ctx: NodeContext) -> dict[str, Any]:
    raise ValueError("no")


async def slow(ctx: NodeContext) -> dict[str, Any]:
    await trio.sleep(60)
    return {}


TWO = Workflow(
    name="two",
    nodes=[
        Step(id="first", fn=first, writes=["a"]),
        Step(
            id="flaky",
            fn=flaky,
            writes=["b"],
            retry=NodeRetry(max_retries=1, backoff=Backoff(initial=0.1)),
        ),
    ],
    edges=[Edge(source="first", target="flaky")],
)


async def test_a_run_is_a_span_with_its_node_executions_as_children(
    autojump_clock: Any, spans: Any
) -> None:
    async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
        outcome = await runs.run(TWO, run_id="r")
    assert outcome.status == "completed"
    by_name = {span.name: span for span in spans.get_finished_spans()}
    run, node_a, node_b = by_name["run two"], by_name["node first"], by_name["node flaky"]
    assert node_a.parent.span_id == run.context.span_id == node_b.parent.span_id
    assert dict(run.attributes) == {
        "ra.run_id": "r",
        "ra.outcome": "completed",
        "ra.code": "",
        "ra.tokens": 0,
        "ra.cost": 0.0,
    }
    assert dict(node_a.attributes) == {
        "ra.run_id": "r",
        "ra.node_id": "first",
        "ra.execution": 1,
        "ra.attempt": 1,
        "ra.kind": "step",
    }
    assert node_b.attributes["ra.attempt"] == 2  # the same execution, retried
    assert [event.name for event in node_b.events] == ["retry"]
    assert dict(node_b.events[0].attributes) == {"ra.code": "unavailable", "ra.delay": 0.1}
    assert run.status.status_code is StatusCode.UNSET


async def test_a_failed_run_and_its_node_have_an_error_status(
    autojump_clock: Any, spans: Any
) -> None:
    workflow = Workflow(name="broken", nodes=[Step(id="boom", fn=broken, writes=["x"])])
    async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
        outcome = await runs.run(workflow)
    by_name = {span.name: span for span in spans.get_finished_spans()}
    run, node = by_name["run broken"], by_name["node boom"]
    assert (
        run.status.status_code is StatusCode.ERROR and node.status.status_code is StatusCode.ERROR
    )
    assert run.attributes["ra.code"] == node.attributes["ra.code"] == str(outcome.code)
    assert run.status.description == node.status.description == str(outcome.code)


async def test_a_cancelled_and_an_interrupted_run_end_their_open_node_spans(
    autojump_clock: Any, spans: Any
) -> None:
    workflow = Workflow(name="slow", nodes=[Step(id="wait", fn=slow, writes=["y"])])
    async with journalled() as (_, runs, _journal):
        cancelled = await runs.start(workflow, run_id="c")
        await runs.start(workflow, run_id="i")
        await trio.sleep(1)
        cancelled.cancel("user")
        await cancelled.wait()
        # Only the cancelled run's node ended with it; the other's is still open.
        ended = [
            s.attributes["ra.run_id"] for s in spans.get_finished_spans() if s.name == "node wait"
        ]
        assert ended == ["c"]
        await runs.shutdown("sigterm", grace=0)
    finished = spans.get_finished_spans()
    outcomes = {
        span.attributes["ra.run_id"]: (span.attributes["ra.outcome"], span.attributes["ra.code"])
        for span in finished
        if span.name == "run slow"
    }
    assert outcomes == {"c": ("cancelled", "cancelled"), "i": ("interrupted", "cancelled")}
    assert len([span for span in finished if span.name == "node wait"]) == 2  # both ended


async def test_provider_attempts_are_spans_with_their_latency(spans: Any) -> None:
    script = FaultScript(faults=[Fault(kind="status", status=503, route="openai")])
    async with chaos_server(script) as server:
        config = ProviderConfig(name="llm", base_url=server.url, api_key="sk-test")
        spec = SupervisorSpec(children=[ChildSpec(id="llm", actor=OpenAIProvider, args=(config,))])
        async with open_tree(spec) as tree:
            pool = ProviderPool(
                [Target(ref=tree.ref("llm"), provider="llm", model="small")],
                resilience=Resilience(
                    retry=RetryPolicy(max_attempts=2, backoff=Backoff(initial=0.01))
                ),
            )
            request = LlmRequest(
                model="small", messages=[Message(role="user", content="reply: hi")]
            )
            await pool.complete(request)
    attempts = [span for span in spans.get_finished_spans() if span.name == "attempt llm/small"]
    assert [(s.attributes["ra.outcome"], s.attributes["ra.code"]) for s in attempts] == [
        ("failed", "unavailable"),
        ("ok", ""),
    ]
    assert attempts[0].status.status_code is StatusCode.ERROR
    assert attempts[0].status.description == "unavailable"
    for span, entry in zip(attempts, pool.ledger, strict=True):
        assert span.end_time - span.start_time == int(entry.latency * 1e9)
        usage = entry.usage
        assert dict(span.attributes) == {
            "ra.provider": "llm",
            "ra.model": "small",
            "ra.outcome": entry.outcome,
            "ra.code": "" if entry.code is None else str(entry.code),
            "ra.number": entry.number,
            "ra.hedge": False,
            "ra.input_tokens": 0 if usage is None else usage.input_tokens,
            "ra.output_tokens": 0 if usage is None else usage.output_tokens,
            "ra.cost": entry.cost or 0.0,
        }
    assert attempts[1].attributes["ra.output_tokens"] > 0


def test_without_opentelemetry_it_is_config_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(
        ActorError, match=r"^\[config_invalid\] Tracing needs opentelemetry-api"
    ) as caught:
        Tracing()
    assert isinstance(caught.value.__cause__, ImportError)


def test_the_default_tracer_is_the_global_providers_named_for_the_runtime() -> None:
    tracer = Tracing().tracer
    assert tracer is not None
    assert getattr(tracer, "_instrumenting_module_name", None) == "resilient-actors"


async def test_a_resumed_run_is_a_span_of_its_own_in_the_daemon_that_resumes_it(
    autojump_clock: Any, spans: Any
) -> None:
    from actors.journal import MemoryStore

    store = MemoryStore()
    workflow = Workflow(name="slow", nodes=[Step(id="wait", fn=slow, writes=["y"])])
    async with journalled(store, workflows=[workflow]) as (_, runs, _journal):
        await runs.start(workflow, run_id="r")
        await trio.sleep(1)
        await runs.shutdown("sigterm", grace=0)
    async with journalled(store, workflows=[workflow]) as (_, runs, _journal):
        (resumed,) = runs.resumed
        assert (await resumed.wait()).status == "completed"
    names = [
        (s.name, s.attributes["ra.outcome"])
        for s in spans.get_finished_spans()
        if s.name.startswith("run")
    ]
    assert names == [("run slow", "interrupted"), ("run (resumed)", "completed")]


def test_records_of_a_run_it_never_saw_start_are_no_trouble() -> None:
    from actors.events import NodeCompleted, NodeStarted, RunCompleted

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider.get_tracer("test"))
    base = {"run_id": "late", "at": 1.0, "node_id": "n", "execution": 1, "attempt": 1}
    tracing.observe(NodeCompleted(seq=2, updates={}, next=(), duration=0.1, **base))
    tracing.observe(
        RunCompleted(run_id="late", seq=3, at=1.0, state={}, duration=1.0, tokens=0, cost=0.0)
    )
    tracing.observe(NodeStarted(seq=4, kind="step", **base))  # its run unseen: a root span
    tracing.observe(NodeCompleted(seq=5, updates={}, next=(), duration=0.1, **base))
    (span,) = exporter.get_finished_spans()
    assert (span.name, span.parent) == ("node n", None)
