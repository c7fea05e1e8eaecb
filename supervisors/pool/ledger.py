"""The ledger: one entry per attempt a pool made — answered, failed, cut short or
cancelled — with its tokens and cost, so cost stays accurate across failover.

* ``ok``: answered; usage as the provider reported it.
* ``failed``: a sent attempt that failed; usage when the error carries it (a provider
  that reports usage on an error, a malformed answer with usage), else ``None``.
* ``partial``: a stream that failed after events reached the consumer. Usage as reported,
  else *estimated* (``usage_estimated``): the request's prompt estimate as input, the
  partial text (4 characters a token) as output — a provider bills a cut stream too.
* ``cancelled``: the caller went away (or a hedge lost the race): no verdict, no charge.

Refusals (an open breaker, a limiter that would make the request wait, a spent budget)
are not attempts — nothing reached a provider — and have no entry.

``cost`` comes from the usage when the provider reported one, else from the pool's price
table (dollars per million input / output tokens, by ``(provider, model)`` then
``(provider, "*")``), else it is ``None`` (unknown, counted as 0 in the totals).

A :class:`Ledger` keeps running totals (attempts, tokens, cost, by outcome and by
target) for the pool's life and the last ``keep`` entries.
"""

from __future__ import annotations

import collections
import itertools
import logging
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal, NamedTuple, TypeVar

import attrs

from actors import Code, Usage
from actors.events import AttemptRecord, PoolAttempt, PoolAttemptCancelled, PoolAttemptFailed
from actors.lowlevel import emit, enabled
from supervisors.resilience.budget import Price, cost_of

Outcome = Literal["ok", "failed", "partial", "cancelled"]
_K = TypeVar("_K")


class Attempt(NamedTuple):
    """One attempt of one request (see the module docstring). A named tuple: immutable,
    and cheap enough to make for every attempt on the hot path."""

    #: The request's id: its ``metadata["request_id"]``, else one the pool made.
    request_id: str
    #: The attempt's number within its request, from 1, in the order they started.
    number: int
    provider: str
    model: str
    outcome: Outcome
    #: The failure's code; ``None`` when answered.
    code: Code | None
    #: Trio time the attempt was sent, and seconds until it ended.
    started_at: float
    latency: float
    usage: Usage | None
    cost: float | None
    usage_estimated: bool = False
    #: Started by hedging, in parallel with a slower attempt.
    hedge: bool = False

    @property
    def tokens(self) -> int:
        """The attempt's tokens (0 when the provider reported no usage)."""
        return 0 if self.usage is None else self.usage.total_tokens


@attrs.define
class Totals:
    """Running totals of a set of attempts."""

    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, entry: Attempt) -> None:
        self.attempts += 1
        usage = entry.usage
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
        if entry.cost is not None:
            self.cost += entry.cost

    def merge(self, other: Totals) -> None:
        self.attempts += other.attempts
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost += other.cost


#: Attempts recorded before the totals take them in (when nobody reads them sooner).
FOLD_EVERY: Final = 256


class Ledger:
    """Every attempt of a pool: totals for its life, the last ``keep`` entries."""

    def __init__(
        self, *, keep: int = 1000, prices: Mapping[tuple[str, str], Price] | None = None
    ) -> None:
        self.prices = dict(prices or {})
        # Entries as recorded (plain tuples in Attempt's field order, or Attempts).
        self._recent: collections.deque[tuple[Any, ...]] = collections.deque(maxlen=keep)
        # Totals by (provider, model, outcome). Recording an attempt only appends it to
        # _unfolded (the hot path); the recent entries and the totals take them in when
        # read, or every FOLD_EVERY attempts, so the list stays short.
        self._totals: dict[tuple[str, str, str], Totals] = {}
        self._unfolded: list[tuple[Any, ...]] = []

    @property
    def entries(self) -> collections.deque[Attempt]:
        """The last ``keep`` entries, oldest first (a copy: recording goes on)."""
        self._fold()
        recent = self._recent
        return collections.deque(itertools.starmap(Attempt, recent), maxlen=recent.maxlen)

    def _fold(self) -> dict[tuple[str, str, str], Totals]:
        totals_by_key = self._totals
        unfolded = self._unfolded
        if not unfolded:
            return totals_by_key
        self._recent.extend(unfolded)
        # By runs of one key (a pool's attempts mostly share one), summed in C.
        for key, run in itertools.groupby(unfolded, _KEY):
            totals = totals_by_key.get(key)
            if totals is None:
                totals = totals_by_key[key] = Totals()
            group = list(run)
            totals.attempts += len(group)
            usages = list(filter(None, map(_USAGE, group)))  # the entries with a usage
            if usages:
                totals.input_tokens += sum(map(_INPUT_TOKENS, usages))
                totals.output_tokens += sum(map(_OUTPUT_TOKENS, usages))
            for cost in filter(None, map(_COST, group)):  # known and not zero
                totals.cost += cost  # one by one, in order: as Totals.add would
        unfolded.clear()
        return totals_by_key

    @property
    def total(self) -> Totals:
        """Every attempt of the pool's life."""
        total = Totals()
        for totals in self._fold().values():
            total.merge(totals)
        return total

    @property
    def by_outcome(self) -> dict[str, Totals]:
        """Totals per outcome (``ok``, ``failed``, ``partial``, ``cancelled``)."""
        return self._group(lambda key: key[2])

    @property
    def by_target(self) -> dict[tuple[str, str], Totals]:
        """Totals per ``(provider, model)``."""
        return self._group(lambda key: (key[0], key[1]))

    def _group(self, key_of: Callable[[tuple[str, str, str]], _K]) -> dict[_K, Totals]:
        groups: dict[_K, Totals] = collections.defaultdict(Totals)
        for key, totals in self._fold().items():
            groups[key_of(key)].merge(totals)
        return dict(groups)

    def cost(self, usage: Usage | None, provider: str, model: str) -> float | None:
        """The cost of ``usage`` (see the module docstring); ``None`` when unknown."""
        if usage is None:
            return None
        if usage.cost is None and not self.prices:
            return None
        return cost_of(self.prices, usage, provider, model)

    def record(self, entry: Attempt | tuple[Any, ...]) -> None:
        """Add ``entry`` to the totals and the recent entries, and report it: an answered
        attempt as ``pool.attempt`` (debug), a cancelled one (its caller left, or it lost
        a hedge) as ``pool.attempt_cancelled``, any other as ``pool.attempt_failed``.

        ``entry`` may be a plain tuple of :class:`Attempt`'s fields in order (how the
        pool records: the named tuple is made only when an entry is read)."""
        unfolded = self._unfolded
        unfolded.append(entry)
        if len(unfolded) >= FOLD_EVERY:
            self._fold()
        ok = entry[4] == "ok"  # its outcome
        if ok and not enabled(_DEBUG):
            return
        attempt = Attempt(*entry)
        usage = attempt.usage
        if ok:
            record: type[AttemptRecord] = PoolAttempt
        elif attempt.outcome == "cancelled":
            record = PoolAttemptCancelled
        else:
            record = PoolAttemptFailed
        emit(
            record(
                request_id=attempt.request_id,
                number=attempt.number,
                provider=attempt.provider,
                model=attempt.model,
                outcome=attempt.outcome,
                code=None if attempt.code is None else str(attempt.code),
                latency=attempt.latency,
                input_tokens=None if usage is None else usage.input_tokens,
                output_tokens=None if usage is None else usage.output_tokens,
                cost=attempt.cost,
                usage_estimated=attempt.usage_estimated,
                hedge=attempt.hedge,
            )
        )

    def of(self, request_id: str) -> list[Attempt]:
        """The recent entries of one request, in order."""
        return [entry for entry in self.entries if entry.request_id == request_id]

    def __iter__(self) -> Iterator[Attempt]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


_DEBUG: Final = logging.DEBUG
_KEY: Final = operator.itemgetter(2, 3, 4)  # (provider, model, outcome)
_USAGE: Final = operator.itemgetter(8)
_COST: Final = operator.itemgetter(9)
_INPUT_TOKENS: Final = operator.attrgetter("input_tokens")
_OUTPUT_TOKENS: Final = operator.attrgetter("output_tokens")
