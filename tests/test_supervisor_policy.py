"""Directives by error class, code and exception type; resume, stop, escalate, abort."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, ErrorClass, normalize
from actors.testing import capture_events
from supervisors import ChildSpec, Directive, Policy, directive_for, open_tree
from tests.sup_helpers import tree_spec, worker


class BaseProblem(Exception):
    pass


class SpecificProblem(BaseProblem):
    pass


def _internal(exc: Exception) -> ActorError:
    return normalize(exc)


@pytest.mark.parametrize(
    ("code", "directive"),
    [
        (Code.RATE_LIMITED, Directive.RESTART),
        (Code.TIMEOUT, Directive.RESTART),
        (Code.TOOL_FAILED, Directive.RESTART),
        (Code.TOOL_TIMEOUT, Directive.RESTART),
        (Code.VALIDATION, Directive.STOP),
        (Code.TOOL_DENIED, Directive.STOP),
        (Code.CONTENT_FILTER, Directive.ESCALATE),
        (Code.AUTH, Directive.ESCALATE),
        (Code.PAYMENT, Directive.ESCALATE),
        (Code.MODEL_NOT_FOUND, Directive.ESCALATE),
        (Code.BUDGET_EXCEEDED, Directive.STOP),
        (Code.RUN_TIMEOUT, Directive.STOP),
        (Code.TURN_LIMIT, Directive.STOP),
        (Code.INTERNAL, Directive.ESCALATE),
    ],
)
def test_default_directives_follow_the_seeds(code: Code, directive: Directive) -> None:
    assert directive_for(ActorError.from_code(code)) is directive


def test_cancellation_has_no_directive() -> None:
    assert directive_for(ActorError.from_code(Code.CANCELLED)) is None


def test_most_specific_exception_type_wins_whatever_the_order() -> None:
    policy = Policy(
        by_exception={
            Exception: Directive.STOP,
            SpecificProblem: Directive.RESUME,
            BaseProblem: Directive.RESTART,
        }
    )
    assert directive_for(_internal(SpecificProblem()), policy) is Directive.RESUME
    assert directive_for(_internal(BaseProblem()), policy) is Directive.RESTART
    assert directive_for(_internal(KeyError()), policy) is Directive.STOP


def test_exception_then_code_then_class_then_defaults() -> None:
    policy = Policy(
        by_code={Code.TOOL_FAILED: Directive.STOP},
        by_class={ErrorClass.TOOL_TRANSIENT: Directive.RESUME},
    )
    assert directive_for(ActorError.from_code(Code.TOOL_FAILED), policy) is Directive.STOP
    assert directive_for(ActorError.from_code(Code.TOOL_TIMEOUT), policy) is Directive.RESUME
    assert directive_for(ActorError.from_code(Code.AUTH), policy) is Directive.ESCALATE
    child = Policy(by_code={Code.TOOL_FAILED: Directive.ABORT})
    assert directive_for(ActorError.from_code(Code.TOOL_FAILED), child, policy) is Directive.ABORT


@pytest.mark.parametrize(
    "build",
    [
        lambda: Policy(by_code={Code.CANCELLED: Directive.RESTART}),
        lambda: Policy(by_class={ErrorClass.CANCELLATION: Directive.RESTART}),
        lambda: Policy(by_exception={trio.Cancelled: Directive.RESTART}),
        lambda: Policy(by_exception={KeyboardInterrupt: Directive.RESTART}),
        lambda: Policy(by_exception={SystemExit: Directive.RESUME}),
    ],
    ids=["code", "class", "trio.Cancelled", "KeyboardInterrupt", "SystemExit"],
)
def test_policies_on_cancellation_or_exits_are_rejected(build: Any) -> None:
    with pytest.raises(ValueError, match="cannot decide"):
        build()


def test_group_reduces_to_its_most_severe_member() -> None:
    group = ExceptionGroup(
        "g",
        [
            ActorError.from_code(Code.TOOL_FAILED),
            ActorError.from_code(Code.TOOL_DENIED),
            ActorError.from_code(Code.RATE_LIMITED),
        ],
    )
    assert directive_for(normalize(group)) is Directive.STOP
    policy = Policy(by_code={Code.RATE_LIMITED: Directive.ABORT})
    assert directive_for(normalize(group), policy) is Directive.ABORT


async def test_resume_keeps_state_and_fails_only_that_caller(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(
        worker("w", journal), policy=Policy(by_code={Code.TOOL_FAILED: Directive.RESUME})
    )
    async with open_tree(spec) as tree:
        ref = tree.ref("w")
        assert await ref.call("a") == ("w", "a", 1)
        with pytest.raises(ActorError) as caught:
            await ref.call(("crash", Code.TOOL_FAILED))
        assert caught.value.code is Code.TOOL_FAILED
        assert await ref.call("b") == ("w", "b", 3)  # same instance: its counter went on
    assert [e[0] for e in journal] == ["start", "stop"]


async def test_stop_directive_ends_that_child_only(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    spec = tree_spec(worker("a", journal), worker("b", journal))
    async with open_tree(spec) as tree:
        await tree.ref("a").cast(("crash", Code.TOOL_DENIED))
        await trio.sleep(1)
        states = [(c.id, str(c.state)) for c in tree.root.which_children()]
        assert states == [("a", "stopped"), ("b", "running")]
        with pytest.raises(ActorError) as caught:
            await tree.ref("a").call("x")
        assert caught.value.code is Code.ACTOR_STOPPED


async def test_escalate_fails_the_tree_with_the_child_error(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    with capture_events("supervisor.escalated") as events, pytest.raises(ActorError) as caught:
        async with open_tree(tree_spec(worker("a", journal), worker("b", journal))) as tree:
            await tree.ref("a").cast(("crash", Code.AUTH))
            await trio.sleep(10)
    assert caught.value.code is Code.AUTH
    assert trio.current_time() == 0.0
    assert [(e.child, e.error.code) for e in events] == [("a", "auth")]
    # a's instance ends at its crash; then the supervisor shuts b down before failing.
    assert [e for e in journal if e[0] == "stop"] == [
        ("stop", "a", "crashed:auth"),
        ("stop", "b", "shutdown"),
    ]


async def test_abort_directive_cancels_the_whole_tree(autojump_clock: MockClock) -> None:
    journal: list[tuple[Any, ...]] = []
    inner = tree_spec(
        worker("deep", journal), policy=Policy(by_code={Code.BUDGET_EXCEEDED: Directive.ABORT})
    )
    spec = tree_spec(worker("top", journal), ChildSpec(id="inner", supervisor=inner))
    outcome: list[ActorError] = []
    with pytest.raises(ActorError) as caught:
        async with open_tree(spec) as tree:
            top = tree.ref("top")

            async def busy() -> None:
                try:
                    await top.call(("sleep", 50), timeout=None)
                except ActorError as err:
                    outcome.append(err)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(busy)
                await trio.sleep(1)
                await tree.ref("inner", "deep").cast(("crash", Code.BUDGET_EXCEEDED))
                await trio.sleep(100)
    assert caught.value.code is Code.BUDGET_EXCEEDED
    assert trio.current_time() == 1.0
    assert [(e.code, e.message.startswith("abort:budget_exceeded")) for e in outcome] == [
        (Code.CANCELLED, True)
    ]


async def test_internal_escalates_by_default(autojump_clock: MockClock) -> None:
    class Buggy(Actor):
        async def handle(self, message: Any) -> Any:
            raise ValueError("bug")

    with pytest.raises(ActorError) as caught:
        async with open_tree(tree_spec(ChildSpec(id="b", actor=Buggy))) as tree:
            await tree.ref("b").cast("x")
            await trio.sleep(1)
    assert caught.value.code is Code.INTERNAL
    assert isinstance(caught.value.__cause__, ValueError)
