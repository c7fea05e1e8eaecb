"""Run budgets: tokens, cost, turns and wall clock — never looped past, never silent.

Usage of **every** attempt counts, failed and partial ones included (charge an error's
``usage`` with :meth:`Budget.charge_error`), so retries and fallbacks never under-count.
Cost comes from the usage when the provider reported it, else from the price table
(per million input / output tokens, by ``(provider, model)`` then ``(provider, "*")``).

What happens at a cap depends on ``on_exceed``:

* ``fail`` (default): the charge or check raises ``budget_exceeded`` (tokens, cost),
  ``turn_limit`` (turns) or ``run_timeout`` (wall clock) — fatal, never retried;
* ``warn``: an event ``budget.warning`` with ``exceeded=True``, and the run goes on;
* ``pause``: an event ``budget.paused``, then the async ``approve`` hook is awaited with
  a :class:`BudgetRequest`; it returns raised :class:`BudgetLimits` to go on, or ``None``
  to stop (the fail-path error is raised). Without a hook, ``pause`` fails.

Whatever the mode, crossing ``warn_at`` (a fraction, default 0.8) of a cap emits one
``budget.warning`` per dimension. A charge fails only *past* a cap (reaching it exactly
is fine); :meth:`Budget.check` runs before each attempt and refuses once a cap is
*reached*, since any further attempt would go past it.

``check``, ``charge``, ``charge_error`` and ``turn`` are checkpoints, as trio's own
functions are: a caller whose scope is cancelled gets ``trio.Cancelled``, never a cap's
error (a charge still counts the usage first: it was spent), and each yields to the
scheduler once, so a loop of refused attempts lets other tasks run.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import attrs
import trio

from actors import ActorError, Code, Usage
from actors.checks import as_float
from actors.events import BudgetPaused, BudgetWarning, Event
from actors.lowlevel import emit
from supervisors.state import MemoryState, StateBackend

OnExceed = Literal["fail", "warn", "pause"]


class Dimension(enum.StrEnum):
    TOKENS = "tokens"
    COST = "cost"
    TURNS = "turns"
    SECONDS = "seconds"


_FAIL_CODE = {
    Dimension.TOKENS: Code.BUDGET_EXCEEDED,
    Dimension.COST: Code.BUDGET_EXCEEDED,
    Dimension.TURNS: Code.TURN_LIMIT,
    Dimension.SECONDS: Code.RUN_TIMEOUT,
}


def _dollars(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    """A finite number >= 0 (not a bool): a NaN price would disable a cost cap."""
    number = as_float(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"Price.{attribute.name} must be a finite number >= 0, got {type(value).__name__}",
        )


@attrs.frozen(kw_only=True)
class Price:
    """Dollars per million tokens: finite numbers >= 0 (else ``config_invalid``)."""

    input_per_mtok: float = attrs.field(validator=_dollars)
    output_per_mtok: float = attrs.field(validator=_dollars)

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage`` at these per-million-token prices."""
        return (
            usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000


def cost_of(
    prices: Mapping[tuple[str, str], Price], usage: Usage, provider: str | None, model: str | None
) -> float | None:
    """The cost of ``usage``: as the provider reported it (``usage.cost``, when it is a
    finite number >= 0 — anything else is not a cost), else from ``prices`` by
    ``(provider, model)`` then ``(provider, "*")``; ``None`` when neither knows it."""
    reported = usage.cost
    if reported is not None and math.isfinite(reported) and reported >= 0:
        return reported
    for key in ((provider or "", model or ""), (provider or "", "*")):
        price = prices.get(key)
        if price is not None:
            return price.cost(usage)
    return None


def _cap(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """``None``, or a number >= 0 that is not NaN (not a bool): a NaN cap is no cap."""
    if value is None:
        return
    number = as_float(value)
    if number is None or math.isnan(number) or number < 0:
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"BudgetLimits.{attribute.name} must be None or a number >= 0, "
            f"got {type(value).__name__}",
        )


@attrs.frozen(kw_only=True)
class BudgetLimits:
    """Caps for one run (``None``: no cap) and what to do at them."""

    tokens: int | None = attrs.field(default=None, validator=_cap)
    cost: float | None = attrs.field(default=None, validator=_cap)
    turns: int | None = attrs.field(default=None, validator=_cap)
    seconds: float | None = attrs.field(default=None, validator=_cap)
    warn_at: float = attrs.field(
        default=0.8,
        validator=attrs.validators.and_(attrs.validators.gt(0.0), attrs.validators.le(1.0)),
    )
    on_exceed: OnExceed = attrs.field(
        default="fail", validator=attrs.validators.in_(("fail", "warn", "pause"))
    )

    def cap(self, dimension: Dimension) -> float | None:
        """The limit on ``dimension`` (``None``: none)."""
        value = getattr(self, str(dimension))
        return None if value is None else float(value)


@attrs.frozen
class BudgetRequest:
    """What a ``pause`` asks the approval hook about."""

    run_id: str
    dimension: Dimension
    used: float
    limits: BudgetLimits


Approve = Callable[[BudgetRequest], Awaitable[BudgetLimits | None]]


class Budget:
    """The budget of one run. Create it when the run starts (the wall clock starts)."""

    def __init__(
        self,
        run_id: str,
        limits: BudgetLimits,
        *,
        prices: Mapping[tuple[str, str], Price] | None = None,
        approve: Approve | None = None,
        state: StateBackend | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.run_id = run_id
        #: Called with each ``budget.warning`` / ``budget.paused`` record as it is emitted
        #: (a run copies them into its event stream).
        self.on_event = on_event
        self.limits = limits
        self.prices = dict(prices or {})
        self.approve = approve
        self.state: StateBackend = state if state is not None else MemoryState()
        self.started_at = trio.current_time()
        self.tokens = 0
        self.cost = 0.0
        self.turns = 0
        self._warned: set[Dimension] = set()

    @property
    def deadline(self) -> float:
        """The trio time at which the wall-clock cap ends (inf without one)."""
        seconds = self.limits.seconds
        return float("inf") if seconds is None else self.started_at + seconds

    def used(self, dimension: Dimension) -> float:
        """What the run has used of ``dimension`` so far (seconds: since it started)."""
        if dimension is Dimension.SECONDS:
            return trio.current_time() - self.started_at
        return float(getattr(self, str(dimension)))

    def price(self, usage: Usage, provider: str | None, model: str | None) -> float:
        """The cost of ``usage``: as reported, else from the price table, else 0."""
        cost = cost_of(self.prices, usage, provider, model)
        return 0.0 if cost is None else cost

    async def charge(
        self, usage: Usage, *, provider: str | None = None, model: str | None = None
    ) -> None:
        """Add one attempt's usage (successful, failed or partial), then apply the caps.

        The usage is counted first, even for a caller whose scope is cancelled (it was
        spent); then this is a checkpoint: a cancelled caller gets ``trio.Cancelled``
        rather than a cap's error, and a charge yields to the scheduler once.
        """
        await self._add(usage, provider, model, 0)
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._refuse(await self._enforce(Dimension.TOKENS, Dimension.COST))

    async def charge_or_refuse(
        self, usage: Usage, *, provider: str | None = None, model: str | None = None
    ) -> ActorError | None:
        """:meth:`charge` without its checkpoint, the cap's error returned, not raised.
        For a caller that checks cancellation and yields itself (``Resilience.call``)."""
        await self._add(usage, provider, model, 0)
        return await self._enforce(Dimension.TOKENS, Dimension.COST)

    async def charge_error(self, error: ActorError) -> None:
        """Charge the usage a failed attempt carried, if any (a checkpoint either way)."""
        if error.usage is None:
            await trio.lowlevel.checkpoint()
            return
        await self.charge(error.usage, provider=error.provider, model=error.model)

    async def turn(self) -> None:
        """Count the start of one agent turn; past ``turns`` it is a ``turn_limit``.

        A checkpoint: a caller whose scope is cancelled starts no turn and gets
        ``trio.Cancelled``."""
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._add(None, None, None, 1)
        await self._refuse(await self._enforce(Dimension.TURNS))

    async def check(self) -> None:
        """Before an attempt: a run that has *reached* a cap (tokens, cost, wall clock)
        starts no further attempt — any attempt would go past it.

        A checkpoint: a caller whose scope is cancelled gets ``trio.Cancelled``, never
        ``budget_exceeded``; a check yields to the scheduler once, so a loop of refused
        attempts lets other tasks run."""
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._refuse(await self.check_or_refuse())

    async def check_or_refuse(self) -> ActorError | None:
        """:meth:`check` without its checkpoint, the cap's error returned, not raised.
        For a caller that checks cancellation and yields itself (``Resilience.call``)."""
        return await self._enforce(
            Dimension.TOKENS, Dimension.COST, Dimension.SECONDS, reached=True
        )

    async def _add(
        self, usage: Usage | None, provider: str | None, model: str | None, turns: int
    ) -> None:
        if usage is None:
            tokens, cost = 0, 0.0
        else:
            tokens, cost = usage.total_tokens, self.price(usage, provider, model)
        self.tokens, self.cost, self.turns = await self.state.add_usage(
            self.run_id, tokens=tokens, cost=cost, turns=turns
        )

    @staticmethod
    async def _refuse(refusal: ActorError | None) -> None:
        """The end of a public entry point: yield (shielded), then raise the refusal."""
        await trio.lowlevel.cancel_shielded_checkpoint()
        if refusal is not None:
            raise refusal

    async def _enforce(self, *dimensions: Dimension, reached: bool = False) -> ActorError | None:
        """Apply the caps of ``dimensions``: the error to raise, or ``None`` to go on."""
        for dimension in dimensions:
            while True:
                cap = self.limits.cap(dimension)
                if cap is None:
                    break
                used = self.used(dimension)
                if used > cap or (reached and used >= cap):
                    verdict = await self._exceeded(dimension, used, cap)
                    if isinstance(verdict, ActorError):
                        return verdict
                    if verdict:
                        continue  # the cap was raised: check it again
                    break
                if used >= cap * self.limits.warn_at and dimension not in self._warned:
                    self._warned.add(dimension)
                    self._warn(dimension, used, cap, exceeded=False)
                break
        return None

    def _warn(self, dimension: Dimension, used: float, cap: float, *, exceeded: bool) -> None:
        self._emit(
            BudgetWarning(
                run_id=self.run_id, dimension=dimension, used=used, limit=cap, exceeded=exceeded
            )
        )

    def _emit(self, record: Event) -> None:
        emit(record)
        if self.on_event is not None:
            self.on_event(record)

    async def _exceeded(self, dimension: Dimension, used: float, cap: float) -> bool | ActorError:
        """Apply ``on_exceed``: ``True`` when approval raised the cap, ``False`` to go on
        (warn), else the error to raise."""
        mode = self.limits.on_exceed
        if mode == "warn":
            self._warn(dimension, used, cap, exceeded=True)
            return False
        if mode == "pause" and self.approve is not None:
            self._emit(BudgetPaused(run_id=self.run_id, dimension=dimension, used=used, limit=cap))
            raised = await self.approve(BudgetRequest(self.run_id, dimension, used, self.limits))
            if raised is not None:
                self.limits = raised
                self._warned.discard(dimension)
                return True
        return ActorError.from_code(
            _FAIL_CODE[dimension],
            f"run {self.run_id}: {dimension} {used:g} over the cap of {cap:g}",
            run_id=self.run_id,
        )
