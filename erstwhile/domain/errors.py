"""The one exception tree of erstwhile.

::

    ErstwhileError
    ├── NotFound               an id that does not exist (or is forgotten) in this namespace
    ├── ValidationError        bad input: nothing was appended
    ├── SupersessionRefused    a supersession broke an invariant; see ``.reason``
    ├── ConcurrencyConflict    another writer changed a memory this write depended on
    ├── IdempotencyMismatch    an idempotency key reused with a different payload
    └── StoreUnavailable       the database cannot be reached or used

Every error that leaves the public API is one of these, or a subclass of one (a log
that does not verify refuses export and import as ``BrokenLog``, a ``StoreUnavailable``);
database driver errors are translated where they enter (``erstwhile.eventstore``). A
call with an argument the method does not take raises Python's own ``TypeError``.
"""

from __future__ import annotations

from typing import Literal

RefusalReason = Literal[
    "self",
    "already_superseded",
    "not_current",
    "event_kind",
    "kind_mismatch",
    "empty_window",
    "no_overlap",
    "identical_claim",
]


class ErstwhileError(Exception):
    """Root of every error erstwhile raises on purpose."""


class NotFound(ErstwhileError):
    """No memory (or proposal) with this id is visible in this namespace."""


class ValidationError(ErstwhileError, ValueError):
    """The input breaks a rule of the contract; nothing was written."""


class SupersessionRefused(ErstwhileError):
    """A supersession would break an invariant; ``reason`` says which, for machines."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(f"supersession refused ({reason}): {message}")
        self.reason: RefusalReason = reason
        self.message = message

    def __reduce__(self) -> tuple[type[SupersessionRefused], tuple[str, str], dict[str, object]]:
        """Rebuild from the reason and the message, as pickle and copy do: the text alone
        (``args``) would not, so a process pool lost the error (and its worker)."""
        return type(self), (self.reason, self.message), self.__dict__


class ConcurrencyConflict(ErstwhileError):
    """Another writer appended to a memory this write read; nothing of it was stored."""


class IdempotencyMismatch(ErstwhileError):
    """The idempotency key was first used with a different payload."""


class StoreUnavailable(ErstwhileError):
    """The store cannot be opened, reached or written."""


BRIEF_CHARS = 40


def brief(value: object) -> str:
    """``repr(value)``, shortened for an error message when longer than
    :data:`BRIEF_CHARS` (a number of 400 digits would otherwise fill the screen)."""
    text = repr(value)
    if len(text) <= BRIEF_CHARS:
        return text
    return f"{text[: BRIEF_CHARS - 10]}... ({len(text):,} characters)"
