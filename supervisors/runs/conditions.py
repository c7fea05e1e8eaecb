"""Edge conditions written as expression strings, evaluated safely: :class:`Condition`.

Workflows loaded from files carry their edge conditions as text, e.g.
``"score > 0.5 and status == 'ok'"``, ``"len(items) >= 3"``, ``"'urgent' in tags"``.
They are evaluated by `simpleeval <https://github.com/danthedeckie/simpleeval>`_ — an
AST walker, never ``eval()`` — with these rules:

* **names** are the run state's keys (and ``true``/``false``/``null`` when the state has
  no such key); literals of numbers, strings, lists, tuples, dicts and sets;
  comparisons, ``and``/``or``/``not``, arithmetic, ``x if c else y``, subscripts
  (``doc['title']``, ``items[0]``), comprehensions;
* **functions**: ``len``, ``min``, ``max``, ``abs``, ``round``, ``int``, ``float``,
  ``str``, ``bool``, ``any``, ``all``, and simpleeval's ``list``, ``tuple``, ``dict``,
  ``set`` — nothing else; no attribute access at all (so no method calls), no ``%``
  string formatting and no f-string format specs (a width such as ``'%09999999d'``
  would build a huge string in one step), no lambdas, no imports, no assignments, one
  expression only;
* **limits**: ``max_length`` characters of source; ``max_operations`` evaluated nodes
  and ``time_limit`` seconds (``time.perf_counter``: a guard on this synchronous
  computation, not run time) per evaluation; simpleeval's own caps on big strings
  (100,000 characters) and comprehensions (10,000 items), and exponents up to 1,000.

Failures are ``sandbox_error`` and split on determinism, as the error standard asks:
a syntax error (raised when the condition is made, so a workflow file fails to load),
an unknown name or function, a type or value error (``'a' + 1``, ``1 / 0``, a missing
key), a forbidden construct, a size overflow and a result that is not a ``bool`` are
**fatal** — evaluating again repeats them; only a runaway evaluation (the operation or
time limit) is **retryable**, within the node's retry budget. The message says which
kind of failure it was and never holds the expression, a name or a state value; so the
simpleeval exception, whose text quotes them, is not chained (``from None``).

A :class:`Condition` may be shared by any number of runs: it parses once, and an
evaluation is synchronous (it cannot be interleaved with another in a trio program).
"""

from __future__ import annotations

import ast
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, NoReturn

import simpleeval  # type: ignore[import-untyped]

from actors import ActorError, Code

#: The functions an expression may call.
FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = {
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "any": any,
    "all": all,
}
#: Names an expression has when the state does not define them.
CONSTANTS: Final[Mapping[str, Any]] = {"true": True, "false": False, "null": None}
#: The largest exponent of ``**``.
MAX_EXPONENT: Final = 1000
#: How many evaluated nodes between two looks at the clock.
_CLOCK_EVERY: Final = 64

_FATAL: Final[tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...]] = (
    (simpleeval.NameNotDefined, "unknown name"),
    (simpleeval.FunctionNotDefined, "unknown function"),
    (simpleeval.NumberTooHigh, "size overflow"),
    (simpleeval.IterableTooLong, "size overflow"),
    (simpleeval.InvalidExpression, "not allowed"),
    ((MemoryError, OverflowError, RecursionError), "size overflow"),
    ((LookupError,), "missing key or index"),
    ((ArithmeticError,), "arithmetic error"),
    ((TypeError, ValueError), "type error"),
)


def _sandbox(text: str, *, retryable: bool = False) -> ActorError:
    return ActorError.from_code(
        Code.SANDBOX_ERROR, f"condition failed: {text}", retryable=retryable
    )


def _modulo(left: Any, right: Any) -> Any:
    if isinstance(left, str | bytes):
        raise simpleeval.FeatureNotAvailable("string formatting is not allowed")
    return left % right


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, int | float) and abs(exponent) > MAX_EXPONENT:
        raise simpleeval.NumberTooHigh("exponent too large")
    return simpleeval.safe_power(base, exponent)


class _Runaway(Exception):
    """The evaluation went past an operation or time limit."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class _Names(Mapping[str, Any]):
    """The state's keys, then :data:`CONSTANTS`."""

    __slots__ = ("_state",)

    def __init__(self, state: Mapping[str, Any]) -> None:
        self._state = state

    def __getitem__(self, key: str) -> Any:
        try:
            return self._state[key]
        except KeyError:
            return CONSTANTS[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)


class _Evaluator(simpleeval.EvalWithCompoundTypes):  # type: ignore[misc]
    """simpleeval with attribute access refused and every node counted."""

    def __init__(self, max_operations: int, time_limit: float) -> None:
        operators = dict(simpleeval.DEFAULT_OPERATORS)
        operators[ast.Pow] = _power
        operators[ast.Mod] = _modulo
        super().__init__(operators=operators, functions=dict(FUNCTIONS), names={})
        self.max_operations = max_operations
        self.time_limit = time_limit
        self.operations = 0
        self.deadline = math.inf

    def _eval(self, node: ast.AST) -> Any:
        self.operations += 1
        if self.operations % _CLOCK_EVERY == 0:
            if self.operations > self.max_operations:
                raise _Runaway(f"over {self.max_operations} operations")
            if time.perf_counter() > self.deadline:
                raise _Runaway(f"over {self.time_limit:g} s")
        return super()._eval(node)

    def _eval_attribute(self, node: ast.Attribute) -> NoReturn:
        raise simpleeval.FeatureNotAvailable("attribute access is not allowed")

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> Any:
        if node.format_spec is not None:
            raise simpleeval.FeatureNotAvailable("format specs are not allowed")
        return super()._eval_formattedvalue(node)


class Condition:
    """An edge condition written as an expression string (see the module docstring).

    ``Condition(source)`` parses at once: a bad source is a fatal ``sandbox_error``.
    ``condition(state)`` is ``True`` or ``False``, or raises ``sandbox_error``.
    """

    __slots__ = ("_evaluator", "_tree", "source")

    def __init__(
        self,
        source: str,
        *,
        max_length: int = 1000,
        time_limit: float = 0.05,
        max_operations: int = 10_000,
    ) -> None:
        if type(source) is not str:
            raise _sandbox("a condition must be a string expression")
        if not source.strip():
            raise _sandbox("empty expression")
        if len(source) > max_length:
            raise _sandbox(f"too long ({len(source)} > {max_length} characters)")
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError:
            raise _sandbox("syntax error") from None
        except (MemoryError, RecursionError, ValueError):
            raise _sandbox("too complex to parse") from None
        self.source = source
        self._tree = tree.body
        self._evaluator = _Evaluator(max_operations, time_limit)

    def __repr__(self) -> str:
        return f"Condition(<{len(self.source)} chars>)"

    def __call__(self, state: Mapping[str, Any]) -> bool:
        evaluator = self._evaluator
        evaluator.names = _Names(state)
        evaluator.operations = 0
        evaluator._max_count = 0  # simpleeval's comprehension count, reset only by eval()
        evaluator.deadline = time.perf_counter() + evaluator.time_limit
        try:
            result = evaluator._eval(self._tree)
        except _Runaway as runaway:
            raise _sandbox(f"time limit ({runaway.what})", retryable=True) from None
        except Exception as exc:  # noqa: BLE001 - classified below, the text dropped
            raise _sandbox(_kind(exc)) from None
        finally:
            evaluator.names = {}
        if type(result) is not bool:
            raise _sandbox(f"not a boolean (got {type(result).__name__})")
        return result


def _kind(exc: Exception) -> str:
    for types, text in _FATAL:
        if isinstance(exc, types):
            return f"{text} ({type(exc).__name__})"
    return f"evaluation error ({type(exc).__name__})"
