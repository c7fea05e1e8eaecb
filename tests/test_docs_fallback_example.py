"""The provider pool example of README.md and docs/fallback.md runs as written, on virtual
time against the chaos server: alpha answers 503 once, so beta serves the completion and
(alpha's breaker now open) the stream; the ledger holds the three attempts."""

from __future__ import annotations

import re
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Code
from actors.providers import AnthropicProvider, OpenAIProvider, ProviderConfig
from actors.testing.chaos import Fault, FaultScript, chaos_server
from supervisors import ChildSpec, SupervisorSpec, Tree, open_tree

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PLACES = [("README.md", "## Provider pool"), ("docs/fallback.md", "# Provider pool")]


def example(doc: str, heading: str) -> str:
    """The first python block after ``heading`` in ``doc``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    match = BLOCK.search(text, text.index(heading))
    assert match is not None, f"no python block after {heading!r} in {doc}"
    return match[1]


async def run(source: str, tree: Tree) -> dict[str, Any]:
    """Run ``source`` as the body of an async function of ``tree``; its locals."""
    code = f"async def example(tree):\n{textwrap.indent(source, '    ')}\n    return locals()\n"
    namespace: dict[str, Any] = {}
    exec(compile(code, "<example>", "exec"), namespace)
    result: dict[str, Any] = await namespace["example"](tree)
    return result


@asynccontextmanager
async def alpha_and_beta(script: FaultScript) -> AsyncIterator[Tree]:
    """A tree of "alpha" (OpenAI-compatible) and "beta" (Anthropic) over one chaos server."""
    async with chaos_server(script) as server:
        children = [
            ChildSpec(
                id=name,
                actor=actor,
                args=(ProviderConfig(name=name, base_url=server.url, api_key=f"sk-doc-{name}"),),
            )
            for name, actor in (("alpha", OpenAIProvider), ("beta", AnthropicProvider))
        ]
        async with open_tree(SupervisorSpec(children=children), name="docs") as tree:
            yield tree


def test_the_readme_and_the_doc_show_the_same_example() -> None:
    readme, doc = (example(*place) for place in PLACES)
    assert readme == doc


@pytest.mark.parametrize(("doc", "heading"), PLACES)
async def test_the_example_runs_and_fails_over(
    doc: str, heading: str, autojump_clock: MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    script = FaultScript(faults=[Fault(kind="status", route="openai", status=503)])
    async with alpha_and_beta(script) as tree:
        names = await run(example(doc, heading), tree)
    pool, reply = names["pool"], names["reply"]
    assert (reply.provider, reply.model, reply.content) == ("beta", "beta-sonnet", "echo: hi")
    assert names["text"] == "echo: hi"
    assert names["events"].response.provider == "beta"
    assert trio.current_time() == 0.0  # the failover slept nowhere
    entries = [(a.provider, a.model, a.outcome, a.code) for a in pool.ledger]
    assert entries == [
        ("alpha", "alpha-large", "failed", Code.UNAVAILABLE),
        ("beta", "beta-sonnet", "ok", None),
        ("beta", "beta-sonnet", "ok", None),  # the stream: alpha's breaker refused it
    ]
    total = pool.ledger.total
    assert total.attempts == 3
    assert total.tokens == sum(a.tokens for a in pool.ledger) > 0
    # Beta's answers at beta's price; alpha's failed attempt reported no usage: no cost.
    beta = [a.usage for a in pool.ledger if a.provider == "beta"]
    expected = sum(u.input_tokens * 3.00 + u.output_tokens * 15.00 for u in beta) / 1e6
    assert total.cost == pytest.approx(expected) and expected > 0
    assert pool.ledger.by_target["alpha", "alpha-large"].cost == 0.0
    assert str(total) in capsys.readouterr().out
