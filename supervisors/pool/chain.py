"""One request's walk along a pool's targets: who is tried next, who waits, who is out.

A :class:`Chain` is made per request. Each target has a :class:`Slot`: how many retries
it used, when it may be retried (``ready_at``: its own retry delay), until when its
breaker or limiter refuses it (``blocked_until``), and whether it is out for this request.

* :meth:`Chain.pick` rotates: the first admissible slot at or after the cursor, wrapping
  around — after a failure the cursor moves past the failed slot, so retries of one
  target interleave with the others. A slot named by a move (the next model, a larger
  window, a content-filter opt-in) is taken first when it is admissible.
* :meth:`Chain.failed` applies :func:`~supervisors.pool.routing.move_for` to a failure;
  a ``stop`` (or a move with nowhere to go) raises the error itself. After a
  ``larger_window`` or ``opt_in`` move, only the targets that fit (a larger window, the
  opt-in) stay in the chain: a retry of one of them never rotates the request to a
  target that may not take it.
* :meth:`Chain.refused` records a breaker or limiter refusal: no retry is used, the slot
  is blocked for the ``retry_after`` it was given (at least :data:`MIN_WAIT`); an
  infinite one (a permanently open breaker) puts it out.
* :meth:`Chain.wake_at` is when the earliest slot that is not out becomes admissible —
  the only time a pool sleeps is until then, and never past its deadline.

A slot is *out* for one of three reasons (:data:`USED_UP`, :data:`SKIPPED`, :data:`GONE`);
an escalation's retry (:meth:`Chain.reopen`) brings back the first two, never the third
(a model that does not exist, a permanently open breaker, a request the target refused
on its content or size).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Sequence
from typing import Final

from actors import ActorError, Code
from actors.events import RetryScheduled
from actors.lowlevel import emit
from supervisors.pool.routing import Move, move_for
from supervisors.pool.target import Target
from supervisors.resilience.breaker import open_error
from supervisors.resilience.retry import RetryPolicy, next_delay

#: The shortest block a refusal imposes (seconds): a refusal never lets the same slot be
#: asked again in the same instant.
MIN_WAIT: Final = 1e-3

#: Out: its retries are used up.
USED_UP: Final = "used_up"
#: Out: it could not serve this request (``skip``: a capability, its actor unavailable).
SKIPPED: Final = "skipped"
#: Out for good within this request.
GONE: Final = "gone"

PolicyFor = Callable[[ActorError], RetryPolicy | None]
#: Seconds until a target could be admitted when its breaker would refuse it now
#: (``inf``: for good), else ``None`` (:meth:`~supervisors.Breaker.blocked_fast`).
Blocked = Callable[[Target], float | None]
#: Whether a target's model is known not to exist (its breaker open for good).
Gone = Callable[[Target], bool]


class Slot:
    """One target's state within one request."""

    __slots__ = ("blocked_until", "index", "out", "ready_at", "retries", "target")

    def __init__(self, target: Target, index: int) -> None:
        self.target = target
        self.index = index
        self.retries = 0
        self.ready_at = -math.inf
        self.blocked_until = -math.inf
        self.out: str | None = None  # pragma: no mutate: why it is out (None: in); read for truth

    def available_at(self) -> float:
        return max(self.ready_at, self.blocked_until)


class Chain:
    """The targets of one request (see the module docstring)."""

    __slots__ = ("blocked", "cursor", "gone", "last", "policy_for", "preferred", "slots")

    def __init__(
        self,
        targets: Sequence[Target],
        policy_for: PolicyFor,
        blocked: Blocked | None = None,
        gone: Gone | None = None,
    ) -> None:
        self.slots = [Slot(target, index) for index, target in enumerate(targets)]
        self.policy_for = policy_for
        self.blocked = blocked
        self.gone = gone
        self.cursor = 0
        self.preferred: Slot | None = None
        # The last failure: an error, or a slot skipped as blocked (its circuit_open is
        # built only if the chain ends on it).
        self.last: ActorError | tuple[Slot, float] | None = None

    def last_failure(self) -> ActorError | None:
        """The last failure of the chain (a skip for an open breaker as ``circuit_open``)."""
        last = self.last
        if isinstance(last, tuple):
            slot, wait = last
            return open_error(slot.target.provider, slot.target.model, wait)
        return last

    def add(self, target: Target) -> Slot:
        """A target added by an escalation decision: tried next."""
        slot = Slot(target, len(self.slots))
        self.slots.append(slot)
        self.preferred = slot
        return slot

    def pick(self, now: float, busy: Container[Slot] = ()) -> Slot | None:
        """The next admissible slot (see the module docstring), or ``None``."""
        preferred = self.preferred
        if preferred is not None:
            if preferred.out:
                self.preferred = None
            elif self._admissible(preferred, now, busy):
                self.preferred = None
                self.cursor = preferred.index + 1
                return preferred
        slots = self.slots
        count = len(slots)
        waiting = self.preferred  # None, or a preferred slot that is not admissible yet
        for step in range(count):
            slot = slots[(self.cursor + step) % count]
            if self._admissible(slot, now, busy):
                self.cursor = slot.index + 1
                return slot
            if self.preferred is not waiting:  # a skip named where to go (a model is gone)
                return self.pick(now, busy)
        return None

    def _admissible(self, slot: Slot, now: float, busy: Container[Slot]) -> bool:
        """In the chain, not waiting, not running — and not known to be refused by its
        breaker (then it is blocked until the probe time, without asking)."""
        if slot.out or slot.available_at() > now or slot in busy:
            return False
        blocked = self.blocked
        if blocked is not None:
            wait = blocked(slot.target)
            if wait is not None:
                self.skip(slot, wait, now)
                return False
        return True

    def skip(self, slot: Slot, wait: float, now: float) -> None:
        """``slot``'s breaker would refuse it for ``wait`` seconds (``inf``: for good).

        A model known not to exist moves the chain as ``model_not_found`` would: to the
        same provider's next model, else the request ends ``model_not_found``."""
        self.last = (slot, wait)
        if math.isinf(wait) and self.gone is not None and self.gone(slot.target):
            target = slot.target
            self._next_model(
                slot,
                ActorError.from_code(
                    Code.MODEL_NOT_FOUND,
                    "the model is known not to exist: its breaker is open until reset",
                    provider=target.provider,
                    model=target.model,
                ),
            )
            return
        self._block(slot, wait, now)

    def refused(self, slot: Slot, error: ActorError, now: float) -> None:
        """A breaker or limiter refused ``slot``: blocked for its ``retry_after``."""
        self.last = error
        wait = error.retry_after
        self._block(slot, math.inf if wait is None else wait, now)

    @staticmethod
    def _block(slot: Slot, wait: float, now: float) -> None:
        if math.isinf(wait):
            slot.out = GONE
        else:
            slot.blocked_until = now + max(wait, MIN_WAIT)

    def failed(self, slot: Slot, error: ActorError, now: float) -> None:
        """Apply the move of ``error`` (a sent attempt failed); raises it on a stop."""
        self.last = error
        move = move_for(error)
        if move is Move.RETRY:
            self._retry(slot, error, now)
            return
        if move is Move.STOP:
            raise error
        if move is Move.SKIP:
            slot.out = SKIPPED
            return
        if move is Move.NEXT_MODEL:
            self._next_model(slot, error)
            return
        fits: Callable[[Slot], bool]
        if move is Move.LARGER_WINDOW:
            window = slot.target.context_window or 0
            fits = lambda s: (s.target.context_window or 0) > window  # noqa: E731
        else:  # Move.OPT_IN
            fits = lambda s: s.target.content_filter_fallback  # noqa: E731
        # The request may now go only where it fits — this move's target first, and on a
        # later retry too: every other slot is out for it, the failed one included.
        slot.out = GONE
        for other in self.slots:
            if not fits(other):
                other.out = GONE
        nxt = self._first(fits)
        if nxt is None:
            raise error
        self.preferred = nxt

    def _next_model(self, slot: Slot, error: ActorError) -> None:
        """The model is gone wherever it appears; the same provider's next model is
        preferred — none left: ``error`` is raised."""
        key, provider = slot.target.key, slot.target.provider
        for other in self.slots:
            if other.target.key == key:
                other.out = GONE
        nxt = self._first(lambda s: s.target.provider == provider)
        if nxt is None:
            raise error
        self.preferred = nxt

    def _retry(self, slot: Slot, error: ActorError, now: float) -> None:
        if error.retry_after is not None:
            slot.ready_at = now + error.retry_after  # known even when no retry is left
        policy = self.policy_for(error)
        step = None if policy is None else next_delay(policy, error, slot.retries)
        if step is None:
            slot.out = USED_UP
            return
        delay, source = step
        slot.retries += 1
        slot.ready_at = now + delay
        emit(RetryScheduled(attempt=slot.retries, error=error, delay=delay, source=source))

    def _first(self, fits: Callable[[Slot], bool]) -> Slot | None:
        """The first slot still in the chain that ``fits``, from the cursor on."""
        slots = self.slots
        count = len(slots)
        for step in range(count):
            slot = slots[(self.cursor + step) % count]
            if not slot.out and fits(slot):
                return slot
        return None

    def wake_at(self, busy: Container[Slot] = ()) -> float | None:
        """When the earliest slot that is not out (nor ``busy``) becomes admissible
        (``None``: none is left)."""
        times = [slot.available_at() for slot in self.slots if not slot.out and slot not in busy]
        return min(times) if times else None

    def retry_after(self, now: float) -> float | None:
        """Seconds until the earliest target is expected to take a request again, from
        the retry delays, ``retry_after`` answers and refusals seen (``None``: none
        known). Targets out for good (a permanent breaker) do not count."""
        waits = [
            at - now
            for slot in self.slots
            if (at := slot.available_at()) > now and not math.isinf(at)
        ]
        return min(waits) if waits else None

    def unblock(self) -> None:
        """Another attempt ended (a probe may have closed a breaker): the slots blocked
        by a refusal are asked again; their own retry delays stand."""
        for slot in self.slots:
            slot.blocked_until = -math.inf

    def reopen(self) -> None:
        """After an escalation's ``retry``: every slot out because its retries were used
        up or it was skipped comes back with a fresh start, and the walk starts again from
        the most preferred target; slots out for good stay out."""
        self.cursor = 0
        for slot in self.slots:
            if slot.out is not GONE:
                slot.out = None  # pragma: no mutate: out is read as a truth value, or "is GONE"
                slot.retries = 0
                slot.ready_at = slot.blocked_until = -math.inf
