"""The score table of docs/contributing.md is generated (``make mutate-all``), never typed.

The driver's pure parts: which modules a prefix selects, a row from a report, the table
replaced between its markers (a partial run keeps the other rows).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation import (
    NO_BODY,
    TABLE_BEGIN,
    TABLE_END,
    TESTS_BY_MODULE,
    ToolError,
    _rows_outside,
    declarations_only,
    mutate,
    replace_table,
    score_row,
    score_table,
    selected,
)

ROOT = Path(__file__).resolve().parent.parent


def test_every_row_names_existing_files() -> None:
    missing = [
        name
        for module, tests in TESTS_BY_MODULE.items()
        for name in (module, *tests)
        if not (ROOT / name).is_file()
    ]
    assert missing == []


def test_a_prefix_selects_its_modules_in_path_order() -> None:
    pool = selected(["supervisors/pool/"])
    assert pool == sorted(pool) and pool
    assert all(module.startswith("supervisors/pool/") for module in pool)
    assert selected([]) == sorted(TESTS_BY_MODULE)
    with pytest.raises(ToolError, match="no module of TESTS_BY_MODULE under nowhere/"):
        selected(["nowhere/"])


def test_a_row_from_a_report() -> None:
    module = "supervisors/pool/routing.py"
    report = (
        f"{module}: 9/10 (90.0 %) killed, 2 of them by timeout\n"
        f"  survived: supervisors.pool.routing.x_f__mutmut_1\n"
        "mutmut run took 12 s"
    )
    tests = ", ".join(Path(t).stem for t in TESTS_BY_MODULE[module])
    assert score_row(module, report, "abc123") == (
        f"| `{module}` | {tests} | 9/10 (90.0 %) | 1 | 12 s | `abc123` |"
    )


def test_the_table_is_replaced_between_its_markers_only() -> None:
    document = f"intro\n{TABLE_BEGIN}\nold\n{TABLE_END}\nafter\n"
    table = score_table(["| `a.py` | t | 1/1 (100.0 %) | 0 | 1 s | `abc123` |"])
    replaced = replace_table(document, table)
    assert replaced.startswith("intro\n" + TABLE_BEGIN)
    assert replaced.endswith(TABLE_END + "\nafter\n")
    assert (
        "old" not in replaced and "| `a.py` | t | 1/1 (100.0 %) | 0 | 1 s | `abc123` |" in replaced
    )
    with pytest.raises(ToolError, match="markers are missing"):
        replace_table("no markers", table)


def test_a_partial_run_keeps_the_rows_of_other_modules() -> None:
    kept = "| `actors/mailbox.py` | x | 1/1 (100.0 %) | 0 | 1 s |"
    dropped = "| `supervisors/pool/routing.py` | x | 1/2 (50.0 %) | 1 | 1 s |"
    gone = "| `no/such/module.py` | x | 1/1 (100.0 %) | 0 | 1 s |"
    document = "\n".join([TABLE_BEGIN, kept, dropped, gone, TABLE_END])
    assert _rows_outside(document, ["supervisors/pool/"]) == [kept]


def test_the_contributing_page_has_the_markers() -> None:
    page = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    assert page.index(TABLE_BEGIN) < page.index(TABLE_END)


@pytest.mark.parametrize(
    "source",
    [
        "X = 1\nclass A:\n    y: int = 2\n",
        'class P(Protocol):\n    def f(self) -> int:\n        """Doc."""\n        ...\n',
        "def f() -> None:\n    pass\n",
    ],
)
def test_a_module_without_function_bodies_has_nothing_to_mutate(source: str) -> None:
    assert declarations_only(source)


@pytest.mark.parametrize(
    "source",
    [
        "def f() -> int:\n    return 1\n",
        'class P:\n    def f(self) -> None:\n        """Doc."""\n        print()\n',
        "async def f() -> None:\n    ...\n    await g()\n",
    ],
)
def test_a_module_with_a_function_body_is_mutated(source: str) -> None:
    assert not declarations_only(source)


def test_the_state_declarations_are_reported_as_such_not_as_failed() -> None:
    for module in ("supervisors/state/base.py", "supervisors/state/redis_scripts.py"):
        report = mutate(module, max_children=1, show=False, keep=False)
        assert report == f"{module}: {NO_BODY}"
