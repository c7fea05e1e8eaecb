"""The crash example of docs/journal.md runs as written: a process that dies while its
run waits for an approval, then a process that resumes it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _run(code: str, mode: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code, mode],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if not line.startswith("20")]


def test_the_crash_example_resumes_where_it_died(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "journal.md").read_text(encoding="utf-8")
    match = BLOCK.search(text, text.index("## An example that survives a crash"))
    assert match is not None
    assert _run(match[1], "start", tmp_path) == [
        "drafting with key refund-A-1:draft:1",
        "waiting for approval; the process dies",
    ]
    assert _run(match[1], "resume", tmp_path) == [
        "resumed refund-A-1 waiting for ('approve',)",
        "sending refund $20 with key refund-A-1:send:1",
        "completed {'order': 'A-1', 'draft': 'refund $20', 'sent': True}",
    ]
    assert (tmp_path / "refunds.journal").is_file()
