"""A real ``redis-server`` for the tests: on 127.0.0.1 at a free port, with a temporary
directory and no persistence. It can be killed and started again on the same port
(degraded mode). Without the binary the tests that need it skip, saying why — except in
CI (``CI`` set), where they fail: ``.ci/run`` installs the server."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.orphans import dies_with_parent
from tests.pg_server import free_port


class RedisServer:
    """One server process; :meth:`kill`, :meth:`pause`/:meth:`resume` and :meth:`start`
    act on it while its port stays the same."""

    def __init__(self, binary: str, root: Path) -> None:
        self.binary = binary
        self.root = root
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.root),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=dies_with_parent(),
        )
        deadline = time.monotonic() + 10
        while not self._answers():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def _answers(self) -> bool:
        """The server answers PING (``False`` while it refuses connections: starting)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str) -> bytes:
        """One command over a plain socket (RESP); the raw reply."""
        request = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(request.encode())
            return sock.recv(4096)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections and answers nothing (a hang)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is needed in CI: not on PATH")
        pytest.skip("redis-server not available here: not on PATH")
    root = Path(tempfile.mkdtemp(prefix="ra-redis-"))
    server = RedisServer(binary, root)
    try:
        server.start()  # inside: a server that fails to start is killed, its folder removed
        yield server
    finally:
        if server.process is not None:
            server.resume()
        server.kill()
        shutil.rmtree(root, ignore_errors=True)
