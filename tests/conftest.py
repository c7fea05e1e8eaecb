"""Shared fixtures: logging into a buffer we can read, and a mock clock."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from actors.observe import configure_logging


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
