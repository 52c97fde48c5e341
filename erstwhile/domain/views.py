"""The shapes queries answer with, beside :class:`~erstwhile.domain.memory.Memory`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from erstwhile.domain.memory import Memory


class History(BaseModel):
    """A memory with its lineage one level each way."""

    model_config = ConfigDict(frozen=True)

    memory: Memory
    superseded_by: Memory | None = None
    supersedes: list[Memory] = Field(default_factory=list)


class Hit(BaseModel):
    """One search result: the memory, its relevance, and its tier."""

    model_config = ConfigDict(frozen=True)

    memory: Memory
    score: float
    tier: Literal["current", "historical"]


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
