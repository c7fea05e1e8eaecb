"""Supervisor trees: OTP's supervisor, its parts and its specs (docs/supervision.md).

:func:`open_tree` runs a tree for the duration of a block (:mod:`supervisors.tree.open`);
the rest of the package is the supervisor (:mod:`~supervisors.tree.supervisor`) and its
parts along OTP's ``supervisor.erl`` seams: the specs (``spec``), the policy by error
class (``policy``), restart delays (``backoff``), the restart window (``intensity``),
the strategy tables (``strategy``), the children (``children``), their incarnations
(``incarnation``, ``start``), the decision on a failure (``decision``) and the subtree's
cancel (``cancel``).
"""

from supervisors.tree.open import Tree, open_tree

__all__ = ["Tree", "open_tree"]
