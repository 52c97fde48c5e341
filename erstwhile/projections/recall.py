"""Reads beyond single memories: search, open proposals and contradictions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from erstwhile.domain.bar import ClaimView
from erstwhile.domain.memory import Kind, State, normalise_label
from erstwhile.domain.time import to_micros
from erstwhile.eventstore import Sql
from erstwhile.projections.candidates import CLAIM_SELECT, claim_from_row
from erstwhile.projections.reader import LATEST
from erstwhile.projections.search import SearchProjection, query_terms


@dataclass(frozen=True)
class SearchRequest:
    """One search, with every instant already resolved."""

    query: str
    valid_at: datetime
    as_of_given: bool
    known_at: datetime | None
    include_history: bool
    kinds: Sequence[Kind] | None
    subject: str | None
    attribute: str | None
    entities: Sequence[str] | None
    limit: int


@dataclass(frozen=True)
class RawHit:
    """A row of the memories projection with its score and tier."""

    row: Any
    score: float
    tier: str


def search(
    sql: Sql, namespace: str, index: SearchProjection, request: SearchRequest
) -> list[RawHit]:
    """Rank live memories first (tier ``current``), then, on request, every other memory
    that is not forgotten (tier ``historical``), each tier by text score then recency."""
    valid, recorded = to_micros(request.valid_at), LATEST
    if request.known_at is not None:
        recorded = to_micros(request.known_at)
    live = "v.valid_from <= ? AND v.valid_until > ?"
    live_params: list[Any] = [valid, valid]
    if not request.as_of_given:
        live += " AND v.state <> 'archived'"
    terms = query_terms(request.query)
    if request.query.strip() and not terms:
        return []
    match, score, text_params = ("1 = 1", "0.0", []) if not terms else index.match(terms)
    score_params = text_params[1:] if len(text_params) > 1 else []
    match_params = text_params[:1]
    source = "memory_versions v JOIN memories m ON m.id = v.memory_id"
    if terms:
        table = "memory_search" if index.dialect == "sqlite" else "memory_search s"
        key = "memory_search" if index.dialect == "sqlite" else "s"
        source = f"{table} JOIN memory_versions v ON v.memory_id = {key}.memory_id " \
                 "JOIN memories m ON m.id = v.memory_id"  # fmt: skip
    where = [
        "v.namespace = ?", "v.recorded_from <= ?", "v.recorded_until > ?",
        "v.state <> 'forgotten'", "m.erased_at IS NULL", match,
    ]  # fmt: skip
    params: list[Any] = [namespace, recorded, recorded, *match_params]
    if not request.include_history:
        where.append(f"({live})")
        params.extend(live_params)
    _filters(request, where, params)
    statement = (
        f"SELECT m.*, v.state AS v_state, v.valid_until AS v_valid_until, "
        f"v.superseded_by AS v_superseded_by, {score} AS score, "
        f"CASE WHEN {live} THEN 0 ELSE 1 END AS tier FROM {source} "
        f"WHERE {' AND '.join(where)} ORDER BY tier, score DESC, m.position DESC LIMIT ?"
    )
    sql.execute(statement, [*score_params, *live_params, *params, request.limit])
    return [
        RawHit(row, float(row["score"]), "current" if row["tier"] == 0 else "historical")
        for row in sql.fetchall()
    ]


def _filters(request: SearchRequest, where: list[str], params: list[Any]) -> None:
    if request.kinds:
        where.append(f"m.kind IN ({', '.join('?' * len(request.kinds))})")
        params.extend(Kind(kind).value for kind in request.kinds)
    if request.subject is not None:
        where.append("v.subject_key = ?")
        params.append(normalise_label(request.subject))
    if request.attribute is not None:
        where.append("v.attribute_key = ?")
        params.append(normalise_label(request.attribute))
    if request.entities:
        names = [normalise_label(name) for name in request.entities]
        where.append(
            "v.memory_id IN (SELECT e.memory_id FROM memory_entities e WHERE "
            f"e.entity IN ({', '.join('?' * len(names))}))"
        )
        params.extend(names)


def open_proposals(sql: Sql, namespace: str) -> list[Any]:
    """Return open proposals whose two memories are both still current, oldest first."""
    sql.execute(
        "SELECT p.id, p.older_id, p.newer_id, p.confidence FROM proposals p "
        "JOIN memories o ON o.id = p.older_id JOIN memories n ON n.id = p.newer_id "
        "WHERE p.namespace = ? AND p.status = 'open' AND o.state = 'current' "
        "AND n.state = 'current' ORDER BY p.position, p.older_id",
        (namespace,),
    )
    return sql.fetchall()


def proposal_row(sql: Sql, namespace: str, proposal: UUID) -> Any:
    """Return one proposal's row (any status), or None."""
    sql.execute(
        "SELECT id, older_id, newer_id, confidence, status FROM proposals "
        "WHERE id = ? AND namespace = ?",
        (str(proposal), namespace),
    )
    return sql.fetchone()


def live_keyed_claims(sql: Sql, namespace: str, subject: str | None) -> list[ClaimView]:
    """Return current, structured, valued claims (events aside), for contradiction checks."""
    condition = (
        "WHERE v.namespace = ? AND v.recorded_until = ? AND v.state = ? AND v.kind <> 'event' "
        "AND v.subject_key IS NOT NULL AND v.attribute_key IS NOT NULL AND m.value IS NOT NULL"
    )
    params: list[Any] = [namespace, LATEST + 1, State.CURRENT.value]
    if subject is not None:
        condition += " AND v.subject_key = ?"
        params.append(normalise_label(subject))
    sql.execute(CLAIM_SELECT + condition + " ORDER BY m.position", params)
    return [claim_from_row(row) for row in sql.fetchall()]
