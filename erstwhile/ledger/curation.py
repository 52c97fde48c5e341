"""Curation: the supersessions the ledger proposes, contradictions, and causality."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from erstwhile.domain.bar import conflict_sets, resolve
from erstwhile.domain.causality import clock_dominates
from erstwhile.domain.errors import ConcurrencyConflict, NotFound, ValidationError
from erstwhile.domain.events import (
    ProposalRejected,
    Superseded,
)
from erstwhile.domain.memory import Memory, State
from erstwhile.domain.rules import check_supersession
from erstwhile.domain.views import Conflict, Proposal
from erstwhile.eventstore import (
    Sql,
    translated_errors,
)
from erstwhile.ledger.arguments import as_id, label_argument, optional_text
from erstwhile.ledger.core import LedgerCore
from erstwhile.projections import (
    recall,
)
from erstwhile.projections.reader import MemoryState


class Curation(LedgerCore):
    """proposals, accept, reject, conflicts, knows."""

    def proposals(self) -> list[Proposal]:
        """Return the open proposals whose memories are both still current."""
        with translated_errors(), self.log.backend.read_one() as sql:
            rows = recall.open_proposals(sql, self.namespace)
        # Ids go in as stored: the model parses them faster than Python does.
        return [
            Proposal(id=r["id"], older_id=r["older_id"], newer_id=r["newer_id"],
                     confidence=r["confidence"])
            for r in rows
        ]  # fmt: skip

    def accept(self, proposal_id: UUID | str) -> Memory:
        """Apply a proposal: the newer memory supersedes the older at its ``valid_from``,
        through every supersession invariant. Returns the newer memory."""
        key = as_id(proposal_id, "proposal_id", noun="proposal")
        row, older, newer = self._proposal_and_sides(key)
        if row["status"] == "rejected":
            raise ValidationError(f"proposal {row['id']} was rejected")
        if row["status"] == "accepted":
            return self.get(row["newer_id"])
        assert older is not None and newer is not None  # read for the undecided
        check_supersession(
            older.existing.side(), newer.existing.side(), newer.existing.window.start
        )
        # Decided on the newer memory as read and on a proposal nobody rejected: a
        # writer changing either meanwhile makes this a conflict, not a supersession.
        position = self._append_one(
            Superseded(originator_id=older.id, originator_version=older.version + 1,
                       newer_id=newer.id, at=newer.existing.window.start,
                       proposal_id=UUID(row["id"])),
            expect={newer.id: newer.version, UUID(row["id"]): 0},
        )  # fmt: skip
        self._fold_own_write(position)
        return self.get(newer.id)

    def reject(self, proposal_id: UUID | str, reason: str | None = None) -> None:
        """Reject a proposal for good: the pair is never proposed again, also after a
        rebuild. Rejecting a rejected proposal changes nothing; one accepted, or
        withdrawn (a side archived, forgotten or superseded since), is refused."""
        reason = optional_text(reason, "reason")
        key = as_id(proposal_id, "proposal_id", noun="proposal")
        row, older, newer = self._proposal_and_sides(key)
        if row["status"] == "rejected":
            return
        if row["status"] == "accepted":
            raise ValidationError(f"proposal {row['id']} was already accepted")
        assert older is not None and newer is not None  # read for the undecided
        # A side no longer current never is again: the pair left proposals() for good,
        # and can be neither accepted nor rejected.
        for side, memory in (("older", older), ("newer", newer)):
            if memory.state is not State.CURRENT:
                raise ValidationError(
                    f"proposal {row['id']} was withdrawn: its {side} memory {memory.id} is "
                    f"{memory.state.value}, so there is nothing to reject"
                )
        # An accept racing this one supersedes the older memory, another writer may
        # retire either side: then this conflicts.
        try:
            self._append_one(
                ProposalRejected(originator_id=UUID(row["id"]), originator_version=1,
                                 older_id=UUID(row["older_id"]), newer_id=UUID(row["newer_id"]),
                                 reason=reason),
                expect={older.id: older.version, newer.id: newer.version},
            )  # fmt: skip
        except ConcurrencyConflict:
            with self._read_caught_up() as sql:
                if self._proposal_in(sql, key)["status"] == "rejected":
                    return  # another process's reject came first: rejected, as asked
            raise

    def conflicts(self, subject: str | None = None) -> list[Conflict]:
        """Return each set of live memories that contradict each other, with the
        highest-confidence member and the recommended resolution. Live: current or
        superseded, over the windows they have (a supersession ends a window; what the
        claim said before still stands against others); archived and forgotten ones
        are retired."""
        label_argument(subject, "subject")
        # The claims and their memories from one snapshot: a member forgotten meanwhile
        # is then neither half found nor missing.
        with translated_errors(), self.log.backend.read() as sql:
            sets = conflict_sets(recall.live_keyed_claims(sql, self.namespace, subject))
            members_of = self.reader.visible(sql, [c.id for members in sets for c in members])
        memory_of = {m.id: m for m in members_of}
        found = []
        for members in sets:
            highest, resolution = resolve(members)
            memories = [memory_of[c.id] for c in members]
            by_id = {m.id: m for m in memories}
            found.append(
                Conflict(subject=memories[0].subject or "", attribute=memories[0].attribute or "",
                         members=memories, highest_confidence=by_id[highest.id],
                         resolution=resolution)
            )  # fmt: skip
        return found

    def knows(self, later_id: UUID | str, earlier_id: UUID | str) -> bool:
        """Whether ``later_id`` was written knowing ``earlier_id`` (by vector clocks)."""
        later, earlier = as_id(later_id, "later_id"), as_id(earlier_id, "earlier_id")
        with translated_errors(), self.log.backend.read_one() as sql:  # one snapshot for both
            later_clock, earlier_clock = self.reader.vector_clocks(sql, [later, earlier])
        return clock_dominates(later_clock, earlier_clock)

    def _proposal_ahead(self, key: UUID) -> Callable[[Sql], None]:
        """What sends a proposal's read ahead, with the check that the projections are
        caught up (see :meth:`_read_caught_up`)."""
        return lambda sql: recall.prefetch_proposal_row(sql, self.namespace, key)

    def _proposal_and_sides(self, key: UUID) -> tuple[Any, MemoryState | None, MemoryState | None]:
        """A proposal's row and, unless it was decided (accepted or rejected), both its
        memories as they stand now, all in one snapshot: either side may have been
        archived, forgotten or superseded since the proposal was made, and read apart,
        an accept committed between the reads left the proposal looking open and the
        older memory's new version looking like the one a decision was made on."""
        with self._read_caught_up(self._proposal_ahead(key)) as sql:
            row = self._proposal_in(sql, key)
            if row["status"] not in ("open", "withdrawn"):
                return row, None, None
            self.reader.prefetch_state(sql, UUID(row["newer_id"]))  # with the older's
            older = self.reader.state(sql, UUID(row["older_id"]))
            return row, older, self.reader.state(sql, UUID(row["newer_id"]))

    def _proposal_in(self, sql: Sql, key: UUID) -> Any:
        """One proposal's row, read in an open transaction (``NotFound`` if none)."""
        row = recall.proposal_row(sql, self.namespace, key)
        if row is None:
            raise NotFound(f"no proposal {key} in namespace {self.namespace!r}")
        return row
