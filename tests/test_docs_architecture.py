"""docs/architecture.md stays true: its import graph is the code's, its modules exist."""

from __future__ import annotations

import re
from pathlib import Path

from tests.layering import graph_text, module_graph

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_import_graph_block_is_the_codes() -> None:
    block = re.search(r"```\n( 0  .*?)\n```", DOC, flags=re.S)
    assert block is not None, "docs/architecture.md has no import graph block"
    assert block.group(1) == graph_text(module_graph(ROOT)), (
        "the import graph changed: paste `python -m tests.layering` into docs/architecture.md"
    )


def test_every_module_the_package_maps_name_exists() -> None:
    """Each `name` in the package maps' module column is a module of that package."""
    modules = set(module_graph(ROOT))
    missing = []
    for package in ("actors", "supervisors"):
        section = DOC.split(f"### `{package}/`")[1].split("\n### ")[0].split("\n## ")[0]
        for row in section.splitlines():
            cells = row.split("|")
            if len(cells) < 4 or cells[1].strip() in {"part", "---"}:
                continue
            named = re.sub(r"\([^)]*\)", "", cells[2])  # what parentheses hold is not a module
            for name in re.findall(r"`([a-z_]+)/?`", named):
                if not any(m.split(".")[-1] == name for m in modules):
                    missing.append(f"{package}: {name}")
    assert missing == []
