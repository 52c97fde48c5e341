"""Turning validated write requests into events: the pure core of every command.

A command reads the memories it touches (as :class:`Existing`), and the log calls
:func:`plan_writes` inside its serialised append once it knows the recording instant,
so a default ``valid_from`` is exactly the instant the ledger recorded the write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

from erstwhile.domain.bar import ClaimView
from erstwhile.domain.errors import NotFound, ValidationError
from erstwhile.domain.events import Asserted, LedgerEvent, Superseded
from erstwhile.domain.ids import parse_id
from erstwhile.domain.memory import (
    Claim,
    Kind,
    MemoryDraft,
    State,
    check_idempotency_key,
    check_position,
    parse_draft,
    whole_numbers_as_integers,
)
from erstwhile.domain.rules import Side, check_supersession
from erstwhile.domain.time import Window

POLICIES = ("propose", "timestamp_wins")


@dataclass(frozen=True)
class Existing:
    """What a write needs to know of a memory it touches."""

    id: UUID
    kind: Kind
    state: State
    window: Window
    claim: Claim
    version: int
    position: int
    """Where it was asserted in the log: memories superseded together are listed in
    this order (0 for a memory of the batch being planned, not yet in the log)."""

    def side(self) -> Side:
        """This memory as the supersession rules see it."""
        return Side(self.id, self.kind, self.state, self.window, self.claim)


@dataclass(frozen=True)
class WritePlan:
    """One validated ``remember`` request: the claim plus what to do with it."""

    draft: MemoryDraft
    supersedes: tuple[UUID, ...]
    policy: str
    idempotency_key: str | None
    observed_position: int | None

    fingerprint: str
    """A digest of the request as made, which a retry under the same idempotency key
    must match (empty when no key is given: nothing will compare it)."""
    earlier_fingerprint: str = ""
    """The digest this request had before whole numbers in ``value`` and ``metadata`` were
    spelled one way (see :func:`fingerprint`), where that differs: a claim stored then
    still matches its retry."""

    @classmethod
    def parse(cls, arguments: Mapping[str, Any]) -> WritePlan:
        """Validate the arguments of one ``remember`` call; refuse anything off-contract."""
        fields = dict(arguments)
        supersedes = _ids(fields.pop("supersedes", ()) or ())
        policy = fields.pop("policy", "propose")
        if policy not in POLICIES:
            raise ValidationError(f"policy: unknown policy {policy!r}; expected one of {POLICIES}")
        key = fields.pop("idempotency_key", None)
        if key is not None:
            check_idempotency_key(key)
        observed = fields.pop("observed_position", None)
        if observed is not None:
            check_position(observed, "observed_position")
        draft = parse_draft(fields)
        if key is None:
            return cls(draft, supersedes, policy, key, observed, "")
        digest, earlier = fingerprint(draft, supersedes, policy), ""
        if _respelled(draft):
            earlier = fingerprint(draft, supersedes, policy, whole_numbers=False)
        return cls(draft, supersedes, policy, key, observed, digest, earlier)

    def matches(self, stored: str) -> bool:
        """Whether a claim's stored fingerprint is this request's (as digested now, or
        as it was digested before whole numbers were spelled one way)."""
        return bool(stored) and stored in (self.fingerprint, self.earlier_fingerprint)

    def claim_view(self, start: datetime) -> ClaimView:
        """This request's claim as the bar sees it, opening at ``start`` if undated."""
        return ClaimView.of_new(self.draft, UUID(int=0), self.draft.window_from(start), 0)


def fingerprint(
    draft: MemoryDraft, supersedes: Sequence[UUID], policy: str, *, whole_numbers: bool = True
) -> str:
    """Digest a ``remember`` request (its claim, what it supersedes, its policy).

    A whole number in ``value`` or ``metadata`` is digested as an integer, written ``12``
    or ``12.0`` (JSON does not tell them apart, and a retry that went through JSON may
    come back spelled the other way), as the ledger compares claims. Until 2026-12-02
    the two spellings digested differently (``whole_numbers=False``)."""
    dumped = draft.model_dump(mode="json")
    if whole_numbers:
        for name in ("value", "metadata"):
            dumped[name] = whole_numbers_as_integers(dumped[name])
    payload = {"draft": dumped, "supersedes": [str(i) for i in supersedes], "policy": policy}
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _respelled(draft: MemoryDraft) -> bool:
    """Whether ``value`` or ``metadata`` holds a whole float, which :func:`fingerprint`
    respells (compared as text: ``1 == 1.0`` in Python)."""
    return any(
        orjson.dumps(whole_numbers_as_integers(found)) != orjson.dumps(found)
        for found in (draft.value, draft.metadata)
    )


def _ids(values: Any) -> tuple[UUID, ...]:
    if isinstance(values, str | UUID):
        values = [values]
    if not isinstance(values, Iterable) or isinstance(values, bytes | Mapping):
        raise ValidationError(
            f"supersedes must be a list of memory ids, got {type(values).__name__}"
        )
    ids: dict[UUID, None] = {}  # in order; a list's `in` made n ids cost n squared
    for value in values:
        if not isinstance(value, str | UUID):
            raise ValidationError(f"supersedes: {value!r} is not a memory id (a UUID or its text)")
        memory_id = value if isinstance(value, UUID) else parse_id(value)
        if memory_id is None:
            raise NotFound(f"supersedes: {value!r} is not a memory id")
        if memory_id in ids:
            raise ValidationError(f"supersedes names memory {memory_id} twice")
        ids[memory_id] = None
    return tuple(ids)


def assert_event(plan: WritePlan, memory_id: UUID, window: Window) -> Asserted:
    """Return the ``Asserted`` event opening a new memory's stream."""
    draft = plan.draft
    return Asserted(
        originator_id=memory_id,
        originator_version=1,
        kind=draft.kind,
        content=draft.content,
        subject=draft.subject,
        attribute=draft.attribute,
        value=draft.value,
        entities=tuple(draft.entities),
        valid_from=window.start,
        valid_until=window.end,
        occurred_at=draft.occurred_at,
        confidence=draft.confidence,
        evidence=tuple(draft.evidence),
        extractor_id=draft.extractor_id,
        extracted_at=draft.extracted_at,
        metadata=draft.metadata,
        supersedes=tuple(plan.supersedes),
        idempotency_key=plan.idempotency_key,
        observed_position=plan.observed_position,
    )


def plan_writes(
    plans: Sequence[WritePlan],
    ids: Sequence[UUID],
    touched: Mapping[UUID, Existing],
    recorded_at: datetime,
) -> list[LedgerEvent]:
    """Return the events of a batch of writes recorded at ``recorded_at``.

    Each supersession is checked against the touched memory as this very batch leaves
    it, so one batch cannot supersede the same memory twice; a plan may supersede an
    earlier plan's memory (``timestamp_wins`` within a batch). A new memory's ``Asserted``
    comes after the ``Superseded`` events it causes: the log assigns consecutive
    microseconds within an append, so "as known at the new memory's ``recorded_at``"
    sees the whole write, links included.
    """
    state = dict(touched)
    events: list[LedgerEvent] = []
    # Only a batch that supersedes something checks a rule: the others (most writes,
    # and every bulk load of new memories) need none of the rules' views.
    superseding = any(plan.supersedes for plan in plans)
    for plan, memory_id in zip(plans, ids, strict=True):
        window = plan.draft.window_from(recorded_at)
        if not superseding:
            events.append(assert_event(plan, memory_id, window))
            continue
        claim = plan.draft.claim()
        newer = Side(memory_id, plan.draft.kind, State.CURRENT, window, claim)
        for older_id in plan.supersedes:
            older = state[older_id]
            check_supersession(older.side(), newer, window.start)
            events.append(
                Superseded(
                    originator_id=older.id,
                    originator_version=older.version + 1,
                    newer_id=memory_id,
                    at=window.start,
                )
            )
            state[older_id] = replace(
                older,
                state=State.SUPERSEDED,
                window=older.window.closed_at(window.start),
                version=older.version + 1,
            )
        events.append(assert_event(plan, memory_id, window))
        state[memory_id] = Existing(memory_id, plan.draft.kind, State.CURRENT, window, claim,
                                    version=1, position=0)  # fmt: skip
    return events
