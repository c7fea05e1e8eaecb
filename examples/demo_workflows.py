"""The demo's workflow runs (the last part of ``make demo``, after the pool's phases).

A support-triage workflow runs under the daemon's tree, through a pool of its own and
the ``tickets`` tools: a router picks the investigation, an agent looks the ticket up
with ``search_tickets`` (the model's tool call goes through the tools front door), an
llm node turns the findings into JSON checked against a schema, and a person approves
before a step files it. Three tickets run at once; the third one's investigation is
slowed down on the chaos server and the run is cancelled while its model call is in
flight: its stream ends ``run:cancelled`` with the reason, and its request is closed.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import trio

from actors.events import RunEvent
from actors.testing.chaos import Fault, FaultScript
from actors.tools import Grants, ToolGroup, tool
from supervisors import Price, ProviderPool, Resilience, RetryRules, Target, Tools, Tree
from supervisors.runs import (
    Agent,
    Approval,
    Edge,
    Llm,
    NodeContext,
    Router,
    Run,
    Step,
    Workflow,
    open_journal,
    open_runs,
)

FILED: list[str] = []


@tool
async def search_tickets(query: str) -> dict[str, Any]:
    """Find a ticket and its history."""
    return {"ticket": query, "status": "open", "reports": 3}


TICKET_TOOLS = ToolGroup("tickets", [search_tickets], concurrency=2)
LABEL_SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"enum": ["bug", "question", "feature"]},
        "urgent": {"type": "boolean"},
    },
    "required": ["label", "urgent"],
}


async def file_ticket(ctx: NodeContext) -> dict[str, Any]:
    """File the triaged ticket (the side effect is keyed by the node's idempotency key)."""
    FILED.append(ctx.key)
    return {"filed": f"{ctx.state['ticket']}:{ctx.state['triage']['label']}"}


def pick(state: Any) -> str:
    return "investigate"


TRIAGE = Workflow(
    name="support-triage",
    nodes=[
        Router(id="route", managed_nodes=["investigate"], pick=pick),
        Agent(
            id="investigate",
            model="alpha-mini",
            messages=[("system", "You investigate tickets."), ("user", "call: {ticket}")],
            grants=Grants.allow("search_tickets"),
            max_turns=4,
            output="findings",
        ),
        Llm(
            id="triage",
            model="alpha-mini",
            messages=[("user", 'reply: {{"label": "bug", "urgent": true}}')],
            output_schema=LABEL_SCHEMA,
        ),
        Approval(id="approve", prompt="File this triage?"),
        Step(id="file", fn=file_ticket, writes=["filed"]),
    ],
    edges=[
        Edge(source="investigate", target="triage"),
        Edge(source="triage", target="approve"),
        Edge(source="approve", target="file"),
    ],
)


def describe(record: RunEvent) -> str:
    """One line of a run's stream."""
    fields = {
        "run:started": lambda r: f"inputs={dict(r.inputs)}",
        "node:started": lambda r: f"{r.node_id} ({r.kind}, attempt {r.attempt})",
        "node:completed": lambda r: f"{r.node_id} -> {', '.join(r.next) or 'end'}",
        "node:retrying": lambda r: f"{r.node_id} {r.code}, retry in {r.delay:.1f} s",
        "node:failed": lambda r: f"{r.node_id} {r.code} ({r.message})",
        "tool:called": lambda r: f"{r.node_id} {r.tool} key={r.key} -> {r.code}",
        "approval:requested": lambda r: f"{r.node_id}: {r.prompt}",
        "approval:decided": lambda r: f"{r.node_id}: {r.decision} by {r.by}",
        "run:completed": lambda r: (
            f"{r.duration:.2f} s, {r.tokens} tokens, filed={r.state.get('filed')}"
        ),
        "run:failed": lambda r: f"{r.code}: {r.message} [{r.correlation_id}]",
        "run:cancelled": lambda r: f"reason={r.reason!r} in_flight={list(r.in_flight)}",
    }
    detail = fields.get(record.name, lambda r: "")(record)
    return f"  [{record.run_id}] {record.seq:>2} {record.name:<19} {detail}"


async def follow(run: Run, lines: list[str], *, approve: bool = True) -> None:
    """Read a run's stream to its end; approve its approval as soon as it is asked."""
    async for record in run.events():
        lines.append(describe(record))
        if approve and record.name == "approval:requested" and record.node_id:
            run.decide(record.node_id, "approve", by="demo-operator", reason="looks right")


async def run_workflows(
    tree: Tree,
    script: FaultScript,
    rules: RetryRules,
    journal_path: str,
    prices: Mapping[tuple[str, str], Price] | None = None,
) -> dict[str, Any]:
    """Three triage runs (the third cancelled mid-flight), journalled to
    ``journal_path``; their streams and a summary."""
    pool = ProviderPool(
        [Target(ref=tree.ref("alpha"), provider="alpha", model="alpha-mini")],
        resilience=Resilience(retry=rules),
        name="runs-pool",
    )
    tools = await Tools.from_tree(tree, TICKET_TOOLS)
    lines: list[str] = []
    async with (
        open_journal(journal_path) as journal,
        open_runs(tree, pools=pool, tools=tools, runners=2, journal=journal, prices=prices) as runs,
    ):
        first = await runs.start(TRIAGE, {"ticket": "T-101"}, run_id="triage-101")
        second = await runs.start(TRIAGE, {"ticket": "T-102"}, run_id="triage-102")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, first, lines)
            nursery.start_soon(follow, second, lines)
        # The third ticket's model call hangs: the operator cancels the run meanwhile.
        script.push(Fault(kind="latency", route="openai", seconds=5))
        third = await runs.start(TRIAGE, {"ticket": "T-103"}, run_id="triage-103")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, third, lines)
            await trio.sleep(0.3)
            third.cancel("operator: ticket withdrawn")
    outcomes = [await run.wait() for run in (first, second, third)]
    statuses = collections.Counter(outcome.status for outcome in outcomes)
    return {
        "lines": lines,
        "statuses": dict(statuses),
        "filed": [outcome.state.get("filed") for outcome in outcomes],
        "attempts": pool.ledger.total.attempts,
        "tokens": pool.ledger.total.tokens,
        "journal": journal_path,
    }


def print_runs(result: dict[str, Any]) -> None:
    print()
    print("workflow runs (router -> agent with tools -> llm with a schema -> approval -> step)")
    for line in sorted(result["lines"], key=lambda text: text.split("]")[0]):
        print(line)
    print(f"  runs:                {result['statuses']}")
    print(f"  filed:               {result['filed']}")
    print(f"  model attempts:      {result['attempts']} ({result['tokens']} tokens)")


def print_journal(path: str) -> None:
    """The journal's listing, as ``python -m actors runs list`` prints it."""
    command = [sys.executable, "-m", "actors", "runs", "list", "--journal", path]
    print()
    print(f"journal: python -m actors runs list --journal {path}")
    listing = subprocess.run(command, capture_output=True, text=True, check=False)
    print(listing.stdout.rstrip() or listing.stderr.rstrip())
