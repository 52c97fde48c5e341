"""The ledger: the one object users hold.

Commands validate, append, then bring the projections up to their own write before
returning; queries read the projections. The class is assembled from one mixin per
concern (``core``, ``writes``, ``reads``, ``curation``) so each file stays small.
"""

from erstwhile.ledger.audit import Audit, ReplayLedger
from erstwhile.ledger.core import Clock, Policy, system_clock
from erstwhile.ledger.curation import Curation
from erstwhile.ledger.reads import Queries
from erstwhile.ledger.writes import WriteCommands


class Ledger(WriteCommands, Queries, Curation, Audit):
    """A bi-temporal memory ledger over one store, scoped to one namespace and actor.

    Open one with :meth:`Ledger.open`; it is a context manager.
    """


__all__ = ["Clock", "Ledger", "Policy", "ReplayLedger", "system_clock"]
