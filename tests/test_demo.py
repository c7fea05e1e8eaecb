"""The demo daemon runs through the provider pool, exits 0, and its summary shows the
ledger, consistent with itself, with the budget and with the chaos server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "agent_daemon.py"

ATTEMPTS = re.compile(
    r"ledger attempts: +(\d+) \(ok (\d+), failed (\d+), partial (\d+), cancelled (\d+)\)"
)
TOKENS = re.compile(r"ledger tokens: +(\d+) \(input (\d+), output (\d+); budget charged (\d+)\)")
COST = re.compile(r"ledger cost: +\$(\d+\.\d+) \(budget charged \$(\d+\.\d+)\)")
BY_TARGET = re.compile(r"^ {4}(\w+)/([\w-]+): (\d+) attempts, (\d+) tokens, \$(\d+\.\d+)$", re.M)
HTTP = re.compile(r"HTTP requests: +(\d+)")
ELAPSED = re.compile(r"demo summary \((\d+\.\d) s\)")


def test_demo_runs_through_the_pool_and_summarises_its_ledger() -> None:
    # The checkout under test first on the path (an editable install may point elsewhere).
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(DEMO)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    # The fault script's story, in the logs.
    assert "retry.scheduled" in out and "source=header" in out  # 429 + Retry-After
    assert "alpha: closed -> open" in out  # the 503 burst
    assert "alpha: half_open -> closed" in out  # the probe after the cool-down
    assert "code=timeout" in out  # the hung alpha
    # The tools: lookup's backend hiccups, its own policy retries it (audited); the one
    # call of delete_notes is denied before it runs, and shown as the model would see it.
    assert re.search(r"tool\.retry .*attempt=1 code=resource_busy .*tool=lookup", out)
    assert re.search(r"demo\.tool +attempt=2 key=demo/ask/(\d+) request=\1 tool=lookup", out)
    assert re.search(r"demo\.tool_error +code=tool_denied .*retryable=False tool=delete_notes", out)
    assert "tool calls:          {'ok': 9, 'tool_denied': 1}, 2 retried" in out
    assert "alpha/alpha-large: closed -> open" in out  # model_not_found, per model
    assert "demo.streamed" in out  # the stream cut before its first event fell back
    assert re.search(r"demo\.stream_cut .*code=network .*partial_text='echo: ", out)
    assert "pool.escalated" in out
    assert "escalations:         ['retry by demo-oncall (rate_limited, 3 attempts)']" in out
    assert "'network': 1" in out  # the one request that failed: the stream cut mid-answer

    # The workflow runs: two complete (router, agent + tool, schema-checked llm node,
    # approval, step), the third is cancelled while its agent's model call is in flight.
    assert "runs:                {'completed': 2, 'cancelled': 1}" in out
    assert "filed:               ['T-101:bug', 'T-102:bug', None]" in out
    assert re.search(
        r"\[triage-101\] +4 tool:called +investigate search_tickets key=triage-101:investigate:1:0 -> ok",
        out,
    )
    assert re.search(r"\[triage-101\] +10 approval:decided +approve: approve by demo-operator", out)
    assert re.search(
        r"\[triage-103\] +4 run:cancelled +reason='operator: ticket withdrawn' in_flight=\['investigate'\]",
        out,
    )
    assert "model attempts:      7 (" in out

    elapsed = ELAPSED.search(out)
    assert elapsed is not None and float(elapsed[1]) < 30

    attempts = ATTEMPTS.search(out)
    assert attempts is not None, out[-3000:]
    total, ok, failed, partial, cancelled = map(int, attempts.groups())
    assert total == ok + failed + partial + cancelled
    assert ok >= 40 and failed >= 1 and partial == 1 and cancelled >= 1

    # Every request the chaos server saw came from an attempt in the ledger (an attempt
    # cancelled before it was sent would be the only one it did not see).
    http = HTTP.search(out)
    assert http is not None and 0 < int(http[1]) <= total

    tokens = TOKENS.search(out)
    assert tokens is not None
    all_tokens, input_tokens, output_tokens, budget_tokens = map(int, tokens.groups())
    assert all_tokens == input_tokens + output_tokens == budget_tokens > 0

    cost = COST.search(out)
    assert cost is not None
    assert float(cost[1]) == float(cost[2]) > 0

    targets = BY_TARGET.findall(out)
    assert {(provider, model) for provider, model, *_ in targets} == {
        ("alpha", "alpha-large"),
        ("alpha", "alpha-mini"),
        ("beta", "beta-sonnet"),
    }
    assert sum(int(row[2]) for row in targets) == total
    assert sum(int(row[3]) for row in targets) == all_tokens
    assert abs(sum(float(row[4]) for row in targets) - float(cost[1])) < 5e-6

    assert "sk-demo" not in out + done.stderr  # keys never reach the logs

    # Last, the daemon as a service: the end of its task file stops it gracefully, the
    # long task is interrupted resumably, and a restart on the journal finishes it.
    service = out[out.index("== the daemon as a service") :].splitlines()
    assert sorted(line for line in service if line.startswith("ended task-")) == [
        "ended task-1 completed",
        "ended task-2 completed",
        "ended task-3 completed",
        "ended task-4 completed",
        "ended task-4 interrupted",
    ]
    # The grace is 1 s (its end is what cut task-4); a loaded machine may take longer.
    shutdowns = [
        match
        for line in service
        if (
            match := re.fullmatch(
                r"shutdown \(eof\): 3 runs ended in the grace \(3 completed\), 1 interrupted"
                r" and resumable, (\d+\.\d\d) s",
                line,
            )
        )
    ]
    assert len(shutdowns) == 1 and float(shutdowns[0][1]) >= 1.0, service
    assert "resumed task-4" in service
    assert service[-1].startswith("shutdown (eof): ")
    assert "Traceback" not in done.stderr
