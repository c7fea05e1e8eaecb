"""The tools examples of docs/tools.md and README.md run as written (on virtual time)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from trio.testing import MockClock

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


async def run_first_block(doc: str, heading: str) -> dict[str, Any]:
    """Run the first python block after ``heading`` in ``doc`` (its imports at the top,
    the rest as an async function's body); its locals."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    match = BLOCK.search(text, text.index(heading))
    assert match is not None
    source = match[1]
    imports = "\n".join(line for line in source.splitlines() if line.startswith("from "))
    body = "\n".join(line for line in source.splitlines() if not line.startswith("from "))
    code = (
        f"{imports}\nasync def example():\n{textwrap.indent(body, '    ')}\n    return locals()\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(code, f"<{doc}>", "exec"), namespace)
    found: dict[str, Any] = await namespace["example"]()
    return found


async def test_the_tools_example_runs(autojump_clock: MockClock) -> None:
    found = await run_first_block("docs/tools.md", "# Tools")
    assert found["result"].errors[0].code == "network"
    assert found["total"].value == 5


async def test_the_readme_tools_example_runs(autojump_clock: MockClock) -> None:
    found = await run_first_block("README.md", "## Tools")
    assert found["result"].value == 5
