"""The smallest useful daemon (docs/daemon.md): each line on stdin is a journalled run."""

import os
import sys

import trio

from actors import ActorError
from supervisors import SupervisorSpec, open_daemon, open_tree
from supervisors.runs import NodeContext, Run, Runs, Step, Workflow, open_journal, open_runs


async def shout(ctx: NodeContext) -> dict[str, str]:
    await trio.sleep(1)  # the work
    return {"answer": ctx.state["text"].upper()}


FLOW = Workflow(name="shout", nodes=[Step(id="shout", fn=shout, writes=["answer"])])


async def report(run: Run) -> None:
    outcome = await run.wait()
    print(run.run_id, outcome.status, outcome.state.get("answer", "-"), flush=True)


async def start(runs: Runs, nursery: trio.Nursery, line: bytes) -> None:
    text = line.decode(errors="replace").strip()
    try:
        nursery.start_soon(report, await runs.start(FLOW, {"text": text}))
    except ActorError as error:  # e.g. actor_stopped: a line that came during a shutdown
        print("refused", repr(text), error.code, flush=True)


async def main() -> None:
    async with (
        open_daemon(grace=5) as daemon,
        open_journal("shout.journal") as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal, workflows=[FLOW]) as runs,
        trio.open_nursery() as nursery,
        trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin,
    ):
        for run in runs.resumed:  # the runs the last shutdown interrupted
            nursery.start_soon(report, run)

        async def intake() -> None:
            pending = b""
            async for chunk in stdin:
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    await start(runs, nursery, line)
            if pending:  # a last line without its newline
                await start(runs, nursery, pending)
            if not daemon.stopping.is_set():  # end of input during a shutdown changes nothing
                daemon.stop("eof")

        nursery.start_soon(intake)
        summary = await daemon.serve(runs)
        nursery.cancel_scope.cancel()
    print(summary.line())


if __name__ == "__main__":
    trio.run(main)
