"""What the cancel-wins tests share."""

from __future__ import annotations


def holds_value_error(exc: BaseException | None) -> bool:
    """Whether ``exc``'s cause chain (groups included) holds the ``ValueError("cleanup
    broke")`` a misbehaving worker raised under the cancel."""
    while exc is not None:
        if isinstance(exc, ValueError) and str(exc) == "cleanup broke":
            return True
        if isinstance(exc, BaseExceptionGroup):
            return any(holds_value_error(member) for member in exc.exceptions)
        exc = exc.__cause__
    return False
