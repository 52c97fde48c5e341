"""The ledger: the one object users hold. Commands validate, append, then bring the
projections up to their own write before returning; queries read the projections.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self
from uuid import UUID

from erstwhile.domain.bar import clears_bar, conflict_sets, resolve
from erstwhile.domain.causality import clock_dominates
from erstwhile.domain.errors import (
    IdempotencyMismatch,
    NotFound,
    SupersessionRefused,
    ValidationError,
)
from erstwhile.domain.events import (
    Archived,
    Forgotten,
    LedgerEvent,
    ProposalRejected,
    Superseded,
)
from erstwhile.domain.ids import uuid7
from erstwhile.domain.memory import DEFAULT_NAMESPACE, Kind, Memory, State
from erstwhile.domain.rules import Side, check_supersession
from erstwhile.domain.time import Instant, from_micros, optional_utc, to_micros, to_utc
from erstwhile.domain.views import Conflict, History, Hit, LoggedEvent, Proposal
from erstwhile.domain.writes import WritePlan, plan_writes
from erstwhile.eventstore import (
    EventFilter,
    EventLog,
    IdempotencyClaim,
    Sql,
    open_backend,
    translated_errors,
)
from erstwhile.projections import (
    MemoryReader,
    ProjectionRunner,
    SearchProjection,
    core_projections,
    recall,
)
from erstwhile.projections.base import Progress
from erstwhile.projections.candidates import candidates
from erstwhile.projections.reader import LATEST, MemoryState

Clock = Callable[[], datetime]
Policy = Literal["propose", "timestamp_wins"]
MAX_NAME_CHARS = 200


def system_clock() -> datetime:
    """The default clock: the current instant in UTC."""
    return datetime.now(UTC)


def _check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ValidationError(f"{what} must be non-empty text without NUL bytes")
    if len(value) > MAX_NAME_CHARS:
        raise ValidationError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    return value.strip()


def _as_id(value: UUID | str, what: str = "id") -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise NotFound(f"{what} {value!r} is not a memory id") from None


class Ledger:
    """A bi-temporal memory ledger over one store, scoped to one namespace and actor."""

    def __init__(self, log: EventLog, *, namespace: str, actor: str, clock: Clock) -> None:
        self.log = log
        self.namespace = namespace
        self.actor = actor
        self._clock = clock
        self.runner = ProjectionRunner(log, core_projections(log.backend.dialect))
        self.reader = MemoryReader(namespace)
        self.search_index = SearchProjection(log.backend.dialect)

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str] | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        actor: str | None = None,
        clock: Clock | None = None,
    ) -> Ledger:
        """Open the ledger a URL names (default ``$ERSTWHILE_URL``, else ``./erstwhile.db``)."""
        namespace = _check_name(namespace, "namespace")
        actor = _check_name(actor if actor is not None else _default_actor(), "actor")
        backend = open_backend(url)
        ledger = cls(
            EventLog(backend), namespace=namespace, actor=actor, clock=clock or system_clock
        )
        try:
            ledger.runner.setup()
            ledger.runner.catch_up()
        except BaseException:
            backend.close()
            raise
        return ledger

    def close(self) -> None:
        """Release the store's connections."""
        self.log.backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The URL of the store this ledger writes to."""
        return self.log.backend.url

    def now(self) -> datetime:
        """Read the injected clock, refusing a clock that returns a naive instant."""
        return to_utc(self._clock(), "clock()")

    def head(self) -> int:
        """Return the latest log position (0 for an empty ledger)."""
        return self.log.head()

    # ----------------------------------------------------------------- commands

    def remember(self, content: str, **arguments: Any) -> Memory:
        """Assert a new memory (optionally superseding others); return it."""
        return self.remember_many([{"content": content, **arguments}])[0]

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[Memory]:
        """Assert many memories in one atomic append: all of them, or none."""
        items = [dict(item) for item in items]
        if not items:
            return []
        plans = [WritePlan.parse(item) for item in items]
        replay = self._idempotent_replay(plans)
        if replay is not None:
            return replay
        self.runner.catch_up()
        now = self.now()
        with translated_errors(), self.log.backend.read() as sql:
            plans = [self._apply_policy(sql, plan, now) for plan in plans]
            olders = {
                older_id: self.reader.state(sql, older_id).existing
                for plan in plans
                for older_id in plan.supersedes
            }
        ids = [uuid7(now, os.urandom(10)) for _ in plans]
        claims = [
            IdempotencyClaim(self.namespace, plan.idempotency_key, plan.fingerprint, new_id)
            for plan, new_id in zip(plans, ids, strict=True)
            if plan.idempotency_key is not None
        ]
        result = self.log.append(
            lambda start: plan_writes(plans, ids, olders, start),
            actor=self.actor,
            namespace=self.namespace,
            now=now,
            idempotency=claims,
        )
        if result.replayed:
            return self._replayed(plans, result.replayed)
        self.runner.catch_up(until=result.position)
        return [self.get(new_id) for new_id in ids]

    def revise(
        self, older_id: UUID | str, content: str, *, at: Instant | None = None, **fields: Any
    ) -> Memory:
        """Assert a memory that supersedes ``older_id`` at ``at``; unset structured fields
        (kind, subject, attribute, value, entities) are copied from the older memory."""
        target = self._state(older_id)
        if target.memory is None:
            raise SupersessionRefused("not_current", f"memory {target.id} is forgotten")
        older = target.memory
        at_instant = optional_utc(at, "at")
        if at_instant is not None:
            given = optional_utc(fields.get("valid_from"), "valid_from")
            if given is not None and given != at_instant:
                raise ValidationError("at and valid_from disagree: the new memory opens at `at`")
            fields["valid_from"] = at_instant
        for name in ("kind", "subject", "attribute", "value", "entities"):
            if fields.get(name) is None:
                fields[name] = getattr(older, name)
        if "supersedes" in fields:
            raise ValidationError("revise supersedes exactly older_id: do not pass supersedes")
        return self.remember(content, supersedes=[older.id], **fields)

    def archive(self, memory_id: UUID | str, *, reason: str | None = None) -> Memory:
        """Retire a memory from "what is true now" without touching its window.

        Archiving an archived memory changes nothing and returns it.
        """
        target = self._state(memory_id)
        if target.memory is None:
            raise NotFound(f"memory {target.id} was forgotten")
        if target.state is State.ARCHIVED:
            return target.memory
        self._append_one(
            Archived(
                originator_id=target.id,
                originator_version=target.version + 1,
                reason=_optional_text(reason, "reason"),
            )
        )
        return self.get(target.id)

    def forget(
        self, memory_id: UUID | str, *, hard: bool = False, reason: str | None = None
    ) -> None:
        """Forget a memory: it disappears from every read at once; the log keeps the proof.

        Forgetting a forgotten memory is a no-op success.
        """
        if hard:
            raise ValidationError(
                "hard forget (crypto-shredding) is not available in this version; use a soft forget"
            )
        target = self._state(memory_id)
        if target.state is State.FORGOTTEN:
            return
        self._append_one(
            Forgotten(
                originator_id=target.id,
                originator_version=target.version + 1,
                hard=False,
                reason=_optional_text(reason, "reason"),
            )
        )

    # ------------------------------------------------------------------ queries

    def get(self, memory_id: UUID | str, *, known_at: Instant | None = None) -> Memory:
        """Return a memory (as known at ``known_at``); ``NotFound`` if unknown or forgotten."""
        key = _as_id(memory_id)
        when = optional_utc(known_at, "known_at")
        with translated_errors(), self.log.backend.read() as sql:
            return self.reader.get(sql, key, when)

    def history(self, memory_id: UUID | str) -> History:
        """Return a memory with what superseded it and what it superseded (one level)."""
        memory = self.get(memory_id)
        successor = self._visible(memory.superseded_by) if memory.superseded_by else None
        earlier = [m for m in (self._visible(i) for i in memory.supersedes) if m is not None]
        return History(memory=memory, superseded_by=successor, supersedes=earlier)

    def chain(self, memory_id: UUID | str) -> list[Memory]:
        """Return the whole lineage through supersession, both ways, in log order.

        Forgotten memories are walked through (the links stay) but not returned.
        """
        start = self.get(memory_id).id
        seen, frontier = {start}, [start]
        with translated_errors(), self.log.backend.read() as sql:
            while frontier:
                linked = self.reader.linked_ids(sql, frontier.pop())
                fresh = [i for i in linked if i not in seen]
                seen.update(fresh)
                frontier.extend(fresh)
            positions = self.reader.positions(sql, list(seen))
        ordered = sorted((pos, i) for i, (pos, visible) in positions.items() if visible)
        return [self.get(i) for _, i in ordered]

    def facts(
        self,
        subject: str,
        attribute: str | None = None,
        *,
        as_of: Instant | None = None,
        known_at: Instant | None = None,
    ) -> list[Memory]:
        """Return what is true about ``subject`` now, at valid time ``as_of``, as known at
        ``known_at``. Without ``as_of``, "now" is ``known_at`` if given, else the clock."""
        if not isinstance(subject, str) or not subject.strip():
            raise ValidationError("subject must be non-empty text")
        known = optional_utc(known_at, "known_at")
        valid = optional_utc(as_of, "as_of")
        with translated_errors(), self.log.backend.read() as sql:
            return self.reader.facts(
                sql,
                subject,
                attribute,
                valid_at=valid or known or self._present(sql),
                known_at=known,
                include_archived=valid is not None,
            )

    def events(
        self,
        *,
        after: int | None = None,
        until: int | None = None,
        since: Instant | None = None,
        before: Instant | None = None,
        memory_id: UUID | str | None = None,
        actor: str | None = None,
    ) -> Iterator[LoggedEvent]:
        """Stream this namespace's stored events in log order: positions ``(after, until]``,
        instants ``[since, before)``, optionally one memory's or one actor's."""
        selection = EventFilter(
            after=after,
            until=until,
            since=optional_utc(since, "since"),
            before=optional_utc(before, "before"),
            memory_id=_as_id(memory_id) if memory_id is not None else None,
            actor=actor,
            namespace=self.namespace,
        )
        for record in self.log.events(selection):
            event = self.log.decode(record)
            yield LoggedEvent(
                position=record.position,
                recorded_at=record.recorded_at,
                type=record.type,
                memory_id=record.memory_id,
                actor=record.actor,
                namespace=record.namespace,
                data=event.model_dump(mode="json", exclude={"originator_id", "originator_version"}),
            )

    def rebuild(self, name: str | None = None, progress: Progress | None = None) -> None:
        """Rebuild projections (all, or the one named) from position 0 of the log."""
        self.runner.rebuild(name, progress)

    def search(
        self,
        query: str = "",
        *,
        as_of: Instant | None = None,
        known_at: Instant | None = None,
        include_history: bool = False,
        kinds: Sequence[str] | None = None,
        subject: str | None = None,
        attribute: str | None = None,
        entities: Sequence[str] | None = None,
        limit: int = 10,
    ) -> list[Hit]:
        """Find memories by meaning-bearing words: what is true now (or at ``as_of``, as
        known at ``known_at``); ``include_history`` adds the rest a full tier below."""
        if not isinstance(query, str) or "\x00" in query:
            raise ValidationError("query must be text without NUL bytes")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ValidationError("limit must be an integer from 1 to 1000")
        known = optional_utc(known_at, "known_at")
        valid = optional_utc(as_of, "as_of")
        with translated_errors(), self.log.backend.read() as sql:
            present = self._present(sql)
        request = recall.SearchRequest(
            query=query,
            valid_at=valid or known or present,
            as_of_given=valid is not None,
            known_at=known,
            include_history=include_history,
            kinds=[_kind(k) for k in kinds] if kinds is not None else None,
            subject=subject,
            attribute=attribute,
            entities=list(entities) if entities is not None else None,
            limit=limit,
        )
        with translated_errors(), self.log.backend.read() as sql:
            raw = recall.search(sql, self.namespace, self.search_index, request)
            recorded = LATEST if known is None else to_micros(known)
            return [
                Hit(memory=self.reader.with_links(sql, h.row, recorded), score=h.score,
                    tier=h.tier)
                for h in raw
            ]  # fmt: skip

    def proposals(self) -> list[Proposal]:
        """Return the open proposals whose memories are both still current."""
        with translated_errors(), self.log.backend.read() as sql:
            rows = recall.open_proposals(sql, self.namespace)
        return [
            Proposal(id=UUID(r["id"]), older_id=UUID(r["older_id"]),
                     newer_id=UUID(r["newer_id"]), confidence=r["confidence"])
            for r in rows
        ]  # fmt: skip

    def accept(self, proposal_id: UUID | str) -> Memory:
        """Apply a proposal: the newer memory supersedes the older at its ``valid_from``,
        through every supersession invariant. Returns the newer memory."""
        row = self._proposal(proposal_id)
        if row["status"] == "rejected":
            raise ValidationError(f"proposal {row['id']} was rejected")
        newer = self.get(row["newer_id"])
        if row["status"] == "accepted":
            return newer
        older = self._state(row["older_id"])
        side = Side(newer.id, newer.kind, newer.state, newer.window, newer.claim())
        check_supersession(older.existing.side(), side, newer.valid_from)
        self._append_one(
            Superseded(originator_id=older.id, originator_version=older.version + 1,
                       newer_id=newer.id, at=newer.valid_from, proposal_id=UUID(row["id"]))
        )  # fmt: skip
        return self.get(newer.id)

    def reject(self, proposal_id: UUID | str, reason: str | None = None) -> None:
        """Reject a proposal for good: the pair is never proposed again, also after a
        rebuild. Rejecting a rejected proposal changes nothing."""
        row = self._proposal(proposal_id)
        if row["status"] == "rejected":
            return
        if row["status"] == "accepted":
            raise ValidationError(f"proposal {row['id']} was already accepted")
        self._append_one(
            ProposalRejected(originator_id=UUID(row["id"]), originator_version=1,
                             older_id=UUID(row["older_id"]), newer_id=UUID(row["newer_id"]),
                             reason=_optional_text(reason, "reason"))
        )  # fmt: skip

    def conflicts(self, subject: str | None = None) -> list[Conflict]:
        """Return each set of live memories that contradict each other, with the
        highest-confidence member and the recommended resolution."""
        with translated_errors(), self.log.backend.read() as sql:
            claims = recall.live_keyed_claims(sql, self.namespace, subject)
        found = []
        for members in conflict_sets(claims):
            highest, resolution = resolve(members)
            memories = [self.get(c.id) for c in members]
            by_id = {m.id: m for m in memories}
            found.append(
                Conflict(subject=memories[0].subject or "", attribute=memories[0].attribute or "",
                         members=memories, highest_confidence=by_id[highest.id],
                         resolution=resolution)
            )  # fmt: skip
        return found

    def knows(self, later_id: UUID | str, earlier_id: UUID | str) -> bool:
        """Whether ``later_id`` was written knowing ``earlier_id`` (by vector clocks)."""
        return clock_dominates(self.get(later_id).vector_clock, self.get(earlier_id).vector_clock)

    # ------------------------------------------------------------------ helpers

    def _present(self, sql: Sql) -> datetime:
        """The instant "now" means for reads: the clock, but never behind the log.

        A write is recorded at ``max(clock, last + 1 µs)``; reading "now" the same way
        means a memory that opened when it was recorded is true the moment it returns.
        """
        now = self.now()
        last = self.log.tip(sql).recorded_at
        return now if last is None else max(now, from_micros(last))

    def _apply_policy(self, sql: Sql, plan: WritePlan, now: datetime) -> WritePlan:
        """Under ``timestamp_wins``, add every older memory that clears the bar."""
        if plan.policy != "timestamp_wins":
            return plan
        newer = plan.claim_view(now)
        winners = [
            c.id for c in candidates(sql, self.namespace, newer, LATEST)
            if clears_bar(c, newer) and c.id not in plan.supersedes
        ]  # fmt: skip
        return replace(plan, supersedes=(*plan.supersedes, *winners))

    def _proposal(self, proposal_id: UUID | str) -> Any:
        self.runner.catch_up()
        key = _as_id(proposal_id, "proposal id")
        with translated_errors(), self.log.backend.read() as sql:
            row = recall.proposal_row(sql, self.namespace, key)
        if row is None:
            raise NotFound(f"no proposal {key} in namespace {self.namespace!r}")
        return row

    def _state(self, memory_id: UUID | str) -> MemoryState:
        self.runner.catch_up()
        with translated_errors(), self.log.backend.read() as sql:
            return self.reader.state(sql, _as_id(memory_id))

    def _visible(self, memory_id: UUID) -> Memory | None:
        try:
            return self.get(memory_id)
        except NotFound:
            return None

    def _append_one(self, event: LedgerEvent) -> None:
        result = self.log.append(
            lambda _start: [event], actor=self.actor, namespace=self.namespace, now=self.now()
        )
        self.runner.catch_up(until=result.position)

    def _idempotent_replay(self, plans: Sequence[WritePlan]) -> list[Memory] | None:
        keyed = [p for p in plans if p.idempotency_key is not None]
        if not keyed:
            return None
        earlier = [self.log.claimed(self.namespace, p.idempotency_key or "") for p in keyed]
        found = [claim for claim in earlier if claim is not None]
        if not found:
            return None
        return self._replayed(plans, found)

    def _replayed(
        self, plans: Sequence[WritePlan], claims: Sequence[IdempotencyClaim]
    ) -> list[Memory]:
        by_key = {claim.key: claim for claim in claims}
        if len(by_key) != len(plans) or any(p.idempotency_key not in by_key for p in plans):
            raise IdempotencyMismatch(
                "some idempotency keys of this batch were used before and some were not; "
                "retry the exact same batch"
            )
        for plan in plans:
            claim = by_key[plan.idempotency_key or ""]
            if claim.fingerprint != plan.fingerprint:
                raise IdempotencyMismatch(
                    f"idempotency key {plan.idempotency_key!r} was first used "
                    "with a different payload"
                )
        self.runner.catch_up()
        return [self.get(by_key[p.idempotency_key or ""].memory_id) for p in plans]


def _kind(kind: str) -> Kind:
    try:
        return Kind(kind)
    except ValueError:
        raise ValidationError(f"kinds: unknown kind {kind!r}") from None


def _optional_text(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or "\x00" in value or len(value) > 4096:
        raise ValidationError(f"{what} must be text under 4096 characters without NUL bytes")
    return value


def _default_actor() -> str:
    """Who writes when no actor is named: the operating-system user."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "anonymous"


__all__ = ["Clock", "Ledger", "Policy", "system_clock"]
