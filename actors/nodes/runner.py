"""The node runner: an actor that runs one attempt of a node at a time and answers its
outcome as a value.

A runner gets :class:`NodeCall` messages (``await fn(arg)``, within ``timeout`` seconds
when one is set) and answers what ``fn`` returned, or the classified error it raised
or returned (:func:`actors.errors.normalize`: a returned ``fail(...)`` and a raised
error are the same error; an exception nothing classifies is ``internal``, logged as
``classify.unplaced``). So a node's failure fails that attempt only, never the
runner. What may not be answered as a value:

* ``trio.Cancelled`` propagates (the engine gave up: a run cancel, a timeout of the
  run); a node that raises *while* being cancelled is still cancelled — its error is
  reported as ``error.suppressed`` and the cancel goes on;
* ``KeyboardInterrupt`` propagates; any other ``BaseException`` that is not an
  ``Exception`` crashes the runner, and its supervisor decides (the caller gets the
  classified crash).

A per-attempt ``timeout`` that trips is ``timeout`` (retryable) naming the node.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import trio

from actors.actor import Actor
from actors.errors import ActorError, Code, Failure, cancel_in_effect, normalize
from actors.events import ErrorSuppressed
from actors.observe import emit


class NodeCall(NamedTuple):
    """One attempt of a node: ``await fn(arg)``; ``node_id`` names it in errors."""

    fn: Callable[[Any], Awaitable[Any]]
    arg: Any
    node_id: str
    timeout: float | None = None


class NodeRunner(Actor):
    """Runs :class:`NodeCall` messages inline, one at a time (see the module docstring)."""

    async def handle(self, message: Any) -> Any:
        fn, arg, node_id, timeout = message
        if timeout is not None:
            return await self._within(fn, arg, node_id, timeout)
        try:
            value = await fn(arg)
        except trio.Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - the attempt's failure, answered as a value
            return await self._failed(exc, node_id)
        if isinstance(value, Failure):
            return _with_node(value.to_error(), node_id)
        return value

    async def _within(
        self, fn: Callable[[Any], Awaitable[Any]], arg: Any, node_id: str, timeout: float
    ) -> Any:
        """The attempt under its own timeout: past it, ``timeout`` — also when the node
        raised while its timeout cancelled it (its error kept as the cause)."""
        try:
            with trio.move_on_after(timeout) as scope:
                value = await fn(arg)
        except trio.Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - the attempt's failure, answered as a value
            if scope.cancel_called:
                return _timed_out(timeout, node_id, exc)
            return await self._failed(exc, node_id)
        if scope.cancelled_caught:
            return _timed_out(timeout, node_id, None)
        if isinstance(value, Failure):
            return _with_node(value.to_error(), node_id)
        return value

    async def _failed(self, exc: Exception, node_id: str) -> ActorError:
        error = normalize(exc)
        reason = await cancel_in_effect()
        if reason is not None:
            emit(ErrorSuppressed(actor=self.ref.path, reason=reason, suppressed=error))
            await trio.lowlevel.checkpoint()  # raises the cancel in effect
        return error if error.node_id else _with_node(error, node_id)


def _timed_out(timeout: float, node_id: str, cause: Exception | None) -> ActorError:
    return ActorError.from_code(
        Code.TIMEOUT, f"node attempt took over {timeout} s", node_id=node_id, cause=cause
    )


def _with_node(error: ActorError, node_id: str) -> ActorError:
    error.node_id = node_id
    return error
