"""TEMPORARY stub: replaced by the real module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import simpleeval  # type: ignore[import-untyped]


class Condition:
    def __init__(self, source: str) -> None:
        self.source = source

    def __call__(self, state: Mapping[str, Any]) -> bool:
        return bool(simpleeval.simple_eval(self.source, names=dict(state)))
