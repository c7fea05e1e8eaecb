"""Helpers for the provider pool tests: one chaos server per provider, a tree of
provider actors over them, exact retry rules (no jitter)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

import attrs
import pytest
import trio

from actors import Code
from actors.providers import (
    AnthropicProvider,
    Capabilities,
    LlmRequest,
    Message,
    OpenAIProvider,
    ProviderConfig,
)
from actors.testing.chaos import ChaosServer, Fault, FaultScript, chaos_server
from supervisors import (
    Backoff,
    ChildSpec,
    RetryPolicy,
    RetryRules,
    SupervisorSpec,
    Target,
    Tree,
    open_tree,
)

#: Seed 003's transient schedule without jitter: 1 -> 2 -> 4 s, 3 retries.
EXACT = RetryPolicy(max_attempts=3, backoff=Backoff(initial=1, factor=2, max=4, jitter=0))
RULES = RetryRules(
    by_code={
        Code.RATE_LIMITED: EXACT,
        Code.UNAVAILABLE: EXACT,
        Code.TIMEOUT: EXACT,
        Code.NETWORK: EXACT,
        Code.MALFORMED_RESPONSE: EXACT,
    }
)


def rules(deadline: float | None = None) -> RetryRules:
    return attrs.evolve(RULES, deadline=deadline)


def request(text: str = "hello", **fields: Any) -> LlmRequest:
    return LlmRequest(
        model=fields.pop("model", "m1"),
        messages=[Message(role="user", content=text)],
        max_tokens=fields.pop("max_tokens", 64),
        **fields,
    )


def faults(*items: Fault) -> FaultScript:
    return FaultScript(faults=list(items))


@attrs.define
class Fleet:
    """A tree of provider actors ``A``, ``B``, … each with its own chaos server."""

    tree: Tree
    servers: dict[str, ChaosServer]

    def target(self, provider: str, model: str = "m1", **fields: Any) -> Target:
        return Target(ref=self.tree.ref(provider), provider=provider, model=model, **fields)

    def targets(self, *providers: str, model: str = "m1") -> list[Target]:
        return [self.target(provider, model) for provider in providers]

    def count(self, provider: str) -> int:
        return self.servers[provider].count()

    def times(self, provider: str) -> list[float]:
        return [record.at for record in self.servers[provider].requests]


@asynccontextmanager
async def fleet(
    scripts: dict[str, FaultScript | None],
    *,
    dialect: Literal["openai", "anthropic"] = "openai",
    models: dict[str, Capabilities] | None = None,
    read_timeout: float = 30.0,
    names: Sequence[str] | None = None,
) -> AsyncIterator[Fleet]:
    """Start one chaos server per provider in ``scripts`` and a tree of their actors."""
    actor = OpenAIProvider if dialect == "openai" else AnthropicProvider
    async with AsyncExitStack() as stack:
        servers = {
            name: await stack.enter_async_context(chaos_server(script))
            for name, script in scripts.items()
        }
        children = [
            ChildSpec(
                id=name,
                actor=actor,
                args=(
                    ProviderConfig(
                        name=name,
                        base_url=server.url,
                        api_key=f"sk-test-{name}-0000",
                        read_timeout=read_timeout,
                        models=models or {},
                    ),
                ),
            )
            for name, server in servers.items()
        ]
        spec = SupervisorSpec(max_restarts=50, period=10, children=children)
        tree = await stack.enter_async_context(open_tree(spec, name="pool-test"))
        yield Fleet(tree, servers)


async def cancelled_by_a_crashing_sibling(
    ask: Callable[[], Awaitable[Any]], after: float = 2
) -> list[BaseException]:
    """Run ``ask()`` beside a sibling that crashes ``after`` seconds in, so the scope
    around ``ask`` is cancelled; what ``ask`` raised (the crash itself is expected)."""
    seen: list[BaseException] = []

    async def asking() -> None:
        try:
            await ask()
        except BaseException as exc:
            seen.append(exc)
            raise

    async def crash() -> None:
        await trio.sleep(after)
        raise ValueError("sibling crashed")

    with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="sibling crashed")):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(asking)
            nursery.start_soon(crash)
    return seen
