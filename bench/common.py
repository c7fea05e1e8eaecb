"""Shared pieces of the benchmarks: the row type and a best-of timer."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import attrs


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


def best_of(repeats: int, fn: Callable[[], float]) -> float:
    """The smallest of ``repeats`` measurements (seconds).

    The garbage collector is run before each repeat and paused during it, for ours and the
    baseline alike: CPython's generational collections scan the whole heap, which makes any
    10,000-task measurement superlinear and noisy without saying anything about our code.
    """
    results = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            results.append(fn())
        finally:
            gc.enable()
    return min(results)
