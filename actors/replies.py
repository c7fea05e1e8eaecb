"""What the callers of an actor slot are answered, once the slot knows.

Every call gets exactly one answer (:meth:`~actors.mailbox.Envelope.resolve` ignores a
second one, for a caller that already gave up). These functions build it from what
happened; the slot (:mod:`actors.cell`) and its incarnation (:mod:`actors.incarnation`)
decide when:

* the handler (or deferred work) returned: its value, or for a returned
  :class:`~actors.errors.Failure` that error (:func:`answer`);
* it raised: the classified error as the caller of a message that ran sees it (:func:`ran`);
* the incarnation ended with the call still running: ``cancelled`` while a cancel is in
  effect, else ``outcome_unknown`` (:func:`answer_unfinished`), ``delivered=True`` both;
* the caller gave up (cancelled, or its call timed out): a queued request is never run, a
  running ``propagate_cancel`` one is cancelled (:func:`withdraw`, :func:`time_out`); a
  timeout that fires while a cancel is in effect is ``cancelled``;
* a ``drop_oldest`` mailbox evicted it: ``not_delivered`` (a cast: a dead letter).

A cast has no caller: its envelope is only marked done (a returned ``Failure`` is logged
as ``actor.cast_failed``).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import attrs
import trio
from outcome import Error, Value

from actors.deadletters import DeadLetters
from actors.errors import ActorError, Code, Failure
from actors.events import ActorCastFailed, ActorLateReply
from actors.mailbox import Envelope, Mailbox, State
from actors.observe import emit, enabled

_DEBUG: Final = logging.DEBUG


def answer(envelope: Envelope, result: Any, path: str) -> None:
    """Resolve a handled message with what the handler (or deferred work) returned."""
    if isinstance(result, Failure):
        err = ran(result.to_error(), path)
        if envelope.is_call:
            envelope.resolve(Error(err))
        else:
            envelope.state = State.DONE
            emit(ActorCastFailed(actor=path, error=err))
    elif envelope.is_call:
        if not envelope.resolve(Value(result)) and enabled(_DEBUG):
            emit(ActorLateReply(actor=path))
    else:
        envelope.state = State.DONE


def ran(err: ActorError, path: str) -> ActorError:
    """``err`` as the caller of a message that ran sees it: ``delivered=True``, ``path``
    as ``actor`` if it has none. An error carrying ``delivered=False`` describes a
    nested call the handler made: it is wrapped (a copy, the original as its cause)."""
    if err.actor is None:
        err.actor = path
    if err.delivered is None:
        err.delivered = True
    elif err.delivered is False:
        nested = err
        err = attrs.evolve(nested, delivered=True)
        err.__cause__ = nested
    return err


def cancelled_after_running(reason: str, path: str, cause: BaseException | None) -> ActorError:
    """``cancelled`` for a caller whose request ran (or was running) when a cancel won."""
    return ActorError.from_code(Code.CANCELLED, reason, cause=cause, actor=path, delivered=True)


def answer_unfinished(
    envelope: Envelope, path: str, cancel: str | None, cause: BaseException | None
) -> None:
    """The incarnation ended while ``envelope``'s call ran: ``cancelled`` with ``cancel``
    (``cause``: the failure the cancel superseded) if a cancel is in effect, else
    ``outcome_unknown``."""
    if cancel is not None:
        err = cancelled_after_running(cancel, path, cause)
    else:
        err = ActorError.from_code(
            Code.OUTCOME_UNKNOWN,
            f"{path} stopped while handling the request",
            actor=path,
            delivered=True,
        )
    envelope.resolve(Error(err))


def stopped_error(path: str, cancel: str | None, *, delivered: bool = False) -> ActorError:
    """``cancelled`` with ``cancel`` while a cancel is in effect, else ``actor_stopped``."""
    if cancel is not None:
        return ActorError.from_code(Code.CANCELLED, cancel, actor=path, delivered=delivered)
    return ActorError.from_code(
        Code.ACTOR_STOPPED, f"{path} is stopped", actor=path, delivered=delivered
    )


def evict(envelope: Envelope, path: str, dead_letters: DeadLetters) -> None:
    """Resolve an envelope a ``drop_oldest`` mailbox pushed out: a call fails with
    ``not_delivered``, a cast becomes a dead letter (``mailbox_overflow``)."""
    envelope.state = State.ABANDONED
    if envelope.is_call and envelope.caller is not None:
        err = ActorError.from_code(
            Code.NOT_DELIVERED,
            f"evicted from the full mailbox of {path}",
            actor=path,
            delivered=False,
        )
        trio.lowlevel.reschedule(envelope.caller, Error(err))
    else:
        dead_letters.record(path, envelope.message, "mailbox_overflow")


def withdraw(envelope: Envelope, mailbox: Mailbox, path: str) -> None:
    """The caller was cancelled: never run a queued request; a running one is cancelled
    if it was sent with ``propagate_cancel`` (its result is then dropped)."""
    state = envelope.state
    if state is State.QUEUED or state is State.WAITING_ROOM:
        mailbox.abandon(envelope)
    elif state is State.RUNNING:
        envelope.state = State.ABANDONED
        if envelope.propagate_cancel and envelope.scope is not None:
            envelope.scope.cancel(reason=f"caller of {path} was cancelled")


def time_out(envelope: Envelope, mailbox: Mailbox, path: str, cancel: str | None) -> None:
    """Fail a pending call with ``call_timeout`` (``delivered``: whether it had started),
    or ``cancelled`` with ``cancel`` if a cancel is in effect for the slot as the timeout
    fires: cancellation wins, decided now, not when the caller resumes (by then the slot
    may be closed).

    A caller that timed out has given up like a cancelled one: a queued request is
    removed, and with ``propagate_cancel=True`` its running handler (or deferred work)
    is cancelled.
    """
    started = envelope.state is State.RUNNING
    if started:
        envelope.state = State.ABANDONED
        if envelope.propagate_cancel and envelope.scope is not None:
            envelope.scope.cancel(reason=f"caller of {path} timed out")
    else:
        mailbox.abandon(envelope)
    if cancel is not None:
        err = ActorError.from_code(Code.CANCELLED, cancel, actor=path, delivered=started)
    else:
        err = ActorError.from_code(
            Code.CALL_TIMEOUT,
            f"no reply from {path} within the call timeout",
            actor=path,
            delivered=started,
        )
    if envelope.caller is not None:
        trio.lowlevel.reschedule(envelope.caller, Error(err))
