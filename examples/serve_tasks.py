"""The agent daemon as a service: ``python examples/agent_daemon.py serve``.

Tasks come on standard input (or from the file ``--tasks``), one per line: a JSON
object ``{"id": "t1", "question": "...", "work": 2.5}`` (``id`` and ``work`` optional)
or a plain line (the question).
Each task is a run of the ``answer-task`` workflow — an agent that may call the
``search_tickets`` tool, through a provider pool (alpha, then beta) against the
embedded chaos provider with a random fault mix, then a ``work`` step that takes the
task's ``work`` seconds (a stand-in for what the daemon does with the answer) — under
one supervisor tree, with every run journalled in ``--journal`` (SQLite).

Output: one line per event on stdout (``ready``, ``resumed``, ``started``, ``ended``),
then the shutdown's summary line; structured logs (warnings and up, JSON) on stderr.

Stopping: ``SIGTERM`` or ``SIGINT`` (Ctrl-C) — intake stops, the runs in flight get
``--grace`` seconds, the rest are cancelled *resumable* (journalled as cancelled), the
tree and the journal close, and the process exits 0 after the summary line; a second
signal ends the grace at once. End of input does the same (reason ``eof``): ``echo task |
agent_daemon.py serve`` runs the task and exits. A daemon started on the same journal
resumes the runs a shutdown interrupted (their ``work`` runs again; ``--max-work`` caps
it, e.g. to finish them at once).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import uuid
from typing import Any

import trio
from demo_workflows import TICKET_TOOLS

from actors import ActorError, Metrics, configure_logging, serve_metrics
from actors.providers import AnthropicProvider, OpenAIProvider, ProviderConfig
from actors.testing.chaos import FaultScript, chaos_server
from actors.tools import Grants
from supervisors import (
    Backoff,
    ChildSpec,
    Daemon,
    ProviderPool,
    Resilience,
    RetryPolicy,
    SupervisorSpec,
    Target,
    Tools,
    open_daemon,
    open_tree,
    tool_hosts,
)
from supervisors.runs import (
    Agent,
    Edge,
    NodeContext,
    Run,
    Runs,
    Step,
    Workflow,
    open_journal,
    open_runs,
)

#: The chaos provider's fault mix: the chance of each fault on any request.
FAULTS: dict[Any, float] = {"status": 0.15, "reset_before": 0.05, "malformed_json": 0.05}
#: Retries of a failed attempt: quick, for a demo (production would wait longer).
RETRY = RetryPolicy(max_attempts=4, backoff=Backoff(initial=0.05, factor=2, max=0.5, jitter=0.1))


def answer_task(max_work: float) -> Workflow:
    """The workflow every task runs (its shape is journalled: keep it stable)."""

    async def work(ctx: NodeContext) -> dict[str, Any]:
        print(f"working {ctx.run_id}", flush=True)
        await trio.sleep(min(float(ctx.state.get("work", 0.0)), max_work))
        return {"done": ctx.key}

    return Workflow(
        name="answer-task",
        nodes=[
            Agent(
                id="answer",
                model="alpha-mini",
                messages=[("system", "You answer tasks."), ("user", "call: {question}")],
                grants=Grants.allow("search_tickets"),
                max_turns=4,
                output="answer",
            ),
            Step(id="work", fn=work, writes=["done"]),
        ],
        edges=[Edge(source="answer", target="work")],
    )


def parse_task(line: str) -> tuple[str, dict[str, Any]] | None:
    """A task's run id and inputs from one input line (``None``: a blank line)."""
    text = line.strip()
    if not text:
        return None
    if text.startswith("{"):
        data = json.loads(text)
        work = data.get("work", 0) if isinstance(data, dict) else None
        if isinstance(work, bool) or not isinstance(work, int | float) or not work >= 0:
            raise ValueError("a task is an object whose work is seconds >= 0")
        task_id = str(data.get("id") or f"task-{uuid.uuid4().hex[:8]}")
        return task_id, {"question": str(data.get("question", "")), "work": work}
    return f"task-{uuid.uuid4().hex[:8]}", {"question": text, "work": 0}


async def report(run: Run) -> None:
    outcome = await run.wait()
    code = f" {outcome.error.code}" if outcome.error is not None else ""
    print(f"ended {run.run_id} {outcome.status}{code}", flush=True)


async def intake(
    runs: Runs, workflow: Workflow, nursery: trio.Nursery, daemon: Daemon, source: str | None
) -> None:
    """Start a run per input line — of the file ``source``, or of stdin — until end of
    input (then stop the daemon: ``eof``)."""
    try:
        if source is not None:
            fd = os.open(source, os.O_RDONLY)
        elif sys.stdin is None:  # started with its stdin closed (<&-): no tasks
            fd = os.open(os.devnull, os.O_RDONLY)
        else:
            fd = os.dup(sys.stdin.fileno())
    except OSError as exc:  # the file cannot be read: no tasks
        print(f"no input: {exc.strerror}", flush=True)
        fd = os.open(os.devnull, os.O_RDONLY)
    stream = trio.lowlevel.FdStream(fd)
    buffer = b""
    async with stream:
        while chunk := await stream.receive_some():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                await start(runs, workflow, nursery, line)
    if buffer:
        await start(runs, workflow, nursery, buffer)
    if not daemon.stopping.is_set():  # after a signal, end of input changes nothing
        daemon.stop("eof")


async def start(runs: Runs, workflow: Workflow, nursery: trio.Nursery, line: bytes) -> None:
    try:
        task = parse_task(line.decode())
    except ValueError as exc:  # not JSON, not a task, or not UTF-8
        shown = line.decode(errors="replace").strip()[:60]
        print(f"refused {shown!r}: {exc}", flush=True)
        return
    if task is None:
        return
    run_id, inputs = task
    try:
        run = await runs.start(workflow, inputs, run_id=run_id)
    except ActorError as error:  # a repeated id, a bad id, the daemon stopping
        print(f"refused {run_id!r}: {error.code}", flush=True)
        return
    print(f"started {run_id}", flush=True)
    nursery.start_soon(report, run)


def provider(name: str, url: str) -> ProviderConfig:
    return ProviderConfig(name=name, base_url=url, api_key=f"sk-{name}-demo", read_timeout=2.0)


async def serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agent_daemon.py serve", description=__doc__)
    parser.add_argument("--journal", default="runs.journal", help="the SQLite journal file")
    parser.add_argument("--grace", type=float, default=10.0, help="seconds for runs in flight")
    parser.add_argument("--max-work", type=float, default=3600.0, help="cap on a task's work")
    parser.add_argument("--seed", type=int, default=0, help="the fault mix's random seed")
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics here")
    parser.add_argument("--tasks", help="read the tasks from this file instead of stdin")
    options = parser.parse_args(argv)
    if not options.grace >= 0:  # NaN, negative: argparse takes any float
        parser.error(f"--grace must be seconds >= 0, got {options.grace}")
    if options.tasks is not None and not await trio.Path(options.tasks).is_file():
        parser.error(f"--tasks {options.tasks!r} is not a file")
    configure_logging(mode="json", level="warning", stream=sys.stderr)
    workflow = answer_task(options.max_work)
    script = FaultScript(probabilities=FAULTS, seed=options.seed)
    metrics = contextlib.ExitStack()
    if options.metrics_port is not None:  # extra "prometheus"
        counted = Metrics()
        metrics.callback(counted.install())
        url = metrics.enter_context(serve_metrics(counted, port=options.metrics_port))
        print(f"metrics {url}", flush=True)
    with metrics:
        return await _serve(options, workflow, script)


async def announce(daemon: Daemon) -> None:
    """Say when the shutdown starts: the runs in flight have the grace from now."""
    await daemon.stopping.wait()
    print(f"stopping ({daemon.reason}) grace={daemon.grace:g}s", flush=True)


async def _serve(options: argparse.Namespace, workflow: Workflow, script: FaultScript) -> int:
    async with open_daemon(grace=options.grace) as daemon, chaos_server(script) as server:
        spec = SupervisorSpec(
            max_restarts=10,
            period=10,
            children=[
                ChildSpec(id="alpha", actor=OpenAIProvider, args=(provider("alpha", server.url),)),
                ChildSpec(id="beta", actor=AnthropicProvider, args=(provider("beta", server.url),)),
                *tool_hosts(TICKET_TOOLS),
            ],
        )
        async with open_journal(options.journal) as journal, open_tree(spec) as tree:
            pool = ProviderPool(
                [
                    Target(ref=tree.ref("alpha"), provider="alpha", model="alpha-mini"),
                    Target(ref=tree.ref("beta"), provider="beta", model="beta-sonnet"),
                ],
                resilience=Resilience(retry=RETRY),
                name="tasks",
            )
            tools = await Tools.from_tree(tree, TICKET_TOOLS)
            async with (
                open_runs(
                    tree, pools=pool, tools=tools, journal=journal, workflows=[workflow]
                ) as runs,
                trio.open_nursery() as reports,
            ):
                print(f"ready journal={options.journal} grace={options.grace:g}s", flush=True)
                for run in runs.resumed:
                    print(f"resumed {run.run_id}", flush=True)
                    reports.start_soon(report, run)
                async with trio.open_nursery() as tasks:
                    tasks.start_soon(intake, runs, workflow, reports, daemon, options.tasks)
                    tasks.start_soon(announce, daemon)
                    summary = await daemon.serve(runs)
                    tasks.cancel_scope.cancel(reason="daemon stopping")
    print(summary.line(), flush=True)
    return 0
