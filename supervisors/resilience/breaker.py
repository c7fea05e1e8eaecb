"""Circuit breakers per provider, one probe at a time, cancellation-neutral.

::

                retryable failures >= failure_threshold
      CLOSED ──────────────────────────────────────────▶ OPEN ◀─────────────┐
        ▲  ▲          auth / payment (permanent, no expiry)  │              │
        │  └──────────────────────────────────────────────── │ ─ reset() ─┐ │
        │                                                     │ probe time │ │ probe
        │      success_threshold probes succeed               ▼            │ │ fails
        └──────────────────────────────────────────────── HALF_OPEN ───────┘─┘

* Keys: the provider; ``model_not_found`` opens the (provider, model) key instead, so a
  model downgrade on the same provider still works. A call is admitted only when both its
  provider key and its (provider, model) key admit it.
* closed → open after ``failure_threshold`` consecutive *counting* failures (default
  1). Counting: retryable errors, plus ``auth`` and ``payment`` which open at once and
  **permanently** (until :meth:`Breaker.reset`), plus ``model_not_found`` (per model,
  permanent). Request errors (``bad_request``, ``content_filter``,
  ``context_window_exceeded``) and other non-retryable errors never count against the
  provider.
* Cooldown by code: ``rate_limited`` = the error's ``retry_after``, else 60 s; ``timeout``
  30 s; ``unavailable`` 60 s; others 60 s; configurable. A longer ``retry_after`` raises
  any cooldown.
* open → half-open at the probe time: an early probe, cooldown - 30 s, when the
  cooldown is longer than 30 s — except when the cooldown came from a ``Retry-After``,
  which is honoured exactly. In half-open **exactly one** probe is admitted at a time
  (a lease of ``probe_lease`` seconds); everyone else fails fast with ``circuit_open``
  and a ``retry_after`` of the time until a probe may be tried. ``success_threshold``
  successful probes close it; a failed probe re-opens it with a fresh cooldown.
* A cancelled call neither opens nor closes the breaker and frees the probe it held —
  also one that raised a group holding ``trio.Cancelled`` next to other errors: anything
  that is not an ``Exception`` is no verdict (a group holding a ``Cancelled`` is a
  ``BaseExceptionGroup``; so is every group :func:`actors.lowlevel.cancellation_reason`
  calls a cancellation), and neither is an error whose code is ``cancelled``.
* Every transition is an event ``breaker.transition`` (provider, model, from, to, code,
  cooldown).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Final

import attrs
import trio

from actors import ActorError, Code, normalize
from actors.checks import code_set, codes_to_seconds, int_at_least, seconds, validator
from actors.events import BreakerTransition
from actors.lowlevel import emit
from supervisors.state import MemoryState, StateBackend, Transition
from supervisors.state.base import BreakerState

DEFAULT_COOLDOWNS: Final[Mapping[Code, float]] = MappingProxyType(
    {Code.RATE_LIMITED: 60.0, Code.TIMEOUT: 30.0, Code.UNAVAILABLE: 60.0}
)


@attrs.frozen(kw_only=True)
class BreakerConfig:
    """Thresholds, cooldowns and which codes count (see the module docstring). Checked
    as it is built (:mod:`actors.checks`): ``config_invalid`` naming the field for a
    threshold that is not an ``int`` >= 1, a cooldown, ``default_cooldown`` or
    ``probe_lease`` that is not finite seconds > 0, an ``early_probe`` that is not finite
    seconds >= 0, a code set holding something other than codes."""

    failure_threshold: int = attrs.field(default=1, validator=validator(int_at_least(1)))
    success_threshold: int = attrs.field(default=1, validator=validator(int_at_least(1)))
    cooldowns: Mapping[Code, float] = attrs.field(
        default=DEFAULT_COOLDOWNS, validator=validator(codes_to_seconds)
    )
    default_cooldown: float = attrs.field(default=60.0, validator=validator(seconds()))
    early_probe: float = attrs.field(default=30.0, validator=validator(seconds(zero=True)))
    probe_lease: float = attrs.field(default=30.0, validator=validator(seconds()))
    permanent: frozenset[Code] = attrs.field(
        default=frozenset({Code.AUTH, Code.PAYMENT}), validator=validator(code_set)
    )
    per_model: frozenset[Code] = attrs.field(
        default=frozenset({Code.MODEL_NOT_FOUND}), validator=validator(code_set)
    )
    ignored: frozenset[Code] = attrs.field(
        default=frozenset({Code.BAD_REQUEST, Code.CONTENT_FILTER, Code.CONTEXT_WINDOW_EXCEEDED}),
        validator=validator(code_set),
    )

    def cooldown(self, error: ActorError) -> tuple[float, float]:
        """``(cooldown, probe_after)`` for a counting failure."""
        retry_after = error.retry_after
        if error.code is Code.RATE_LIMITED and retry_after is not None:
            return retry_after, retry_after  # honoured exactly: no early probe
        cooldown = self.cooldowns.get(error.code, self.default_cooldown)
        if retry_after is not None and retry_after > cooldown:
            return retry_after, retry_after
        probe_after = cooldown - self.early_probe if cooldown > self.early_probe else cooldown
        return cooldown, probe_after


@functools.lru_cache(maxsize=4096)
def model_key(provider: str, model: str) -> str:
    """The breaker key of one (provider, model) pair."""
    return f"{provider}\x1fmodel\x1f{model}"


class Admission:
    """One admitted call: which keys it holds and whether it holds a probe lease."""

    __slots__ = ("clean", "model", "model_probe", "probe", "provider")

    def __init__(
        self,
        provider: str,
        model: str | None,
        *,
        probe: bool = False,
        model_probe: bool = False,
        clean: bool = False,
    ) -> None:
        self.provider = provider
        self.model = model
        self.probe = probe
        self.model_probe = model_probe
        self.clean = clean  # closed with nothing counted when admitted


class Breaker:
    """Circuit breakers keyed by provider (and by model for ``model_not_found``).

    Use :meth:`guard` around each provider call::

        async with breaker.guard("alpha", model="gpt-x"):
            response = await adapter.call(request)

    or :meth:`admit` then :meth:`record`. The product composes it with the limiter and the
    budget in :func:`supervisors.resilience.attempt.attempt`, the one caller of
    :meth:`admit_fast` and :meth:`admit_or_refuse`.
    ``admit`` and entering ``guard`` are checkpoints (trio's convention): a cancelled
    caller gets ``trio.Cancelled`` rather than ``circuit_open``, and a refusal yields to
    the scheduler, so a loop of refused calls cannot starve other tasks.
    """

    def __init__(
        self, config: BreakerConfig | None = None, *, state: StateBackend | None = None
    ) -> None:
        self.config = config or BreakerConfig()
        self.state: StateBackend = state if state is not None else MemoryState()
        # The in-process backend, whose state can be read without a call (hot path).
        self.local = self.state if isinstance(self.state, MemoryState) else None
        self._clean: dict[tuple[str, str | None], Admission] = {}

    @contextlib.asynccontextmanager
    async def guard(self, provider: str, model: str | None = None) -> AsyncIterator[None]:
        """An async context manager around one call guarded by this breaker alone:
        :meth:`admit` on entry (a checkpoint; ``circuit_open`` raised), :meth:`record`
        of how the block ended on exit (a cancellation records nothing and frees the
        probe lease; a clean success that changes nothing is not recorded). The
        product's calls go through :func:`supervisors.resilience.attempt.attempt`
        (budget, limiter and breaker in one sequence); this is the breaker's own form."""
        admission = await self.admit(provider, model)
        try:
            yield
        except BaseException as exc:
            await self.record(admission, exc)
            raise
        if not self.unchanged_by_success(admission):
            await self.record(admission, None)

    def admit_fast(self, provider: str, model: str | None = None) -> Admission | None:
        """A clean admission without touching state, when the in-process breakers for
        the provider (and model) are closed with nothing counted; else ``None``."""
        local = self.local
        if local is None:
            return None
        if local.breakers and (
            not local.breaker_clean(provider)
            or (model is not None and not local.breaker_clean(model_key(provider, model)))
        ):
            return None
        # A clean admission is never mutated (record() reads it, never writes it), so
        # one per (provider, model) serves every call.
        admission = self._clean.get((provider, model))
        if admission is None:
            admission = self._clean[provider, model] = Admission(provider, model, clean=True)
        return admission

    def unchanged_by_success(self, admission: Admission) -> bool:
        """Whether a success of ``admission`` would change nothing, so that recording it
        can be skipped: it was admitted clean *and* the in-process breakers of its
        provider (and model) are still clean — failures counted by other calls while it
        was in flight are reset by its success, as consecutive failures must be. Always
        ``False`` for a shared state backend (another replica may have counted some)."""
        if not admission.clean:
            return False
        local = self.local
        if local is None:
            return False
        if not local.breakers:
            return True
        model = admission.model
        return local.breaker_clean(admission.provider) and (
            model is None or local.breaker_clean(model_key(admission.provider, model))
        )

    def blocked_fast(
        self, provider: str, model: str | None = None, now: float | None = None
    ) -> float | None:
        """Seconds until a call to ``provider`` (and ``model``) could be admitted, when the
        in-process breakers would refuse it now (``inf``: open for good) — the provider's
        wait when its own breaker refuses, else the model's; ``None`` when they might
        admit it, or when the state is shared (ask :meth:`admit`). ``now``: the trio
        time, when the caller has it (default: read here). No side effects, no error
        built: how a pool skips a target known to be down."""
        local = self.local
        if local is None:
            return None
        breakers = local.breakers  # only breakers that are not closed-and-clean are here
        if not breakers:
            return None
        if now is None:
            now = trio.current_time()
        if provider in breakers:
            wait = local.breaker_blocked(provider, now)
            if wait is not None:
                return wait  # the provider's own breaker is reason enough to skip it
        if model is None:
            return None
        key = model_key(provider, model)
        return local.breaker_blocked(key, now) if key in breakers else None

    def model_gone_fast(self, provider: str, model: str) -> bool:
        """The in-process breaker of ``model`` on ``provider`` is open for good (the
        model was not found); ``False`` when it is not, or the state is shared."""
        local = self.local
        return local is not None and local.breaker_permanent(model_key(provider, model))

    async def admit(self, provider: str, model: str | None = None) -> Admission:
        """Admit a call or raise ``circuit_open`` (with the time to the next probe).

        A checkpoint: a caller whose scope is cancelled gets ``trio.Cancelled``, never
        ``circuit_open`` and never an admission; after the decision it yields to the
        scheduler (shielded: an admission once granted is always returned, so a probe
        lease cannot be lost to a cancel).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        decision = self.admit_fast(provider, model) or await self.admit_or_refuse(provider, model)
        await trio.lowlevel.cancel_shielded_checkpoint()
        if isinstance(decision, ActorError):
            raise decision
        return decision

    async def admit_or_refuse(
        self, provider: str, model: str | None = None
    ) -> Admission | ActorError:
        """:meth:`admit` as a value and without its checkpoint: the admission, or the
        ``circuit_open`` error to raise. For a caller that checks cancellation and yields
        itself (:class:`~supervisors.Resilience` does, once per call)."""
        state = self.state
        now = trio.current_time()
        lease = self.config.probe_lease
        snap = await state.breaker_admit(provider, now=now, lease_ttl=lease)
        self._emit(snap.transition, provider, None)
        if not snap.admitted:
            return open_error(provider, model, snap.retry_after)
        admission = Admission(provider, model, probe=snap.probe, clean=snap.clean)
        if model is not None:
            key = model_key(provider, model)
            model_snap = await state.breaker_admit(key, now=now, lease_ttl=lease)
            self._emit(model_snap.transition, provider, model)
            if not model_snap.admitted:
                await state.breaker_release(provider, probe=snap.probe)
                return open_error(provider, model, model_snap.retry_after)
            admission.model_probe = model_snap.probe
            admission.clean = snap.clean and model_snap.clean
        return admission

    async def record(self, admission: Admission, exc: BaseException | None) -> None:
        """Record how an admitted call ended: ``None`` for success, else what it raised.

        Shielded: a verdict (or the release of a probe lease) is recorded even while the
        caller is being cancelled. Anything that is not an ``Exception`` records nothing
        but frees the lease: a cancellation (``trio.Cancelled``, or a group holding one,
        whatever else it holds — a ``BaseExceptionGroup``), ``KeyboardInterrupt``,
        ``GeneratorExit``…: not the provider's doing; so does an error whose code is
        ``cancelled``.
        """
        if exc is None and self.unchanged_by_success(admission):
            return
        with trio.CancelScope(shield=True):
            if exc is None:
                await self._success(admission)
            else:
                # Anything not an Exception — a cancellation, a group holding one (a
                # BaseExceptionGroup), an interrupt — is no verdict: _failure releases.
                await self._failure(
                    admission, normalize(exc) if isinstance(exc, Exception) else None
                )

    async def state_of(self, provider: str, model: str | None = None) -> BreakerState:
        """The state of ``provider``'s breaker (or of its ``model``'s, for the per-model
        codes) as a caller would see it now; changes nothing."""
        key = provider if model is None else model_key(provider, model)
        return await self.state.breaker_state(key, now=trio.current_time())

    async def reset(self, provider: str, model: str | None = None) -> None:
        """Operator reset: close the breaker (ends a permanent open, too)."""
        key = provider if model is None else model_key(provider, model)
        self._emit(await self.state.breaker_reset(key), provider, model)

    async def _success(self, admission: Admission) -> None:
        now = trio.current_time()
        threshold = self.config.success_threshold
        transition = await self.state.breaker_success(
            admission.provider, now=now, probe=admission.probe, success_threshold=threshold
        )
        self._emit(transition, admission.provider, None)
        if admission.model is not None:
            transition = await self.state.breaker_success(
                model_key(admission.provider, admission.model),
                now=now,
                probe=admission.model_probe,
                success_threshold=threshold,
            )
            self._emit(transition, admission.provider, admission.model)

    async def _release(self, admission: Admission) -> None:
        await self.state.breaker_release(admission.provider, probe=admission.probe)
        if admission.model is not None:
            key = model_key(admission.provider, admission.model)
            await self.state.breaker_release(key, probe=admission.model_probe)

    async def _failure(self, admission: Admission, error: ActorError | None) -> None:
        config = self.config
        if error is None or error.code is Code.CANCELLED or error.code in config.ignored:
            await self._release(admission)
            return
        provider, model = admission.provider, admission.model
        per_model = error.code in config.per_model and model is not None
        permanent = error.code in config.permanent or per_model
        if not (permanent or error.retryable):
            await self._release(admission)  # not the provider's fault: no verdict
            return
        cooldown, probe_after = (math.inf, math.inf) if permanent else config.cooldown(error)
        if per_model:
            assert model is not None
            await self.state.breaker_release(provider, probe=admission.probe)
            key, probe, event_model = model_key(provider, model), admission.model_probe, model
        else:
            if model is not None:
                key_m = model_key(provider, model)
                await self.state.breaker_release(key_m, probe=admission.model_probe)
            key, probe, event_model = provider, admission.probe, None
        transition = await self.state.breaker_failure(
            key,
            now=trio.current_time(),
            probe=probe,
            code=str(error.code),
            threshold=config.failure_threshold,
            cooldown=cooldown,
            probe_after=probe_after,
            permanent=permanent,
        )
        self._emit(transition, provider, event_model)

    def _emit(self, transition: Transition | None, provider: str, model: str | None) -> None:
        if transition is None:
            return
        cooldown = transition.cooldown
        emit(
            BreakerTransition(
                provider=provider,
                model=model,
                before=transition.before,
                after=transition.after,
                code=transition.code,
                cooldown=None if cooldown is None or math.isinf(cooldown) else cooldown,
                permanent=cooldown is not None and math.isinf(cooldown),
            )
        )


def open_error(provider: str, model: str | None, retry_after: float) -> ActorError:
    """The ``circuit_open`` refusal: ``retry_after`` seconds to the next probe (``inf``:
    open for good, then not retryable)."""
    return ActorError.from_code(
        Code.CIRCUIT_OPEN,
        f"circuit for {provider} is open",
        provider=provider,
        model=model,
        retry_after=None if math.isinf(retry_after) else retry_after,
        retryable=not math.isinf(retry_after),
    )
