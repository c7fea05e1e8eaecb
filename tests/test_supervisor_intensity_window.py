"""The restart-intensity window as a pure part: ``supervisors.tree.intensity.add_restart``.

Boundaries pinned here: a stamp exactly ``period`` old still counts, intensity 0 allows
nothing, 1 allows one restart per period, many expire at once, and the input window is
never changed. A property test checks the window against the spec's definition: the
stamps with ``now - t <= period``, the new one included.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import ActorError, Code
from supervisors.tree.intensity import (
    EMPTY_WINDOW,
    TIME_TOLERANCE,
    RestartStamp,
    RestartWindow,
    add_restart,
    intensity_exceeded,
)


def _stamp(at: float, child: str = "w") -> RestartStamp:
    return RestartStamp(at=at, child=child, error=ActorError.from_code(Code.TOOL_FAILED, f"@{at}"))


def _run(times: list[float], *, intensity: int, period: float) -> tuple[RestartWindow, list[bool]]:
    window, verdicts = EMPTY_WINDOW, []
    for at in times:
        window, allowed = add_restart(window, _stamp(at), intensity=intensity, period=period)
        verdicts.append(allowed)
    return window, verdicts


def _times(window: RestartWindow) -> list[float]:
    return [stamp.at for stamp in window.stamps]


def test_intensity_zero_allows_no_restart_and_keeps_the_refused_stamp() -> None:
    window, allowed = add_restart(EMPTY_WINDOW, _stamp(0.0), intensity=0, period=5.0)
    assert allowed is False
    assert _times(window) == [0.0]


def test_intensity_one_allows_one_restart_per_period() -> None:
    window, verdicts = _run([0.0, 5.0], intensity=1, period=5.0)
    assert verdicts == [True, False]  # the stamp at 0 is exactly 5 s old: it counts
    assert _times(window) == [0.0, 5.0]
    window, verdicts = _run([0.0, 5.5], intensity=1, period=5.0)
    assert verdicts == [True, True]  # 5.5 s old: dropped
    assert _times(window) == [5.5]


def test_a_stamp_exactly_period_old_counts_one_just_older_does_not() -> None:
    window, allowed = add_restart(
        RestartWindow.of(_stamp(1.0), _stamp(2.0)), _stamp(6.0), intensity=2, period=5.0
    )
    assert (allowed, _times(window)) == (False, [1.0, 2.0, 6.0])
    window, allowed = add_restart(
        RestartWindow.of(_stamp(1.0), _stamp(2.0)), _stamp(6.25), intensity=2, period=5.0
    )
    assert (allowed, _times(window)) == (True, [2.0, 6.25])


@pytest.mark.parametrize(("first", "now", "period"), [(0.1, 0.4, 0.3), (0.7, 1.0, 0.3)])
def test_a_decimal_period_exactly_old_counts_despite_float_rounding(
    first: float, now: float, period: float
) -> None:
    assert now - first > period  # the float age is a hair over the period
    window, allowed = add_restart(
        RestartWindow.of(_stamp(first)), _stamp(now), intensity=1, period=period
    )
    assert (allowed, _times(window)) == (False, [first, now])
    window, allowed = add_restart(
        RestartWindow.of(_stamp(first)), _stamp(now + 1e-6), intensity=1, period=period
    )
    assert (allowed, _times(window)) == (True, [now + 1e-6])


def test_the_time_tolerance_is_a_nanosecond() -> None:
    assert TIME_TOLERANCE == 1e-9


@pytest.mark.parametrize(
    ("times", "verdicts", "left"),
    [
        # The examples of docs/supervision.md, 3 restarts in 5 s.
        ([0, 1, 2, 3], [True, True, True, False], [0, 1, 2, 3]),
        ([0, 4.9, 5.1, 5.2, 5.3], [True, True, True, True, False], [4.9, 5.1, 5.2, 5.3]),
        ([0, 1, 2, 5], [True, True, True, False], [0, 1, 2, 5]),
        # Several stamps expire at once; the same instant counts as often as it occurs.
        ([0, 1, 2, 10], [True, True, True, True], [10]),
        ([7, 7, 7, 7], [True, True, True, False], [7, 7, 7, 7]),
    ],
)
def test_many(times: list[float], verdicts: list[bool], left: list[float]) -> None:
    window, got = _run(times, intensity=3, period=5.0)
    assert got == verdicts
    assert _times(window) == left


def test_the_window_given_is_never_changed() -> None:
    before = RestartWindow.of(_stamp(0.0), _stamp(1.0))
    after, _ = add_restart(before, _stamp(9.0), intensity=3, period=5.0)
    assert _times(before) == [0.0, 1.0] and len(before) == 2
    assert _times(after) == [9.0]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        before.stamps = ()  # type: ignore[misc]


def test_windows_that_share_a_past_stay_apart() -> None:
    base, _ = _run([0.0, 1.0], intensity=5, period=5.0)
    left, _ = add_restart(base, _stamp(2.0, "left"), intensity=5, period=5.0)
    right, _ = add_restart(base, _stamp(3.0, "right"), intensity=5, period=5.0)
    further, _ = add_restart(left, _stamp(4.0), intensity=5, period=5.0)
    assert _times(base) == [0.0, 1.0]
    assert [s.child for s in left.stamps] == ["w", "w", "left"]
    assert [s.child for s in right.stamps] == ["w", "w", "right"]
    assert _times(further) == [0.0, 1.0, 2.0, 4.0]
    assert left == RestartWindow.of(*base.stamps, left.stamps[-1])
    assert left != right


def test_the_empty_window_stays_empty() -> None:
    first, _ = add_restart(EMPTY_WINDOW, _stamp(1.0), intensity=1, period=5.0)
    second, _ = add_restart(EMPTY_WINDOW, _stamp(2.0), intensity=1, period=5.0)
    assert (len(EMPTY_WINDOW), _times(first), _times(second)) == (0, [1.0], [2.0])


def test_a_long_run_keeps_only_the_window() -> None:
    window, verdicts = _run([float(t) for t in range(1000)], intensity=5, period=2.0)
    assert _times(window) == [997.0, 998.0, 999.0]
    assert all(verdicts)
    # Expired stamps (and the errors they hold) are let go, not kept at the log's front.
    assert len(window._log) <= 2 * len(window) + 17


def test_stamps_keep_their_child_and_error_oldest_first() -> None:
    window, _ = add_restart(
        RestartWindow.of(_stamp(1.0, "a")), _stamp(2.0, "b"), intensity=3, period=5.0
    )
    assert [(s.child, s.error.message) for s in window.stamps] == [("a", "@1.0"), ("b", "@2.0")]
    assert len(window) == 2


def test_intensity_exceeded_carries_the_window_oldest_first() -> None:
    window, _ = _run([0, 1, 2, 3], intensity=3, period=5.0)
    error = intensity_exceeded("/root", window, intensity=3, period=5.0)
    assert error.code is Code.RESTART_INTENSITY_EXCEEDED
    assert error.message == "/root: 4 failures within 5.0 s (max_restarts 3)"
    assert error.actor == "/root"
    assert [e.message for e in error.errors] == ["@0", "@1", "@2", "@3"]


@given(
    gaps=st.lists(st.integers(min_value=0, max_value=8), min_size=1, max_size=60),
    intensity=st.integers(min_value=0, max_value=6),
    period=st.integers(min_value=1, max_value=10),
    branch=st.integers(min_value=0, max_value=59),
)
def test_the_window_is_the_stamps_at_most_period_old(
    gaps: list[int], intensity: int, period: int, branch: int
) -> None:
    times, now = [], 0.0
    for gap in gaps:
        now += gap / 4  # quarter seconds: exact in binary, so boundaries are hit exactly
        times.append(now)
    window, history = EMPTY_WINDOW, []
    for i, at in enumerate(times):
        window, allowed = add_restart(window, _stamp(at), intensity=intensity, period=period)
        expected = [t for t in times[: i + 1] if at - t <= period]
        assert _times(window) == expected
        assert allowed is (len(expected) <= intensity)
        history.append((window, expected))
    # Every earlier window still holds what it held, and can be added to again.
    for earlier, expected in history:
        assert _times(earlier) == expected
    old, expected = history[branch % len(history)]
    later = times[-1] + 0.25
    grown, _ = add_restart(old, _stamp(later), intensity=intensity, period=period)
    assert _times(grown) == [t for t in [*expected, later] if later - t <= period]
    assert _times(old) == expected
