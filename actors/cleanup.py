"""An instance's cleanup hook, run once nothing of it runs any more.

Exactly one hook runs on every way a started instance ends: ``on_restart(error)`` when
it crashed and is restarted, ``on_stop(reason)`` otherwise — a stop (``reason`` is the
stop's), a crash not restarted (``"crashed:<code>"``), a kill (stop timeout, brutal
shutdown), an abort or an enclosing cancel (``"cancelled: <reason>"``).

A hook runs shielded, within the slot's ``cleanup_budget`` seconds: past it the hook is
cancelled and ``actor.cleanup_timeout`` logged. A hook that raises is logged as
``actor.cleanup_failed`` (the instance is going away regardless), never raised — unless
it is ``KeyboardInterrupt`` / ``SystemExit`` (:func:`~actors.exits.must_propagate`). A
hook the instance's class does not override is not run at all (no shielded scope).
"""

from __future__ import annotations

from typing import Any, Final

import trio

from actors.actor import Actor, overrides
from actors.errors import normalize
from actors.events import ActorCleanupFailed, ActorCleanupTimeout
from actors.exits import AfterCrash, Exit, ExitKind, must_propagate
from actors.observe import emit

DEFAULT_CLEANUP_BUDGET: Final = 5.0


async def clean_up_after(instance: Actor, exit_: Exit, *, budget: float, path: str) -> None:
    """The cleanup hook ``exit_`` calls for (see the module docstring)."""
    if exit_.after is AfterCrash.RESTART and exit_.error is not None:
        await run_cleanup_hook(instance, "on_restart", exit_.error, budget=budget, path=path)
    elif exit_.kind is ExitKind.CANCELLED:
        reason = f"cancelled: {exit_.reason}"
        await run_cleanup_hook(instance, "on_stop", reason, budget=budget, path=path)
    else:
        await run_cleanup_hook(instance, "on_stop", exit_.reason, budget=budget, path=path)


async def run_cleanup_hook(
    instance: Actor, hook: str, arg: Any, *, budget: float, path: str
) -> None:
    """Run ``instance.<hook>(arg)`` shielded, within ``budget`` seconds, if overridden."""
    if not overrides(instance, hook):
        return
    with trio.move_on_after(budget, shield=True) as scope:
        try:
            await getattr(instance, hook)(arg)
        except trio.Cancelled:
            raise
        except BaseException as exc:
            if must_propagate(exc):
                raise
            # The instance is going away regardless; the failure is logged, not lost.
            emit(ActorCleanupFailed(actor=path, hook=hook, error=normalize(exc)))
    if scope.cancelled_caught:
        emit(ActorCleanupTimeout(actor=path, hook=hook))
