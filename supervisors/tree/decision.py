"""Deciding on a failure: the one place the policy is consulted.

:meth:`Decider.settle` answers a child's failure with a directive and records it on the
child as pending, for the supervisor loop (or the child's own task, for a restart in
place) to carry out:

1. a cancel under way for the subtree wins: nothing is decided, the failure is logged as
   ``error.suppressed`` and ``None`` returned;
2. the directive — forced by the caller (a permanent child's normal exit restarts without
   the policy), else the child's policy, the supervisor's, the defaults; none: ``stop``;
3. a ``restart`` counts in the intensity window (:func:`~supervisors.tree.intensity.add_restart`)
   and gets the child's backoff delay; past the limit it becomes ``escalate`` with
   ``restart_intensity_exceeded``;
4. the ``supervisor.decision`` event; an ``abort`` cancels the tree at this instant,
   before the failed child's cleanup runs.

:meth:`Decider.after_crash` is the cell's side of it (``Supervision.after_crash``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from actors import ActorError, Code
from actors.events import ErrorSuppressed, SupervisorDecision
from actors.lowlevel import AfterCrash, emit
from supervisors.tree.cancel import CancelState
from supervisors.tree.children import Child, PendingDecision, Status
from supervisors.tree.intensity import EMPTY_WINDOW, RestartStamp, add_restart, intensity_exceeded
from supervisors.tree.policy import Directive, directive_for
from supervisors.tree.spec import SupervisorSpec
from supervisors.tree.strategy import AFTER_CRASH, RESTARTABLE


class Root(Protocol):
    """What a decision needs of the tree's root supervisor: its abort."""

    def abort(self, reason: str, *, error: ActorError | None = None) -> None: ...


class Decider:
    """One supervisor's decisions and its restart-intensity window (reset per run)."""

    def __init__(
        self,
        path: str,
        spec: SupervisorSpec,
        cancel: CancelState,
        root: Callable[[], Root],
    ) -> None:
        self.path = path
        self.spec = spec
        self.cancel = cancel
        self.root = root
        self.window = EMPTY_WINDOW

    def after_crash(self, child: Child, error: ActorError) -> AfterCrash:
        """A handler of ``child`` raised ``error``: what its cell does next."""
        if child.status is Status.TERMINATING:
            self.settle(child, error, Directive.STOP)  # stopping itself: no restart
            return AfterCrash.STOP
        if child.status is Status.STOPPING:
            # We are stopping it (terminate, a sibling's restart, shutdown): its exit is
            # ours. The crash is reported as a stop, never counted, never restarted.
            self.settle(child, error, Directive.STOP)
            child.pending = None
            return AfterCrash.STOP
        if error.code is Code.CANCELLED:
            # Not our subtree's cancel (that is checked first): a cancellation from
            # elsewhere (a nested call into a cancelled tree) crossed in as an error. That
            # request is cancelled; the actor is fine and goes on.
            directive = self.settle(child, error, Directive.RESUME)
        else:
            directive = self.settle(child, error)
        if directive is None:
            return AfterCrash.STOP  # a cancel is under way: nothing restarts
        if directive is Directive.RESTART and not RESTARTABLE[child.spec.restart]:
            return AfterCrash.STOP  # a temporary child is never restarted: on_stop
        return AFTER_CRASH[directive]

    def settle(
        self, child: Child, error: ActorError, directive: Directive | None = None
    ) -> Directive | None:
        """Decide on a failure (never on a cancellation) and record it as pending (see the
        module docstring); ``None`` if a cancel is under way."""
        cancel = self.cancel.in_effect()
        if cancel is not None:
            emit(
                ErrorSuppressed(
                    supervisor=self.path, child=child.id, reason=cancel, suppressed=error
                )
            )
            return None
        spec = self.spec
        if directive is None:
            directive = directive_for(error, child.spec.policy, spec.policy) or Directive.STOP
        delay, now = 0.0, trio.current_time()
        if directive is Directive.RESTART and RESTARTABLE[child.spec.restart]:
            # Only a restart that happens counts (a temporary child's never does).
            stamp = RestartStamp(at=now, child=child.id, error=error)
            self.window, allowed = add_restart(
                self.window, stamp, intensity=spec.max_restarts, period=spec.period
            )
            if allowed:
                delay = child.backoff_delay(spec.backoff, error, now)
            else:
                directive = Directive.ESCALATE
                error = intensity_exceeded(
                    self.path, self.window, intensity=spec.max_restarts, period=spec.period
                )
        if directive is not Directive.RESUME:
            child.pending = PendingDecision(directive, delay, error)
        emit(
            SupervisorDecision(
                supervisor=self.path,
                child=child.id,
                error=error,
                directive=directive,
                restarts=len(self.window),
                delay=delay,
                at=now,
            )
        )
        if directive is Directive.ABORT:
            self.root().abort(f"abort:{error.code} from {self.path}/{child.id}", error=error)
        return directive
