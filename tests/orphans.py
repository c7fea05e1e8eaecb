"""Test servers die with the test process: a ``preexec_fn`` for ``subprocess.Popen``
that asks Linux to send the child ``SIGTERM`` when its parent dies
(``PR_SET_PDEATHSIG``), so a test run killed with SIGTERM or SIGKILL — whose fixtures'
teardown never runs — leaves no PostgreSQL or Redis server behind. Optionally drops to
another user first (PostgreSQL refuses to run as root), in the same child, so the signal
setting is not cleared by a set-user-ID helper such as ``runuser``. Elsewhere than on
Linux it only drops the user."""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def dies_with_parent(user: str | None = None) -> Callable[[], None]:
    """The ``preexec_fn``: become ``user`` (when given), then die with the parent."""
    parent = os.getpid()
    account = None if user is None else pwd.getpwnam(user)

    def preexec() -> None:
        if account is not None:
            os.setgroups([])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:  # the parent died before the call above
                os._exit(1)

    return preexec
