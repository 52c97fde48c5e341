"""The proposals projection: supersessions the ledger suggests, and what became of them.

On each ``Asserted`` it looks for older memories that clear the bar against the new one,
as the ledger knew them at that instant (through the bitemporal versions, so a rebuild
of this projection alone proposes exactly the same pairs). A ``ProposalRejected`` marks
its pair rejected for good; a ``Superseded`` that names a proposal marks it accepted;
any event taking a memory out of ``current`` marks its pairs still open withdrawn.
"""

from __future__ import annotations

from erstwhile.domain.bar import clears_bar
from erstwhile.domain.events import (
    Archived,
    Asserted,
    Forgotten,
    LedgerEvent,
    ProposalRejected,
    Superseded,
    proposal_key,
)
from erstwhile.eventstore import RecordedEvent, Sql
from erstwhile.eventstore.backend import in_lists, marks
from erstwhile.projections.base import Folded, Projection
from erstwhile.projections.batch import BufferedSql
from erstwhile.projections.candidates import candidates_many, claim_from_event, probe_of_event


class ProposalsProjection(Projection):
    """One row per proposed pair: ``open``, ``accepted``, ``rejected`` or ``withdrawn``
    (a side left ``current``: archived, forgotten or superseded otherwise)."""

    name = "proposals"
    version = 5  # 2: no proposal pairs with an erased memory; 3: 1 and 1.0 are one value;
    # 4: labels typed composed or decomposed are one (NFC); 5: withdrawn pairs are marked
    tables = ("proposals",)
    reads = ("memories", "memory_versions")  # the candidates, as known at each assertion
    reader_indexes = ("proposals_open",)

    def create(self, sql: Sql) -> None:
        sql.execute(
            "CREATE TABLE IF NOT EXISTS proposals (id TEXT PRIMARY KEY, namespace TEXT NOT NULL, "
            "older_id TEXT NOT NULL, newer_id TEXT NOT NULL, confidence DOUBLE PRECISION NOT NULL, "
            "status TEXT NOT NULL, position BIGINT NOT NULL)"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS proposals_open ON proposals (namespace, status, position)"
        )
        # A hard forget drops the memory's pairs, found from either side: without these,
        # through every proposal of the store (95 ms a forget at 224,000 proposals).
        sql.execute("CREATE INDEX IF NOT EXISTS proposals_older ON proposals (older_id)")
        sql.execute("CREATE INDEX IF NOT EXISTS proposals_newer ON proposals (newer_id)")

    def drop(self, sql: Sql) -> None:
        sql.execute("DROP TABLE IF EXISTS proposals")

    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        self.apply_many(sql, [(record, event)])

    def apply_many(self, sql: Sql, batch: Folded) -> None:
        """Fold a batch: find every new claim's candidates in a few queries for the
        whole batch, then record each pair that clears the bar, in log order. A pair
        already recorded (a fold that repeats) is left as it is, by the INSERT itself:
        reading the pairs first cost a write that proposes one a wait for the server."""
        proposed = self._proposed(sql, batch)
        buffered = BufferedSql(sql)
        retired: set[str] = set()
        for record, event in batch:
            if isinstance(event, Asserted):
                for pair, older, confidence in proposed.get(record.position, []):
                    buffered.execute(
                        "INSERT INTO proposals (id, namespace, older_id, newer_id, confidence, "
                        "status, position) VALUES (?, ?, ?, ?, ?, 'open', ?) "
                        "ON CONFLICT (id) DO NOTHING",
                        (pair, record.namespace, older, record.memory_key, confidence,
                         record.position),
                    )  # fmt: skip
            elif isinstance(event, ProposalRejected):
                self._set_status(buffered, record.memory_key, "rejected")
            elif isinstance(event, Forgotten) and event.hard:
                # Proposals never pair with erased content: a fold that meets the
                # assertion already erased (a rebuild) makes none, so this one drops its.
                buffered.execute(
                    "DELETE FROM proposals WHERE older_id = ? OR newer_id = ?",
                    (record.memory_key, record.memory_key),
                )
            elif isinstance(event, Archived | Forgotten | Superseded):
                if isinstance(event, Superseded) and event.proposal_id is not None:
                    self._set_status(buffered, str(event.proposal_id), "accepted")
                retired.add(record.memory_key)
        self._withdraw(buffered, sorted(retired))
        buffered.flush()

    @staticmethod
    def _withdraw(sql: Sql, retired: list[str]) -> None:
        """Mark withdrawn the pairs still open of memories the batch took out of
        ``current`` for good: none of them can be accepted again. Left open, every
        listing read and dropped them (394 ms to list none, with 1,000 claims of one
        key archived but one).

        Once for the batch, after its other writes: a pair proposed in the batch before
        a side's retirement is withdrawn too, and none is proposed after it (a side no
        longer current is no candidate); one accepted or rejected in the batch is no
        longer open. So a batch runs one statement for all its retirements, not one per
        event (a rebuild meets one for every supersession in the log)."""
        for chunk in in_lists(retired):
            listed = marks(chunk)
            sql.execute(
                "UPDATE proposals SET status = 'withdrawn' WHERE status = 'open' "
                f"AND (older_id IN ({listed}) OR newer_id IN ({listed}))",
                [*chunk, *chunk],
            )

    def _proposed(self, sql: Sql, batch: Folded) -> dict[int, list[tuple[str, str, float]]]:
        """For each ``Asserted`` (by position): the (pair id, older id, confidence) of
        every memory it might replace, as the ledger knew them at that instant."""
        only_assertions = all(isinstance(event, Asserted) for _, event in batch)
        by_namespace: dict[str, list[tuple[RecordedEvent, Asserted]]] = {}
        for record, event in batch:
            if isinstance(event, Asserted) and not event.erased:
                by_namespace.setdefault(record.namespace, []).append((record, event))
        found: dict[int, list[tuple[str, str, float]]] = {}
        for namespace, asserted in by_namespace.items():
            wanted = [(probe_of_event(record, event), record.recorded_micros)
                      for record, event in asserted]  # fmt: skip
            olders = candidates_many(sql, namespace, wanted, self.dialect, only_assertions)
            for (record, event), candidates in zip(asserted, olders, strict=True):
                if not candidates:
                    continue
                newer, newer_key = claim_from_event(record, event), str(event.originator_id)
                pairs = found[record.position] = []
                for older in candidates:
                    if clears_bar(older, newer):
                        older_key = str(older.id)
                        pair = proposal_key(older_key, newer_key)
                        pairs.append((pair, older_key, newer.confidence))
        return found

    def _set_status(self, sql: Sql, pair: str, status: str) -> None:
        sql.execute("UPDATE proposals SET status = ? WHERE id = ?", (status, pair))
