"""The demo daemon runs, exits 0, and shows retries, a breaker cycle and the summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "examples" / "agent_daemon.py"


def test_demo_runs_and_summarises() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "retry.scheduled" in out and "source=header" in out
    assert "alpha: closed -> open" in out
    assert "alpha: half_open -> closed" in out
    assert "tool: tool_failed -> restart" in out
    for line in (
        "requests:",
        "outcomes:",
        "HTTP attempts:",
        "retries scheduled:",
        "breaker transitions:",
        "tokens (all attempts, failed ones too):",
    ):
        assert line in out
    assert "sk-demo" not in out + done.stderr  # keys never reach the logs
