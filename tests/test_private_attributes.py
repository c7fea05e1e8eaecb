"""No module reaches into another module's private attributes.

A name with a leading underscore (``obj._name``, not a dunder) belongs to the module
whose class defines it (``self._name = …`` or ``def _name``, in a class that is not a
``Protocol``). Any other module that reads or writes it through an object — a run's
``_cancel`` from the shutdown, a store's ``_recover`` from its opener — is a second owner
of that state: the decision it stands for then lives in two places. Ask the owning class
for a method instead.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "supervisors")


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).endswith("Protocol") for base in node.bases)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def owners(sources: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Private attribute name -> the modules whose (non-protocol) classes define it."""
    found: dict[str, set[str]] = defaultdict(set)
    for module, tree in sources.items():
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef) or _is_protocol(cls):
                continue
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
                    found[node.name].add(module)
                elif (
                    isinstance(node, ast.Attribute)
                    and _private(node.attr)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls")
                ):
                    found[node.attr].add(module)
            for stmt in cls.body:  # class-level declarations (attrs fields, slots)
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and _private(stmt.target.id)
                ):
                    found[stmt.target.id].add(module)
    return found


def foreign_uses(sources: dict[str, ast.Module]) -> list[str]:
    """``module:line expr`` for each ``obj._name`` used outside the modules owning it
    (names no class of the two packages defines — a foreign library's — are not ours)."""
    owned = owners(sources)
    found = []
    for module, tree in sources.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            where = owned.get(node.attr)
            if where and module not in where:
                found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return found


def _sources(root: Path) -> dict[str, ast.Module]:
    return {
        str(path.relative_to(root)): ast.parse(path.read_text(encoding="utf-8"))
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
    }


def test_no_module_uses_another_modules_private_attributes() -> None:
    found = foreign_uses(_sources(ROOT))
    assert found == [], "\n" + "\n".join(found)


def test_the_check_catches_a_write_and_a_read() -> None:
    owner = ast.parse("class Run:\n    def __init__(self):\n        self._cancel = None\n")
    other = ast.parse("def stop(run):\n    run._cancel = print\n    return run._cancel\n")
    own = ast.parse("def make(run):\n    run._cancel = 1\nclass Run:\n    _cancel: int\n")
    assert foreign_uses({"a.py": owner, "b.py": other, "c.py": own}) == [
        "b.py:2 run._cancel",
        "b.py:3 run._cancel",
    ]


def test_a_protocol_does_not_make_its_module_an_owner() -> None:
    owner = ast.parse("class Runs:\n    def _plan(self):\n        return 1\n")
    seen = ast.parse(
        "from typing import Protocol\n"
        "class Host(Protocol):\n    def _plan(self): ...\n"
        "def use(runs):\n    return runs._plan()\n"
    )
    assert foreign_uses({"a.py": owner, "b.py": seen}) == ["b.py:5 runs._plan"]
