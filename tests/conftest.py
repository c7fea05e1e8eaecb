"""Shared fixtures: logging into a buffer we can read, and a mock clock."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from actors.observe import configure_logging

if TYPE_CHECKING:
    from tests.redis_server import RedisServer


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Every rendered JSON log line of the test, as text."""
    stream = io.StringIO()
    configure_logging(mode="json", level="debug", stream=stream)
    yield stream
    configure_logging(mode="json", level="debug", stream=io.StringIO())


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    """Tests log at debug into a throwaway buffer unless they ask for ``log_stream``."""
    configure_logging(mode="json", level="debug", stream=io.StringIO())


@pytest.fixture(scope="session")
def postgres_server_dsn() -> Iterator[str]:
    """A real PostgreSQL server for the session (tests/pg_server.py)."""
    from tests.pg_server import postgres_server

    with postgres_server() as dsn:
        yield dsn


@pytest.fixture
def postgres_dsn(postgres_server_dsn: str) -> Iterator[str]:
    """A fresh database of that server for one test."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield postgres_server_dsn.replace("dbname=postgres", f"dbname={name}")
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    """A fresh real redis-server for one test (tests/redis_server.py)."""
    from tests.redis_server import redis_server

    with redis_server() as server:
        yield server
