"""Running a supervisor tree for the duration of a block: :func:`open_tree`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from actors import ActorError, ActorRef, Runtime, open_runtime
from actors.lowlevel import cancel_in_effect, open_nursery_unwrapped
from supervisors.tree.spec import SupervisorSpec
from supervisors.tree.supervisor import ChildInfo, Supervisor


@asynccontextmanager
async def open_tree(
    spec: SupervisorSpec,
    *,
    name: str = "root",
    runtime: Runtime | None = None,
) -> AsyncIterator[Tree]:
    """Run a supervisor tree for the duration of the block.

    Returns once every child has started. If the root gives up (intensity, escalation,
    abort), the block is cancelled and the root's error is raised at its end — unwrapped,
    an :class:`ActorError`. An exception the block raises itself comes out as raised.
    Leaving the block shuts the tree down in reverse order.
    """
    tree: Tree | None = None
    async with _runtime_for(runtime, name) as rt:
        tree = Tree(Supervisor(spec, rt, path=f"/{name}"))
        async with open_nursery_unwrapped() as nursery:
            try:
                await nursery.start(tree._run_root)
            except ActorError as err:
                tree.error = err  # start_failed: raised below, outside the nurseries
            if tree.error is None:
                with trio.CancelScope() as body:
                    tree._body = body
                    try:
                        yield tree
                    finally:
                        if not body.cancel_called:
                            # Leaving because a scope around the tree was cancelled (by an
                            # exception or not): that is the tree's cancel, noted before
                            # the shutdown below can claim the reason.
                            reason = await cancel_in_effect()
                            if reason is not None:
                                tree.root.note_cancel(reason)
                        with trio.CancelScope(shield=True):
                            tree.root.request_shutdown(f"shutdown:/{name}")
                            await tree._done.wait()
    # Raised out here, not inside the nurseries, so the caller gets the ActorError itself.
    if tree is not None and tree.error is not None:
        raise tree.error


@asynccontextmanager
async def _runtime_for(runtime: Runtime | None, name: str) -> AsyncIterator[Runtime]:
    if runtime is not None:
        yield runtime
        return
    async with open_runtime(name=name) as rt:
        yield rt


class Tree:
    """A running tree: the root supervisor and how it ended."""

    def __init__(self, root: Supervisor) -> None:
        self.root = root
        self.error: ActorError | None = None
        self._done = trio.Event()
        self._body: trio.CancelScope | None = None

    async def _run_root(
        self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await self.root.run(task_status=task_status)
        except ActorError as err:
            self.error = err
            if self._body is None:
                raise
        finally:
            # However the root ends (failure, abort, auto_shutdown), the block ends too.
            if self._body is not None:
                # An abort's reason reaches the block's tasks (and what they report).
                reason = self.root.cancel_reason() or f"tree {self.root.path} ended"
                self._body.cancel(reason=reason)
            self.root.close(f"shutdown:{self.root.path}")
            self._done.set()

    def ref(self, *path: str) -> ActorRef:
        """The ref of a worker by child ids from the root: ``tree.ref("sub", "worker")``."""
        sup = self.root
        for step in path[:-1]:
            sup = sup.child(step)
        return sup.ref(path[-1])

    def abort(self, reason: str) -> None:
        """Abort the whole tree: everything inside reports ``cancelled`` with ``reason``."""
        self.root.abort(reason)

    def which_children(self, *path: str) -> list[ChildInfo]:
        """The children of the root (or of the nested supervisor at ``path``, by child
        ids) in start order: id, state, restarts, kind, ref — OTP's ``which_children``.
        ``child_not_found`` for a path that names no supervisor."""
        return self._supervisor(path).which_children()

    def count_children(self, *path: str) -> dict[str, int]:
        """``specs``, ``active``, ``supervisors`` and ``workers`` of the root (or of the
        nested supervisor at ``path``), as OTP's ``count_children``."""
        return self._supervisor(path).count_children()

    def _supervisor(self, path: tuple[str, ...]) -> Supervisor:
        sup = self.root
        for step in path:
            sup = sup.child(step)
        return sup
