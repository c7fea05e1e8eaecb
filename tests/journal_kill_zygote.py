"""The process the kill -9 test forks its daemons from: it imports the runtime and
``tests.journal_kill_child`` once, then forks one child per command, so each of the ~45
daemons the test kills or resumes starts in milliseconds instead of importing the
runtime again (about a second each, most of the test's time before).

A forked child is a real process of its own: it opens its journal, its connections and
its side-effect database after the fork, and SIGKILL ends it as it would a daemon
started from scratch. Nothing is open in the zygote when it forks (no trio run, no
connection, no thread).

Protocol: one JSON line per command on stdin, ``{"fifo": PATH, "argv": [...]}`` (argv as
``journal_kill_child`` takes it); the zygote answers the child's pid on a line of its
stdout. The child writes what ``journal_kill_child`` prints to the FIFO, then
``EXIT <code>`` when it ends by itself (0: its main returned). Children are reaped by
the kernel (SIGCHLD ignored): once one has ended, its pid no longer exists.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import traceback

import trio

import actors.journal.postgres  # noqa: F401 - imported once here, not in every child
import tests.journal_kill_child as child


def _run_child(fifo: str, argv: list[str]) -> None:
    """In the forked child: stdout to ``fifo``, stderr discarded; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        random.seed()  # the zygote's random state is every child's otherwise
        out = os.open(fifo, os.O_WRONLY)
        os.dup2(out, 1)
        os.close(out)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process's own stdout
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        sys.argv = ["journal_kill_child", *argv]
        trio.run(child.main)
        code = 0
    except BaseException:  # noqa: BLE001 - reported by its exit line; the child ends here
        traceback.print_exc()
    finally:
        try:
            print(f"EXIT {code}", flush=True)
        finally:
            os._exit(code)


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        command = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(command["fifo"], command["argv"])
        print(pid, flush=True)


if __name__ == "__main__":
    main()
