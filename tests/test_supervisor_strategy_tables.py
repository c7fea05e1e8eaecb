"""Every entry of the strategy tables, pinned: a change to any one of them fails here.

``supervisors.tree.strategy`` is pure, so these are plain lookups; the behaviour they drive is
tested through the public API in ``test_supervisor_strategies.py`` and friends.
"""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from actors.lowlevel import AfterCrash, ExitKind
from supervisors import Directive
from supervisors.tree.spec import AutoShutdown, RestartType, Strategy
from supervisors.tree.strategy import (
    AFTER_CRASH,
    ON_DIRECTIVE,
    ON_EXIT,
    RESTARTABLE,
    Outcome,
    RestartPlan,
    rejoins,
    restart_plan,
    restarts_in_place,
    shuts_down,
)

RESTART_TYPES: tuple[RestartType, ...] = get_args(RestartType)
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
MODES: tuple[AutoShutdown, ...] = get_args(AutoShutdown)


def test_restartable() -> None:
    assert dict(RESTARTABLE) == {"permanent": True, "transient": True, "temporary": False}


def test_on_exit_every_entry() -> None:
    assert dict(ON_EXIT) == {
        ("permanent", ExitKind.NORMAL): Outcome.RESTART,
        ("transient", ExitKind.NORMAL): Outcome.EXITED,
        ("temporary", ExitKind.NORMAL): Outcome.EXITED,
        ("permanent", ExitKind.CRASHED): Outcome.DECIDE,
        ("transient", ExitKind.CRASHED): Outcome.DECIDE,
        ("temporary", ExitKind.CRASHED): Outcome.DECIDE,
        ("permanent", ExitKind.CANCELLED): Outcome.STOPPED,
        ("transient", ExitKind.CANCELLED): Outcome.STOPPED,
        ("temporary", ExitKind.CANCELLED): Outcome.STOPPED,
    }
    assert set(ON_EXIT) == set(itertools.product(RESTART_TYPES, ExitKind))


def test_on_directive_every_entry() -> None:
    assert dict(ON_DIRECTIVE) == {
        (Directive.RESTART, "permanent"): Outcome.RESTART,
        (Directive.RESTART, "transient"): Outcome.RESTART,
        (Directive.RESTART, "temporary"): Outcome.STOPPED,
        (Directive.STOP, "permanent"): Outcome.EXITED,
        (Directive.STOP, "transient"): Outcome.EXITED,
        (Directive.STOP, "temporary"): Outcome.EXITED,
        (Directive.ESCALATE, "permanent"): Outcome.ESCALATE,
        (Directive.ESCALATE, "transient"): Outcome.ESCALATE,
        (Directive.ESCALATE, "temporary"): Outcome.ESCALATE,
        (Directive.ABORT, "permanent"): Outcome.ABORTED,
        (Directive.ABORT, "transient"): Outcome.ABORTED,
        (Directive.ABORT, "temporary"): Outcome.ABORTED,
    }
    # resume keeps the instance: nothing is left for the loop to carry out.
    assert {d for d, _ in ON_DIRECTIVE} == set(Directive) - {Directive.RESUME}


def test_after_crash_every_entry() -> None:
    assert dict(AFTER_CRASH) == {
        Directive.RESUME: AfterCrash.RESUME,
        Directive.RESTART: AfterCrash.RESTART,
        Directive.STOP: AfterCrash.STOP,
        Directive.ESCALATE: AfterCrash.STOP,
        Directive.ABORT: AfterCrash.STOP,
    }


def test_outcomes() -> None:
    assert [str(o) for o in Outcome] == [
        "decide",
        "restart",
        "stopped",
        "exited",
        "escalate",
        "aborted",
    ]


@pytest.mark.parametrize(
    ("strategy", "restart", "expected"),
    [
        ("one_for_one", "permanent", True),
        ("one_for_one", "transient", True),
        ("one_for_one", "temporary", False),
        ("one_for_all", "permanent", False),
        ("one_for_all", "transient", False),
        ("one_for_all", "temporary", False),
        ("rest_for_one", "permanent", False),
        ("rest_for_one", "transient", False),
        ("rest_for_one", "temporary", False),
    ],
)
def test_restarts_in_place(strategy: Strategy, restart: RestartType, expected: bool) -> None:
    assert restarts_in_place(strategy, restart) is expected


@pytest.mark.parametrize(
    ("restart", "down", "expected"),
    [
        ("permanent", False, True),
        ("permanent", True, False),
        ("transient", False, True),
        ("transient", True, False),
        ("temporary", False, False),
        ("temporary", True, False),
    ],
)
def test_rejoins(restart: RestartType, down: bool, expected: bool) -> None:
    assert rejoins(restart, down=down) is expected


# Four children a b c d (positions 0..3), every sibling may rejoin: (stop, start).
ALL_REJOIN = {
    ("one_for_one", 0): ((), (0,)),
    ("one_for_one", 1): ((), (1,)),
    ("one_for_one", 2): ((), (2,)),
    ("one_for_one", 3): ((), (3,)),
    ("one_for_all", 0): ((3, 2, 1), (0, 1, 2, 3)),
    ("one_for_all", 1): ((3, 2, 0), (0, 1, 2, 3)),
    ("one_for_all", 2): ((3, 1, 0), (0, 1, 2, 3)),
    ("one_for_all", 3): ((2, 1, 0), (0, 1, 2, 3)),
    ("rest_for_one", 0): ((3, 2, 1), (0, 1, 2, 3)),
    ("rest_for_one", 1): ((3, 2), (1, 2, 3)),
    ("rest_for_one", 2): ((3,), (2, 3)),
    ("rest_for_one", 3): ((), (3,)),
}


@pytest.mark.parametrize(("strategy", "failed"), sorted(ALL_REJOIN))
def test_restart_plan_every_strategy_and_position(strategy: Strategy, failed: int) -> None:
    stop, start = ALL_REJOIN[strategy, failed]
    assert restart_plan(strategy, failed, [True] * 4) == RestartPlan(stop=stop, start=start)


def test_restart_plan_covers_every_strategy() -> None:
    assert {s for s, _ in ALL_REJOIN} == set(STRATEGIES)


@pytest.mark.parametrize(
    ("strategy", "failed", "expected"),
    [
        # b (1) fails; a and d may not rejoin (temporary, or stopped for good): they are
        # still stopped if affected, but not started again. The failed child always starts.
        ("one_for_one", 1, RestartPlan(stop=(), start=(1,))),
        ("one_for_all", 1, RestartPlan(stop=(3, 2, 0), start=(1, 2))),
        ("rest_for_one", 1, RestartPlan(stop=(3, 2), start=(1, 2))),
    ],
)
def test_restart_plan_leaves_out_siblings_that_do_not_rejoin(
    strategy: Strategy, failed: int, expected: RestartPlan
) -> None:
    assert restart_plan(strategy, failed, [False, False, True, False]) == expected


def test_restart_plan_of_a_lone_child() -> None:
    for strategy in STRATEGIES:
        assert restart_plan(strategy, 0, [False]) == RestartPlan(stop=(), start=(0,))


SHUTS_DOWN = {
    # (mode, significant, all significant down): the supervisor shuts down
    ("never", False, False): False,
    ("never", False, True): False,
    ("never", True, False): False,
    ("never", True, True): False,
    ("any_significant", False, False): False,
    ("any_significant", False, True): False,
    ("any_significant", True, False): True,
    ("any_significant", True, True): True,
    ("all_significant", False, False): False,
    ("all_significant", False, True): False,
    ("all_significant", True, False): False,
    ("all_significant", True, True): True,
}


@pytest.mark.parametrize(("mode", "significant", "all_down"), sorted(SHUTS_DOWN))
def test_auto_shutdown_every_entry(mode: AutoShutdown, significant: bool, all_down: bool) -> None:
    expected = SHUTS_DOWN[mode, significant, all_down]
    assert shuts_down(mode, significant=significant, all_significant_down=all_down) is expected


def test_auto_shutdown_covers_every_mode() -> None:
    assert set(SHUTS_DOWN) == set(itertools.product(MODES, (False, True), (False, True)))
