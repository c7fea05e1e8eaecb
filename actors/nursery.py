"""A nursery whose block's own exception comes out as raised.

With strict exception groups, an exception raised in the body of ``async with
trio.open_nursery()`` leaves wrapped in an ``ExceptionGroup``. Context managers that
yield inside a nursery (``open_runtime``, ``open_tree``, ``ProviderClient.stream``) would
hand their users a group for their own ``raise``. :func:`open_nursery_unwrapped` catches
the block's exception, lets the nursery close (its children are cancelled or finish as
usual), and re-raises it as it was. Cancellations and errors of the nursery's children
are untouched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


@asynccontextmanager
async def open_nursery_unwrapped() -> AsyncIterator[trio.Nursery]:
    """``trio.open_nursery()``, except that an ``Exception`` raised by the block itself
    is re-raised unwrapped once the nursery has closed."""
    body_error: Exception | None = None
    async with trio.open_nursery() as nursery:
        try:
            yield nursery
        except Exception as exc:  # noqa: BLE001 - re-raised below, unwrapped
            body_error = exc
            nursery.cancel_scope.cancel(reason=f"block raised {type(exc).__name__}")
    if body_error is not None:
        raise body_error
