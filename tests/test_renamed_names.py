"""Names renamed since 0.1.0 keep working from their old spelling, with a warning."""

from __future__ import annotations

import pytest

import actors.nodes


def test_actors_nodes_attempt_is_node_attempt_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"actors\.nodes\.Attempt is deprecated: use "):
        old = actors.nodes.Attempt  # type: ignore[attr-defined]
    assert old is actors.nodes.NodeCall


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        actors.nodes.Nothing  # type: ignore[attr-defined]  # noqa: B018
