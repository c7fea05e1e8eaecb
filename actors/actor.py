"""Actors: a trio task with a bounded mailbox, addressed by an :class:`ActorRef`.

Lifecycle of one actor *slot* (:class:`~actors.cell.ActorCell`)::

    starting ──on_start ok──▶ running ──stop()──▶ stopping ──▶ stopped
        │                       │  ▲
        │ on_start raised       │  │ fresh instance, on_start
        ▼                       ▼  │
     stopped (start raises)   crashed ──restart allowed──┘
                                │
                                └──not allowed──▶ on_stop(reason) ──▶ stopped

* ``on_start`` runs before the actor counts as started: :meth:`Runtime.spawn` returns only
  after it did (``nursery.start``). If it raises, spawn raises that typed error (a foreign
  exception is classified first) and nothing else.
* ``handle(message)`` serves calls and casts one at a time. Its return value is a call's
  reply. A returned :class:`~actors.errors.Failure` fails only that caller (errors as
  values; the actor goes on). A *raised* exception crashes the instance: the caller of that
  message gets the classified error at once, queued messages stay in the mailbox, and the
  slot's restart rule decides whether a fresh instance (constructed anew: state is plain
  attributes) carries on with the same mailbox and the same ref.
* ``on_restart(error)`` runs on the crashed instance before it is replaced; ``on_stop(reason)``
  runs on every other way a started instance ends: graceful stop, a crash that is not
  restarted, a kill (stop timeout, brutal shutdown), an abort, a cancelled scope around the
  runtime or tree. Both run shielded, within ``cleanup_budget`` seconds; an error in them
  is logged (``actor.cleanup_failed``), never raised into the runtime.
* A constructor (the factory) that raises is a start failure, exactly like ``on_start``.
* On stop the in-flight message (if any) finishes, then: every queued call fails with
  ``actor_stopped`` (``delivered=False``) and every queued cast becomes a dead letter. If
  the stop has to cancel the handler (shutdown timeout), its caller gets
  ``outcome_unknown`` (``delivered=True``).

The slot itself (mailbox, incarnations, supervision hooks) is :mod:`actors.cell`; a ref
reaches it only through the :class:`ActorAddress` protocol.

Call outcomes (all :class:`~actors.errors.ActorError`; ``docs/actors.md`` has the table of
every exit path): the handler's own error with ``delivered=True`` (an error that described
a nested call is wrapped); ``cancelled`` under an abort or a cancelled scope around the
tree or runtime; ``input_validation`` for a bad ``timeout``, before anything is queued;
``call_timeout`` (``delivered`` tells whether it had started — a call that timed
out while queued is removed and never executed, a late reply is dropped without disturbing
the actor); ``actor_stopped`` at once for a stopped actor; ``not_delivered`` when evicted
by a ``drop_oldest`` mailbox. If the *caller's* scope is cancelled the caller sees
``trio.Cancelled``; the handler is cancelled too only with ``propagate_cancel=True``.
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import trio

from actors.errors import ActorError, Code
from actors.mailbox import Envelope, Mailbox, State
from actors.timer import DeadlineTimer

DEFAULT_CALL_TIMEOUT: Final = 5.0
DEFAULT_SHUTDOWN_TIMEOUT: Final = 5.0
_INF: Final = float("inf")


def seconds(timeout: object) -> float:
    """``timeout`` as float seconds >= 0 (``inf`` allowed), or ``input_validation``.

    Any real number is accepted (``int``, ``Fraction``, a ``float`` subclass); NaN, a
    negative, a bool, anything else — or an int too large for a float — is refused.
    """
    if isinstance(timeout, bool):
        raise bad_timeout(timeout)
    if isinstance(timeout, numbers.Real):
        try:
            value = float(timeout)
        except (OverflowError, ValueError, TypeError) as exc:
            raise bad_timeout(timeout) from exc
        if value >= 0:  # NaN compares false
            return value
    raise bad_timeout(timeout)


def bad_timeout(timeout: object) -> ActorError:
    """``input_validation`` for a timeout that is not ``None`` or a number >= 0."""
    return ActorError.from_code(
        Code.INPUT_VALIDATION,
        f"timeout must be None or a number of seconds >= 0, got {type(timeout).__name__} "
        f"{timeout!r:.40}",
        delivered=False,
    )


class Deferred:
    """What :meth:`Actor.defer` returns: the call is answered later, by ``fn``."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args


class Actor:
    """Base class for actors. Override :meth:`handle` and any lifecycle hook you need.

    ``self.ref`` is set before :meth:`on_start` runs. Keep state in plain attributes: a
    restart builds a fresh instance with the factory given to ``spawn``.

    ``max_deferred`` (default 0) lets the handler answer later with :meth:`defer`, up to
    that many calls in flight at once.
    """

    ref: ActorRef
    #: Calls that may be answered later at once (see :meth:`defer`); a class default
    #: that an instance may override (an adapter takes it from its config).
    max_deferred: int = 0

    def defer(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Deferred:
        """Return this from :meth:`handle` to answer the message later (OTP's ``noreply``
        followed by ``gen_server:reply``): ``fn(*args)`` runs in the instance's own
        nursery while the actor takes its next message, and its return value is the
        reply (a returned ``Failure`` or a raised error fails only that caller; it does
        not crash the actor). At most ``max_deferred`` run at once — more wait, which
        backs the mailbox up. A caller with ``propagate_cancel=True`` that gives up
        cancels ``fn``. A stop lets deferred work finish (within the shutdown timeout);
        a crash cancels it and its callers learn ``outcome_unknown``.
        """
        if self.max_deferred < 1:
            raise TypeError(f"{type(self).__name__}.defer() needs max_deferred >= 1")
        return Deferred(fn, args)

    async def on_start(self) -> None:
        """Acquire resources. The actor counts as started only after this returns."""

    async def handle(self, message: Any) -> Any:
        """Serve one message; the return value is the reply to a call."""
        raise NotImplementedError(f"{type(self).__name__}.handle() is not implemented")

    async def on_stop(self, reason: str) -> None:
        """Release resources on a graceful stop (or a crash that is not restarted)."""

    async def on_restart(self, error: ActorError) -> None:
        """Release resources of this crashed instance before a fresh one replaces it."""

    def stop_self(self, reason: str = "normal") -> None:
        """End this instance normally after the current message.

        A *normal* exit: under a supervisor, a permanent child is restarted, a transient or
        temporary one is not. Use ``ref.stop()`` to stop an actor for good.
        """
        self.ref._address.request_exit(reason)


class CellState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    BACKING_OFF = "backing_off"
    STOPPING = "stopping"
    STOPPED = "stopped"


def overrides(instance: Actor, name: str) -> bool:
    """Whether ``instance``'s class overrides the no-op hook ``name`` of :class:`Actor`."""
    return getattr(type(instance), name) is not getattr(Actor, name)


class ActorAddress(Protocol):
    """What an :class:`ActorRef` needs of the slot behind it (an ``ActorCell``).

    The ref does the sending itself — it builds the :class:`~actors.mailbox.Envelope`
    (``owner`` is the address), puts it in :attr:`mailbox`, watches its deadline on
    :attr:`timer` and parks the caller — so a call costs no more than plain attribute
    reads on the address. What to answer when is the address's: a refused message
    (:meth:`stopped_error`, :meth:`dead_letter`), an evicted one (:meth:`evicted`), one
    whose caller gave up (:meth:`caller_gave_up`). The timer's callback fails an
    expired call through the owner of its envelope.
    """

    @property
    def name(self) -> str:
        """The name the slot is registered under."""

    @property
    def path(self) -> str:
        """The slot's path, as errors and events name it (``actor``)."""

    @property
    def state(self) -> CellState:
        """The slot's state now."""
        ...

    @property
    def restarts(self) -> int:
        """Restarts of the slot so far."""

    @property
    def accepting(self) -> bool:
        """Whether new messages are taken (``False``: calls fail at once, casts
        dead-letter)."""

    @property
    def mailbox(self) -> Mailbox:
        """The slot's mailbox (its messages outlive restarts)."""
        ...

    @property
    def timer(self) -> DeadlineTimer:
        """Where a call's deadline is watched."""

    def stopped_error(self, *, delivered: bool = False) -> ActorError:
        """What a caller the slot cannot serve gets: ``cancelled`` while an enclosing
        cancel is under way, else ``actor_stopped``."""

    def cancel_reason(self) -> str | None:
        """The reason of a cancel in effect for the slot's subtree, else ``None``."""

    def evicted(self, envelope: Envelope) -> None:
        """Answer ``envelope``, pushed out of a full ``drop_oldest`` mailbox."""

    def caller_gave_up(self, envelope: Envelope) -> None:
        """The caller of ``envelope`` was cancelled: withdraw (or cancel) its request."""

    def dead_letter(self, message: Any, reason: str) -> None:
        """Record ``message``, sent to the slot, as undeliverable for ``reason``."""

    def request_exit(self, reason: str) -> None:
        """End the current instance normally after its in-flight message."""

    async def stop(self, reason: str, timeout: float | None) -> None:
        """Stop the slot for good (see :meth:`ActorRef.stop`)."""


class Receipt:
    """Whether a call's message reached the actor, for a caller that left cancelled:
    pass one to :meth:`ActorRef.call` (``receipt=``). ``delivered`` stays ``None`` unless
    the caller is cancelled while it waits; then it is ``False`` when the message was
    withdrawn before the actor took it (still queued, or waiting for mailbox room: it is
    never handled) and ``True`` when the handler had it. What a caller that reserved
    something for the call (a rate limit) needs to give it back whole."""

    __slots__ = ("delivered",)

    def __init__(self) -> None:
        self.delivered: bool | None = None


class ActorRef:
    """The address of an actor slot. Valid across restarts; cheap to copy and compare."""

    __slots__ = ("_address",)

    def __init__(self, address: ActorAddress) -> None:
        self._address = address

    @property
    def name(self) -> str:
        """The actor's name in its runtime."""
        return self._address.name

    @property
    def path(self) -> str:
        """The actor's path (``tree/sub/worker``), as errors and events name it."""
        return self._address.path

    @property
    def state(self) -> CellState:
        """The slot's state now (starting, running, restarting, backing off, stopping,
        stopped)."""
        return self._address.state

    @property
    def restarts(self) -> int:
        """How many times the actor behind this ref was restarted (the ref stays valid)."""
        return self._address.restarts

    def __repr__(self) -> str:
        return f"<ActorRef {self._address.path} {self._address.state}>"

    async def call(
        self,
        message: Any,
        *,
        timeout: float | None = DEFAULT_CALL_TIMEOUT,
        propagate_cancel: bool = False,
        receipt: Receipt | None = None,
    ) -> Any:
        """Send ``message`` and wait for the reply (see the module docstring for outcomes).

        ``receipt``: filled if the caller is cancelled while it waits (see
        :class:`Receipt`).

        ``timeout`` is in seconds (``None`` or ``math.inf``: wait as long as the actor
        lives; ``0``: only a reply in the same instant); it covers waiting for mailbox room,
        queueing and handling. A timeout that is not a number >= 0 (NaN, negative, a
        string, a bool) fails with ``input_validation`` before anything is queued.
        """
        deadline = _INF
        if timeout is not None:
            if type(timeout) is not float or not timeout >= 0:  # NaN compares false
                timeout = seconds(timeout)
            # Computed before anything is queued: nothing after the put may raise.
            deadline = trio.current_time() + timeout
        address = self._address
        if not address.accepting:
            raise address.stopped_error()
        envelope = Envelope(message, True, trio.lowlevel.current_task(), propagate_cancel, address)
        evicted = address.mailbox.put(envelope)
        if evicted is not None:
            address.evicted(evicted)
        if deadline != _INF:
            address.timer.add(envelope, deadline)

        def abort(_: object) -> trio.lowlevel.Abort:
            if receipt is not None:
                state = envelope.state
                receipt.delivered = state is not State.QUEUED and state is not State.WAITING_ROOM
            address.caller_gave_up(envelope)
            return trio.lowlevel.Abort.SUCCEEDED

        try:
            return await trio.lowlevel.wait_task_rescheduled(abort)
        except ActorError as err:
            if err.code is Code.CALL_TIMEOUT:
                reason = address.cancel_reason()
                if reason is not None:
                    # An abort raced the timeout: cancellation wins, whichever came first.
                    raise ActorError.from_code(
                        Code.CANCELLED, reason, actor=address.path, delivered=err.delivered
                    ) from err
            raise

    async def cast(self, message: Any) -> None:
        """Send ``message`` without waiting for it to be handled.

        With a full backpressure mailbox this waits for room (FIFO). A cast to a stopped
        actor becomes a dead letter. A sender cancelled while waiting for room withdraws the
        message (it is never delivered, and the sender sees ``Cancelled``).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        address = self._address
        if not address.accepting:
            address.dead_letter(message, "actor_stopped")
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        envelope = Envelope(message, False, None, False, address)
        mailbox = address.mailbox
        evicted = mailbox.put(envelope)
        if evicted is not None:
            address.evicted(evicted)
        if envelope.state is not State.WAITING_ROOM:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        envelope.caller = trio.lowlevel.current_task()
        envelope.sender_parked = True

        def abort(_: object) -> trio.lowlevel.Abort:
            mailbox.abandon(envelope)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def try_cast(self, message: Any) -> None:
        """Queue ``message`` now or raise ``mailbox_full`` (a ``drop_oldest`` mailbox evicts)."""
        address = self._address
        if not address.accepting:
            address.dead_letter(message, "actor_stopped")
            return
        mailbox = address.mailbox
        if mailbox.full() and mailbox.overflow == "backpressure":
            raise ActorError.from_code(
                Code.MAILBOX_FULL,
                f"mailbox of {address.path} is full ({mailbox.capacity})",
                actor=address.path,
                delivered=False,
            )
        evicted = mailbox.put(Envelope(message, False, None, False, address))
        if evicted is not None:
            address.evicted(evicted)

    async def stop(
        self, reason: str = "normal", *, timeout: float | None = DEFAULT_SHUTDOWN_TIMEOUT
    ) -> None:
        """Stop the actor for good and wait until it is stopped.

        The in-flight message finishes; after ``timeout`` seconds the actor is cancelled
        (reason ``shutdown:<name>``). Under a supervisor this terminates the child (it is
        not restarted, whatever its restart type), and the child's ``ChildSpec.shutdown``
        sets the time allowed, not ``timeout``. Once begun, the stop completes even if the
        caller is cancelled (the caller leaves at once). Called from the actor's own
        handler or deferred work, it returns at once and the stop takes effect after the
        current message. A timeout that is not a number >= 0 fails with
        ``input_validation`` before anything is stopped.
        """
        if timeout is not None:
            timeout = seconds(timeout)
        await self._address.stop(reason, timeout)


def address_of(ref: ActorRef) -> ActorAddress:
    """The slot behind ``ref`` (what :func:`actors.lowlevel.cell_of` narrows to the cell
    a supervisor drives)."""
    return ref._address
