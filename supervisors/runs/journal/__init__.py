"""The run journal's decisions and the way to open one: :func:`open_journal`,
:class:`Journal`, its :class:`JournalPolicy` (retry schedule, halting) and
:class:`Leases` (renewal, fenced runs halted). The mechanism — storage, records,
checksums, one write attempt per batch — is :mod:`actors.journal`."""

from supervisors.runs.journal.journal import Journal, open_journal
from supervisors.runs.journal.policy import (
    DELAYS,
    LEASE_TTL,
    THRESHOLD,
    JournalPolicy,
    Leases,
)

__all__ = [
    "DELAYS",
    "LEASE_TTL",
    "THRESHOLD",
    "Journal",
    "JournalPolicy",
    "Leases",
    "open_journal",
]
