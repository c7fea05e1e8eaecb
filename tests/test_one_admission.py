"""One admission: only the attempt primitive admits a call (issue 26).

``supervisors/resilience/attempt.py`` is the one place the sequence *budget check →
limiter reservation → breaker admission → call → verdict → settle → charge* is written.
This test reads the code (AST) of ``actors/`` and ``supervisors/`` and fails when any
other module calls an admission method of a budget, a limiter or a breaker:

* :data:`ADMISSION` — names that are admission wherever they are called:
  ``admit``, ``admit_fast``, ``admit_or_refuse`` (breaker), ``acquire_fast``,
  ``acquire_or_refuse`` (limiter), ``check_or_refuse`` (budget);
* :data:`AMBIGUOUS` — ``acquire`` (limiter) and ``check`` (budget), names other objects
  have too (a journal's ``acquire``, a lock's, grants' ``check``): an admission when the
  receiver names a budget, a limiter or a breaker (``budget.check()``,
  ``self.limiter.acquire(...)``).

The classes that define them may build them on each other through ``self``
(``Breaker.admit`` on ``admit_or_refuse``, ``Budget.check`` on ``check_or_refuse``): the
defining modules' ``self.<admission>(...)`` calls are allowed, nothing else is.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "supervisors")
#: The one module allowed to admit.
PRIMITIVE = "supervisors/resilience/attempt.py"
#: Modules whose classes define the admission methods (``self.`` calls allowed there).
DEFINING = frozenset(
    {
        "supervisors/resilience/breaker.py",
        "supervisors/resilience/ratelimit.py",
        "supervisors/resilience/budget.py",
    }
)
#: Admission wherever called.
ADMISSION = frozenset(
    {
        "admit",
        "admit_fast",
        "admit_or_refuse",
        "acquire_fast",
        "acquire_or_refuse",
        "check_or_refuse",
    }
)
#: Admission when the receiver names a budget, a limiter or a breaker.
AMBIGUOUS = frozenset({"acquire", "check"})
_OWNERS = ("budget", "limiter", "breaker")


def admission_calls(module: str, tree: ast.AST) -> list[str]:
    """``module:line receiver.name`` for each admission call of ``tree`` not allowed
    in ``module`` (see the module docstring)."""
    if module == PRIMITIVE:
        return []
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, receiver = node.func.attr, node.func.value
        text = ast.unparse(receiver)
        if name in AMBIGUOUS:
            if not any(owner in text.lower() for owner in _OWNERS):
                continue
        elif name not in ADMISSION:
            continue
        if module in DEFINING and isinstance(receiver, ast.Name) and receiver.id == "self":
            continue
        found.append((node.lineno, f"{module}:{node.lineno} {text}.{name}"))
    return [text for _, text in sorted(found)]


def test_only_the_attempt_primitive_admits() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = str(path.relative_to(ROOT))
            found += admission_calls(module, ast.parse(path.read_text(encoding="utf-8")))
    assert found == []


def test_the_primitive_does_admit() -> None:
    """The check is not vacuous: the primitive's own calls are what it would flag."""
    path = ROOT / PRIMITIVE
    calls = admission_calls("elsewhere.py", ast.parse(path.read_text(encoding="utf-8")))
    assert sorted(call.split(" ", 1)[1] for call in calls) == [
        "breaker.admit_fast",
        "breaker.admit_or_refuse",
        "budget.check_or_refuse",
        "limiter.acquire_fast",
        "limiter.acquire_or_refuse",
    ]


SNIPPET = """
async def f(self, budget, limiter, breaker, ctx, grants, journal, lock):
    await budget.check()
    await ctx.budget.check_or_refuse()
    limiter.acquire_fast("a", tokens=1)
    await self.limiter.acquire("a")
    await self._limiter.acquire_or_refuse("a")
    breaker.admit_fast("a")
    await breaker.admit("a")
    await self.breaker.admit_or_refuse("a")
    await self.admit_or_refuse("a")
    grants.check("tool", {})
    await journal.acquire("run")
    await lock.acquire()
    self._admit()
    await budget.charge_or_refuse(None)
"""


def test_a_synthetic_snippet_is_flagged_call_by_call() -> None:
    tree = ast.parse(SNIPPET)
    assert [line.split(":", 1)[1] for line in admission_calls("x.py", tree)] == [
        "3 budget.check",
        "4 ctx.budget.check_or_refuse",
        "5 limiter.acquire_fast",
        "6 self.limiter.acquire",
        "7 self._limiter.acquire_or_refuse",
        "8 breaker.admit_fast",
        "9 breaker.admit",
        "10 self.breaker.admit_or_refuse",
        "11 self.admit_or_refuse",
    ]


def test_defining_modules_may_build_on_their_own_methods_only() -> None:
    tree = ast.parse(SNIPPET)
    flagged = [
        line.split(" ", 1)[1] for line in admission_calls("supervisors/resilience/breaker.py", tree)
    ]
    assert "self.admit_or_refuse" not in flagged  # its own method, through self
    assert "self.breaker.admit_or_refuse" in flagged  # another object's, even there
    assert admission_calls(PRIMITIVE, tree) == []


def test_a_new_call_elsewhere_fails_the_check() -> None:
    source = (ROOT / "supervisors/resilience/resilient.py").read_text(encoding="utf-8")
    assert admission_calls("supervisors/resilience/resilient.py", ast.parse(source)) == []
    added = source + "\n\nasync def sneaky(limiter):\n    return limiter.acquire_fast('x')\n"
    assert admission_calls("supervisors/resilience/resilient.py", ast.parse(added)) == [
        f"supervisors/resilience/resilient.py:{len(added.splitlines())} limiter.acquire_fast"
    ]
