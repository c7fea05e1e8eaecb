"""The example agent daemon, run by ``make demo``.

It starts the embedded chaos provider on loopback, builds a supervisor tree in code —
an OpenAI-compatible provider "alpha", an Anthropic-compatible provider "beta" and a
flaky tool — and sends a few dozen requests through retries, circuit breakers and a
fallback from alpha to beta, while the fault script injects 429s with Retry-After, a
503 burst, a timeout and cut streams. It prints structured logs, then a summary:
requests, outcomes by code, attempts, retries, breaker transitions, supervisor
decisions, and tokens — failed attempts included. Finishes in well under 30 s.
"""

from __future__ import annotations

import collections
import sys
from typing import Any

import attrs
import trio

from actors import Actor, ActorError, Code, configure_logging, get_logger
from actors.events import BreakerTransition, Event, RetryScheduled, SupervisorDecision
from actors.observe import add_event_hook
from actors.providers import (
    AnthropicProvider,
    Complete,
    LlmRequest,
    LlmResponse,
    Message,
    OpenAIProvider,
    ProviderClient,
    ProviderConfig,
)
from actors.testing.chaos import Fault, FaultScript, chaos_server
from supervisors import (
    Backoff,
    Breaker,
    BreakerConfig,
    Budget,
    BudgetLimits,
    ChildSpec,
    Resilience,
    RetryPolicy,
    RetryRules,
    SupervisorSpec,
    open_tree,
    retrying,
)

log = get_logger("demo")

# Faults, in order, per provider route.
SCRIPT = FaultScript(
    faults=[
        Fault(kind="status", route="openai", status=429, headers={"retry-after": "1"}, times=2),
        Fault(kind="latency", route="openai", seconds=0.05),
        Fault(kind="status", route="openai", status=503, times=4),  # a burst: alpha's breaker opens
        Fault(kind="hang", route="openai", seconds=3),  # a timeout (read timeout 0.8 s)
        Fault(kind="cut_stream", route="openai", after=3),
        Fault(kind="cut_stream", route="anthropic", after=4, clean=False),
    ]
)

# Seed 003's schedules, scaled down so the demo runs in seconds (Retry-After is honoured
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
    deadline=10.0,
)
BREAKER = BreakerConfig(
    cooldowns={Code.UNAVAILABLE: 2.0, Code.TIMEOUT: 2.0, Code.RATE_LIMITED: 2.0},
    early_probe=0.0,
)


class FlakyTool(Actor):
    """A tool that fails on every fifth use (the supervisor restarts it)."""

    uses = 0

    async def handle(self, message: Any) -> Any:
        FlakyTool.uses += 1
        if FlakyTool.uses % 5 == 0:
            raise ActorError.from_code(Code.TOOL_FAILED, "the tool's backend hiccuped")
        return f"tool result for {message!r}"


@attrs.define
class Summary:
    outcomes: collections.Counter[str] = attrs.Factory(collections.Counter)
    served_by: collections.Counter[str] = attrs.Factory(collections.Counter)
    retries: int = 0
    transitions: list[str] = attrs.Factory(list)
    decisions: list[str] = attrs.Factory(list)

    def hook(self, event: Event) -> None:
        """An event hook: typed records, whatever the log level."""
        match event:
            case RetryScheduled():
                self.retries += 1
            case BreakerTransition(provider=provider, before=before, after=after):
                self.transitions.append(f"{provider}: {before} -> {after}")
            case SupervisorDecision(child=child, error=error, directive=directive):
                self.decisions.append(f"{child}: {error.code} -> {directive}")


def usage_of(reply: LlmResponse) -> Any:
    return reply.usage


def provider_config(name: str, url: str) -> ProviderConfig:
    return ProviderConfig(
        name=name, base_url=url, api_key=f"sk-demo-{name}-not-a-real-key", read_timeout=0.8
    )


async def ask(
    number: int,
    tree: Any,
    resilience: Resilience,
    budget: Budget,
    summary: Summary,
) -> None:
    """One request: alpha first, beta as the fallback; every fifth one uses the tool."""
    request = LlmRequest(
        model="demo-model",
        messages=[Message(role="user", content=f"question {number}: how are the actors?")],
        max_tokens=64,
    )
    if number % 5 == 0:
        try:
            await tree.ref("tool").call(f"lookup {number}", timeout=2)
        except ActorError as err:
            log.info("demo.tool_failed", request=number, code=str(err.code))
    for provider in ("alpha", "beta"):
        try:
            await resilience.call(
                tree.ref(provider),
                Complete(request),
                provider=provider,
                model=request.model,
                tokens=request.estimated_prompt_tokens() + request.max_tokens,
                timeout=15,
                budget=budget,
            )
        except ActorError as err:
            if (
                err.code
                in (
                    Code.CIRCUIT_OPEN,
                    Code.RATE_LIMITED,
                    Code.UNAVAILABLE,
                    Code.TIMEOUT,
                    Code.NETWORK,
                )
                and provider == "alpha"
            ):
                log.info("demo.fallback", request=number, code=str(err.code), to="beta")
                continue
            summary.outcomes[str(err.code)] += 1
            return
        summary.outcomes["ok"] += 1
        summary.served_by[provider] += 1
        return


async def stream_once(tree: Any, provider: str, budget: Budget, summary: Summary) -> None:
    """A streamed answer under the retry rules: a cut stream is retried, its usage counted."""
    client = ProviderClient(tree.ref(provider), provider)
    request = LlmRequest(
        model="demo-model",
        messages=[Message(role="user", content=f"stream something from {provider}")],
        stream=True,
    )

    async def attempt() -> LlmResponse:
        async with client.stream(request) as events:
            pieces = [event.text async for event in events if event.kind == "text"]
        assert events.response is not None
        log.info("demo.streamed", provider=provider, text="".join(pieces))
        return events.response

    try:
        reply = await retrying(RULES, attempt)
    except ActorError as err:
        await budget.charge_error(err)
        summary.outcomes[str(err.code)] += 1
        return
    await budget.charge(reply.usage, provider=provider, model=request.model)
    summary.outcomes["ok"] += 1
    summary.served_by[f"{provider} (stream)"] += 1


async def main() -> int:
    configure_logging(mode="console", level="info")
    summary = Summary()
    remove = add_event_hook(summary.hook)
    started = trio.current_time()
    try:
        async with chaos_server(SCRIPT) as server:
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
                    ChildSpec(id="tool", actor=FlakyTool),
                ],
            )
            budget = Budget("demo-run", BudgetLimits(tokens=100_000))
            resilience = Resilience(retry=RULES, breaker=Breaker(BREAKER), usage_of=usage_of)
            async with open_tree(spec, name="daemon") as tree:
                for batch in range(4):
                    async with trio.open_nursery() as nursery:
                        for number in range(batch * 8, batch * 8 + 8):
                            nursery.start_soon(ask, number, tree, resilience, budget, summary)
                    if batch == 1:
                        await trio.sleep(2.2)  # let alpha's breaker cool down and close again
                await stream_once(tree, "alpha", budget, summary)
                await stream_once(tree, "beta", budget, summary)
            attempts = len(server.requests)
    finally:
        remove()
    elapsed = trio.current_time() - started
    requests = sum(summary.outcomes.values())
    print()
    print("=" * 72)
    print(f"demo summary ({elapsed:.1f} s)")
    print(f"  requests:            {requests}")
    print(f"  outcomes:            {dict(summary.outcomes)}")
    print(f"  served by:           {dict(summary.served_by)}")
    print(f"  HTTP attempts:       {attempts}")
    print(f"  retries scheduled:   {summary.retries}")
    print(f"  breaker transitions: {summary.transitions}")
    print(f"  supervisor:          {summary.decisions}")
    print(f"  tokens (all attempts, failed ones too): {budget.tokens}")
    print("=" * 72)
    return 0 if summary.outcomes.get("ok", 0) > 0 else 1


if __name__ == "__main__":
    sys.exit(trio.run(main))
