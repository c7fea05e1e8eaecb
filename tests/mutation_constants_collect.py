"""The constant mutants of one module: every literal Python evaluates at import time.

mutmut 3 mutates function bodies only. This module finds what it leaves alone — the
literals evaluated when the module is imported — and makes one text edit per mutant
(:func:`collect_mutants`); ``tests/mutation_constants.py`` runs the tests against each.

Import-time code, walked with :mod:`ast`:

* the module body and every class body in it, through ``if``/``try``/``with``/``for``/
  ``while`` blocks: assignments (plain, annotated, ``Final``, augmented), expression
  statements, calls and their keyword arguments (``attrs.field(default=3)``), decorators,
  class bases and keywords, comprehensions, ``assert`` and ``raise``;
* the default values of function and lambda parameters (evaluated at ``def`` time).

Never walked: function and lambda bodies (mutmut's part), annotations (of assignments,
parameters and returns), the value of a ``TypeAlias``, the type arguments of ``cast``,
``TypeVar``, ``ParamSpec``, ``TypeVarTuple`` and ``NewType`` calls (strings there are type
expressions), ``if TYPE_CHECKING:`` bodies and ``if __name__ == "__main__":`` blocks (not
run at import), assignments to ``__all__``, string statements (docstrings, attribute
docstrings: they have no effect), and f-strings (one mutant would need their parts).

The mutants, each a replacement of the node's exact source span (UTF-8 byte offsets, as
:mod:`ast` reports them):

* ``int`` ``n`` → ``n + 1`` (a negative literal ``-n`` is one literal: ``-1`` → ``0``);
* ``float`` ``x`` → ``x + 1.0`` (also ``float("…")`` and ``math.inf``; an infinity →
  ``1e9``, keeping its sign; NaN → ``0.0``);
* ``str`` ``s`` → ``"XX" + s + "XX"``, the empty string → ``"XX"``; ``bytes`` likewise;
* ``True`` ↔ ``False``;
* ``None`` and ``...``: no mutant. No replacement fits every place a ``None`` can stand
  (``0``, ``""`` and ``object()`` each only some), and a replacement of the wrong type is
  mostly killed by the first use, which would measure nothing;
* a ``dict``/``tuple``/``list``/``set`` display (a *table*) also gets one mutant that drops
  its last entry (``(a, b)`` → ``(a,)``; a one-entry table becomes empty: ``()``, ``[]``,
  ``{}``, ``set()``). Not for assignment targets, nor for the ``[…]`` of a subscript.

A line carrying ``# pragma: no mutate`` (in a comment) makes no mutant: a literal is
skipped when any line it spans carries the pragma; a table's drop mutant when a line of
its last entry does.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

PRAGMA: Final = re.compile(r"#.*\bpragma:\s*no mutate\b")
#: Calls whose string arguments are type expressions (only the first argument of cast).
_TYPE_FACTORIES: Final = frozenset({"TypeVar", "ParamSpec", "TypeVarTuple", "NewType"})
_EMPTY_TABLE: Final = {ast.Tuple: "()", ast.List: "[]", ast.Dict: "{}", ast.Set: "set()"}
_SHOWN: Final = 60  # characters of a literal shown in a description


@dataclass(frozen=True)
class ConstantMutant:
    """One mutant: the UTF-8 bytes ``[start, end)`` of the source become ``replacement``.

    ``line`` is the first line of the mutated text, ``description`` reads
    ``original -> mutant`` (``drop last entry <entry>`` for a table)."""

    line: int
    start: int
    end: int
    replacement: str
    description: str

    def apply(self, source: bytes) -> bytes:
        """``source`` (the module's bytes the mutant was collected from) with the edit."""
        return source[: self.start] + self.replacement.encode("utf-8") + source[self.end :]


def _shown(text: str) -> str:
    """``text`` on one line, cut to :data:`_SHOWN` characters (``…`` marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def pragma_lines(source: str) -> frozenset[int]:
    """The lines (1-based) with a comment carrying ``pragma: no mutate``."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return frozenset(
        token.start[0]
        for token in tokens
        if token.type == tokenize.COMMENT and PRAGMA.search(token.string)
    )


class ImportTimeLiteralCollector:
    """Walks one module's import-time code (see the module docstring) for mutants."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.data = source.encode("utf-8")
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))
        self.skipped_lines = pragma_lines(source)
        self.mutants: list[ConstantMutant] = []

    # --- positions -------------------------------------------------------------------

    def offset(self, line: int, column: int) -> int:
        """The byte offset of ``column`` (a UTF-8 byte column, as ast gives) of ``line``."""
        return self.line_starts[line - 1] + column

    def span(self, node: ast.expr) -> tuple[int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return (
            self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset),
        )

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8")

    def carries_pragma(self, first: int, last: int) -> bool:
        return any(line in self.skipped_lines for line in range(first, last + 1))

    # --- statements ------------------------------------------------------------------

    def collect(self) -> list[ConstantMutant]:
        """Every mutant of the module, in the order of their edits in the source."""
        self.body(ast.parse(self.source).body)
        return sorted(self.mutants, key=lambda m: (m.start, -m.end))

    def body(self, statements: Sequence[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            is_string = isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            if not is_string:  # a string statement is a docstring or has no effect
                self.expression(node.value)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.expressions(node.decorator_list)
            self.parameter_defaults(node.args)
        elif isinstance(node, ast.ClassDef):
            self.expressions([*node.decorator_list, *node.bases])
            self.expressions([keyword.value for keyword in node.keywords])
            self.body(node.body)
        elif isinstance(node, ast.Assign):
            if not any(_names_all(target) for target in node.targets):
                self.expressions([*node.targets, node.value])
        elif isinstance(node, ast.AugAssign):
            if not _names_all(node.target):
                self.expressions([node.target, node.value])
        elif isinstance(node, ast.AnnAssign):
            is_alias = _names(node.annotation, "TypeAlias")
            if node.value is not None and not is_alias and not _names_all(node.target):
                self.expressions([node.target, node.value])
        elif isinstance(node, ast.If):
            if _names(node.test, "TYPE_CHECKING") or _is_main_check(node.test):
                self.body(node.orelse)
            else:
                self.expression(node.test)
                self.body([*node.body, *node.orelse])
        elif isinstance(node, ast.For | ast.AsyncFor):
            self.expressions([node.target, node.iter])
            self.body([*node.body, *node.orelse])
        elif isinstance(node, ast.While):
            self.expression(node.test)
            self.body([*node.body, *node.orelse])
        elif isinstance(node, ast.With | ast.AsyncWith):
            self.expressions([item.context_expr for item in node.items])
            self.body(node.body)
        elif isinstance(node, ast.Try | ast.TryStar):
            self.body(node.body)
            for handler in node.handlers:
                self.expressions([handler.type] if handler.type is not None else [])
                self.body(handler.body)
            self.body([*node.orelse, *node.finalbody])
        elif isinstance(node, ast.Assert | ast.Raise | ast.Delete | ast.Match):
            self.expressions([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)])
            if isinstance(node, ast.Match):
                for case in node.cases:
                    self.body(case.body)
        # imports, global, pass, …: no literal

    def parameter_defaults(self, arguments: ast.arguments) -> None:
        defaults = [*arguments.defaults, *arguments.kw_defaults]
        self.expressions([default for default in defaults if default is not None])

    # --- expressions -----------------------------------------------------------------

    def expressions(self, nodes: Sequence[ast.expr]) -> None:
        for node in nodes:
            self.expression(node)

    def expression(self, node: ast.expr, *, is_slice: bool = False) -> None:
        """Mutants of ``node`` and what it holds. ``is_slice``: ``node`` is the ``[…]`` of
        a subscript (a tuple there is a type's arguments or a key, not a table)."""
        if isinstance(node, ast.Lambda):
            self.parameter_defaults(node.args)
        elif isinstance(node, ast.JoinedStr):
            return
        elif isinstance(node, ast.Constant):
            self.literal(node, node.value)
        elif _negative_number(node) is not None:
            self.literal(node, _negative_number(node))
        elif _float_call(node) is not None:
            self.literal(node, _float_call(node))
        elif isinstance(node, ast.Attribute) and _dotted(node) == "math.inf":
            self.literal(node, math.inf)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.Subscript):
            self.expression(node.value)
            self.expression(node.slice, is_slice=True)
        else:
            if isinstance(node, ast.Tuple | ast.List | ast.Dict | ast.Set) and not is_slice:
                self.drop_last_entry(node)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expression(child)
                elif isinstance(child, ast.comprehension):
                    self.expressions([child.target, child.iter, *child.ifs])

    def call(self, node: ast.Call) -> None:
        name = _dotted(node.func).rpartition(".")[2]
        arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
        if name == "cast":
            arguments = arguments[1:]
        elif name in _TYPE_FACTORIES:
            arguments = [a for a in arguments if not isinstance(a, ast.Constant)]
        self.expressions([node.func, *arguments])

    def literal(self, node: ast.expr, value: object) -> None:
        """One mutant replacing ``node`` (whose value is ``value``), if it has one."""
        replacement = literal_replacement(value)
        assert node.end_lineno is not None
        if replacement is None or self.carries_pragma(node.lineno, node.end_lineno):
            return
        start, end = self.span(node)
        original = self.text(start, end)
        self.mutants.append(
            ConstantMutant(
                line=node.lineno,
                start=start,
                end=end,
                replacement=replacement,
                description=f"{_shown(original)} -> {_shown(replacement)}",
            )
        )

    def drop_last_entry(self, node: ast.Tuple | ast.List | ast.Dict | ast.Set) -> None:
        """The table's drop mutant (none for an empty table or an assignment target)."""
        if isinstance(node, ast.Tuple | ast.List) and not isinstance(node.ctx, ast.Load):
            return
        entries = _entries(node)
        if not entries:
            return
        first, last = entries[-1]
        assert last.end_lineno is not None
        if self.carries_pragma(first.lineno, last.end_lineno):
            return
        start, end = self.span(node)
        entry = self.text(self.span(first)[0], self.span(last)[1])
        if isinstance(node, ast.Dict) and node.keys[-1] is None:
            entry = "**" + entry
        if len(entries) == 1:
            cut_start, cut_end, replacement = start, end, _EMPTY_TABLE[type(node)]
        else:
            cut_start = _separator_after(self.data, self.span(entries[-2][1])[1]) + 1
            closing = end if _is_bare_tuple(node, self.text(start, end)) else end - 1
            trailing = _separator_after(self.data, self.span(last)[1], closing)
            cut_end = closing if trailing < 0 else trailing + 1
            replacement = ""
        self.mutants.append(
            ConstantMutant(
                line=first.lineno,
                start=cut_start,
                end=cut_end,
                replacement=replacement,
                description=f"drop last entry {_shown(entry)}",
            )
        )


def literal_replacement(value: object) -> str | None:
    """The source text of the mutant of a literal whose value is ``value`` (``None`` when
    it has none: ``None``, ``...``, complex numbers)."""
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return repr(value + 1)
    if isinstance(value, float):
        if math.isnan(value):
            return "0.0"
        if math.isinf(value):
            return "1e9" if value > 0 else "-1e9"
        return repr(value + 1.0)
    if isinstance(value, str):
        return _quoted(repr("XX" + value + "XX" if value else "XX"))
    if isinstance(value, bytes):
        return _quoted(repr(b"XX" + value + b"XX" if value else b"XX"))
    return None


def _quoted(literal: str) -> str:
    """``repr``'s string (or bytes) literal in double quotes, as the code is written, when
    that needs no escape (``repr`` itself picks double quotes for a text with a ``'``)."""
    prefix = "b" if literal.startswith("b") else ""
    body = literal[len(prefix) :]
    if body.startswith("'") and '"' not in body[1:-1]:
        return f'{prefix}"{body[1:-1]}"'
    return literal


def collect_mutants(source: str) -> list[ConstantMutant]:
    """Every constant mutant of a module's ``source`` (see the module docstring), in
    source order. Each one's edit parses (``AssertionError`` otherwise: a bug here)."""
    mutants = ImportTimeLiteralCollector(source).collect()
    data = source.encode("utf-8")
    for mutant in mutants:
        mutated = mutant.apply(data)
        assert mutated != data, mutant
        ast.parse(mutated)  # a SyntaxError here is a bug of this module
    return mutants


# --- helpers ---------------------------------------------------------------------------


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a name or attribute chain, ``""`` for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _names(node: ast.expr, name: str) -> bool:
    """``node`` is ``name`` or ``<anything>.name``."""
    return _dotted(node).rpartition(".")[2] == name


def _names_all(target: ast.expr) -> bool:
    return isinstance(target, ast.Name) and target.id == "__all__"


def _is_main_check(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    sides = [test.left, test.comparators[0]]
    has_name = any(isinstance(side, ast.Name) and side.id == "__name__" for side in sides)
    has_main = any(isinstance(side, ast.Constant) and side.value == "__main__" for side in sides)
    return isinstance(test.ops[0], ast.Eq) and has_name and has_main


def _negative_number(node: ast.expr) -> int | float | None:
    """The value of ``-<int or float literal>``, else ``None``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = node.operand
        value = operand.value if isinstance(operand, ast.Constant) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value
    return None


def _float_call(node: ast.expr) -> float | None:
    """The value of ``float("<number>")`` (``float("inf")``, …), else ``None``."""
    if not (isinstance(node, ast.Call) and _dotted(node.func) == "float"):
        return None
    if len(node.args) != 1 or node.keywords:
        return None
    argument = node.args[0]
    if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
        return None
    try:
        return float(argument.value)
    except ValueError:
        return None


def _entries(node: ast.Tuple | ast.List | ast.Dict | ast.Set) -> list[tuple[ast.expr, ast.expr]]:
    """Each entry's first and last node (a dict entry: its key — or, for ``**x``, its
    value — and its value)."""
    if isinstance(node, ast.Dict):
        return [(key or value, value) for key, value in zip(node.keys, node.values, strict=True)]
    return [(element, element) for element in node.elts]


def _separator_after(data: bytes, position: int, limit: int | None = None) -> int:
    """The offset of the first comma at or after ``position`` (before ``limit``), skipping
    comments: between two entries there is nothing but brackets, blanks, comments, ``**``
    and the comma. ``-1`` when there is none before ``limit``."""
    stop = len(data) if limit is None else limit
    index = position
    while index < stop:
        char = data[index : index + 1]
        if char == b"#":
            newline = data.find(b"\n", index)
            index = stop if newline < 0 else newline
        elif char == b",":
            return index
        index += 1
    return -1


def _is_bare_tuple(node: ast.expr, text: str) -> bool:
    """A tuple written without its own parentheses (``1, 2`` rather than ``(1, 2)``): its
    text no longer parses as the same tuple once its outer characters are dropped."""
    if not isinstance(node, ast.Tuple) or not (text.startswith("(") and text.endswith(")")):
        return isinstance(node, ast.Tuple)
    try:
        inner = ast.parse(text[1:-1].strip() or "()", mode="eval").body
    except SyntaxError:
        return True
    return ast.dump(inner) != ast.dump(ast.parse(text, mode="eval").body)
