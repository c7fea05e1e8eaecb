"""A daemon's resume entry point, as ``python -m actors runs resume --app`` calls it (for
the CLI tests): the workflow, and ``resume(journal_path, run_id)`` which resumes the run,
approves what it waits for and returns its final status."""

from __future__ import annotations

from typing import Any

import trio

from actors import fail
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import Approval, Edge, NodeContext, Step, Workflow, open_journal, open_runs


async def _write(ctx: NodeContext) -> dict[str, Any]:
    return {ctx.node_id: ctx.key}


async def _broken(ctx: NodeContext) -> Any:
    return fail("tool_failed", "the ticket system is down")


GATED = Workflow(
    name="gated",
    nodes=[
        Step(id="a", fn=_write, writes=["a"]),
        Approval(id="ok", prompt="go on?"),
        Step(id="b", fn=_write, writes=["b"]),
    ],
    edges=[Edge(source="a", target="ok"), Edge(source="ok", target="b")],
)
BROKEN = Workflow(name="broken", nodes=[Step(id="x", fn=_broken)])


async def resume(journal_path: str, run_id: str) -> str:
    async with (
        open_journal(journal_path) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal, workflows=[GATED], resume=False) as runs,
    ):
        run = await runs.resume(run_id)
        while not run.done:
            if run.pending:
                run.decide("ok", "approve", by="cli-test")
            await trio.sleep(0.01)
        return (await run.wait()).status
