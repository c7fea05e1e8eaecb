"""The layering rules hold on the real tree; the checker (tests/layering.py) catches each.

``actors/`` makes one attempt and classifies; ``supervisors/`` makes every decision. The
rules (R1, R2, R3, R4 and the own-package rule) are stated in :mod:`tests.layering`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.layering import (
    MAX_CYCLES,
    actors_importing_supervisors,
    cycle_violations,
    import_cycles,
    imports,
    module_graph,
    moved_names,
    own_package_imports,
    private_actors_imports,
    string_imports_of_supervisors,
    violations,
)

ROOT = Path(__file__).resolve().parent.parent


def _report(found: list[str]) -> str:
    return "\n" + "\n".join(found)


# --- the real tree --------------------------------------------------------------------


def test_the_scan_sees_the_real_tree() -> None:
    graph = module_graph(ROOT)
    assert {"actors.errors", "actors.runtime", "actors.observe"} <= graph["actors"]
    assert {"actors", "actors.lowlevel"} <= graph["supervisors.tree.open"]
    assert "actors.testing.chaos.server" in graph


def test_actors_never_import_supervisors() -> None:
    found = actors_importing_supervisors(imports(ROOT))
    assert found == [], _report(found)


def test_supervisors_import_only_public_actors_names() -> None:
    found = private_actors_imports(imports(ROOT), ROOT)
    assert found == [], _report(found)


def test_no_module_imports_its_own_package_init() -> None:
    found = own_package_imports(imports(ROOT), ROOT)
    assert found == [], _report(found)


def test_actors_name_supervisors_only_in_moved_tables() -> None:
    found = string_imports_of_supervisors(ROOT)
    assert found == [], _report(found)
    # The one table there is: the journal's decisions moved to supervisors.runs (issue 26).
    assert moved_names(ROOT) == {
        "actors.journal": {
            name: "supervisors.runs"
            for name in ("DELAYS", "LEASE_TTL", "THRESHOLD", "Journal", "Leases", "open_journal")
        }
    }


def test_no_import_cycles() -> None:
    found = cycle_violations(module_graph(ROOT))
    assert found == [], _report(found)


# --- the checker, on trees made to break the rules ------------------------------------

ACTORS_INIT = """
from actors.core import Thing, helper

__all__ = ["Thing", "helper"]
"""
LOWLEVEL = """
from actors.core import Slot

__all__ = ["Slot"]
"""
CORE = """
class Thing: ...
class Slot: ...
class Hidden: ...
def helper() -> None: ...
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    base = {
        "actors/__init__.py": ACTORS_INIT,
        "actors/core.py": CORE,
        "actors/lowlevel.py": LOWLEVEL,
        "supervisors/__init__.py": "",
    }
    for name, text in {**base, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_clean_tree_reports_nothing(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/providers/__init__.py": "from .http import Http\n__all__ = ['Http']\n",
            "actors/providers/http.py": "from actors import Thing\nclass Http: ...\n",
            "actors/testing/__init__.py": "from actors import core\n",
            "supervisors/__init__.py": "from supervisors.tree import Tree\n",
            "supervisors/tree.py": """
                import actors
                import actors.lowlevel
                from actors import *
                from actors import Thing, lowlevel
                from actors.lowlevel import Slot
                from actors.providers import Http
                from supervisors.state import Memory
                from . import state
                class Tree: ...
            """,
            "supervisors/state/__init__.py": "from .memory import Memory\n",
            "supervisors/state/memory.py": "from ..backoff import Backoff\nclass Memory: ...\n",
            "supervisors/backoff.py": "class Backoff: ...\n",
        },
    )
    assert violations(root) == []
    assert module_graph(root) == {
        "actors": {"actors.core"},
        "actors.core": set(),
        "actors.lowlevel": {"actors.core"},
        "actors.providers": {"actors.providers.http"},
        "actors.providers.http": {"actors"},
        "actors.testing": {"actors.core"},
        "supervisors": {"supervisors.tree"},
        "supervisors.backoff": set(),
        "supervisors.tree": {
            "actors",
            "actors.lowlevel",
            "actors.providers",
            "supervisors.state",
        },
        "supervisors.state": {"supervisors.state.memory"},
        "supervisors.state.memory": {"supervisors.backoff"},
    }


def test_a_name_the_package_binds_is_not_its_submodule(tmp_path: Path) -> None:
    # actors/__init__.py re-exports the function `classify`; there is also a module
    # actors/classify.py. `from actors import classify` gets the function, as Python does.
    root = _tree(
        tmp_path,
        {
            "actors/__init__.py": "from actors.errors import classify\n__all__ = ['classify']\n",
            "actors/errors.py": "def classify() -> None: ...\n",
            "actors/classify.py": "",
            "supervisors/retry.py": "from actors import classify\n",
        },
    )
    assert violations(root) == []
    assert module_graph(root)["supervisors.retry"] == {"actors"}


def test_r1_an_actors_module_importing_supervisors_anywhere(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/top.py": "import supervisors\n",
            "actors/inside.py": """
                def later() -> None:
                    from supervisors.policy import Policy
            """,
            "actors/typed.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from supervisors import Tree
            """,
            "actors/dotted.py": "import supervisors.state.memory as memory\n",
        },
    )
    assert violations(root) == [
        "R1 actors/dotted.py:1: actors.dotted imports supervisors.state.memory "
        "(actors/ never imports supervisors/)",
        "R1 actors/inside.py:3: actors.inside imports supervisors.policy "
        "(actors/ never imports supervisors/)",
        "R1 actors/top.py:1: actors.top imports supervisors (actors/ never imports supervisors/)",
        "R1 actors/typed.py:4: actors.typed imports supervisors "
        "(actors/ never imports supervisors/)",
    ]


def test_r2_a_supervisors_module_importing_a_private_actors_module(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/testing/__init__.py": "def capture() -> None: ...\n__all__ = ['capture']\n",
            "supervisors/sup.py": """
                import actors.core
                from actors import core
                from actors.core import Thing
                from actors.testing import capture

                def later() -> None:
                    from actors.gone import Nothing
            """,
        },
    )
    rule = (
        "which is not public (supervisors/ import from actors, actors.checks, actors.events, "
        "actors.journal, actors.lowlevel, actors.nodes, actors.providers, actors.tools only)"
    )
    assert violations(root) == [
        f"R2 supervisors/sup.py:2: supervisors.sup imports actors.core, {rule}",
        f"R2 supervisors/sup.py:3: supervisors.sup imports actors.core, {rule}",
        f"R2 supervisors/sup.py:4: supervisors.sup imports actors.core, {rule}",
        f"R2 supervisors/sup.py:5: supervisors.sup imports actors.testing, {rule}",
        f"R2 supervisors/sup.py:8: supervisors.sup imports actors.gone, {rule}",
    ]


def test_r2_a_supervisors_module_importing_a_name_not_in_all(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/providers/__init__.py": "from actors.providers.http import Http\n",
            "actors/providers/http.py": "class Http: ...\n",
            "supervisors/sup.py": """
                from actors import Hidden, Thing
                from actors.lowlevel import Slot, Thing as Other
                from actors.providers import Http
            """,
        },
    )
    assert violations(root) == [
        "R2 supervisors/sup.py:2: supervisors.sup imports Hidden from actors, "
        "which is not in actors.__all__",
        "R2 supervisors/sup.py:3: supervisors.sup imports Thing from actors.lowlevel, "
        "which is not in actors.lowlevel.__all__",
        "R2 supervisors/sup.py:4: supervisors.sup imports Http from actors.providers, "
        "which has no literal __all__",
    ]


def test_r3_a_two_module_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/errors.py": "from actors.classify import classify\n",
            "actors/classify.py": """
                def classify() -> None:
                    from actors.errors import normalize
            """,
        },
    )
    assert violations(root) == [
        "R3 import cycle: actors.classify -> actors.errors -> actors.classify"
    ]


def test_r3_a_three_module_cycle_through_type_checking_and_relative_imports(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/actor.py": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from actors.cell import Cell
            """,
            "actors/cell.py": "from . import runtime\n",
            "actors/runtime.py": "from .actor import Actor\n",
        },
    )
    assert violations(root) == [
        "R3 import cycle: actors.actor -> actors.cell -> actors.runtime -> actors.actor"
    ]


def test_r3_a_cycle_through_packages(tmp_path: Path) -> None:
    # actors.providers.http may use the actors package's public API only while the
    # actors package does not import actors.providers.
    root = _tree(
        tmp_path,
        {
            "actors/__init__.py": ACTORS_INIT + "from actors.providers import Http\n",
            "actors/providers/__init__.py": "from actors.providers.http import Http\n",
            "actors/providers/http.py": "from actors import Thing\n",
        },
    )
    assert violations(root) == [
        "R3 import cycle: actors -> actors.providers -> actors.providers.http -> actors"
    ]


def test_r3_importing_its_own_package_init_is_its_own_violation(tmp_path: Path) -> None:
    # actors/__init__.py imports actors.core; actors.core importing `actors` back is
    # reported as such, not as the cycle it would otherwise close.
    root = _tree(
        tmp_path,
        {
            "actors/core.py": CORE + "from actors import helper\n",
            "actors/lowlevel.py": LOWLEVEL + "import actors\n",
            "actors/testing/__init__.py": "",
            "actors/testing/chaos/__init__.py": "from .server import Server\n",
            "actors/testing/chaos/server.py": "from actors.testing.chaos import Fault\n",
        },
    )
    own = "import it from the module that defines it"
    assert violations(root) == [
        f"R3 actors/core.py:6: actors.core imports helper from its own package's "
        f"__init__ (actors); {own}",
        f"R3 actors/lowlevel.py:5: actors.lowlevel imports actors from its own package's "
        f"__init__ (actors); {own}",
        f"R3 actors/testing/chaos/server.py:1: actors.testing.chaos.server imports Fault "
        f"from its own package's __init__ (actors.testing.chaos); {own}",
    ]
    assert "actors" not in module_graph(root)["actors.core"]


def test_cycles_are_listed_once_each_and_capped() -> None:
    assert import_cycles({"b": {"a"}, "a": {"b", "c"}, "c": {"a"}}) == [
        ["a", "b", "a"],
        ["a", "c", "a"],
    ]
    everything = {n: {m for m in "abcdefgh" if m != n} for n in "abcdefgh"}
    found = cycle_violations(everything)
    assert len(found) == MAX_CYCLES + 1
    assert found[-1] == f"R3 stopped after {MAX_CYCLES} cycles"


# --- R4: the only strings in actors/ naming supervisors are _MOVED tables -------------

MOVED_INIT = """
import importlib
import warnings

_MOVED = {"Policy": "supervisors.policy", "Tree": "supervisors"}


def __getattr__(name):
    if name not in _MOVED:
        raise AttributeError(name)
    warnings.warn(f"use {_MOVED[name]}.{name}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(_MOVED[name]), name)
"""
SUPERVISORS = {
    "supervisors/__init__.py": "from supervisors.tree import Tree\n__all__ = ['Tree']\n",
    "supervisors/tree.py": "class Tree: ...\n",
    "supervisors/policy.py": "class Policy: ...\n__all__ = ['Policy']\n",
}


def test_r4_a_moved_table_and_its_getattr_are_fine(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**SUPERVISORS, "actors/old/__init__.py": MOVED_INIT})
    assert violations(root) == []
    assert moved_names(root) == {
        "actors.old": {"Policy": "supervisors.policy", "Tree": "supervisors"}
    }
    # Not an import statement: no edge, so no cycle through it.
    assert module_graph(root)["actors.old"] == set()


def test_r4_a_string_naming_supervisors_outside_a_table(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            **SUPERVISORS,
            "actors/sneaky.py": """
                import importlib

                WHERE = "supervisors.policy"
                \"\"\"A docstring that mentions supervisors.policy is prose, not a name.\"\"\"

                def load():
                    importlib.import_module("supervisors")
                    return __import__(WHERE)
            """,
            "actors/other.py": "_TABLE = {'Tree': 'supervisors'}\n",
        },
    )
    assert violations(root) == [
        "R4 actors/other.py:1: actors.other names supervisors in a string "
        "(actors/ may only in a _MOVED table)",
        "R4 actors/sneaky.py:4: actors.sneaky names supervisors.policy in a string "
        "(actors/ may only in a _MOVED table)",
        "R4 actors/sneaky.py:8: actors.sneaky names supervisors in a string "
        "(actors/ may only in a _MOVED table)",
    ]


def test_r4_a_table_must_be_literal_and_point_at_what_exports_the_name(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            **SUPERVISORS,
            "actors/a.py": "_MOVED = dict(Tree='supervisors')\n",
            "actors/b.py": """
                _MOVED = {
                    "Tree": "supervisors.tree",
                    "Gone": "supervisors.gone",
                    "Thing": "actors.core",
                    "Policy": "supervisors.policy",
                }
            """,
        },
    )
    assert violations(root) == [
        "R4 actors/a.py:1: _MOVED must be a literal dict of names to modules",
        "R4 actors/a.py:1: actors.a names supervisors in a string "
        "(actors/ may only in a _MOVED table)",
        "R4 actors/b.py:3: _MOVED sends Tree to supervisors.tree, "
        "which does not list it in supervisors.tree.__all__",
        "R4 actors/b.py:4: _MOVED sends Gone to supervisors.gone, "
        "which is not a module of supervisors",
        "R4 actors/b.py:5: _MOVED sends Thing to actors.core, which is not a module of supervisors",
    ]


def test_r4_a_table_entry_imported_outside_getattr(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            **SUPERVISORS,
            "actors/old/__init__.py": MOVED_INIT
            + "\ndef eager():\n    return importlib.import_module(_MOVED['Tree'])\n",
        },
    )
    assert violations(root) == [
        "R4 actors/old/__init__.py:15: actors.old imports a _MOVED entry outside its module "
        "__getattr__"
    ]
