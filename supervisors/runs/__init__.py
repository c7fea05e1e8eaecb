"""Workflow runs: graphs of nodes run by node-runner actors under a run supervisor.

Build a :class:`Workflow` of nodes (:class:`Step`, :class:`Llm`, :class:`Agent`,
:class:`Router`, :class:`Approval`) and :class:`Edge` values, then start runs with
:func:`open_runs`. docs/runs.md tells the whole story.

Their journal (docs/journal.md): :func:`open_journal`, :class:`Journal`, with its
policy — :class:`JournalPolicy` (:data:`DELAYS`, :data:`THRESHOLD`) and
:class:`Leases` (:data:`LEASE_TTL`).
"""

from supervisors.runs.conditions import Condition
from supervisors.runs.context import NodeContext
from supervisors.runs.graph import (
    Agent,
    Approval,
    Edge,
    Llm,
    Node,
    Router,
    Step,
    Workflow,
)
from supervisors.runs.journal import (
    DELAYS,
    LEASE_TTL,
    THRESHOLD,
    Journal,
    JournalPolicy,
    Leases,
    open_journal,
)
from supervisors.runs.load import load_workflow
from supervisors.runs.node_policy import NO_RETRY, NodeBreaker, NodeRetry
from supervisors.runs.run import Run, RunOutcome, RunStream
from supervisors.runs.runs import Runs, open_runs
from supervisors.runs.shutdown import ShutdownSummary

__all__ = [
    "DELAYS",
    "LEASE_TTL",
    "NO_RETRY",
    "THRESHOLD",
    "Agent",
    "Approval",
    "Condition",
    "Edge",
    "Journal",
    "JournalPolicy",
    "Leases",
    "Llm",
    "Node",
    "NodeBreaker",
    "NodeContext",
    "NodeRetry",
    "Router",
    "Run",
    "RunOutcome",
    "RunStream",
    "Runs",
    "ShutdownSummary",
    "Step",
    "Workflow",
    "load_workflow",
    "open_journal",
    "open_runs",
]
