"""Every complete program in the docs runs as written.

A ``python`` code block of ``README.md`` or ``docs/*.md`` is a complete program when it
runs itself (``trio.run(``); the others are fragments. Each program runs in a process of
its own, in a scratch directory, with nothing on its standard input (and the command
lines ``ARGUMENTS`` gives, for a program that reads them), and must exit 0 without a
traceback. Blocks that are also files (``examples/minimal_daemon.py``) must
stay identical to them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
#: Blocks that are a file of the repository, kept equal to it.
COPIES = {"docs/daemon.md": "examples/minimal_daemon.py"}
#: The command lines of the programs that read ``sys.argv``, run one after the other in
#: one directory (the journal's crash example: a first process, then the one resuming).
ARGUMENTS = {"docs/journal.md": [["start"], ["resume"]]}


def _programs() -> list[tuple[str, int, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for index, match in enumerate(BLOCK.finditer(text)):
            if "trio.run(" in match[1]:
                found.append((str(path.relative_to(ROOT)), index, match[1]))
    return found


PROGRAMS = _programs()


def test_the_docs_have_complete_programs_and_the_copies_are_in_them() -> None:
    files = {file for file, _, _ in PROGRAMS}
    assert {"docs/daemon.md", "docs/index.md", "docs/journal.md", "docs/runs.md"} <= files
    for doc, example in COPIES.items():
        blocks = [code for file, _, code in PROGRAMS if file == doc]
        assert (ROOT / example).read_text(encoding="utf-8") in blocks, f"{doc} != {example}"


@pytest.mark.parametrize(
    ("file", "index", "code"), PROGRAMS, ids=[f"{f}#{i}" for f, i, _ in PROGRAMS]
)
def test_a_complete_program_of_the_docs_runs(
    tmp_path: Path, file: str, index: int, code: str
) -> None:
    for arguments in ARGUMENTS.get(file, [[]]) if "sys.argv" in code else [[]]:
        done = subprocess.run(
            [sys.executable, "-c", code, *arguments],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        assert done.returncode == 0, f"{file} block {index} {arguments}:\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr


def test_the_quickstart_prints_what_the_page_says(tmp_path: Path) -> None:
    (code,) = [code for file, _, code in PROGRAMS if file == "docs/index.md"]
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["hi", "2 attempts"]
    assert any("pool.attempt_failed" in line and "code=unavailable" in line for line in lines)
    assert any("retry.scheduled" in line for line in lines)
