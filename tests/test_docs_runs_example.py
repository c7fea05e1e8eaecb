"""The end-to-end example of docs/runs.md runs as written (a complete program, in a
process of its own, against the chaos server on loopback)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_the_end_to_end_example_runs_and_prints_its_stream() -> None:
    text = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    match = BLOCK.search(text, text.index("## An end-to-end example"))
    assert match is not None
    done = subprocess.run(
        [sys.executable, "-c", match[1]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if not line.startswith("20")]
    assert lines[0] == "0 run:started "
    assert "tool:called investigate" in "\n".join(lines)
    assert any(line.endswith("approval:requested approve") for line in lines)
    assert lines[-3].endswith("run:completed ")
    assert lines[-2:] == ["completed bug", "cancelled nobody is around"]


@pytest.mark.trio
async def test_the_readme_runs_example_runs(autojump_clock: Any) -> None:
    from tests.test_docs_tools_example import run_first_block

    found = await run_first_block("README.md", "## Runs")
    assert found["outcome"].status == "completed"
    assert found["names"] == [
        "run:started",
        "node:started",
        "node:completed",
        "node:started",
        "node:completed",
        "run:completed",
    ]
