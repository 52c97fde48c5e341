"""The proposals projection: supersessions the ledger suggests, and what became of them.

On each ``Asserted`` it looks for older memories that clear the bar against the new one,
as the ledger knew them at that instant (through the bitemporal versions, so a rebuild
of this projection alone proposes exactly the same pairs). A ``ProposalRejected`` marks
its pair rejected for good; a ``Superseded`` that names a proposal marks it accepted.
"""

from __future__ import annotations

from erstwhile.domain.bar import clears_bar
from erstwhile.domain.events import Asserted, LedgerEvent, ProposalRejected, Superseded, proposal_id
from erstwhile.domain.time import to_micros
from erstwhile.eventstore import RecordedEvent, Sql
from erstwhile.projections.base import Projection
from erstwhile.projections.candidates import candidates, claim_from_event


class ProposalsProjection(Projection):
    """One row per proposed pair: ``open``, ``accepted`` or ``rejected``."""

    name = "proposals"
    version = 1
    tables = ("proposals",)

    def create(self, sql: Sql) -> None:
        sql.execute(
            "CREATE TABLE IF NOT EXISTS proposals (id TEXT PRIMARY KEY, namespace TEXT NOT NULL, "
            "older_id TEXT NOT NULL, newer_id TEXT NOT NULL, confidence DOUBLE PRECISION NOT NULL, "
            "status TEXT NOT NULL, position BIGINT NOT NULL)"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS proposals_open ON proposals (namespace, status, position)"
        )

    def drop(self, sql: Sql) -> None:
        sql.execute("DROP TABLE IF EXISTS proposals")

    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        if isinstance(event, Asserted):
            self._propose(sql, record, event)
        elif isinstance(event, ProposalRejected):
            self._set_status(sql, str(record.memory_id), "rejected")
        elif isinstance(event, Superseded) and event.proposal_id is not None:
            self._set_status(sql, str(event.proposal_id), "accepted")

    def _propose(self, sql: Sql, record: RecordedEvent, event: Asserted) -> None:
        newer = claim_from_event(record, event)
        known = to_micros(record.recorded_at)
        for older in candidates(sql, record.namespace, newer, known):
            if not clears_bar(older, newer):
                continue
            pair = proposal_id(older.id, newer.id)
            sql.execute("SELECT status FROM proposals WHERE id = ?", (str(pair),))
            if sql.fetchone() is not None:
                continue
            sql.execute(
                "INSERT INTO proposals (id, namespace, older_id, newer_id, confidence, status, "
                "position) VALUES (?, ?, ?, ?, ?, 'open', ?)",
                (str(pair), record.namespace, str(older.id), str(newer.id), newer.confidence,
                 record.position),
            )  # fmt: skip

    def _set_status(self, sql: Sql, pair: str, status: str) -> None:
        sql.execute("UPDATE proposals SET status = ? WHERE id = ?", (status, pair))
