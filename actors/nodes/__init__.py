"""Node runners: the actors that run a workflow's nodes, one attempt at a time.

What a node *is* and what follows it is decided in :mod:`supervisors.runs`; a runner
only runs one attempt of a node's work and hands back its outcome, classified.
"""

from actors.nodes.runner import Attempt, NodeRunner

__all__ = ["Attempt", "NodeRunner"]
