"""Every event is a typed record: library code emits through ``actors.events``, only.

No module of ``actors/`` or ``supervisors/`` outside :data:`ALLOWED` (the one sink) may
call a structlog logger method itself. Checked on source text with :mod:`ast`, nothing
imported. What counts as a direct call — kept simple and precise rather than clever:

- a *logger* is a name bound at module level (``_log = ...`` or ``_log: T = ...``) to a
  call of ``get_logger(...)`` or ``<anything>.get_logger(...)`` (``structlog.get_logger``,
  ``observe.get_logger``);
- a *direct call* is ``<logger>.<method>(...)`` for a method in :data:`METHODS`,
  anywhere in that module (functions and methods included).

Not seen, on purpose: a logger reached another way (``get_logger(...).info(...)``, an
attribute ``self._log``, a ``get_logger`` imported under another name, a local
rebinding), and methods outside :data:`METHODS`.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

ALLOWED = {"actors/observe.py"}  # emit()'s structlog sink
METHODS = frozenset({"info", "warning", "error", "debug", "exception", "critical", "msg", "log"})
PACKAGES = ("actors", "supervisors")
ROOT = Path(__file__).resolve().parent.parent


def _is_get_logger_call(value: ast.expr | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    return (isinstance(func, ast.Name) and func.id == "get_logger") or (
        isinstance(func, ast.Attribute) and func.attr == "get_logger"
    )


def module_loggers(tree: ast.Module) -> set[str]:
    """The names the module's top level binds to ``get_logger(...)``."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and _is_get_logger_call(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and _is_get_logger_call(node.value)
        ):
            names.add(node.target.id)
    return names


def direct_calls(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``(line, "logger.method(first argument, ...)")`` for each direct logger call."""
    loggers = module_loggers(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func = node.func
        if func.attr in METHODS and isinstance(func.value, ast.Name) and func.value.id in loggers:
            first = ast.unparse(node.args[0]) if node.args else ""
            more = ", ..." if len(node.args) > 1 or node.keywords else ""
            yield node.lineno, f"{func.value.id}.{func.attr}({first}{more})"


def lint(root: Path, allowed: set[str] = ALLOWED) -> list[str]:
    """``file:line: call`` for each direct logger call outside ``allowed``, in file order."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            file = path.relative_to(root).as_posix()
            if file in allowed:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=file)
            found += [f"{file}:{line}: {call}" for line, call in sorted(direct_calls(tree))]
    return found


# --- the real tree --------------------------------------------------------------------


def test_the_scan_sees_a_logger_added_to_a_real_module(tmp_path: Path) -> None:
    """The real tree has no direct calls left; prove the scan would see one there."""
    source = (ROOT / "actors/runtime.py").read_text(encoding="utf-8")
    source += '\n_log = get_logger("x")\n\n\ndef _probe() -> None:\n    _log.info("x.y")\n'
    root = _tree(tmp_path, {"actors/runtime.py": source})
    assert [line.split(":")[0] for line in lint(root)] == ["actors/runtime.py"]


def test_library_code_emits_only_typed_records() -> None:
    found = lint(ROOT)
    assert found == [], f"{len(found)} direct logger calls (emit a typed record):\n" + "\n".join(
        found
    )


# --- the lint, on trees made to break the rule ----------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_direct_calls_on_module_loggers_are_reported(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/cell.py": """
                from typing import Any
                import structlog
                from actors.observe import get_logger, EventName

                _log = get_logger("actors.cell")
                _raw: Any = structlog.get_logger()

                def crash() -> None:
                    _log.warning(EventName.ACTOR_CRASHED, actor="a")
                    _raw.msg("plain")

                class Cell:
                    def stop(self) -> None:
                        _log.debug("actor.stopped", reason="done")
            """,
            "supervisors/resilience/retry.py": """
                from actors import get_logger
                _log = log = get_logger("supervisors.resilience.retry")
                log.info("retry.scheduled")
                _log.error("e"); _log.exception("x"); _log.critical("c"); _log.log(10, "l")
            """,
            "supervisors/state/memory.py": """
                from actors import get_logger
                _log = get_logger("supervisors.state")
                async def f() -> None:
                    _log.info("deep")
            """,
        },
    )
    assert lint(root) == [
        "actors/cell.py:10: _log.warning(EventName.ACTOR_CRASHED, ...)",
        "actors/cell.py:11: _raw.msg('plain')",
        "actors/cell.py:15: _log.debug('actor.stopped', ...)",
        "supervisors/resilience/retry.py:4: log.info('retry.scheduled')",
        "supervisors/resilience/retry.py:5: _log.critical('c')",
        "supervisors/resilience/retry.py:5: _log.error('e')",
        "supervisors/resilience/retry.py:5: _log.exception('x')",
        "supervisors/resilience/retry.py:5: _log.log(10, ...)",
        "supervisors/state/memory.py:5: _log.info('deep')",
    ]


def test_the_sink_other_objects_and_other_methods_are_not_reported(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/events.py": """
                from actors.observe import get_logger
                _log = get_logger("actors.events")
                def emit(record: object) -> None:
                    _log.info("event", record=record)
            """,
            "actors/observe.py": """
                import structlog
                _log = structlog.get_logger()
                _log.warning("sink")
            """,
            "actors/other.py": """
                import logging
                from actors.observe import get_logger
                _std = logging.getLogger("x")
                _log = get_logger("actors.other")
                _std.info("stdlib logger: not structlog")
                _log.bind(actor="a")
                _log.is_enabled_for(10)

                def local() -> None:
                    _inner = get_logger("inside")
                    _inner.info("not a module-level logger")
            """,
            "examples/demo.py": """
                from actors import get_logger
                _log = get_logger("demo")
                _log.info("outside the library")
            """,
        },
    )
    sinks = {"actors/events.py", "actors/observe.py"}
    assert lint(root, allowed=sinks) == []
    assert lint(root, allowed=set()) == [
        "actors/events.py:5: _log.info('event', ...)",
        "actors/observe.py:4: _log.warning('sink')",
    ]
