"""Targets: the places a pool can send a request — a provider actor and a model.

A pool is built from targets in preference order plus a per-provider downgrade map.
:func:`expand` turns them into the request's chain: the targets as given, then each
provider's downgrade models (in the order of the provider's first target, each model
once), served by that provider's first target's actor. So a transient failure rotates to
another *provider* before it tries a cheaper model of the failing one, while
``model_not_found`` goes straight to the same provider's next model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from actors import ActorRef
from actors.providers import LlmRequest
from supervisors.pool.config import invalid, name


def _ref(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, ActorRef):
        raise invalid(f"Target.{attribute.name}", "an ActorRef", value)


def _name(instance: Any, attribute: Any, value: Any) -> None:
    name(f"Target.{attribute.name}", value)


def _window(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise invalid(f"Target.{attribute.name}", "None or an integer >= 1", value)


def _flag(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, bool):
        raise invalid(f"Target.{attribute.name}", "a bool", value)


@attrs.frozen(kw_only=True)
class Target:
    """One place a request can be served.

    ``provider`` names the provider for the breaker, the limiter, the prices and the
    ledger (usually the child id of its actor in the tree). ``context_window`` is an
    opt-in: a request that failed with ``context_window_exceeded`` may move to a target
    marked with a window larger than the failed target's (a target without a mark counts
    as 0). ``content_filter_fallback`` is an opt-in too: a ``content_filter`` refusal
    moves only to a target that says it may take one; by default it ends the request.
    """

    ref: ActorRef = attrs.field(validator=_ref)
    provider: str = attrs.field(validator=_name)
    model: str = attrs.field(validator=_name)
    context_window: int | None = attrs.field(default=None, validator=_window)
    content_filter_fallback: bool = attrs.field(default=False, validator=_flag)
    downgrade: bool = attrs.field(default=False, validator=_flag)

    @property
    def key(self) -> tuple[str, str]:
        """``(provider, model)``: how the ledger and the breakers name this target."""
        return (self.provider, self.model)


def request_for(request: LlmRequest, model: str) -> LlmRequest:
    """The request a target serving ``model`` receives: ``request`` itself when it names
    ``model``, else a copy of it with ``model`` in it (the caller's model is a preference,
    each target is asked for its own).

    The one place this is decided: the pool's fast path, its walk, hedged attempts and
    streams all send what this returns (:meth:`supervisors.pool.attempt.PooledRequest.request_for`
    keeps one copy per model for a request's retries)."""
    if model == request.model:
        return request
    return attrs.evolve(request, model=model)


def expand(targets: Sequence[Target], downgrades: Mapping[str, Sequence[str]]) -> list[Target]:
    """The chain: ``targets`` in order, then each provider's downgrade models (see the
    module docstring). A downgrade already present as a target is not added twice; a
    provider in ``downgrades`` without a target is a ``config_invalid``."""
    chain = list(targets)
    seen = {target.key for target in chain}
    first: dict[str, Target] = {}
    for target in chain:
        first.setdefault(target.provider, target)
    for provider in downgrades:
        if provider not in first:
            raise invalid(f"downgrades[{provider!r}]", "the provider of a target", provider)
    for provider, owner in first.items():
        models = downgrades.get(provider, ())
        if isinstance(models, str) or not isinstance(models, Sequence):
            raise invalid(f"downgrades[{provider!r}]", "a list of model names", models)
        for index, model in enumerate(models):
            name(f"downgrades[{provider!r}][{index}]", model)
            if (provider, model) in seen:
                continue
            seen.add((provider, model))
            chain.append(Target(ref=owner.ref, provider=provider, model=model, downgrade=True))
    return chain
