"""Shared pieces of the benchmarks: the row type and a best-of timer."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from actors import configure_logging


@attrs.frozen
class Row:
    """One result: ``value`` of ours vs ``baseline`` measured in the same run."""

    name: str
    value: float
    unit: str
    baseline: float
    ratio: float
    target: str

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def best_pair(
    repeats: int, baseline: Callable[[], float], ours: Callable[[], float]
) -> tuple[float, float]:
    """The smallest of ``repeats`` measurements (seconds) of each side, taken in turns.

    The baseline and ours alternate round by round, so drift during the run (caches,
    heap growth, other load) weighs on both sides alike instead of on one phase.
    The garbage collector is run before each measurement and paused during it:
    CPython's generational collections scan the whole heap, which makes any
    10,000-task measurement superlinear and noisy without saying anything about our code.
    """
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        for side, fn in enumerate((baseline, ours)):
            gc.collect()
            gc.disable()
            try:
                best[side] = min(best[side], fn())
            finally:
                gc.enable()
    return best[0], best[1]


@contextmanager
def logs_to_null(level: str = "info") -> Iterator[None]:
    """Log lines rendered as usual (JSON, redaction on) into a null sink for the block,
    then to standard output again — so no later benchmark writes to a closed file."""
    with open(os.devnull, "w") as sink:
        configure_logging(mode="json", level=level, stream=sink)
        try:
            yield
        finally:
            configure_logging(mode="json", level=level)
