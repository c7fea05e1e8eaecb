"""Shared pieces of the benchmarks: the row type and the paired median every ratio is
measured with (never best-of: a minimum of each side taken at different moments
moves a ratio near 1 by ±10 % on a noisy machine)."""

from __future__ import annotations

import gc
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs

from actors import configure_logging

T = TypeVar("T")


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


def paired_median(
    rounds: int, baseline: Callable[[], float], ours: Callable[[], float]
) -> tuple[float, float, float]:
    """Median times (seconds) of each side and the median of the per-round ratios
    (baseline / ours) over ``rounds`` rounds, the two sides measured back to back.

    For rows whose target is a ratio close to 1 (a thin layer over the baseline): a
    round's two measurements share the machine's state of that moment, so their ratio
    cancels what drifts between rounds (frequency, neighbours' load), and the median
    ignores the rounds a hiccup hit. Best-of-each-side takes each minimum from a
    different moment, which on a noisy machine moves a ratio near 1 by ±10 %. The
    garbage collector is run before each measurement and paused during it: CPython's
    generational collections scan the whole heap, which makes any 10,000-task
    measurement superlinear and noisy without saying anything about our code. Use an
    odd ``rounds``: the median of the reciprocal ratios is then the reciprocal of the
    median (a row whose ratio is ours / baseline takes ``1 / ratio``).
    """
    times: list[tuple[float, float]] = []
    for _ in range(rounds):
        pair = []
        for fn in (baseline, ours):
            gc.collect()
            gc.disable()
            try:
                pair.append(fn())
            finally:
                gc.enable()
        times.append((pair[0], pair[1]))
    ratio = statistics.median(base / our for base, our in times)
    return (
        statistics.median(base for base, _ in times),
        statistics.median(our for _, our in times),
        ratio,
    )


def without_gc(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` with the garbage collector run first and paused during the call, as
    :func:`paired_median` measures (a full collection scans the whole heap the earlier
    benchmarks of the process left, and says nothing about the code measured)."""
    gc.collect()
    gc.disable()
    try:
        return fn(*args)
    finally:
        gc.enable()


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
