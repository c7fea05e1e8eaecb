"""The example agent daemon, run by ``make demo``; ``agent_daemon.py serve`` runs it as a
service that takes tasks on standard input and shuts down gracefully on SIGTERM or
SIGINT (:mod:`serve_tasks`).

It starts the embedded chaos provider on loopback, builds a supervisor tree in code —
an OpenAI-compatible provider "alpha", an Anthropic-compatible provider "beta" and two
workers hosting its tools (``lookup``, a flaky one with a schema and its own retry policy,
and ``delete_notes``, which the daemon's requests are not granted) — and sends a few dozen
requests through one :class:`~supervisors.ProviderPool`
(alpha's large model first, beta as the fallback, alpha's mini model as a downgrade),
phase by phase, each phase queueing its own faults on the chaos server:

1. rate limits — two 429s with ``Retry-After: 1``: the pool rotates to beta at once;
2. a 503 burst — each request falls back to beta at once; the third 503 in a row opens
   alpha's breaker, and then nothing is sent to alpha (a refusal is not an attempt);
3. cool-down — requests every 0.25 s: alpha's probe closes its breaker again;
4. slow and hung — a slow alpha is hedged after 0.4 s: beta answers first and alpha's
   request is cancelled (ledger: ``cancelled``, no breaker verdict, no charge); a hung
   alpha is hedged on a slow beta, then times out (read timeout 0.8 s), and alpha's mini
   model, started in its place, answers before beta;
5. streams — one cut before its first event (the pool falls back to beta), one cut after
   three text events (the consumer gets a typed failure with the partial text);
6. everyone throttled — 429s with ``Retry-After: 3`` on every target, past the request's
   2 s deadline: the chain ends at once (``all_providers_failed``) and the
   ``on_exhausted`` hook decides to wait the 3 s and walk the chain again;
7. a model retired — alpha answers 404 for its large model: ``model_not_found`` moves
   to alpha's mini model.

Every fifth request first calls ``lookup`` through the tools front door (grants, schema,
retries audited as ``tool.retry``); once, a request asks for ``delete_notes`` and is
denied (``tool_denied``: the tool never runs).

Then three workflow runs (:mod:`demo_workflows`): a router, an agent whose tool calls go
through the tools front door, an llm node whose JSON answer is checked against a schema,
an approval and a step; the third run is cancelled while its model call is in flight.
Their event streams are printed.

Last, the daemon as a service (:mod:`serve_tasks`): four tasks from
``demo_tasks.jsonl``; the end of the file stops it gracefully, the long task is
interrupted (journalled as a resumable cancel), and a restart on the same journal
resumes and finishes it.

It prints structured logs, then a summary: requests, outcomes by code, who served them,
retries, breaker transitions, supervisor decisions, escalations, tool calls, and the
pool's ledger —
attempts by outcome, tokens and cost (total and by target), failed attempts included.
Finishes by itself in well under 30 s; exits 0 when requests were served.
"""

from __future__ import annotations

import collections
import itertools
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio
from demo_workflows import TICKET_TOOLS, print_journal, print_runs, run_workflows
from serve_tasks import serve

from actors import ActorError, Code, configure_logging, get_logger
from actors.events import (
    BreakerTransition,
    Event,
    PoolEscalated,
    RetryScheduled,
    SupervisorDecision,
    ToolCallFailed,
    ToolRetried,
)
from actors.observe import add_event_hook
from actors.providers import (
    AnthropicProvider,
    LlmRequest,
    Message,
    OpenAIProvider,
    ProviderConfig,
)
from actors.testing.chaos import Fault, FaultScript, Route, chaos_server
from actors.tools import Grants, ToolContext, ToolGroup, for_model, tool
from supervisors import (
    AllProvidersFailed,
    Backoff,
    Breaker,
    BreakerConfig,
    Budget,
    BudgetLimits,
    ChildSpec,
    Price,
    ProviderPool,
    Resilience,
    RetryLater,
    RetryPolicy,
    RetryRules,
    SupervisorSpec,
    Target,
    Tools,
    Tree,
    open_tree,
    tool_hosts,
)

log = get_logger("demo")

ALPHA_LARGE, ALPHA_MINI, BETA_MODEL = "alpha-large", "alpha-mini", "beta-sonnet"

#: Example prices in dollars per million input / output tokens — made up, in the range
#: of public list prices for a large model, a small one and a large one elsewhere.
PRICES = {
    ("alpha", ALPHA_LARGE): Price(input_per_mtok=2.50, output_per_mtok=10.00),
    ("alpha", ALPHA_MINI): Price(input_per_mtok=0.15, output_per_mtok=0.60),
    ("beta", BETA_MODEL): Price(input_per_mtok=3.00, output_per_mtok=15.00),
}

# The default schedules, scaled down so the demo runs in seconds (Retry-After is honoured
# exactly, as in production).
FAST = Backoff(initial=0.2, factor=2, max=1.0, jitter=0.1)
RULES = RetryRules(
    by_code={
        Code.RATE_LIMITED: RetryPolicy(max_attempts=6, backoff=FAST),
        Code.UNAVAILABLE: RetryPolicy(max_attempts=3, backoff=FAST),
        Code.TIMEOUT: RetryPolicy(max_attempts=3, backoff=FAST),
        Code.NETWORK: RetryPolicy(max_attempts=3, backoff=FAST),
        Code.MALFORMED_RESPONSE: RetryPolicy(max_attempts=3, backoff=FAST),
    },
    deadline=2.0,  # per request, every attempt and wait included (the pool's deadline)
)
# Three failures in a row open a breaker; it probes again 1.5 s later.
BREAKER = BreakerConfig(
    failure_threshold=3,
    cooldowns={Code.UNAVAILABLE: 1.5, Code.TIMEOUT: 1.5, Code.NETWORK: 1.5},
    early_probe=0.0,
)
READ_TIMEOUT = 0.8  # seconds: a hung provider is a `timeout` after this
HEDGE_AFTER = 0.4  # seconds without an answer before the next target starts beside it
#: The demo's run journal: a fresh file on every run (``python -m actors runs list``).
JOURNAL = str(Path(".demo") / "runs.journal")


def status(code: int, route: Route, *, times: int = 1, retry_after: str | None = None) -> Fault:
    """The next ``times`` requests on ``route`` answered with HTTP ``code``."""
    headers = {} if retry_after is None else {"retry-after": retry_after}
    return Fault(kind="status", route=route, status=code, times=times, headers=headers)


def cut_stream(after: int) -> Fault:
    """Alpha's next stream ends after ``after`` SSE events (the first is a keep-alive
    comment, each next one a word of text) without its terminator."""
    return Fault(kind="cut_stream", route="openai", after=after)


@attrs.define
class NotesBackend:
    """The notes store behind ``lookup``: every fourth use hiccups."""

    uses: int = 0


NOTES = NotesBackend()


@tool(retry=RetryPolicy(max_attempts=2, backoff=Backoff(initial=0.05, max=0.2, jitter=0)))
async def lookup(topic: str, limit: int = 3, *, context: ToolContext) -> dict[str, Any]:
    """Look notes up by topic (its backend fails now and then: retried by its policy)."""
    NOTES.uses += 1
    if NOTES.uses % 4 == 0:
        raise ActorError.from_code(Code.RESOURCE_BUSY, "the notes backend is busy")
    return {"topic": topic, "notes": [f"{topic} #{i}" for i in range(1, limit + 1)]}


@tool
async def delete_notes(topic: str) -> str:
    """Delete every note on a topic — never granted to the daemon's requests."""
    raise AssertionError("a denied tool never runs")


NOTES_TOOLS = ToolGroup("notes", [lookup, delete_notes], concurrency=2)
#: What the daemon's requests may call: lookup, at most 5 notes at a time.
GRANTS = Grants.allow(lookup={"properties": {"limit": {"maximum": 5}}})


@attrs.define
class Summary:
    outcomes: collections.Counter[str] = attrs.Factory(collections.Counter)
    served_by: collections.Counter[str] = attrs.Factory(collections.Counter)
    retries: int = 0
    transitions: list[str] = attrs.Factory(list)
    decisions: list[str] = attrs.Factory(list)
    escalations: list[str] = attrs.Factory(list)
    tool_calls: collections.Counter[str] = attrs.Factory(collections.Counter)
    tool_retries: int = 0

    def hook(self, event: Event) -> None:
        """An event hook: typed records, whatever the log level."""
        match event:
            case RetryScheduled():
                self.retries += 1
            case BreakerTransition(provider=provider, model=model, before=before, after=after):
                key = provider if model is None else f"{provider}/{model}"
                self.transitions.append(f"{key}: {before} -> {after}")
            case SupervisorDecision(child=child, error=error, directive=directive):
                self.decisions.append(f"{child}: {error.code} -> {directive}")
            case PoolEscalated(decision=decision, by=by, category=category, attempts=attempts):
                self.escalations.append(f"{decision} by {by} ({category}, {attempts} attempts)")
            case ToolRetried():
                self.tool_retries += 1
            case ToolCallFailed(code=code):
                self.tool_calls[code] += 1


@attrs.define
class Daemon:
    """The demo's requests: each through the pool, every fifth one using the tool."""

    tree: Tree
    pool: ProviderPool
    tools: Tools
    script: FaultScript
    summary: Summary
    numbers: itertools.count[int] = attrs.Factory(lambda: itertools.count(1))

    def request(self, number: int, text: str) -> LlmRequest:
        return LlmRequest(
            model=ALPHA_LARGE,  # each target puts its own model in
            messages=[Message(role="user", content=f"question {number}: {text}")],
            max_tokens=64,
            metadata={"request_id": f"req-{number}"},
        )

    async def ask(self, text: str = "how are the actors?") -> None:
        """One request through the pool (``complete``)."""
        number = next(self.numbers)
        if number % 5 == 0:
            await self.use_tool("lookup", {"topic": f"q{number}", "limit": 2}, number)
        if number == 22:
            await self.use_tool("delete_notes", {"topic": "everything"}, number)
        try:
            reply = await self.pool.complete(self.request(number, text))
        except ActorError as err:
            log.warning("demo.request_failed", request=number, code=str(err.code))
            self.summary.outcomes[str(err.code)] += 1
            return
        self.summary.outcomes["ok"] += 1
        self.summary.served_by[f"{reply.provider}/{reply.model}"] += 1

    async def use_tool(self, name: str, arguments: dict[str, Any], number: int) -> None:
        """A tool call as an agent node makes it: the request's grants, its key."""
        try:
            result = await self.tools.call(
                name, arguments, run_id="demo", node_id="ask", index=number, timeout=2
            )
        except ActorError as err:
            # What the model would be told: code, user-safe message, retryable.
            log.info("demo.tool_error", request=number, tool=name, **for_model(err)["error"])
            return
        self.summary.tool_calls["ok"] += 1
        log.info("demo.tool", request=number, tool=name, attempt=result.attempt, key=result.key)

    async def stream(self, text: str) -> None:
        """One streamed request: the pool falls back only before the first event."""
        number = next(self.numbers)
        pieces: list[str] = []
        try:
            async with self.pool.stream(self.request(number, text)) as events:
                async for event in events:
                    if event.kind == "text":
                        pieces.append(event.text)
        except ActorError as err:
            # Events reached us: no fallback. The failure is typed, with what was said
            # and its usage (estimated when the provider did not report it).
            entry = self.pool.ledger.of(f"req-{number}")[-1]
            log.warning(
                "demo.stream_cut",
                request=number,
                code=str(err.code),
                partial_text=err.partial_text,
                tokens=None if err.usage is None else err.usage.total_tokens,
                outcome=entry.outcome,
                estimated=entry.usage_estimated,
            )
            self.summary.outcomes[str(err.code)] += 1
            return
        assert events.response is not None
        log.info("demo.streamed", request=number, text="".join(pieces))
        self.summary.outcomes["ok"] += 1
        self.summary.served_by[f"{events.response.provider}/{events.response.model} (stream)"] += 1

    async def batch(self, count: int, *, every: float = 0.0) -> None:
        """``count`` requests at once, or one every ``every`` seconds."""
        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(self.ask)
                if every:
                    await trio.sleep(every)

    async def phase(self, name: str, *faults: Fault) -> None:
        log.info("demo.phase", phase=name, faults=[f.kind for f in faults])
        self.script.push(*faults)


async def run_phases(daemon: Daemon) -> None:
    """The phases, one after the other. Steady traffic after a phase's faults lets
    successes reset alpha's failure count, so one phase's failures do not carry into the
    next."""
    phase, ask, batch, stream = daemon.phase, daemon.ask, daemon.batch, daemon.stream
    await phase("rate limits", status(429, "openai", times=2, retry_after="1"))
    await batch(8)
    await batch(4)

    await phase("503 burst", status(503, "openai", times=3))
    for _ in range(6):
        await ask()

    await phase("cool-down: alpha's probe")
    await batch(8, every=0.25)

    await phase("slow alpha: hedged", Fault(kind="latency", route="openai", seconds=0.7))
    await ask()
    await phase(
        "hung alpha: a timeout",
        Fault(kind="hang", route="openai", seconds=3),
        Fault(kind="latency", route="anthropic", seconds=0.5),
    )
    await ask()
    await batch(4)

    await phase("stream cut before its first event", cut_stream(after=1))
    await stream("stream me a short answer")
    await phase("stream cut mid-answer", cut_stream(after=4))
    await stream("stream me a longer answer, please")
    await batch(4)

    # Every target throttled for longer than the deadline: the chain ends at once, and
    # the on-call's hook decides to wait for the Retry-After and walk it again.
    await phase(
        "everyone throttled past the deadline",
        status(429, "openai", times=2, retry_after="3"),  # alpha-large, then alpha-mini
        status(429, "anthropic", retry_after="3"),
    )
    await ask()
    await batch(4)

    await phase("alpha retires its large model", status(404, "openai"))
    await ask()
    await ask()


def on_exhausted_once() -> Callable[[AllProvidersFailed], Awaitable[RetryLater | None]]:
    """The on-call's rule: a request whose chain is exhausted gets one more walk, after
    the earliest ``retry_after`` the targets gave (else a second); the second time it
    fails as it is (the hook is asked each time the chain is exhausted)."""
    retried: set[str] = set()

    async def decide(failure: AllProvidersFailed) -> RetryLater | None:
        # The failure names its request only through its attempts (none: all refused).
        request_id = failure.attempts[0].request_id if failure.attempts else None
        if request_id is None or request_id in retried:
            return None
        retried.add(request_id)
        wait = failure.retry_after if failure.retry_after is not None else 1.0
        return RetryLater(seconds=wait, by="demo-oncall")

    return decide


def provider_config(name: str, url: str) -> ProviderConfig:
    return ProviderConfig(
        name=name,
        base_url=url,
        api_key=f"sk-demo-{name}-not-a-real-key",
        read_timeout=READ_TIMEOUT,
    )


OUTCOMES = ("ok", "failed", "partial", "cancelled")


def print_summary(
    elapsed: float, summary: Summary, pool: ProviderPool, budget: Budget, http: int
) -> None:
    ledger = pool.ledger
    total = ledger.total
    outcomes = ledger.by_outcome
    counts = {name: outcomes[name].attempts if name in outcomes else 0 for name in OUTCOMES}
    print()
    print("=" * 72)
    print(f"demo summary ({elapsed:.1f} s)")
    print(f"  requests:            {sum(summary.outcomes.values())}")
    print(f"  outcomes:            {dict(summary.outcomes)}")
    print(f"  served by:           {dict(summary.served_by)}")
    print(f"  HTTP requests:       {http} (as the chaos server saw them)")
    print(f"  retries scheduled:   {summary.retries}")
    print(f"  breaker transitions: {summary.transitions}")
    print(f"  supervisor:          {summary.decisions}")
    print(f"  escalations:         {summary.escalations}")
    print(f"  tool calls:          {dict(summary.tool_calls)}, {summary.tool_retries} retried")
    print(
        f"  ledger attempts:     {total.attempts} ("
        + ", ".join(f"{name} {count}" for name, count in counts.items())
        + ")"
    )
    print(
        f"  ledger tokens:       {total.tokens} (input {total.input_tokens}, "
        f"output {total.output_tokens}; budget charged {budget.tokens})"
    )
    print(f"  ledger cost:         ${total.cost:.6f} (budget charged ${budget.cost:.6f})")
    for (provider, model), totals in sorted(ledger.by_target.items()):
        print(
            f"    {provider}/{model}: {totals.attempts} attempts, "
            f"{totals.tokens} tokens, ${totals.cost:.6f}"
        )
    print("=" * 72)


def fresh_journal(path: str) -> None:
    """Remove the last demo's journal (its WAL files too): the demo's run ids repeat."""
    Path(path).parent.mkdir(exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)


async def main() -> int:
    configure_logging(mode="console", level="info")
    fresh_journal(JOURNAL)
    summary = Summary()
    remove = add_event_hook(summary.hook)
    started = trio.current_time()
    script = FaultScript()
    try:
        async with chaos_server(script) as server:
            spec = SupervisorSpec(
                max_restarts=5,
                period=10,
                backoff=Backoff(initial=0.1, max=1.0),
                children=[
                    ChildSpec(
                        id="alpha",
                        actor=OpenAIProvider,
                        args=(provider_config("alpha", server.url),),
                    ),
                    ChildSpec(
                        id="beta",
                        actor=AnthropicProvider,
                        args=(provider_config("beta", server.url),),
                    ),
                    *tool_hosts(NOTES_TOOLS, TICKET_TOOLS),
                ],
            )
            budget = Budget("demo-run", BudgetLimits(tokens=100_000, cost=1.00))
            async with open_tree(spec, name="daemon") as tree:
                pool = ProviderPool(
                    [
                        Target(ref=tree.ref("alpha"), provider="alpha", model=ALPHA_LARGE),
                        Target(ref=tree.ref("beta"), provider="beta", model=BETA_MODEL),
                    ],
                    downgrades={"alpha": [ALPHA_MINI]},
                    resilience=Resilience(retry=RULES, breaker=Breaker(BREAKER)),
                    budget=budget,
                    prices=PRICES,
                    hedge_after=HEDGE_AFTER,
                    on_exhausted=on_exhausted_once(),
                    name="demo-pool",
                )
                tools = await Tools.from_tree(tree, NOTES_TOOLS, grants=GRANTS)
                await run_phases(Daemon(tree, pool, tools, script, summary))
                http = len(server.requests)  # the pool's phases; the runs report their own
                workflows = await run_workflows(tree, script, RULES, JOURNAL, PRICES)
    finally:
        remove()
    print_runs(workflows)
    print_summary(trio.current_time() - started, summary, pool, budget, http)
    print_journal(JOURNAL)
    served = await run_as_service()
    return 0 if summary.outcomes.get("ok", 0) > 0 and served == 0 else 1


async def run_as_service() -> int:
    """The daemon as a service (``serve``), twice on one journal: the fixed tasks of
    ``demo_tasks.jsonl``, whose end stops the daemon gracefully — the long task is
    interrupted, resumable — then a restart that resumes it and finishes it at once."""
    tasks = str(trio.Path(__file__).parent / "demo_tasks.jsonl")
    journal = str(trio.Path(".demo") / "service.journal")
    fresh_journal(journal)
    print("\n== the daemon as a service: four tasks, end of input stops it (grace 1 s) ==")
    first = await serve(["--journal", journal, "--tasks", tasks, "--grace", "1"])
    print("== restarted on the same journal: the interrupted task is resumed ==")
    empty = trio.Path(".demo") / "no-tasks.jsonl"
    await empty.write_text("")
    second = await serve(["--journal", journal, "--tasks", str(empty), "--max-work", "0"])
    return first or second


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:  # the daemon as a service (serve_tasks.py)
        sys.exit(trio.run(serve, sys.argv[2:]))
    sys.exit(trio.run(main))
