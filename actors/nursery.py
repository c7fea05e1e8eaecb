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

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors.error_types import ActorError
from actors.events import TaskFailed
from actors.observe import emit


@asynccontextmanager
async def open_nursery_unwrapped() -> AsyncIterator[trio.Nursery]:
    """``trio.open_nursery()``, except that an ``Exception`` raised by the block itself
    is re-raised unwrapped once the nursery has closed — and a cancellation from outside
    (the block and its children all cancelled, nothing else) comes out as one
    ``trio.Cancelled``, not a group of them, so ``except trio.Cancelled`` sees it. A
    ``KeyboardInterrupt`` (Ctrl-C: trio raises it in the main task, inside the user's
    blocks) or a ``SystemExit`` (``sys.exit()`` in the block, or in a handler: it stops
    the program, never handled by a policy) comes out bare too, when all that came with
    it are cancellations: the nursery closes first (its children are cancelled), then the
    exit is re-raised as it was."""
    body_error: Exception | KeyboardInterrupt | SystemExit | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: BLE001 - re-raised below
                body_error = exc
                nursery.cancel_scope.cancel(reason=f"block raised {type(exc).__name__}")
    except BaseExceptionGroup as group:
        single = only_cancelled(group) or only_interrupted(group)
        if single is None:
            raise
        raise single from None
    if body_error is not None:
        raise body_error


def only_cancelled(group: BaseExceptionGroup) -> trio.Cancelled | None:
    """The first ``trio.Cancelled`` of ``group`` when it holds nothing else, else ``None``.

    Not "is this a cancellation?" — :func:`actors.errors.cancellation_reason` is the one
    answer to that, and it says yes to a group holding a ``Cancelled`` next to other
    errors too. This asks a narrower question only unwrapping has: may one bare
    ``Cancelled`` *replace* the whole group? Only when nothing else would be lost (every
    leaf a ``Cancelled``; then ``cancellation_reason`` says yes as well). A mixed group is
    re-raised as it is, so its other errors reach whoever handles the cancel — an actor
    keeps them as the cause of ``cancelled`` and logs them (``error.suppressed``) — rather
    than being dropped here, where nobody would log them."""
    matched, rest = group.split(trio.Cancelled)
    if rest is not None or matched is None:
        return None
    leaf: BaseException = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, trio.Cancelled)  # split kept only Cancelled leaves
    return leaf


def only_interrupted(group: BaseExceptionGroup) -> KeyboardInterrupt | SystemExit | None:
    """The first ``KeyboardInterrupt`` or ``SystemExit`` of ``group`` when everything
    else in it is a cancellation (at any depth), else ``None``."""
    interrupts, rest = group.split((KeyboardInterrupt, SystemExit))
    if interrupts is None or (rest is not None and only_cancelled(rest) is None):
        return None
    leaf: BaseException = interrupts
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, KeyboardInterrupt | SystemExit)  # what split kept
    return leaf


async def run_to_completion(
    nursery: trio.Nursery, fn: Callable[..., Awaitable[object]], *args: Any
) -> None:
    """Run ``fn(*args)`` as a task of ``nursery`` and wait until it has finished.

    For work that, once begun, must complete even if the task that asked for it is
    cancelled (a stop): the waiter leaves at once with ``trio.Cancelled``; the work goes
    on in ``nursery``. An ``Exception`` it raises is re-raised to the waiter, or logged
    (``task.failed``) if the waiter has left. If ``nursery`` is already closed to new
    tasks (its owner's run is ending), the work runs in the caller's task, shielded.
    """
    done = trio.Event()
    failure: list[Exception] = []
    waiting = True

    async def run() -> None:
        try:
            await fn(*args)
        except Exception as exc:  # noqa: BLE001 - handed to the waiter, or logged
            if waiting:
                failure.append(exc)
            else:
                emit(TaskFailed(task=_task_name(fn), error=_error_of(exc)))
        finally:
            done.set()

    try:
        nursery.start_soon(run)
    except RuntimeError:
        # The nursery is closing (its owner's run is ending): no task can join it. The
        # work still must complete, so it runs here, shielded from the caller's cancel.
        with trio.CancelScope(shield=True):
            await fn(*args)
        return
    try:
        await done.wait()
    except BaseException:
        waiting = False
        raise
    if failure:
        raise failure[0]


def _task_name(fn: Callable[..., Awaitable[object]]) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else repr(fn)


def _error_of(exc: Exception) -> ActorError | str:
    """An :class:`ActorError` as it is; anything else as its ``repr`` (as logged)."""
    return exc if isinstance(exc, ActorError) else repr(exc)
