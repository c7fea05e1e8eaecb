"""A real PostgreSQL server for the tests: ``initdb`` into a temporary directory, then
``postgres`` on 127.0.0.1 at a free port (as the ``postgres`` user when the tests run
as root, which PostgreSQL refuses). Binaries are found on ``PATH`` or under
``/usr/lib/postgresql/*/bin``. Without them the tests that need the server skip, saying
why — except in CI (``CI`` set), where they fail: ``.ci/run`` installs the server."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.orphans import dies_with_parent


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is needed in CI: {reason}")
    pytest.skip(f"PostgreSQL not available here: {reason}")


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server; yields its DSN (database ``postgres``, trust auth, loopback)."""
    initdb, postgres = _binary("initdb"), _binary("postgres")
    if initdb is None or postgres is None:
        unavailable("no initdb/postgres binary on PATH or under /usr/lib/postgresql")
    assert initdb is not None and postgres is not None
    root = Path(tempfile.mkdtemp(prefix="ra-pg-"))
    data, sockets = root / "data", root / "run"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    subprocess.run(
        _as_server_user([initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync"]),
        check=True,
        capture_output=True,
    )
    port = free_port()
    # Started as the postgres user directly (not through runuser), dying with this
    # process: a killed test run leaves no server behind (tests/orphans.py).
    server = subprocess.Popen(
        (
            [
                postgres,
                "-D",
                str(data),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-k",
                str(sockets),
                "-c",
                "fsync=on",
                "-c",
                "max_connections=50",
            ]
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=dies_with_parent("postgres" if os.geteuid() == 0 else None),
    )
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres connect_timeout=5"
    try:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(dsn).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.1)
        yield dsn
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)
