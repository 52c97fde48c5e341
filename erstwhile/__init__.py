"""erstwhile: a bi-temporal, event-sourced memory ledger for AI agents and for audit.

Every write is an immutable event in an append-only log; projections fold the log into
views that answer what is true now, what was true at a valid time, and what the ledger
believed at a transaction time.
"""

from erstwhile.domain.errors import (
    ConcurrencyConflict,
    ErstwhileError,
    IdempotencyMismatch,
    NotFound,
    StoreUnavailable,
    SupersessionRefused,
    ValidationError,
)
from erstwhile.domain.memory import Kind, Memory, State
from erstwhile.domain.views import (
    Conflict,
    History,
    Hit,
    LoggedEvent,
    ProjectionStatus,
    Proposal,
    Rectangle,
    VerifyReport,
)
from erstwhile.ledger import Ledger, ReplayLedger

__version__ = "0.1.0"

__all__ = [
    "ConcurrencyConflict",
    "Conflict",
    "ErstwhileError",
    "History",
    "Hit",
    "IdempotencyMismatch",
    "Kind",
    "Ledger",
    "LoggedEvent",
    "Memory",
    "NotFound",
    "ProjectionStatus",
    "Proposal",
    "Rectangle",
    "ReplayLedger",
    "State",
    "StoreUnavailable",
    "SupersessionRefused",
    "ValidationError",
    "VerifyReport",
    "__version__",
]
