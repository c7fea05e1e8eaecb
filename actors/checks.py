"""The checks every config value goes through, built in code or loaded from a file.

Here, in ``actors``, so that both layers use one set: the supervisors' specs, pools,
budgets and deployment, and the actors' own config (the chaos server's faults).

One set of checks for seconds, counts, fractions, enums and names: each is a function
returning what is wrong with a value (``"must be ..., got ..."``) or ``None``. A config
class keeps each field's check in its attrs ``metadata`` (:func:`checked`); built in
code, :func:`problems_of` runs them all and one ``config_invalid`` names every bad
field; loaded from a file, a cattrs structure hook runs the same check on each field and
raises :class:`FieldProblem`, to which cattrs attaches the field's path.

One reading of "a number" for everything users configure (specs, pools, prices):
:func:`as_float` is the shared first step of every numeric check: a real number — an
``int`` or a ``float``, never a ``bool`` (``True`` is not a count of seconds) — as a float,
or ``None`` for anything else, including an int too large for a float (trio's clock
arithmetic would overflow on it). NaN and infinities come through as floats: each check
decides whether it allows them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from actors.errors import ActorError, Code

__all__ = [
    "CHECK",
    "Check",
    "FieldProblem",
    "as_float",
    "checked",
    "code_set",
    "codes_to",
    "codes_to_seconds",
    "env_variable",
    "finite_non_negative",
    "finite_positive",
    "fraction",
    "grace_seconds",
    "http_url",
    "instance_of",
    "int_at_least",
    "is_bool",
    "is_str",
    "is_tuple",
    "named",
    "non_empty_str",
    "one_of",
    "optional",
    "per_minute",
    "positive_finite",
    "problems_of",
    "seconds",
    "shown",
    "str_keyed_mapping",
    "validator",
]


class FieldProblem(ValueError):
    """One field's problem while a config is loaded from untrusted input (a cattrs
    structure hook raises it with the problem's text; cattrs attaches the field's path,
    and the loader reports the text as it is)."""


def grace_seconds(value: Any, where: str) -> float:
    """A grace period: seconds >= 0, ``math.inf`` for no limit (an int too large for a
    float is no limit too); ``input_validation`` naming ``where`` otherwise (NaN, negative,
    a bool, not a number)."""
    seconds = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
    if not seconds >= 0:
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, f"{where}: grace must be seconds >= 0 (inf: no limit)"
        )
    return seconds


def shown(value: Any) -> str:
    """A short repr for a message (an int too long for ``repr`` is summarised)."""
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_float(value: Any) -> float | None:
    """``value`` as a float when it is an int or a float (not a bool) a float can hold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


Check = Callable[[Any], "str | None"]
#: The attrs metadata key under which a field keeps its check.
CHECK: Final = "actors.checks.check"


def checked(check: Check) -> dict[str, Check]:
    """An attrs field's ``metadata`` holding ``check`` (read by :func:`problems_of` for a
    value built in code and by a loader's cattrs hook for one read from a file)."""
    return {CHECK: check}


def one_of(choices: tuple[str, ...]) -> Check:
    """One of ``choices`` (strings)."""

    def check(value: Any) -> str | None:
        if isinstance(value, str) and value in choices:
            return None
        return f"must be one of {', '.join(map(repr, choices))}, got {shown(value)}"

    return check


def int_at_least(minimum: int, *, optional: bool = False, at_most: int | None = None) -> Check:
    """An ``int`` (not a ``bool``) >= ``minimum`` (and <= ``at_most`` when given);
    ``None`` too when ``optional``."""

    def check(value: Any) -> str | None:
        if value is None and optional:
            return None
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value >= minimum
            and (at_most is None or value <= at_most)
        ):
            return None
        alternative = " or None" if optional else ""
        bound = f">= {minimum}" if at_most is None else f"from {minimum} to {at_most}"
        return f"must be an integer {bound}{alternative}, got {shown(value)}"

    return check


def optional(check: Check) -> Check:
    """``check``, or ``None`` (unset)."""
    return lambda value: None if value is None else check(value)


def seconds(*, zero: bool = False, optional: bool = False, at_most: float = math.inf) -> Check:
    """Finite seconds > 0 (``zero``: >= 0), at most ``at_most``; ``None`` too when
    ``optional``."""

    def check(value: Any) -> str | None:
        number = as_float(value)
        if (value is None and optional) or (
            number is not None
            and math.isfinite(number)
            and (number >= 0 if zero else number > 0)
            and number <= at_most
        ):
            return None
        bound = ">= 0" if zero else "> 0"
        most = ""
        if at_most != math.inf:
            most = f" (at most {int(at_most) if float(at_most).is_integer() else at_most})"
        return f"must be a finite number of seconds {bound}{most}, got {shown(value)}"

    return check


#: Finite seconds > 0.
positive_finite: Final = seconds()


def per_minute(value: Any) -> str | None:
    """A rate: a finite number > 0 per minute, or ``None`` (no limit)."""
    number = as_float(value)
    if value is None or (number is not None and math.isfinite(number) and number > 0):
        return None
    return f"must be a finite number > 0 per minute, got {shown(value)}"


def finite_positive(value: Any) -> str | None:
    """A finite number > 0 (a count of requests or tokens, not seconds)."""
    number = as_float(value)
    if number is not None and math.isfinite(number) and number > 0:
        return None
    return f"must be a finite number > 0, got {shown(value)}"


def finite_non_negative(value: Any) -> str | None:
    """A finite number >= 0."""
    number = as_float(value)
    if number is not None and math.isfinite(number) and number >= 0:
        return None
    return f"must be a finite number >= 0, got {shown(value)}"


def fraction(value: Any) -> str | None:
    """A number from 0 to 1."""
    number = as_float(value)
    if number is not None and 0 <= number <= 1:
        return None
    return f"must be a number from 0 to 1, got {shown(value)}"


def non_empty_str(value: Any) -> str | None:
    """A string with something besides white space."""
    if isinstance(value, str) and value.strip():
        return None
    return f"must be a non-empty string, got {shown(value)}"


def is_bool(value: Any) -> str | None:
    """``True`` or ``False``."""
    return None if isinstance(value, bool) else f"must be true or false, got {shown(value)}"


def is_tuple(value: Any) -> str | None:
    """A tuple (a loader or converter made it one from a list)."""
    return None if isinstance(value, tuple) else f"must be a tuple, got {shown(value)}"


def str_keyed_mapping(value: Any) -> str | None:
    """A mapping whose keys are strings."""
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return None
    return f"must be a mapping of names to values, got {shown(value)}"


def named(field: str, problem: str) -> str:
    """``problem`` (a check's text) naming ``field``: ``"lease_ttl must be ..."``, or
    joined without a space when it names an entry (``"cooldowns[timeout] must be ..."``)."""
    joint = "" if problem.startswith((".", "[")) else " "
    return f"{field}{joint}{problem}"


def problems_of(spec: attrs.AttrsInstance) -> list[str]:
    """What is wrong with each field of ``spec``, each naming its field."""
    problems = []
    for field in attrs.fields(type(spec)):
        check = field.metadata.get(CHECK)
        problem = check(getattr(spec, field.name)) if check is not None else None
        if problem is not None:
            problems.append(named(field.name, problem))
    return problems


def validator(check: Check) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """An attrs validator running ``check``: ``config_invalid`` naming the class and the
    field (``Fault.kind must be one of ...``) — for a class that refuses a bad value as it
    is built, field by field, rather than all its fields at once (:func:`problems_of`)."""

    def validate(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        problem = check(value)
        if problem is not None:
            where = f"{type(instance).__name__}.{attribute.name}"
            raise ActorError.from_code(Code.CONFIG_INVALID, named(where, problem))

    return validate


def instance_of(kind: type) -> Check:
    """An instance of ``kind`` (a class of this project: a ``Backoff``, a ``RetryPolicy``)."""

    def check(value: Any) -> str | None:
        if isinstance(value, kind):
            return None
        return f"must be a {kind.__name__}, got {type(value).__name__}"

    return check


_VARIABLE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def env_variable(*, optional: bool = False) -> Check:
    """The *name* of an environment variable (letters, digits, ``_``; ``None`` too when
    ``optional``). A value that is not a name is not shown in the message: it is most
    likely the secret pasted in its place."""

    def check(value: Any) -> str | None:
        if (value is None and optional) or (
            isinstance(value, str) and _VARIABLE.fullmatch(value) is not None
        ):
            return None
        return (
            "must be the name of an environment variable (letters, digits, _), not its"
            " value (not shown)"
        )

    return check


def http_url(value: Any) -> str | None:
    """An absolute ``http://`` or ``https://`` URL with a host (``localhost:8080``, with
    no scheme, is not one: every request to it would fail). A value holding ``@`` (user
    information, maybe a password) is not shown."""
    if isinstance(value, str):
        try:
            parts = urlsplit(value)
        except ValueError:
            parts = None
        if parts is not None and parts.scheme in ("http", "https") and parts.hostname:
            return None
    seen = (
        "a value with '@' (not shown)" if isinstance(value, str) and "@" in value else shown(value)
    )
    return f"must be an http:// or https:// URL with a host, got {seen}"


def codes_to(check: Check, what: str) -> Check:
    """A mapping of :class:`~actors.Code` to values that pass ``check`` (``what`` they
    are, for the message): a problem names the entry (``[timeout] must be ...``)."""

    def mapping(value: Any) -> str | None:
        if not isinstance(value, Mapping):
            return f"must be a mapping of codes to {what}, got {type(value).__name__}"
        for code, item in value.items():
            if not isinstance(code, Code):
                return f"has the key {shown(code)}, which is not an actors.Code"
            problem = check(item)
            if problem is not None:
                return f"[{code}] {problem}"
        return None

    return mapping


def code_set(value: Any) -> str | None:
    """A set (or frozenset) of :class:`~actors.Code`."""
    if not isinstance(value, set | frozenset):
        return f"must be a set of codes, got {type(value).__name__}"
    for code in value:
        if not isinstance(code, Code):
            return f"has {shown(code)}, which is not an actors.Code"
    return None


def is_str(value: Any) -> str | None:
    """A string (empty allowed)."""
    return None if isinstance(value, str) else f"must be a string, got {shown(value)}"


#: A cooldown per code: a mapping of :class:`~actors.Code` to finite seconds > 0.
codes_to_seconds: Final = codes_to(positive_finite, "seconds")
