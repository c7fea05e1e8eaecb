"""Node runners: the actors that run a workflow's nodes, one attempt at a time.

What a node *is* and what follows it is decided in :mod:`supervisors.runs`; a runner
only runs one attempt of a node's work and hands back its outcome, classified.

``Attempt`` (0.1.0) is now :class:`NodeCall`; the old name still works, with a
``DeprecationWarning``.
"""

import warnings
from typing import Any

from actors.nodes.runner import NodeCall, NodeRunner

__all__ = ["NodeCall", "NodeRunner"]

_RENAMED = {"Attempt": "NodeCall"}


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"actors.nodes.{name} is deprecated: use actors.nodes.{new}",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
