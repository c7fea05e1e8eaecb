"""The shape of the house: one class per name, small modules.

* **One class per name** across ``actors/`` and ``supervisors/``: two classes of one
  name (two ``Run``, two ``Entry``) make every reader ask which one is meant, and a
  protocol and its implementation are named apart.
* **No module over** :data:`MAX_LINES` lines: a bigger one is two concerns.
* **Every ``# pragma: no mutate`` says why** its line's mutants are equivalent (text
  after ``no mutate:``) and is listed in docs/contributing.md's *Equivalent mutants*
  (by its module's path): a marking nobody can check is how a killable mutant hides.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "supervisors")
#: The most lines a module of the two packages may have.
MAX_LINES = 450
#: Modules still over :data:`MAX_LINES`, each to be split; the list may only shrink (a
#: module under the limit must leave it).
OVER_THE_LIMIT: frozenset[str] = frozenset()
#: Class names still defined twice, each to be renamed; the list may only shrink.
TWICE: frozenset[str] = frozenset()


def _modules() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def class_names(sources: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Class name -> the modules defining a class of that name (at any depth)."""
    found: dict[str, list[str]] = defaultdict(list)
    for module, tree in sources.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(module)
    return found


def repeated(sources: dict[str, ast.Module]) -> list[str]:
    """``Name: a.py, b.py`` for each class name defined more than once."""
    return [
        f"{name}: {', '.join(where)}"
        for name, where in sorted(class_names(sources).items())
        if len(where) > 1
    ]


def test_no_class_name_is_defined_twice() -> None:
    sources = {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
        for path in _modules()
    }
    found = repeated(sources)
    assert [line for line in found if line.split(":")[0] not in TWICE] == []
    assert {line.split(":")[0] for line in found} == TWICE, "a renamed class: shrink TWICE"


def test_the_name_check_sees_nested_and_private_classes() -> None:
    a = ast.parse("class Run: ...\nclass _Usage: ...\n")
    b = ast.parse("def f():\n    class Run: ...\nclass _Usage: ...\nclass Other: ...\n")
    assert repeated({"a.py": a, "b.py": b}) == ["Run: a.py, b.py", "_Usage: a.py, b.py"]


def test_no_module_is_over_the_line_limit() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert set(found) - OVER_THE_LIMIT == set(), found
    assert set(found) == OVER_THE_LIMIT, "a module got under the limit: shrink OVER_THE_LIMIT"


PRAGMA = re.compile(r"#\s*pragma: no mutate(?P<rest>.*)$")


def test_every_no_mutate_pragma_gives_its_reason_and_is_listed() -> None:
    listed = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    listed = listed[listed.index("### Equivalent mutants") :]
    unexplained, unlisted = [], []
    for path in _modules():
        relative = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = PRAGMA.search(line)
            if found is None:
                continue
            if not re.match(r":\s*\S.{8,}", found.group("rest")):
                unexplained.append(f"{relative}:{number}")
            if f"`{relative}`" not in listed:
                unlisted.append(relative)
    assert unexplained == []
    assert sorted(set(unlisted)) == []
