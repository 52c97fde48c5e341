"""Finding the memories a new claim might replace, through indexes only.

Candidates share the new claim's kind and are current as the ledger knew them at the
given recorded instant, and either share its subject and attribute (the structured key)
or name one of its entities. The bar itself is decided in ``erstwhile.domain.bar``.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import orjson

from erstwhile.domain.bar import ClaimView, canonical_json
from erstwhile.domain.events import Asserted
from erstwhile.domain.memory import Kind, State
from erstwhile.domain.time import Window, end_from_micros, from_micros
from erstwhile.eventstore import RecordedEvent, Sql

CLAIM_SELECT = (
    "SELECT m.id, m.kind, v.state, m.subject_key, m.attribute_key, m.entities, m.valid_from, "
    "v.valid_until, m.value, m.content, m.confidence, m.position FROM memory_versions v "
    "JOIN memories m ON m.id = v.memory_id "
)


def claim_from_row(row: Any) -> ClaimView:
    """Build a claim view from a ``CLAIM_SELECT`` row."""
    value = row["value"]
    return ClaimView(
        id=UUID(row["id"]),
        kind=Kind(row["kind"]),
        state=State(row["state"]),
        subject_key=row["subject_key"],
        attribute_key=row["attribute_key"],
        entities=frozenset(orjson.loads(row["entities"] or "[]")),
        window=Window(from_micros(row["valid_from"]), end_from_micros(row["valid_until"])),
        value_json=None if value is None else canonical_json(orjson.loads(value)),
        content=row["content"] or "",
        confidence=row["confidence"],
        position=row["position"],
    )


def claim_from_event(record: RecordedEvent, event: Asserted) -> ClaimView:
    """Build the claim view of a memory being asserted."""
    window = Window(event.valid_from, event.valid_until)
    return ClaimView.of_new(event, record.memory_id, window, record.position)


def candidates(sql: Sql, namespace: str, newer: ClaimView, known: int) -> list[ClaimView]:
    """Return current memories of the same kind that share the claim's key or an entity,
    as known at ``known``; never the claim itself."""
    if not newer.kind.revisable:
        return []
    found: dict[UUID, ClaimView] = {}
    at_known = (
        "WHERE v.namespace = ? AND v.recorded_from <= ? AND v.recorded_until > ? "
        "AND v.state = 'current' AND v.kind = ? "
    )
    base: list[Any] = [namespace, known, known, newer.kind.value]
    if newer.keyed:
        sql.execute(
            CLAIM_SELECT + at_known + "AND v.subject_key = ? AND v.attribute_key = ?",
            [*base, newer.subject_key, newer.attribute_key],
        )
        found.update((c.id, c) for c in map(claim_from_row, sql.fetchall()))
    if newer.entities:
        # A structured claim meets another structured one by key alone, so through shared
        # entities it only meets the claims that lack a key.
        members = _entity_members(sql, namespace, sorted(newer.entities), newer.keyed)
        for chunk in _chunks(members, 500):
            marks = ", ".join("?" * len(chunk))
            sql.execute(CLAIM_SELECT + at_known + f"AND v.memory_id IN ({marks})", [*base, *chunk])
            found.update((c.id, c) for c in map(claim_from_row, sql.fetchall()))
    found.pop(newer.id, None)
    return sorted(found.values(), key=lambda c: c.position)


def _entity_members(sql: Sql, namespace: str, names: list[str], unkeyed_only: bool) -> list[str]:
    """Ids of the memories naming any of these entities (looked up first, on its own, so
    the versions are then fetched by id whatever the planner thinks of the tables)."""
    keyed = "AND keyed = 0 " if unkeyed_only else ""
    sql.execute(
        "SELECT DISTINCT memory_id FROM memory_entities "
        f"WHERE namespace = ? AND entity IN ({', '.join('?' * len(names))}) {keyed}",
        [namespace, *names],
    )
    return [str(row["memory_id"]) for row in sql.fetchall()]


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]
