"""The layering rules of ``actors/`` and ``supervisors/``, checked on source text.

``actors/`` makes one attempt and classifies; ``supervisors/`` makes every decision. The
imports must say so. Nothing here imports the code it checks: every file is parsed with
:mod:`ast`, and every import statement counts wherever it is (module level, under ``if
TYPE_CHECKING:``, inside a function).

- **R1**: no module under ``actors/`` imports ``supervisors`` in any form.
- **R2**: modules under ``supervisors/`` import from ``actors`` only through
  :data:`PUBLIC_ACTORS_MODULES`, and only names in that module's literal ``__all__``
  (read from the target file). ``from actors import lowlevel`` imports a module and is
  checked as the module ``actors.lowlevel``; a star import takes ``__all__`` and is fine.
- **R3**: no import cycle among the modules of both packages. A node is a file, dotted
  (``actors/cell.py`` is ``actors.cell``, ``actors/__init__.py`` is ``actors``). An import
  is an edge to what it loads: ``import a.b`` to ``a.b``; ``from pkg import name`` to
  ``pkg`` when ``pkg/__init__.py`` binds ``name`` itself (as Python does, the package's
  attribute wins: ``from actors import classify`` is the function ``actors/__init__.py``
  re-exports, not the module ``actors/classify.py``), else to ``pkg.name`` when that is a
  module or subpackage file, else to ``pkg``. Relative imports are resolved; imports of
  anything outside the two packages are not edges.
- **R4**: ``actors/`` names ``supervisors`` in a string only in a ``_MOVED`` table —
  the one way a name that moved from ``actors`` to ``supervisors`` keeps working from
  its old place (with a ``DeprecationWarning``: a module-level ``__getattr__`` that does
  ``importlib.import_module(_MOVED[name])``). A table is a literal top-level dict of
  names to modules; each module must be one of ``supervisors`` whose literal ``__all__``
  has the name. Any other string that is a dotted name of ``supervisors`` in an
  ``actors`` module is a violation (it could only be there to be imported), and so is a
  dynamic import (``import_module``, ``__import__``) of a ``_MOVED`` entry anywhere but
  in the module's ``__getattr__``. A module name computed at run time is out of reach
  of a check on source text: write none.
- **Own package**: a submodule importing its own package's ``__init__`` (``actors/cell.py``
  doing ``from actors import X``) is reported on its own, and its edge left out of the
  cycle search: packages re-export from their submodules, so that edge would close a
  trivial cycle. A subpackage is its own package: ``actors/providers/http.py`` may import
  ``from actors import X``, and that edge is searched for cycles like any other.

Every violation is a line starting with its rule (``R1``, ``R2``, ``R3``, ``R4``), then
the file and line of the import where there is one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import attrs

PACKAGES = ("actors", "supervisors")
PUBLIC_ACTORS_MODULES = frozenset(
    {
        "actors",
        "actors.checks",
        "actors.events",
        "actors.lowlevel",
        "actors.nodes",
        "actors.providers",
        "actors.tools",
        "actors.journal",
    }
)
#: The table of names moved out of an ``actors`` module (R4).
MOVED_TABLE = "_MOVED"
#: The calls that import a module named by a string (R4).
DYNAMIC_IMPORTS = frozenset({"import_module", "__import__"})
# Past this many cycles the tree has a structural problem; listing more would not help.
MAX_CYCLES = 50


@attrs.frozen
class Import:
    """One name (or module) one import statement brings in.

    ``module`` is the absolute module the statement names (``from module import name``,
    ``import module``); ``name`` is ``None`` for ``import module``. ``target`` is the node
    it loads, ``None`` when outside the two packages (or not a file under ``root``).
    """

    source: str
    file: str
    line: int
    module: str
    name: str | None
    target: str | None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def loaded(self) -> str:
        """The module this import loads: ``module.name`` when it resolved to that file."""
        if self.name is not None and self.target == f"{self.module}.{self.name}":
            return self.target
        return self.module


def module_files(root: Path) -> dict[str, Path]:
    """Every module of both packages under ``root``, dotted name to file."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _own_package(module: str, path: Path) -> str:
    """The package whose ``__init__`` a module belongs to: itself for an ``__init__``."""
    return module if _is_package(path) else module.rpartition(".")[0]


def _absolute(source: str, path: Path, node: ast.ImportFrom) -> str | None:
    """The absolute module of a ``from`` import; ``None`` if it climbs out of the tree."""
    if node.level == 0:
        return node.module
    parts = _own_package(source, path).split(".")
    if node.level - 1 >= len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def bound_names(body: Iterable[ast.stmt]) -> set[str]:
    """The names a module's top level binds: imports, defs, classes, assignments.

    Statements under ``if``/``try``/``with`` count (they run at import); function and
    class bodies do not.
    """
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add(alias.asname or alias.name.partition(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.With):
            names |= bound_names(node.body)
            names |= bound_names(getattr(node, "orelse", []))
            names |= bound_names(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                names |= bound_names(handler.body)
    return names


def _package_bindings(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    return {
        module: bound_names(ast.parse(path.read_text(encoding="utf-8")).body)
        for module, path in modules.items()
        if _is_package(path)
    }


def _resolve(
    module: str, name: str | None, modules: Mapping[str, Path], bindings: Mapping[str, set[str]]
) -> str | None:
    """The node an import loads (see R3 in the module docstring), ``None`` outside."""
    submodule = f"{module}.{name}"
    if name is not None and name not in bindings.get(module, set()) and submodule in modules:
        return submodule
    return module if module in modules else None


def _imports_of(
    source: str,
    path: Path,
    root: Path,
    modules: Mapping[str, Path],
    bindings: Mapping[str, set[str]],
) -> Iterator[Import]:
    file = path.relative_to(root).as_posix()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=file)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, None, modules, bindings)
                yield Import(source, file, node.lineno, alias.name, None, target)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(source, path, node)
            if module is None:
                continue
            for alias in node.names:
                target = _resolve(module, alias.name, modules, bindings)
                yield Import(source, file, node.lineno, module, alias.name, target)


def imports(root: Path) -> list[Import]:
    """Every import in both packages, in file then line order."""
    modules = module_files(root)
    bindings = _package_bindings(modules)
    found = [i for m, p in modules.items() for i in _imports_of(m, p, root, modules, bindings)]
    return sorted(found, key=lambda i: (i.file, i.line, i.module, i.name or ""))


def _is_own_package_import(found: Import, modules: Mapping[str, Path]) -> bool:
    path = modules[found.source]
    return not _is_package(path) and found.target == _own_package(found.source, path)


def module_graph(root: Path) -> dict[str, set[str]]:
    """Each module to the modules it imports, own-package imports left out (see R3)."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for found in imports(root):
        if found.target is None or found.target == found.source:
            continue
        if not _is_own_package_import(found, modules):
            graph[found.source].add(found.target)
    return graph


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def actors_importing_supervisors(found: Iterable[Import]) -> list[str]:
    """R1."""
    return [
        f"R1 {i.where}: {i.source} imports {i.module} (actors/ never imports supervisors/)"
        for i in found
        if _in(i.source, "actors") and _in(i.module, "supervisors")
    ]


def literal_all(path: Path) -> frozenset[str] | None:
    """The names of a module's literal top-level ``__all__`` list or tuple, else ``None``."""
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            if not isinstance(value, ast.List | ast.Tuple):
                return None
            values = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            strings = [v for v in values if isinstance(v, str)]
            return frozenset(strings) if len(strings) == len(value.elts) else None
    return None


def private_actors_imports(found: Iterable[Import], root: Path) -> list[str]:
    """R2."""
    modules = module_files(root)
    problems = []
    for i in found:
        if not (_in(i.source, "supervisors") and _in(i.module, "actors")):
            continue
        loaded = i.loaded
        if loaded not in PUBLIC_ACTORS_MODULES:
            allowed = ", ".join(sorted(PUBLIC_ACTORS_MODULES))
            problems.append(
                f"R2 {i.where}: {i.source} imports {loaded}, which is not public "
                f"(supervisors/ import from {allowed} only)"
            )
            continue
        if i.name is None or i.name == "*" or loaded != i.module:
            continue  # a whole public module
        names = literal_all(modules.get(i.module, root / "missing"))
        if names is None:
            problems.append(
                f"R2 {i.where}: {i.source} imports {i.name} from {i.module}, "
                f"which has no literal __all__"
            )
        elif i.name not in names:
            problems.append(
                f"R2 {i.where}: {i.source} imports {i.name} from {i.module}, "
                f"which is not in {i.module}.__all__"
            )
    return problems


def _names_supervisors(value: object) -> bool:
    """``value`` is a string that is a dotted name in ``supervisors``."""
    return isinstance(value, str) and re.fullmatch(r"supervisors(\.\w+)*", value) is not None


def moved_table(tree: ast.Module) -> ast.Assign | None:
    """A module's top-level ``_MOVED = ...`` statement, if it has one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == MOVED_TABLE for t in node.targets
        ):
            return node
    return None


def moved_names(root: Path) -> dict[str, dict[str, str]]:
    """Each ``actors`` module with a literal ``_MOVED`` table -> its entries."""
    found = {}
    for source, path in module_files(root).items():
        table = moved_table(ast.parse(path.read_text(encoding="utf-8")))
        if _in(source, "actors") and table is not None and isinstance(table.value, ast.Dict):
            found[source] = {
                k.value: v.value
                for k, v in zip(table.value.keys, table.value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            }
    return found


def _table_problems(
    where: str, table: ast.Assign, modules: Mapping[str, Path]
) -> tuple[list[str], set[int]]:
    """R4 for one ``_MOVED`` table; the ids of its value nodes (the strings allowed)."""
    value = table.value
    entries = (
        list(zip(value.keys, value.values, strict=True)) if isinstance(value, ast.Dict) else []
    )
    if not isinstance(value, ast.Dict) or not all(
        isinstance(k, ast.Constant)
        and isinstance(k.value, str)
        and isinstance(v, ast.Constant)
        and isinstance(v.value, str)
        for k, v in entries
    ):
        return [
            f"R4 {where}:{table.lineno}: {MOVED_TABLE} must be a literal dict of names to modules"
        ], set()
    problems = []
    for key, target in entries:
        assert isinstance(key, ast.Constant) and isinstance(target, ast.Constant)
        name, module = key.value, target.value
        if not (_names_supervisors(module) and module in modules):
            problems.append(
                f"R4 {where}:{target.lineno}: {MOVED_TABLE} sends {name} to {module}, "
                "which is not a module of supervisors"
            )
        elif name not in (literal_all(modules[module]) or ()):
            problems.append(
                f"R4 {where}:{target.lineno}: {MOVED_TABLE} sends {name} to {module}, "
                f"which does not list it in {module}.__all__"
            )
    return problems, {id(v) for _, v in entries}


def _is_dynamic_import(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name in DYNAMIC_IMPORTS


def _reads_table(node: ast.Call) -> bool:
    return any(
        isinstance(a, ast.Subscript) and isinstance(a.value, ast.Name) and a.value.id == MOVED_TABLE
        for a in node.args
    )


def string_imports_of_supervisors(root: Path) -> list[str]:
    """R4."""
    modules = module_files(root)
    problems = []
    for source, path in modules.items():
        if not _in(source, "actors"):
            continue
        where = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
        table = moved_table(tree)
        allowed: set[int] = set()
        if table is not None:
            found, allowed = _table_problems(where, table, modules)
            problems += found
        getattr_calls = {
            id(call)
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for call in ast.walk(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and _names_supervisors(node.value):
                if id(node) not in allowed:
                    problems.append(
                        f"R4 {where}:{node.lineno}: {source} names {node.value} in a string "
                        f"(actors/ may only in a {MOVED_TABLE} table)"
                    )
            elif _is_dynamic_import(node) and id(node) not in getattr_calls:
                assert isinstance(node, ast.Call)
                if _reads_table(node):
                    problems.append(
                        f"R4 {where}:{node.lineno}: {source} imports a {MOVED_TABLE} entry "
                        "outside its module __getattr__"
                    )
    return sorted(problems)


def own_package_imports(found: Iterable[Import], root: Path) -> list[str]:
    """Submodules importing their own package's ``__init__`` (see the module docstring)."""
    modules = module_files(root)
    return [
        f"R3 {i.where}: {i.source} imports {i.name or i.module} from its own package's "
        f"__init__ ({i.target}); import it from the module that defines it"
        for i in found
        if _is_own_package_import(i, modules)
    ]


def import_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every elementary cycle once (at most :data:`MAX_CYCLES`), as a closed path.

    Each cycle starts and ends at its alphabetically first module; cycles come in order
    of that module, then of the path.
    """
    cycles: list[list[str]] = []

    def walk(start: str, path: list[str]) -> None:
        for following in sorted(graph.get(path[-1], ())):
            if len(cycles) >= MAX_CYCLES:
                return
            if following == start:
                cycles.append([*path, start])
            elif following > start and following not in path:
                walk(start, [*path, following])

    for start in sorted(graph):
        walk(start, [start])
    return cycles


def cycle_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """R3, one line a cycle: ``R3 import cycle: a -> b -> a``."""
    cycles = import_cycles(graph)
    lines = [f"R3 import cycle: {' -> '.join(cycle)}" for cycle in cycles]
    if len(cycles) >= MAX_CYCLES:
        lines.append(f"R3 stopped after {MAX_CYCLES} cycles")
    return lines


def violations(root: Path) -> list[str]:
    """Every violation of every rule in the tree under ``root``: R1, R2, own package, R3,
    R4."""
    found = imports(root)
    return [
        *actors_importing_supervisors(found),
        *private_actors_imports(found, root),
        *own_package_imports(found, root),
        *cycle_violations(module_graph(root)),
        *string_imports_of_supervisors(root),
    ]


def layers(graph: Mapping[str, Iterable[str]]) -> dict[str, int]:
    """Each module's layer: 0 for a module importing nothing of the two packages, else one
    more than the highest layer it imports (defined only for an acyclic graph)."""
    found: dict[str, int] = {}

    def layer(module: str, path: tuple[str, ...]) -> int:
        if module in path:
            raise ValueError("import cycle: " + " -> ".join((*path, module)))
        if module not in found:
            deps = [layer(dep, (*path, module)) for dep in graph.get(module, ())]
            found[module] = 1 + max(deps) if deps else 0
        return found[module]

    for module in graph:
        layer(module, ())
    return found


def graph_text(graph: Mapping[str, Iterable[str]]) -> str:
    """The import graph as text for docs/architecture.md: one line per module, leaves
    first (by layer, then name), each with what it imports of the two packages."""
    by_layer = layers(graph)
    lines = []
    for module in sorted(graph, key=lambda m: (by_layer[m], m)):
        deps = ", ".join(sorted(graph[module])) or "-"
        lines.append(f"{by_layer[module]:>2}  {module:<28} -> {deps}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(graph_text(module_graph(Path(__file__).resolve().parent.parent)))
