"""The Redis state's checks of its arguments: its settings (``config_invalid``, by the
checks every config uses) and the numbers its scripts can take (``input_validation``).
"""

from __future__ import annotations

import math

from actors import ActorError, Code
from actors.checks import int_at_least, positive_finite


def positive(name: str, value: object, *, integer: bool = False) -> None:
    """``config_invalid`` naming ``name`` unless ``value`` is finite seconds > 0 (with
    ``integer``: an integer >= 1), by the checks every config uses."""
    problem = (int_at_least(1) if integer else positive_finite)(value)
    if problem is not None:
        raise ActorError.from_code(Code.CONFIG_INVALID, f"redis state: {name} {problem}")


def finite(name: str, value: float) -> None:
    """Refuse a value the scripts cannot take (Lua reads no ``nan``/``inf``): a caller's
    bad number must not look like Redis failing, which would degrade the replica."""
    if not math.isfinite(value):
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, f"redis state: {name} must be finite, not {value!r}"
        )
