"""One attempt: admit, call once, classify, record the breaker's verdict, settle, charge.

:func:`attempt` is the one place this sequence is written; :class:`~supervisors.Resilience`,
the provider pool (its general walk and its fast path) and the run engine's node attempts
are built on it. :func:`attempt` checks its arguments and returns the coroutine of
:func:`attempt_unchecked`, the sequence itself — which the callers that checked
everything once, where they were built (``Resilience``, the pool), call directly. It
never retries and never picks a target: it makes one attempt on the target it is given
and says how it went, as one of four values:

* :class:`Replied` — the call answered (``value``, and the ``usage`` it reported);
* :class:`Faulted` — the call was sent and failed: it raised, or returned an
  :class:`~actors.ActorError`, or its answer was refused by ``usage_of`` (``error``,
  classified, cause kept);
* :class:`TurnedAway` — nothing was sent: the budget, the limiter or the breaker refused
  (``error``: ``budget_exceeded`` / ``turn_limit`` / ``run_timeout``, ``rate_limited`` or
  ``circuit_open``, with its ``retry_after``; ``by`` says which);
* :class:`CutOff` — the call was still running at ``deadline`` and was cancelled
  (``error``: ``timeout``, not retryable).

A cancellation of the caller (or of a scope around it) is not a value: it propagates as
``trio.Cancelled`` once everything below is released.

**The order, and why.** Admission is budget, then limiter, then breaker:

1. the budget's check — a cap reached refuses; it takes nothing;
2. the limiter's reservation of one request and ``tokens`` tokens — a wait past the
   limiter's deadline refuses with ``rate_limited`` and takes nothing (with
   ``wait=False`` any wait refuses: the caller rotates instead of waiting);
3. the breaker's admission of the provider key and the (provider, model) key — an open
   breaker refuses with ``circuit_open`` and the reservation is given back.

The breaker comes last because its admission may take the *one* probe lease of a
half-open breaker: a call the budget or the limiter refuses never holds it. The limiter
before it, because a reservation is given back whole and cheaply. When the state is in
process, the limiter and the breaker are asked synchronously first (``acquire_fast``,
``admit_fast``: no coroutine when nothing needs to wait or change), in the same order; the
coroutines are the fallback.

Then the call is made once (``call`` is a coroutine not yet started, awaited here; cut at
``deadline``, an absolute trio time, when given), and the ending is settled:

* **replied** — breaker: success (not recorded when it changes nothing,
  ``unchanged_by_success``); reservation: settled with ``usage`` (kept when there is
  none); budget: charged with ``usage``;
* **faulted** — breaker: the error's verdict; reservation: given back whole when the
  message was not delivered (``delivered is False``), settled with ``error.usage`` when
  there is one, else kept; budget: charged with ``error.usage``;
* **cut off** — breaker: no verdict (a probe lease is freed); reservation: kept (the
  request may have reached the provider); budget: not charged;
* **cancelled** — breaker: no verdict (a probe lease is freed); reservation: given back
  whole when cancelled before the call (during admission), or during it but before the
  actor took the message (``receipt.delivered is False``: withdrawn, never handled —
  ``book`` is told :meth:`~Bookkeeping.withdrawn`, not ``ended``), else as for a failure
  without usage: kept; budget: not charged;
* **turned away** — reservation given back whole; nothing recorded or charged.

A caller already cancelled when the attempt starts gets ``trio.Cancelled`` at once and
takes nothing (``checkpoint_if_cancelled``: no schedule point when it is not cancelled).
A cancellation is anything that is not an ``Exception``: ``trio.Cancelled``, a group
holding one next to other errors (:func:`actors.lowlevel.cancellation_reason`, which the
breaker's ``record`` applies), ``KeyboardInterrupt``. It is re-raised as it is.

``book`` (optional, a :class:`Bookkeeping`) is told when the call is sent (``sent``) and
how (and when) the attempt ended (``ended``) — or that it was withdrawn unsent
(``withdrawn``) — before the budget is charged: the pool writes its ledger there and says
what to charge (the usage priced, a stream's estimated partial usage). A charge that
passes a cap is raised (the refusal's error) once everything is settled: it ends
whatever the caller was doing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Coroutine
from types import CoroutineType
from typing import Any, Final, Literal, Protocol

import attrs
import trio

from actors import ActorError, Code, Receipt, Usage, classify
from supervisors.resilience.breaker import Admission, Breaker
from supervisors.resilience.budget import Budget
from supervisors.resilience.ratelimit import Permit, RateLimiter

#: What refused an attempt.
RefusedBy = Literal["budget", "limiter", "breaker"]
#: The usage a reply reports (``None``: none). Raising an :class:`~actors.ActorError`
#: refuses the reply: the attempt is :class:`Faulted` with that error.
UsageOf = Callable[[Any], Usage | None]

_CUT: Final = object()  # the call was cut at the deadline
_NOT_GIVEN: Final = object()  # bad_arguments(): no call to check
_clock = trio.lowlevel.current_clock
_checkpoint_if_cancelled = trio.lowlevel.checkpoint_if_cancelled
_INF: Final = math.inf
#: What the breaker is told of a call cut at the deadline: a cancellation (no verdict,
#: a probe lease freed). Never raised; the breaker reads its code only.
_DEADLINE_CUT: Final = ActorError.from_code(Code.CANCELLED, "cut by the deadline")


@attrs.define  # not frozen: made on every call's hot path, where frozen costs 2x
class Replied:
    """The call answered ``value``; ``usage`` is what it reported (``None``: nothing).
    Read-only by convention (the other outcomes are frozen; this one is built on every
    successful call, and a frozen attrs class's ``__init__`` costs twice as much)."""

    value: Any
    usage: Usage | None = None


@attrs.frozen
class Faulted:
    """The call was sent and failed with ``error`` (classified; its ``usage`` was charged)."""

    error: ActorError


@attrs.frozen
class TurnedAway:
    """Nothing was sent: ``by`` refused the attempt with ``error`` (its ``retry_after``:
    when it may admit again; ``None`` for a budget, or a breaker open for good)."""

    error: ActorError
    by: RefusedBy


@attrs.frozen
class CutOff:
    """The call was still running at the deadline and was cancelled: ``error`` is its
    ``timeout`` (not retryable)."""

    error: ActorError


#: An attempt that was sent.
Ended = Replied | Faulted | CutOff
#: Every outcome of :func:`attempt`.
Outcome = Replied | Faulted | TurnedAway | CutOff


class Bookkeeping(Protocol):
    """Told about one attempt as it goes (synchronously: nothing may be awaited there)."""

    def sent(self, now: float) -> None:
        """The attempt was admitted and the call is about to be made, at trio time ``now``."""

    def ended(self, outcome: Ended | None, now: float) -> Usage | None:
        """The sent attempt ended, at trio time ``now`` (``outcome`` ``None``: cancelled
        after the actor took the call, and about to be re-raised); return the usage to
        charge the budget with (``None``: nothing)."""

    def withdrawn(self) -> None:
        """The call was not sent after all: its caller was cancelled before the actor
        took it (the receipt says so), and the cancellation is about to be re-raised.
        Told instead of :meth:`ended`; nothing is charged."""


def attempt(
    call: Coroutine[Any, Any, Any],
    *,
    provider: str,
    model: str | None = None,
    breaker: Breaker | None = None,
    limiter: RateLimiter | None = None,
    budget: Budget | None = None,
    tokens: int = 0,
    deadline: float | None = None,
    wait: bool = True,
    usage_of: UsageOf | None = None,
    book: Bookkeeping | None = None,
    receipt: Receipt | None = None,
) -> Coroutine[Any, Any, Outcome]:
    """Make one attempt of ``call`` on the target ``(provider, model)``; see the module
    docstring for the sequence and what each ending does. ``await attempt(...)``.

    ``call`` is the call to make, as a coroutine not yet started (``ref.call(message,
    timeout=…)``): it is awaited once when the attempt is admitted, and closed unstarted
    when it is refused (or cancelled during admission) — so nothing of it runs.
    ``receipt``: the :class:`~actors.Receipt` that ``call`` fills (``ref.call(…,
    receipt=receipt)``), read when the caller is cancelled during the call: a call
    withdrawn before the actor took it was never sent (without one, a cancelled call
    counts as sent).

    ``tokens``: the limiter's estimate (an ``int`` >= 0). ``deadline``: an absolute trio
    time at which a running call is cut (``None`` or ``inf``: never); it bounds the
    limiter's wait too (else trio's effective deadline does). ``wait=False``: a limiter
    without room *now* refuses rather than waits. ``usage_of``: the usage of a reply
    (default: none). Not a checkpoint of its own unless the caller is already cancelled
    (then ``trio.Cancelled`` at once, nothing taken): the call is one; a refusal returns
    without yielding (the caller yields). Arguments of the wrong type (a ``tokens`` that
    is negative, a float, NaN; a NaN deadline) are ``input_validation``, raised (by this
    call, before anything is taken) with ``call`` closed; the attempt itself is
    :func:`attempt_unchecked`'s coroutine, returned here to be awaited.
    """
    if (
        type(tokens) is not int
        or tokens < 0
        or type(provider) is not str
        or (model is not None and type(model) is not str)
        or (deadline is not None and (type(deadline) not in (int, float) or deadline != deadline))
        or (breaker is not None and not isinstance(breaker, Breaker))
        or (limiter is not None and not isinstance(limiter, RateLimiter))
        or (budget is not None and not isinstance(budget, Budget))
        or (receipt is not None and not isinstance(receipt, Receipt))
        or type(call) is not CoroutineType
    ):
        if type(call) is CoroutineType:
            call.close()
        raise bad_arguments(
            "attempt()", provider, model, tokens, budget, deadline, breaker, limiter, call, receipt
        )
    return attempt_unchecked(
        call,
        provider,
        model,
        breaker,
        limiter,
        budget,
        tokens,
        deadline,
        wait,
        usage_of,
        book,
        receipt,
    )


async def attempt_unchecked(
    call: Coroutine[Any, Any, Any],
    provider: str,
    model: str | None,
    breaker: Breaker | None,
    limiter: RateLimiter | None,
    budget: Budget | None,
    tokens: int,
    deadline: float | None,
    wait: bool,
    usage_of: UsageOf | None,
    book: Bookkeeping | None,
    receipt: Receipt | None,
    /,
) -> Outcome:
    """:func:`attempt` without the checks of its arguments, which are positional, in
    :func:`attempt`'s order — for a caller that checked them once, where it was built
    (:class:`~supervisors.Resilience` checks its breaker and limiter when it is made and
    a call's own arguments on each call; the provider pool checks everything when it is
    made and makes the rest itself). Anything :func:`attempt` would refuse is undefined
    here."""
    permit: Permit | None = None
    admission: Admission | None = None
    clock = _clock()  # one trio run's: valid across the awaits below
    # The trio time, read once: valid until the first await (the synchronous path has none).
    now = clock.current_time()
    try:
        # A caller already cancelled takes nothing, is refused nothing: trio.Cancelled
        # (a schedule point only then).
        await _checkpoint_if_cancelled()
        if budget is not None:
            refusal = await budget.check_or_refuse()
            if refusal is not None:
                call.close()
                return TurnedAway(refusal, "budget")
            now = clock.current_time()
        if limiter is not None:
            # Synchronous when the in-process buckets have room (the fast path only saves
            # an await: acquire_or_refuse would grant the same permit).
            permit = limiter.acquire_fast(
                provider,
                tokens=tokens,
                now=now,  # pragma: no mutate: equivalent, None reads the same clock here
            )
            if permit is None:
                acquired = await limiter.acquire_or_refuse(
                    provider, tokens=tokens, deadline=deadline if wait else now
                )
                if isinstance(acquired, ActorError):
                    call.close()
                    return TurnedAway(acquired, "limiter")
                permit = acquired
                now = clock.current_time()
        if breaker is not None:
            # Synchronous for a clean in-process breaker (the fast path only saves an
            # await: admit_or_refuse admits it alike).
            admission = breaker.admit_fast(provider, model)
            if admission is None:
                decision = await breaker.admit_or_refuse(provider, model)
                if isinstance(decision, ActorError):
                    call.close()
                    if permit is not None:
                        await limiter.release(permit)  # type: ignore[union-attr]
                    return TurnedAway(decision, "breaker")
                admission = decision
                now = clock.current_time()
    except BaseException:  # cancelled during admission: nothing was sent
        call.close()
        if permit is not None:
            await limiter.release(permit)  # type: ignore[union-attr]
        raise
    if book is not None:
        book.sent(now)
    try:
        if deadline is None or deadline == _INF:
            value = await call
        else:
            value = _CUT
            with trio.move_on_at(deadline):
                value = await call
        usage = None if usage_of is None or value is _CUT else usage_of(value)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # a cancellation (or an interrupt): no verdict
            if admission is not None:
                await breaker.record(admission, exc)  # type: ignore[union-attr]
            if receipt is not None and receipt.delivered is False:
                # Withdrawn before the actor took it: never sent, all of it goes back.
                if permit is not None:
                    await limiter.release(permit)  # type: ignore[union-attr]
                if book is not None:
                    book.withdrawn()
            elif book is not None:  # the reservation is kept: the call may have been sent
                book.ended(None, clock.current_time())
            raise
        value = classify(exc, provider=provider, model=model)
    outcome: Ended
    if value is _CUT:
        if admission is not None:  # the deadline is the caller's, not a verdict
            await breaker.record(admission, _DEADLINE_CUT)  # type: ignore[union-attr]
        outcome = CutOff(_timeout(provider, model))
    elif isinstance(value, ActorError):
        if admission is not None:
            await breaker.record(admission, value)  # type: ignore[union-attr]
        if permit is not None:
            await _give_back(limiter, permit, value)  # type: ignore[arg-type]
        outcome = Faulted(value)
        usage = value.usage
    else:
        if admission is not None and not breaker.unchanged_by_success(admission):  # type: ignore[union-attr]
            await breaker.record(admission, None)  # type: ignore[union-attr]
        if permit is not None and usage is not None:
            actual = usage.total_tokens
            if not limiter.settle_fast(permit, actual):  # type: ignore[union-attr]
                await limiter.settle(permit, actual)  # type: ignore[union-attr]
        outcome = Replied(value, usage)
    if book is not None:
        usage = book.ended(outcome, clock.current_time())
    if budget is not None and usage is not None:
        refusal = await budget.charge_or_refuse(usage, provider=provider, model=model)
        if refusal is not None:
            raise refusal
    return outcome


async def _give_back(limiter: RateLimiter, permit: Permit, error: ActorError) -> None:
    """Settle the reservation of a sent attempt that failed with ``error``: not delivered
    to the actor (``delivered is False``) — all of it goes back; with the usage it
    reports — settled with that usage (shielded: a cancel in the meantime does not undo
    it); otherwise — kept, as the request may have reached the provider."""
    if error.delivered is False:
        await limiter.release(permit)
    elif error.usage is not None:
        actual = error.usage.total_tokens
        if not limiter.settle_fast(permit, actual):
            with trio.CancelScope(shield=True):
                await limiter.settle(permit, actual)


def _timeout(provider: str, model: str | None) -> ActorError:
    return ActorError.from_code(
        Code.TIMEOUT,
        "the deadline passed during the attempt",
        retryable=False,
        provider=provider,
        model=model,
    )


def bad_arguments(
    where: str,
    provider: object,
    model: object,
    tokens: object,
    budget: object,
    deadline: object = None,
    breaker: object = None,
    limiter: object = None,
    call: object = _NOT_GIVEN,
    receipt: object = None,
) -> ActorError:
    """``input_validation`` naming the first of the arguments of :func:`attempt` that is
    wrong (one of them must be), raised by ``where`` (``call`` not given: not checked)."""
    checks: tuple[tuple[str, object, bool, str], ...] = (  # in the order attempt() checks
        ("tokens", tokens, type(tokens) is int and tokens >= 0, "an int >= 0"),
        ("provider", provider, type(provider) is str, "a str"),
        ("model", model, model is None or type(model) is str, "None or a str"),
        (
            "deadline",
            deadline,
            deadline is None or (type(deadline) in (int, float) and deadline == deadline),
            "None or a trio time (not NaN)",
        ),
        ("breaker", breaker, breaker is None or isinstance(breaker, Breaker), "None or a Breaker"),
        (
            "limiter",
            limiter,
            limiter is None or isinstance(limiter, RateLimiter),
            "None or a RateLimiter",
        ),
        ("budget", budget, budget is None or isinstance(budget, Budget), "None or a Budget"),
        (
            "receipt",
            receipt,
            receipt is None or isinstance(receipt, Receipt),
            "None or an actors.Receipt",
        ),
    )
    # The call last, and only named when nothing before it is wrong: then it is what is
    # (attempt() checks it; a caller that passes none has a wrong argument above).
    name, shown, wanted = next(
        ((name, value, wanted) for name, value, ok, wanted in checks if not ok),
        ("call", call, "a coroutine (not started)"),
    )
    return ActorError.from_code(
        Code.INPUT_VALIDATION,
        f"{where}: {name} must be {wanted}, got {type(shown).__name__} {shown!r:.40}",
        delivered=False,
    )
