"""The process the kill -9 test starts and kills: a daemon running a 10-node workflow
with a journal; its side effects go to a separate SQLite file, by idempotency key.

``python -m tests.journal_kill_child JOURNAL EFFECTS start RUN_ID...`` (JOURNAL: a SQLite
file, or a PostgreSQL DSN starting ``host=``) starts those
runs; ``... resume`` resumes every unfinished run of the journal. Either prints
``STARTED`` once its runs are going, and ``DONE`` when they all completed.

The workflow: s1 → s2 → s3 → (s4a, s4b) → s5 (a join) → s6 (calls the ``charge`` tool
with the node's key) → s7 → s8 → s9. Each step records every call it gets (``calls``)
and does its side effect once per key (``done``, keyed by ``ctx.key``); the tool the
same (``tool_calls``, ``tool_done``).
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
from typing import Any

import trio

from actors.observe import configure_logging
from actors.tools import ALL, ToolContext, ToolGroup, tool
from supervisors import SupervisorSpec, Tools, open_tree, tool_hosts
from supervisors.runs import Edge, NodeContext, Step, Workflow, open_journal, open_runs

EFFECTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (key TEXT, node TEXT, pid INTEGER, attempt INTEGER);
CREATE TABLE IF NOT EXISTS done (key TEXT PRIMARY KEY, pid INTEGER);
CREATE TABLE IF NOT EXISTS tool_calls (key TEXT, pid INTEGER);
CREATE TABLE IF NOT EXISTS tool_done (key TEXT PRIMARY KEY, pid INTEGER);
"""

NODES = ("s1", "s2", "s3", "s4a", "s4b", "s5", "s6", "s7", "s8", "s9")


def _effects() -> sqlite3.Connection:
    db = sqlite3.connect(sys.argv[2], isolation_level=None, timeout=10.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


def _record(table: str, done: str, key: str, *extra: Any) -> None:
    db = _effects()
    try:
        marks = ", ".join("?" * (2 + len(extra)))
        db.execute(f"INSERT INTO {table} VALUES ({marks})", (key, *extra, os.getpid()))
        db.execute(f"INSERT OR IGNORE INTO {done} VALUES (?, ?)", (key, os.getpid()))
    finally:
        db.close()


@tool
async def charge(amount: int, context: ToolContext) -> dict[str, Any]:
    """Charge once per idempotency key."""
    _record("tool_calls", "tool_done", context.key)
    return {"charged": amount}


def _step(node_id: str) -> Step:
    async def fn(ctx: NodeContext) -> dict[str, Any]:
        db = _effects()
        try:
            db.execute(
                "INSERT INTO calls VALUES (?, ?, ?, ?)",
                (ctx.key, node_id, os.getpid(), ctx.attempt),
            )
            db.execute("INSERT OR IGNORE INTO done VALUES (?, ?)", (ctx.key, os.getpid()))
        finally:
            db.close()
        if node_id == "s6":  # a step reaches the tools front door it was given
            assert TOOLS is not None
            await TOOLS.call("charge", {"amount": 5}, grants=ALL, key=f"{ctx.key}:charge")
        await trio.sleep(random.uniform(0.002, 0.02))
        return {node_id: ctx.key}

    return Step(id=node_id, fn=fn, writes=[node_id], join=node_id == "s5")


WORKFLOW = Workflow(
    name="ten",
    nodes=[_step(node_id) for node_id in NODES],
    edges=[
        Edge(source="s1", target="s2"),
        Edge(source="s2", target="s3"),
        Edge(source="s3", target="s4a"),
        Edge(source="s3", target="s4b"),
        Edge(source="s4a", target="s5"),
        Edge(source="s4b", target="s5"),
        Edge(source="s5", target="s6"),
        Edge(source="s6", target="s7"),
        Edge(source="s7", target="s8"),
        Edge(source="s8", target="s9"),
    ],
)

GROUP = ToolGroup(name="billing", tools=[charge], concurrency=2)
TOOLS: Tools | None = None
#: Short, so that a process resuming after a kill takes the dead one's leases soon.
LEASE_TTL = 0.5


async def main() -> None:
    journal_path, _, mode, *run_ids = sys.argv[1:]
    configure_logging(mode="json", level="info", stream=sys.stderr)  # stdout: the protocol
    db = _effects()
    db.executescript(EFFECTS_SCHEMA)
    db.close()
    spec = SupervisorSpec(children=list(tool_hosts(GROUP)))
    store: Any = journal_path
    leased = journal_path.startswith("host=")  # a PostgreSQL DSN: runs are leased
    if leased:
        from actors.journal.postgres import PostgresStore

        store = PostgresStore(journal_path)
    async with (
        open_journal(store, lease_ttl=LEASE_TTL) as journal,
        open_tree(spec, name="kill-child") as tree,
    ):
        global TOOLS
        TOOLS = await Tools.from_tree(tree, GROUP, grants=ALL)
        async with open_runs(tree, journal=journal, workflows=[WORKFLOW], runners=2) as runs:
            if mode == "start":
                started = [await runs.start(WORKFLOW, run_id=run_id) for run_id in run_ids]
            elif leased:
                # The killed process's leases run until they expire on the database's
                # clock; then this process takes its runs over (open_runs adopts them).
                with trio.fail_after(30):
                    while set(await journal.read(journal.store.unfinished)) - {
                        run.run_id for run in runs.resumed
                    }:
                        await trio.sleep(0.05)
                started = list(runs.resumed)
            else:
                started = list(runs.resumed)
            print("STARTED", len(started), flush=True)
            outcomes = [await run.wait() for run in started]
    statuses = sorted({outcome.status for outcome in outcomes})
    print("DONE", ",".join(statuses) or "-", flush=True)


if __name__ == "__main__":
    trio.run(main)
