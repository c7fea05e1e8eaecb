"""Mutation testing of one module against the tests that exercise it (``make mutate``).

Usage, from the repository root::

    python -m tests.mutation actors/mailbox.py            # or: make mutate MODULE=...
    python -m tests.mutation actors/mailbox.py --show     # also print each survivor's diff
    python -m tests.mutation actors/mailbox.py --keep     # keep the scratch copy afterwards

What it does:

1. copies the files git knows about (tracked, plus untracked ones that are not ignored,
   so a new test file counts before it is committed) into a fresh scratch directory
   under ``$MUTATE_DIR`` (default ``/tmp/mutate``) — the working tree is never mutated;
2. writes a ``setup.cfg`` ``[mutmut]`` section there: mutate only ``MODULE``, run only its
   row of :data:`TESTS_BY_MODULE`;
3. runs ``mutmut run --max-children N`` (``--max-children``, default 2) and
   ``mutmut results --all true``;
4. prints ``killed/total (pct)`` for the module and the names of the survivors.

mutmut 3 mutates function bodies only (module-level constants and class attribute
defaults are not mutated: pin those with plain tests). Timeouts count as killed (the
mutant made a test hang, which a test run reports). A line whose mutants cannot change
behaviour carries ``# pragma: no mutate`` with the reason in the same comment; mutmut
then makes no mutant of it (see docs/contributing.md).

Exit status: 0 when mutmut ran, whatever the score (survivors are information, not a
failure); 2 for a module not in the table or a missing test file; mutmut's own status
when mutmut fails (e.g. the clean test run is red).

Adding a module: add a row to :data:`TESTS_BY_MODULE` — the module's path from the
repository root, and the test files that exercise it *directly* (its own test file, its
pins, the integration tests of its one caller). mutmut runs, for each mutant, only the
selected tests that called the mutated function, so a narrow row keeps a run to minutes;
a test left out of the row cannot kill anything.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

_ROOT = Path(__file__).resolve().parent.parent


def _tests(*patterns: str) -> tuple[str, ...]:
    """The test files matching ``patterns`` (globs under ``tests/``), in path order."""
    found = {f"tests/{p.name}" for pattern in patterns for p in (_ROOT / "tests").glob(pattern)}
    return tuple(sorted(found))


_POOL = _tests("test_pool_*.py")
_TOOLS = _tests("test_tools_*.py", "test_tool_schema.py")
_RUNS = _tests("test_runs_*.py", "test_journal_runs.py", "test_docs_runs_example.py")
_JOURNAL = _tests(
    "test_journal_store.py",
    "test_journal_runs.py",
    "test_journal_hostile.py",
    "test_journal_corrupt.py",
    "test_journal_moved.py",
    "test_journal_leases_unit.py",
    "test_journal_leases.py",
)
_STATE = _tests("test_state_*.py", "test_breaker_pins.py", "test_ratelimit.py", "test_budget.py")
_RESILIENCE = _tests(
    "test_resilient.py",
    "test_resilience_*.py",
    "test_budget.py",
    "test_ratelimit.py",
    "test_one_admission.py",
)
_TREE = _tests("test_supervisor_*.py", "test_spec_validation.py", "test_hardening_*.py")

#: Modules measured with a package's whole test set (a row of their own overrides it).
_BY_PACKAGE: Final = {
    "supervisors/pool/": _POOL,
    "supervisors/tools/": _TOOLS,
    "supervisors/runs/journal/": _JOURNAL,
    "supervisors/runs/": _RUNS,
    "supervisors/state/": _STATE,
    "actors/journal/": _JOURNAL,
    "supervisors/resilience/": _RESILIENCE,
    "supervisors/tree/": _TREE,
}

_EXPLICIT: Final[Mapping[str, tuple[str, ...]]] = {
    "actors/classify.py": (
        "tests/test_classify_conformance.py",
        "tests/test_classify_exceptions.py",
        "tests/test_classify_properties.py",
        "tests/test_classify_pins.py",
    ),
    "actors/http_status.py": (
        "tests/test_classify_conformance.py",
        "tests/test_classify_exceptions.py",
        "tests/test_classify_properties.py",
        "tests/test_http_status_pins.py",
    ),
    "actors/mailbox.py": (
        "tests/test_actor_calls.py",
        "tests/test_actor_defer.py",
        "tests/test_actor_lifecycle.py",
        "tests/test_spec_validation.py",
        "tests/test_mailbox_pins.py",
    ),
    "supervisors/tree/backoff.py": (
        "tests/test_backoff_pins.py",  # first: its first test covers the import-time validators
        "tests/test_supervisor_backoff.py",
        "tests/test_retry.py",
        "tests/test_spec_validation.py",
    ),
    "supervisors/resilience/breaker.py": (
        "tests/test_breaker.py",
        "tests/test_resilient.py",
        "tests/test_resilience_hardening.py",
        "tests/test_breaker_pins.py",
        "tests/test_breaker_fast_checks.py",
        "tests/test_breaker_overlapping_calls.py",
    ),
    "supervisors/resilience/attempt.py": (
        "tests/test_resilience_attempt.py",
        "tests/test_resilient.py",
        "tests/test_pool_fast_path.py",
    ),
    "supervisors/tree/policy.py": (
        "tests/test_supervisor_policy.py",
        "tests/test_hardening_cancel.py",
        "tests/test_policy_pins.py",
    ),
    "supervisors/pool/chain.py": (
        "tests/test_pool_rotation.py",
        "tests/test_pool_fatal.py",
        "tests/test_pool_escalation.py",
        "tests/test_pool_hedge.py",
        "tests/test_pool_waits.py",
        "tests/test_pool_chain_mutants.py",
    ),
    "supervisors/pool/routing.py": ("tests/test_pool_fatal.py",),
    "actors/tools/grants.py": (
        "tests/test_tools_errors.py",
        "tests/test_tools_front.py",
        "tests/test_tools_hostile.py",
    ),
    "actors/tools/facing.py": ("tests/test_tools_results.py",),
    "supervisors/runs/engine.py": (
        "tests/test_runs_steps.py",
        "tests/test_runs_policy.py",
        "tests/test_runs_cancel.py",
        "tests/test_runs_llm.py",
        "tests/test_runs_hostile.py",
        "tests/test_runs_conditions.py",
        "tests/test_runs_engine_mutants.py",
    ),
    "supervisors/runs/attempts.py": (
        "tests/test_runs_steps.py",
        "tests/test_runs_policy.py",
        "tests/test_runs_cancel.py",
        "tests/test_runs_llm.py",
        "tests/test_runs_hostile.py",
        "tests/test_runs_conditions.py",
        "tests/test_runs_attempts_mutants.py",
    ),
    "supervisors/runs/commit.py": (
        "tests/test_runs_steps.py",
        "tests/test_runs_conditions.py",
        "tests/test_runs_hostile.py",
    ),
    "supervisors/runs/graph.py": (
        "tests/test_runs_steps.py",
        "tests/test_runs_policy.py",
        "tests/test_runs_pins.py",
        "tests/test_runs_hostile.py",
    ),
    "supervisors/runs/progress.py": (
        "tests/test_runs_progress.py",
        "tests/test_runs_steps.py",
        "tests/test_journal_runs.py",
        "tests/test_journal_corrupt.py",
    ),
    "actors/journal/leases.py": (
        "tests/test_journal_leases_unit.py",
        "tests/test_journal_leases.py",
        "tests/test_journal_store.py",
    ),
    "actors/journal/thread.py": ("tests/test_journal_thread.py",),
    "actors/journal/integrity.py": (
        "tests/test_journal_integrity.py",
        "tests/test_journal_corrupt.py",
    ),
    "actors/journal/records.py": (*_JOURNAL, "tests/test_journal_records_mutants.py"),
    "actors/journal/writer.py": (
        "tests/test_journal_store.py",
        "tests/test_journal_hostile.py",
        "tests/test_journal_leases.py",
        "tests/test_journal_writer_mutants.py",
    ),
    "supervisors/runs/shutdown.py": ("tests/test_runs_shutdown.py", "tests/test_daemon.py"),
    "supervisors/daemon.py": ("tests/test_daemon.py",),
    "actors/tracing.py": ("tests/test_tracing.py",),
    "actors/metrics.py": ("tests/test_metrics.py",),
    "supervisors/deployment.py": ("tests/test_deployment.py",),
    "actors/nodes/runner.py": (
        "tests/test_runs_steps.py",
        "tests/test_runs_policy.py",
        "tests/test_runs_cancel.py",
        "tests/test_runs_hostile.py",
    ),
    "supervisors/tools/entry.py": (
        "tests/test_tools_errors.py",
        "tests/test_tools_results.py",
        "tests/test_tools_front.py",
        "tests/test_tools_hostile.py",
    ),
    "supervisors/resilience/retry.py": (
        "tests/test_retry.py",
        "tests/test_resilient.py",
        "tests/test_resilience_hardening.py",
        "tests/test_retry_pins.py",
    ),
}
TESTS_BY_MODULE: Final[Mapping[str, tuple[str, ...]]] = {
    **{
        str(path.relative_to(_ROOT)): tests
        for prefix, tests in _BY_PACKAGE.items()
        for path in sorted((_ROOT / prefix).glob("*.py"))
        if path.name != "__init__.py"
    },
    **_EXPLICIT,  # a module's own row is narrower than its package's
}
"""Module (path from the repository root) → the test files that exercise it."""

SOURCE_PATHS: Final = ("actors/", "supervisors/")
KILLED: Final = frozenset({"killed", "timeout", "caught by type check"})


class ToolError(Exception):
    """The driver could not run (bad module, missing file, mutmut failed): exit non-zero."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def repository_files(root: Path) -> list[str]:
    """Tracked files that still exist, plus untracked files git does not ignore."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=False,
    )
    if listing.returncode != 0:
        raise ToolError(f"git ls-files failed: {listing.stderr.decode(errors='replace')}")
    names = sorted({name for name in listing.stdout.decode().split("\0") if name})
    return [name for name in names if (root / name).is_file()]


def scratch_base() -> Path:
    """Where scratch copies go: ``$MUTATE_DIR``, default ``/tmp/mutate`` (created)."""
    base = Path(os.environ.get("MUTATE_DIR", "/tmp/mutate"))
    base.mkdir(parents=True, exist_ok=True)
    return base


def copy_tree(root: Path, files: Sequence[str], scratch: Path) -> None:
    for name in files:
        target = scratch / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def mutmut_config(module: str, tests: Sequence[str], top_level: Sequence[str]) -> str:
    """The ``setup.cfg`` for one run (mutmut reads newline-separated lists)."""

    def listing(values: Sequence[str]) -> str:
        return "".join(f"\n\t{value}" for value in values)

    also_copy = [name for name in top_level if name + "/" not in SOURCE_PATHS]
    pytest_args = ["-p", "no:randomly", "-q", "--timeout=30"]
    return (
        "[mutmut]\n"
        f"source_paths={listing(SOURCE_PATHS)}\n"
        f"only_mutate={listing([module])}\n"
        f"also_copy={listing(also_copy)}\n"
        f"pytest_add_cli_args={listing(pytest_args)}\n"
        f"pytest_add_cli_args_test_selection={listing(tests)}\n"
    )


def parse_results(output: str, module: str) -> dict[str, str]:
    """``mutmut results --all true`` lines (``    name: status``) of ``module`` only."""
    prefix = module.removesuffix(".py").replace("/", ".") + "."
    statuses: dict[str, str] = {}
    for line in output.splitlines():
        name, sep, status = line.strip().partition(": ")
        if sep and name.startswith(prefix):
            statuses[name] = status
    return statuses


def summary(module: str, statuses: Mapping[str, str]) -> str:
    total = len(statuses)
    killed = sum(1 for status in statuses.values() if status in KILLED)
    timeouts = sum(1 for status in statuses.values() if status == "timeout")
    pct = 100.0 * killed / total if total else 100.0
    lines = [
        f"{module}: {killed}/{total} ({pct:.1f} %) killed"
        + (f", {timeouts} of them by timeout" if timeouts else "")
    ]
    survivors = sorted(name for name, status in statuses.items() if status not in KILLED)
    for name in survivors:
        lines.append(f"  {statuses[name]}: {name}")
    return "\n".join(lines)


def run_mutmut(scratch: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=scratch,
        capture_output=True,
        text=True,
        check=False,
    )


def declarations_only(source: str) -> bool:
    """Whether ``source`` has no function body that runs: every function's body is a
    docstring, ``...`` or ``pass`` (a ``Protocol``), or there is no function at all (a
    module of constants, classes of fields and enums). mutmut mutates function bodies
    only, so such a module has no mutant a test can kill; its literals are measured by
    the constant table (``make mutate-constants-all``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for statement in node.body:
                if isinstance(statement, ast.Pass):
                    continue
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    continue  # a docstring, or ``...``
                return False
    return True


#: The report of a module with no function body to mutate (:func:`declarations_only`).
NO_BODY: Final = "no function body to mutate (declarations and constants only)"


def mutate(module: str, *, max_children: int, show: bool, keep: bool) -> str:
    """Run mutmut on ``module`` in a scratch copy; the report to print."""
    tests = TESTS_BY_MODULE.get(module)
    if tests is None:
        known = ", ".join(sorted(TESTS_BY_MODULE))
        raise ToolError(f"{module} has no row in tests/mutation.py TESTS_BY_MODULE ({known})")
    root = Path(__file__).resolve().parent.parent
    missing = [name for name in (module, *tests) if not (root / name).is_file()]
    if missing:
        raise ToolError(f"missing: {', '.join(missing)}")
    if declarations_only((root / module).read_text(encoding="utf-8")):
        return f"{module}: {NO_BODY}"
    scratch = Path(tempfile.mkdtemp(prefix=Path(module).stem + "-", dir=scratch_base()))
    try:
        files = repository_files(root)
        copy_tree(root, files, scratch)
        top_level = sorted({name.split("/", 1)[0] for name in files})
        (scratch / "setup.cfg").write_text(mutmut_config(module, tests, top_level))
        started = time.monotonic()
        ran = run_mutmut(scratch, "run", "--max-children", str(max_children))
        elapsed = time.monotonic() - started
        if ran.returncode != 0:
            raise ToolError(
                f"mutmut run failed ({ran.returncode}):\n{ran.stdout[-4000:]}{ran.stderr[-4000:]}",
                status=ran.returncode,
            )
        listed = run_mutmut(scratch, "results", "--all", "true")
        if listed.returncode != 0:
            raise ToolError(f"mutmut results failed:\n{listed.stderr}", status=listed.returncode)
        statuses = parse_results(listed.stdout, module)
        if not statuses:
            raise ToolError(f"mutmut produced no mutants for {module}:\n{ran.stdout[-4000:]}")
        report = [summary(module, statuses), f"mutmut run took {elapsed:.0f} s"]
        if show:
            for name, status in sorted(statuses.items()):
                if status not in KILLED:
                    report.append(run_mutmut(scratch, "show", name).stdout.rstrip())
        if keep:
            report.append(f"scratch copy kept: cd {scratch} && mutmut show <name>")
        return "\n".join(report)
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


#: The markers around the generated score table in docs/contributing.md.
TABLE_BEGIN: Final = "<!-- mutation scores: generated by `make mutate-all`, do not edit -->"
TABLE_END: Final = "<!-- end of mutation scores -->"


def selected(prefixes: Sequence[str]) -> list[str]:
    """The modules of :data:`TESTS_BY_MODULE` under any of ``prefixes`` (all without),
    in path order; ``ToolError`` when a prefix selects nothing."""
    modules = sorted(TESTS_BY_MODULE)
    if not prefixes:
        return modules
    chosen = [m for m in modules if any(m.startswith(p) for p in prefixes)]
    if not chosen:
        raise ToolError(f"no module of TESTS_BY_MODULE under {', '.join(prefixes)}")
    return chosen


def score_row(module: str, report: str, revision: str) -> str:
    """One Markdown row from :func:`mutate`'s report: module, tests, score, survivors,
    run time, the revision measured."""
    first = report.splitlines()[0]  # "<module>: k/n (p %) killed[, t of them by timeout]"
    score = first.split(": ", 1)[1].removesuffix(" killed").split(" killed,")[0]
    survivors = sum(1 for line in report.splitlines() if line.startswith("  "))
    took = next(
        (line.split()[-2] for line in report.splitlines() if line.startswith("mutmut run took")),
        "?",
    )
    tests = ", ".join(Path(t).stem for t in TESTS_BY_MODULE[module])
    return f"| `{module}` | {tests} | {score} | {survivors} | {took} s | `{revision}` |"


def score_table(rows: Sequence[str]) -> str:
    """The generated block: markers, the header, the rows."""
    return "\n".join(
        [
            TABLE_BEGIN,
            "",
            "| module | tests (row of `TESTS_BY_MODULE`) | killed / total | survivors | run "
            "| revision |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            TABLE_END,
        ]
    )


def replace_table(
    document: str, table: str, *, begin: str = TABLE_BEGIN, end: str = TABLE_END
) -> str:
    """``document`` with the block between the markers ``begin`` and ``end`` (default:
    this table's) replaced by ``table`` (``ToolError`` when the markers are missing)."""
    start, stop = document.find(begin), document.find(end)
    if start < 0 or stop < start:
        raise ToolError(f"the score table's markers are missing: {begin!r}")
    return document[:start] + table + document[stop + len(end) :]


def revision(root: Path) -> str:
    """``git describe --always --dirty`` of ``root`` (``-dirty``: uncommitted changes)."""
    return subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def mutate_all(prefixes: Sequence[str], *, max_children: int, write: Path | None) -> str:
    """Every selected module in turn; with ``write``, its score table regenerated from
    these runs (a failed module is a row saying so, never a stale score)."""
    measured = revision(Path(__file__).resolve().parent.parent)
    if write is not None and TABLE_BEGIN not in write.read_text(encoding="utf-8"):
        raise ToolError(f"{write}: no score table markers to replace")
    rows, reports = [], []
    for module in selected(prefixes):
        try:
            report = mutate(module, max_children=max_children, show=False, keep=False)
        except ToolError as error:
            first = str(error).splitlines()[0]
            report = f"{module}: failed ({first})"
            rows.append(f"| `{module}` | — | failed: {first} | — | — | `{measured}` |")
        else:
            if report.endswith(NO_BODY):
                rows.append(f"| `{module}` | — | none: {NO_BODY} | — | — | `{measured}` |")
            else:
                rows.append(score_row(module, report, measured))
        print(report, flush=True)
        reports.append(report)
        if write is not None:  # after each module: an interrupted run keeps what it measured
            document = write.read_text(encoding="utf-8")
            done = {row.split("`")[1] for row in rows}
            kept = [r for r in _rows_outside(document, []) if r.split("`")[1] not in done]
            write.write_text(replace_table(document, score_table(sorted([*kept, *rows]))))
    return "\n".join(reports)


def _rows_outside(
    document: str, prefixes: Sequence[str], *, begin: str = TABLE_BEGIN, end: str = TABLE_END
) -> list[str]:
    """The rows of the table between ``begin`` and ``end`` (default: this table's) in
    ``document`` of modules of :data:`TESTS_BY_MODULE` not under ``prefixes``."""
    block = document[document.find(begin) : document.find(end)]
    rows = []
    for line in block.splitlines():
        if line.startswith("| `"):
            module = line.split("`")[1]
            if module in TESTS_BY_MODULE and not any(module.startswith(p) for p in prefixes if p):
                rows.append(line)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument(
        "module",
        nargs="*",
        help="path from the repository root, e.g. actors/mailbox.py (with --all: prefixes)",
    )
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutmut workers")
    parser.add_argument("--show", action="store_true", help="print each survivor's diff")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    parser.add_argument(
        "--all", action="store_true", help="every module of the table (or under the prefixes)"
    )
    parser.add_argument("--write", type=Path, help="with --all: regenerate this file's table")
    options = parser.parse_args(argv)
    try:
        if options.all:
            prefixes = [Path(m).as_posix() for m in options.module]
            mutate_all(prefixes, max_children=options.max_children, write=options.write)
            return 0
        if len(options.module) != 1:
            parser.error("give one module (or --all)")
        print(
            mutate(
                Path(options.module[0]).as_posix(),
                max_children=options.max_children,
                show=options.show,
                keep=options.keep,
            )
        )
    except ToolError as error:
        print(f"mutation: {error}", file=sys.stderr)
        return error.status
    return 0


if __name__ == "__main__":
    sys.exit(main())
