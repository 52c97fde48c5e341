"""The shapes queries answer with, beside :class:`~erstwhile.domain.memory.Memory`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from erstwhile.domain.memory import Kind, Memory, State


class History(BaseModel):
    """A memory with its lineage one level each way."""

    model_config = ConfigDict(frozen=True)

    memory: Memory
    superseded_by: Memory | None = None
    supersedes: list[Memory] = Field(default_factory=list)

    def __hash__(self) -> int:
        """Hash by the memory's id (see :meth:`Memory.__hash__`)."""
        return hash(self.memory.id)


class Hit(BaseModel):
    """One search result: the memory, its relevance, and its tier.

    ``score`` is the number of query terms the memory shares plus its text score (BM25
    or ``ts_rank``) mapped into [0, 1): within a tier, hits come in descending score.
    Scores compare within a tier only: with ``include_history=True`` a historical hit may
    carry a higher score than a current one that ranks above it, so keep the order the
    search returns, or sort by tier first.
    """

    model_config = ConfigDict(frozen=True)

    memory: Memory
    score: float
    tier: Literal["current", "historical"]

    def __hash__(self) -> int:
        """Hash by the memory's id (see :meth:`Memory.__hash__`)."""
        return hash(self.memory.id)


class LoggedEvent(BaseModel):
    """One stored event as an auditor sees it; ``data`` is None where content was erased."""

    model_config = ConfigDict(frozen=True)

    position: int
    recorded_at: datetime
    type: str
    memory_id: UUID
    actor: str
    namespace: str
    data: dict[str, Any] | None

    def __hash__(self) -> int:
        """Hash by log position, which names one event (its data may be a dict)."""
        return hash(self.position)


class Rectangle(BaseModel):
    """One version of a memory, as a rectangle of the bi-temporal picture: valid
    ``[valid_from, valid_until)`` (across), as the ledger recorded it during
    ``[recorded_from, recorded_until)`` (down); a None end is open.

    A new rectangle starts each time the ledger changed what it held about the memory
    (its state, or the end of its window). A forgotten memory's rectangles end at its
    forget; a hard-forgotten memory has none.
    """

    model_config = ConfigDict(frozen=True)

    memory_id: UUID
    kind: Kind
    state: State
    content: str
    value: Any = None
    valid_from: datetime
    valid_until: datetime | None
    recorded_from: datetime
    recorded_until: datetime | None

    def __hash__(self) -> int:
        """Hash by memory and corner, which name one rectangle (its value may be a list
        or a dict)."""
        return hash((self.memory_id, self.valid_from, self.recorded_from))


class ProjectionStatus(BaseModel):
    """How far one projection has applied the log."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    position: int
    head: int
    lag: int


class VerifyReport(BaseModel):
    """The result of checking the log: ``first_break`` is the position of the first
    event found wrong (its stored hash does not match its recomputed one, its memory's
    key is gone without a hard forget, or it is the first of a tail the projections had
    applied but the log no longer holds), and ``reason`` says which."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    checked: int
    first_break: int | None = None
    reason: str | None = None


class Proposal(BaseModel):
    """The ledger's suggestion that ``newer_id`` supersedes ``older_id``."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    older_id: UUID
    newer_id: UUID
    confidence: float


class Conflict(BaseModel):
    """Live memories that disagree about one subject and attribute at overlapping times.

    ``highest_confidence`` is always one member: when several tie for the highest
    confidence, the one whose window opens last (then the one recorded last). It is
    the member to keep only under ``resolution="by_confidence"``. Under ``by_recency``
    the member to keep is the one whose window opens last, which may be another (one
    of lower confidence); under ``unresolved`` it is a tie's tiebreak, not a winner.
    """

    model_config = ConfigDict(frozen=True)

    subject: str
    attribute: str
    members: list[Memory]
    highest_confidence: Memory
    resolution: Literal["by_confidence", "by_recency", "unresolved"]

    def __hash__(self) -> int:
        """Hash by the members' ids (see :meth:`Memory.__hash__`)."""
        return hash(tuple(member.id for member in self.members))
