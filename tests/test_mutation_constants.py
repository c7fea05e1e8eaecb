"""The constant mutation driver (``make mutate-constants``): its literal collector, its
text edits, its report and its table — on small synthetic modules, without running the
project's tests (one end-to-end run on a two-line package in a temporary directory)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.mutation import TABLE_BEGIN, TABLE_END, TESTS_BY_MODULE
from tests.mutation_constants import (
    CONSTANT_TABLE_BEGIN,
    CONSTANT_TABLE_END,
    ConstantMutantOutcome,
    _check_imported_from,
    constant_score_row,
    constant_score_table,
    run_mutants,
    run_tests,
    summary,
    write_rows,
)
from tests.mutation_constants_collect import collect_mutants, literal_replacement

ROOT = Path(__file__).resolve().parent.parent


def described(source: str) -> list[str]:
    """``line: description`` of each mutant of ``source`` (dedented)."""
    source = textwrap.dedent(source).lstrip("\n")
    return [f"{m.line}: {m.description}" for m in collect_mutants(source)]


def mutated(source: str, description: str) -> str:
    """``source`` (dedented) with the one mutant described so applied."""
    source = textwrap.dedent(source).lstrip("\n")
    (mutant,) = [m for m in collect_mutants(source) if m.description == description]
    return mutant.apply(source.encode()).decode()


# --- what is collected ---------------------------------------------------------------------


def test_import_time_literals_are_the_mutants_in_source_order() -> None:
    source = '''
        """Module docstring."""
        import math
        LIMIT: Final = 3
        RATIO = 0.5
        NAME = "pool"
        ON = True
        NOTHING = None
        NEGATIVE = -2
        FOREVER = float("inf")
        ALSO_FOREVER = math.inf
        RAW = b"ab"
        CONVERTER = cattrs.Converter(forbid_extra_keys=True)

        @attrs.frozen(slots=True)
        class Config:
            """Class docstring."""
            retries: int = attrs.field(default=2)
            mode: str = "fast"
            "an attribute docstring"

            def call(self, timeout: float = 1.5, *, label: str = "", flag=None) -> int:
                return 99

        KEY = lambda item, width=4: item * 7
    '''
    assert described(source) == [
        "3: 3 -> 4",
        "4: 0.5 -> 1.5",
        '5: "pool" -> "XXpoolXX"',
        "6: True -> False",
        "8: -2 -> -1",
        '9: float("inf") -> 1e9',
        "10: math.inf -> 1e9",
        '11: b"ab" -> b"XXabXX"',
        "12: True -> False",
        "14: True -> False",
        "17: 2 -> 3",
        '18: "fast" -> "XXfastXX"',
        "21: 1.5 -> 2.5",
        '21: "" -> "XX"',
        "24: 4 -> 5",
    ]


def test_docstrings_annotations_type_expressions_and_non_import_code_make_no_mutant() -> None:
    source = '''
        """Docstring."""
        from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar, cast
        __all__ = ["a", "b"]
        __all__ += ["c"]
        T = TypeVar("T", bound="Base")
        Alias: TypeAlias = "dict[str, Base]"
        size: Final["Literal[3]"]
        VALUE = cast("int", other)
        if TYPE_CHECKING:
            HIDDEN = 5

        def f(x: "Annotated[int, 3]") -> "Literal[4]":
            """Docstring."""
            return 5 + "body"

        if __name__ == "__main__":
            main(7)
        FORMATTED = f"{size}s"
    '''
    assert described(source) == []


def test_a_pragma_covers_its_own_line_only_and_a_pragma_in_a_string_is_none() -> None:
    source = """
        A = 1  # pragma: no mutate: equivalent, read as a truth value only
        B = (2,
             3)  # pragma: no mutate
        C = "# pragma: no mutate"
        D = 4
    """
    assert described(source) == [
        "2: 2 -> 3",  # the pragma is on the next line, with the last entry
        '4: "# pragma: no mutate" -> "XX# pragma: no mutateXX"',
        "5: 4 -> 5",
    ]


def test_each_literal_kind_has_its_replacement() -> None:
    cases = [
        (0, "1"),
        (41, "42"),
        (-1, "0"),
        (0.0, "1.0"),
        (-0.5, "0.5"),
        (float("inf"), "1e9"),
        (float("-inf"), "-1e9"),
        (float("nan"), "0.0"),
        ("", '"XX"'),
        ("it's", '"XXit\'sXX"'),
        ('say "hi"', "'XXsay \"hi\"XX'"),
        (b"", 'b"XX"'),
        (b"ab", 'b"XXabXX"'),
        (True, "False"),
        (False, "True"),
    ]
    assert [(value, literal_replacement(value)) for value, _ in cases] == cases
    assert literal_replacement(None) is None
    assert literal_replacement(...) is None
    assert literal_replacement(1j) is None


# --- the edits -----------------------------------------------------------------------------


def test_each_edit_replaces_exactly_the_literal_even_after_multibyte_text() -> None:
    source = 'LABEL = {"héllo": 12, "ü": "ß"}  # ünïcode\n'
    data = source.encode()
    texts = [data[m.start : m.end].decode() for m in collect_mutants(source)]
    assert texts == ['"héllo"', "12", ' "ü": "ß"', '"ü"', '"ß"']
    assert mutated(source, "12 -> 13") == 'LABEL = {"héllo": 13, "ü": "ß"}  # ünïcode\n'


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("T = (1, 2)\n", "T = (1,)\n"),
        ("T = 1, 2\n", "T = 1,\n"),
        ("T = 1, 2,\n", "T = 1,\n"),
        ("T = (1,)\n", "T = ()\n"),
        ("T = ((1), (2))\n", "T = ((1),)\n"),
        ("T = [1, 2]\n", "T = [1,]\n"),
        ("T = {1}\n", "T = set()\n"),
        ("T = {1, 2}\n", "T = {1,}\n"),
        ('T = {"a": 1, "b": 2}\n', 'T = {"a": 1,}\n'),
        ('T = {"a": 1, **extra}\n', 'T = {"a": 1,}\n'),
        ('T = {\n    "a": 1,  # first, of two\n    "b": 2,\n}\n', 'T = {\n    "a": 1,\n}\n'),
    ],
)
def test_a_table_gets_a_mutant_dropping_its_last_entry(source: str, expected: str) -> None:
    (drop,) = [m for m in collect_mutants(source) if m.description.startswith("drop last entry")]
    result = drop.apply(source.encode()).decode()
    assert result == expected
    before, after = (ast.parse(s).body[0] for s in (source, result))
    assert isinstance(before, ast.Assign) and isinstance(after, ast.Assign)
    assert type(after.value) is type(before.value) or isinstance(before.value, ast.Set)


def test_no_drop_mutant_for_a_target_a_subscript_or_a_pragma_on_the_last_entry() -> None:
    source = """
        a, b = c
        X = Mapping[str, int]
        Y = (
            "kept",
            "last",  # pragma: no mutate: the last entry is a sentinel
        )
    """
    assert described(source) == ['4: "kept" -> "XXkeptXX"']


def test_every_mutant_of_the_real_target_modules_parses_and_changes_the_code() -> None:
    for module in (
        "supervisors/pool/config.py",
        "actors/journal/records.py",
        "supervisors/state/base.py",
    ):
        source = (ROOT / module).read_text(encoding="utf-8")
        mutants = collect_mutants(source)  # asserts that each edit parses
        assert mutants, module
        for mutant in mutants:
            changed = mutant.apply(source.encode()).decode()
            assert ast.dump(ast.parse(changed)) != ast.dump(ast.parse(source)), mutant


# --- the report and the table --------------------------------------------------------------


def test_the_report_counts_timeouts_as_killed_and_lists_survivors() -> None:
    module = "supervisors/pool/config.py"
    (mutant,) = collect_mutants((ROOT / module).read_text(encoding="utf-8"))
    outcomes = [
        ConstantMutantOutcome(mutant, "killed"),
        ConstantMutantOutcome(mutant, "timeout"),
        ConstantMutantOutcome(mutant, "survived"),
    ]
    report = summary(module, outcomes, show=True).splitlines()
    assert report[0] == f"{module}: 2/3 (66.7 %) constant mutants killed, 1 of them by timeout"
    assert report[1] == f"  {module}:{mutant.line}: False -> True"
    assert report[2].startswith(f"    {mutant.line:>5} | def seconds_or_none(")
    assert summary(module, [], show=False).startswith(f"{module}: 0/0 constant mutants")


def test_a_row_from_a_report() -> None:
    report = (
        "actors/journal/records.py: 4/7 (57.1 %) constant mutants killed\n"
        '  actors/journal/records.py:34: "run:failed" -> "XXrun:failedXX"\n'
        "       34 | TERMINAL = ...\n"
        '  actors/journal/records.py:34: drop last entry "run:cancelled"\n'
        "  actors/journal/records.py:48: True -> False\n"
        "constant mutation run took 219 s (clean run 18 s, 1 worker)"
    )
    assert constant_score_row(report, "abc123") == (
        "| `actors/journal/records.py` | 4/7 (57.1 %) | 3 (l. 34 x2, 48) | 219 s | `abc123` |"
    )
    empty = "a.py: 0/0 constant mutants (no literal evaluated at import time)\nconstant mutation run took 0 s"
    assert constant_score_row(empty, "abc123") == "| `a.py` | 0/0 (none) | 0 | 0 s | `abc123` |"


def test_writing_rows_keeps_other_modules_and_the_mutmut_table(tmp_path: Path) -> None:
    kept = "| `actors/journal/records.py` | 1/1 (100.0 %) | 0 | 1 s | `old` |"
    replaced = "| `supervisors/pool/config.py` | 0/1 (0.0 %) | 1 (l. 21) | 9 s | `old` |"
    gone = "| `no/such/module.py` | 1/1 (100.0 %) | 0 | 1 s | `old` |"
    mutmut_row = "| `supervisors/pool/config.py` | t | 42/46 (91.3 %) | 4 | 58 s | `x` |"
    page = tmp_path / "contributing.md"
    page.write_text(
        "\n".join(
            [
                "intro",
                TABLE_BEGIN,
                mutmut_row,
                TABLE_END,
                "between",
                constant_score_table([kept, replaced, gone]),
                "after",
            ]
        )
    )
    new = "| `supervisors/pool/config.py` | 1/1 (100.0 %) | 0 | 8 s | `new` |"
    write_rows(page, [new])
    assert page.read_text() == "\n".join(
        [
            "intro",
            TABLE_BEGIN,
            mutmut_row,
            TABLE_END,
            "between",
            constant_score_table([kept, new]),
            "after",
        ]
    )


def test_the_contributing_page_has_both_tables_and_every_constant_row_is_a_known_module() -> None:
    page = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    assert page.index(TABLE_BEGIN) < page.index(TABLE_END)
    assert page.index(CONSTANT_TABLE_BEGIN) < page.index(CONSTANT_TABLE_END)
    block = page[page.index(CONSTANT_TABLE_BEGIN) : page.index(CONSTANT_TABLE_END)]
    modules = [line.split("`")[1] for line in block.splitlines() if line.startswith("| `")]
    assert all(module in TESTS_BY_MODULE for module in modules)


# --- end to end, on a synthetic package ----------------------------------------------------


def test_mutants_run_against_the_tests_in_a_scratch_copy(tmp_path: Path) -> None:
    module = "synthetic_limits/limits.py"
    original = b'"""Limits."""\nLIMIT = 3\nNAME = "unpinned"\n'
    (tmp_path / "synthetic_limits").mkdir()
    (tmp_path / "synthetic_limits" / "__init__.py").write_text("")
    (tmp_path / module).write_bytes(original)
    (tmp_path / "test_limits.py").write_text(
        "from synthetic_limits.limits import LIMIT\n\n\ndef test_limit():\n    assert LIMIT == 3\n"
    )
    tests = ["test_limits.py"]
    _check_imported_from(tmp_path, module)
    assert run_tests(tmp_path, tests, None)[0] == "passed"
    mutants = collect_mutants(original.decode())
    outcomes = run_mutants(module, tests, original, mutants, [tmp_path], 60)
    assert [(o.mutant.description, o.status) for o in outcomes] == [
        ("3 -> 4", "killed"),
        ('"unpinned" -> "XXunpinnedXX"', "survived"),
    ]
    assert (tmp_path / module).read_bytes() == original
