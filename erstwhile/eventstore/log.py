"""The append-only log: serialised appends with ledger-assigned time and a hash chain.

Every append takes the database's write lock, reads the tip of the log, stamps each new
event with ``recorded_at = max(now, last + 2 µs)`` (so transaction time strictly
increases in log order even when a clock steps back, across processes), chains its hash
to the previous event's, and inserts everything in one transaction. A per-memory version
clash (another writer appended to the same memory first) surfaces as
``ConcurrencyConflict`` and stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any, NamedTuple
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent

from erstwhile.domain.errors import ConcurrencyConflict, StoreUnavailable, ValidationError
from erstwhile.domain.events import Asserted, Forgotten, LedgerEvent
from erstwhile.domain.memory import LOG_POSITIONS
from erstwhile.domain.time import LAST_RECORDABLE, ONE_MICROSECOND, from_micros, to_micros
from erstwhile.eventstore.backend import Backend, Sql, translated_errors
from erstwhile.eventstore.keys import (
    MASTER_KEY_VARIABLE,
    WRAPPED_KEY,
    CheckableKeys,
    KeyRing,
    new_key,
    seal_opens,
)
from erstwhile.eventstore.mapper import DECODE_ERRORS, PydanticMapper, why_undecodable
from erstwhile.eventstore.records import (
    GENESIS_HASH,
    IdempotencyClaim,
    LogTip,
    RecordedEvent,
    chain_hash,
)

EventBuilder = Callable[[datetime], Sequence[LedgerEvent]]
"""Builds a command's events once the append knows its recording instant."""

CLAIMED = (
    "SELECT memory_id, fingerprint FROM erstwhile_idempotency "
    "WHERE namespace = ? AND idempotency_key = ?"
)
"""The earlier write made under an idempotency key, if any."""

AfterInsert = Callable[[Sql, int, Sequence[tuple[RecordedEvent, LedgerEvent]]], None]
"""Runs inside an append's transaction as ``then(sql, previous_head, appended)``, where
``appended`` pairs each stored event with the domain event it was built from."""


@dataclass(frozen=True)
class AppendResult:
    """What an append stored, or the earlier write an idempotency key points to."""

    events: tuple[RecordedEvent, ...] = ()
    replayed: tuple[IdempotencyClaim, ...] = ()

    @property
    def position(self) -> int:
        """The position of the last event stored by this append."""
        return self.events[-1].position


KEYS_OF_PAGE = {
    "sqlite": "LEFT JOIN erstwhile_keys k ON k.memory_id = page.originator_id",
    "postgresql": "LEFT JOIN LATERAL (SELECT key_bytes, wrapped FROM erstwhile_keys "
    "WHERE memory_id = page.originator_id::text OFFSET 0) k ON true",
}
"""How a page of events (``page``) reads its memories' keys (``k``): a lookup by
primary key for each event. PostgreSQL's planner joined a page of 50 events to the
keys by hashing the whole keys table (a scan that grows with the store); a ``LATERAL``
subquery kept from being flattened (``OFFSET 0``) probes the key's index once an event."""

NO_POSITION = LOG_POSITIONS.stop
"""A position past any event's: where no event was recorded at or after an instant."""


@dataclass(frozen=True)
class EventFilter:
    """Which events to read: positions ``(after, until]``, instants ``[since, before)``."""

    after: int | None = None
    until: int | None = None
    since: datetime | None = None
    before: datetime | None = None
    memory_id: UUID | None = None
    actor: str | None = None
    namespace: str | None = None

    def where(self, table: str) -> tuple[str, list[Any]]:
        """Return the SQL condition on ``table`` (the events table) and its parameters.

        An instant bound becomes a position bound: ``recorded_at`` grows with
        ``position`` (an append stamps ``max(now, last + 2 µs)``, a restore refuses an
        instant that does not), so the first event recorded at or after an instant,
        found through the ``recorded_at`` index, splits the log. As a filter on the
        rows, a bound read the namespace's log from its start up to the instant
        (``since``), or past it to its end (``before``)."""
        first_at = (
            f"COALESCE((SELECT position FROM {table} WHERE recorded_at >= ? "
            f"ORDER BY recorded_at LIMIT 1), {NO_POSITION})"
        )
        terms: list[tuple[str, Any]] = [
            ("position > ?", self.after),
            ("position <= ?", self.until),
            (f"position >= {first_at}", self.since and to_micros(self.since)),
            (f"position < {first_at}", self.before and to_micros(self.before)),
            ("originator_id = ?", self.memory_id),
            ("actor = ?", self.actor),
            ("namespace = ?", None if self.memory_id is not None else self.namespace),
        ]
        used = [(clause, value) for clause, value in terms if value is not None]
        condition = " AND ".join(clause for clause, _ in used) or "1 = 1"
        return condition, [value for _, value in used]

    @property
    def order(self) -> str:
        """The log order, spelled as the index that serves the selection gives it: one
        memory's events come in version order, which is their log order, and which its
        index gives without a sort (ordered by position, PostgreSQL walked the whole
        log's position index looking for the memory's rows)."""
        return "originator_version" if self.memory_id is not None else "position"

    def admits(self, record: RecordedEvent) -> bool:
        """Whether a row the condition selected is in the namespace asked for.

        One memory's events are read through the events' (memory id, version) index,
        so the namespace is not in their condition and is checked here instead: with
        it, SQLite (which keeps no statistics) walked the namespace's whole log through
        its (namespace, position) index (25 ms for one memory's two events at 36,000
        events, 0.1 ms through the memory's own). All of a memory's events share its
        namespace, so a page is either kept whole or dropped whole."""
        return self.namespace is None or record.namespace == self.namespace


APPEND_GAP = 2 * ONE_MICROSECOND
"""The least an append starts after the one before it ends: one microsecond more than
between two events of one append, so that an append's end can be told from the stamps
alone (see :meth:`EventLog.rest_of_append`), even when the clock stands still."""

EVENTS_PER_INSERT = 100
"""An append stamps its events (encodes, seals and chains them) and inserts them this
many at a time: on PostgreSQL the server stores each part while the client stamps the
next, instead of waiting idle, holding the write lock, for the whole batch's stamps."""


def _same_append(last: RecordedEvent, record: RecordedEvent) -> bool:
    """Whether ``record`` continues the append that wrote ``last`` (see
    :meth:`EventLog.rest_of_append`)."""
    return (
        record.position == last.position + 1
        and record.recorded_micros == last.recorded_micros + 1
        and (record.actor, record.namespace) == (last.actor, last.namespace)
    )


def _undecodable(record: RecordedEvent, error: Exception) -> StoreUnavailable:
    """The error for a stored event that does not decode: its payload was changed
    outside the ledger (or its key was), and reads stop there rather than guess."""
    return StoreUnavailable(
        f"the event at position {record.position} (memory {record.memory_key}) cannot be "
        f"read: {why_undecodable(error)}; the store was changed outside the ledger "
        f"(run `erstwhile audit verify` to find where)"
    )


def _selected_rows(rows: Sequence[Any], selection: EventFilter) -> list[tuple[RecordedEvent, Any]]:
    """The records of stored rows, those of the selection's namespace (see
    :meth:`EventFilter.admits`), each with its row."""
    try:
        pairs = [(RecordedEvent.from_row(row), row) for row in rows]
    except (TypeError, ValueError):
        raise _unreadable(rows) from None
    if selection.memory_id is None:
        return pairs
    return [(record, row) for record, row in pairs if selection.admits(record)]


def _unreadable(rows: Sequence[Any]) -> StoreUnavailable:
    """The error for a page of stored rows one of which holds what the ledger never
    writes (text where an instant was, say), naming the first such row."""
    for row in rows:
        try:
            RecordedEvent.from_row(row)
        except (TypeError, ValueError) as error:
            return StoreUnavailable(
                f"the event at position {row['position']} (memory {row['originator_id']}) "
                f"cannot be read: its row holds what the ledger never writes ({error}); the "
                "store was changed outside the ledger (run `erstwhile audit verify` to find "
                "where)"
            )
    return StoreUnavailable("a stored event cannot be read")  # pragma: no cover


def _tip_of(row: Any) -> LogTip:
    """The tip a row of the log's last event makes (the genesis tip where there is none)."""
    if row is None:
        return LogTip(0, None, GENESIS_HASH)
    return LogTip(row["position"], row["recorded_at"], bytes(row["hash"]))


def _start_after(tip: LogTip, now: datetime) -> datetime:
    """Where an append after ``tip`` starts: ``now``, but at least :data:`APPEND_GAP`
    after the last event (transaction time never steps back)."""
    if tip.recorded_at is None:
        return now
    try:
        return max(now, from_micros(tip.recorded_at) + APPEND_GAP)
    except OverflowError:
        raise StoreUnavailable(
            "the log's last event is recorded at the calendar's end: nothing can follow it"
        ) from None


def _check_clock(now: datetime, count: int) -> None:
    """Refuse an append of ``count`` events when the clock reads so close to the
    calendar's end that they would be recorded after :data:`LAST_RECORDABLE`: the log
    could not grow after them (not even by the hard forget that erases a memory), and
    an import refuses such a log. The calendar's last second stays for the writes that
    follow a write near it, which the log's own order pushes past the clock."""
    if count and now > LAST_RECORDABLE - (count - 1) * ONE_MICROSECOND:
        raise ValidationError(
            f"clock() reads {now.isoformat()}: too close to the calendar's end to record "
            f"{count} event(s) and leave room for later writes; nothing was stored"
        )


def _check_room(tip: LogTip, count: int) -> None:
    """Refuse an append of ``count`` events that would take positions from
    :data:`NO_POSITION` up: the queries that turn an instant into a position read that
    number as "no such event", so an event there would be missing from them (an import
    leaves room after its last position, so only a log that grew by over a million
    events since gets here)."""
    if count and tip.position + count >= NO_POSITION:
        raise StoreUnavailable(
            f"the log's positions end below {NO_POSITION}: its last event is at "
            f"{tip.position}, so {count} more do not fit; nothing was stored"
        )


ERASED_FINGERPRINT = "erased"
"""The fingerprint of an idempotency claim whose memory was hard-forgotten."""
UNKNOWN_FINGERPRINT = "unknown"
"""The fingerprint of a claim imported from an export that did not carry it (written
before exports did): no request matches it, so a retry is refused, never written twice."""


@dataclass
class SealCheck:
    """Follow :meth:`EventLog.verify` through the log, finding the memories whose key is
    gone without a hard forget, or does not open their sealed content."""

    keyless: dict[str, int] = field(default_factory=dict)
    """Memories whose key is gone, and no hard forget seen yet: their Asserted."""
    unopened: dict[str, int] = field(default_factory=dict)
    """Memories whose key does not open their seal: their Asserted."""
    not_unwrapped: dict[str, int] = field(default_factory=dict)
    """Memories whose wrapped key the master key does not unwrap: their Asserted."""
    unwrapped: int = 0
    """How many wrapped keys the master key unwrapped."""

    def follow(
        self, records: Sequence[RecordedEvent], sealed: dict[int, str], found: CheckableKeys
    ) -> None:
        """Take in a batch of events, ``sealed`` those that seal content (by position),
        with the keys ``found`` for their memories."""
        self.unwrapped += found.unwrapped
        for record in records:
            if record.position in sealed:
                if record.memory_key in found.not_unwrapped:
                    self.not_unwrapped[record.memory_key] = record.position
                elif record.memory_key not in found.keys:
                    self.keyless[record.memory_key] = record.position
                elif (key := found.keys[record.memory_key]) is not None and not seal_opens(
                    record.payload, record.memory_id, key
                ):  # a key of None is wrapped, with no master key to check it
                    self.unopened[record.memory_key] = record.position
            elif record.type == "Forgotten" and _hard(record):
                self.keyless.pop(record.memory_key, None)

    def first_break(self) -> tuple[int, str] | None:
        """Return the first break's position and why, or None; ``StoreUnavailable`` when
        the master key unwrapped none of the wrapped keys (it is not the store's)."""
        if self.not_unwrapped and not self.unwrapped:
            raise StoreUnavailable(
                f"${MASTER_KEY_VARIABLE} unwraps none of the memory keys it was tried on "
                f"({len(self.not_unwrapped)}): it is not the store's master key, or every "
                "one of them was changed; verify without it checks that the wrapped keys "
                "are there"
            )
        breaks = [(at, KEY_GONE) for at in self.keyless.values()]
        breaks += [(at, KEY_CHANGED) for at in {**self.unopened, **self.not_unwrapped}.values()]
        return min(breaks, default=None)


class Verified(NamedTuple):
    """What :meth:`EventLog.verify` found: events checked, and the first break and why."""

    checked: int
    first_break: int | None
    reason: str | None


BROKEN_HASH = "its stored hash is not the one its content and the event before it give"
BROKEN_ROW = "its row holds what the ledger never writes"
KEY_GONE = "its memory's key is gone, but no event forgets the memory for good (hard)"
KEY_CHANGED = (
    "its memory's key does not open its sealed content (the key was changed, or is "
    "another memory's; or a master key other than the store's unwrapped it)"
)


def _sealed(record: RecordedEvent) -> bool:
    """Whether an event is an ``Asserted`` that sealed its content under a key of its own
    (all but those written before sealing, and those an import brought in erased)."""
    if record.type != "Asserted":
        return False
    try:
        return orjson.loads(record.payload).get("sealed") is not None
    except (orjson.JSONDecodeError, AttributeError):
        return False


def _hard(record: RecordedEvent) -> bool:
    """Whether a ``Forgotten`` event forgot its memory for good."""
    try:
        return orjson.loads(record.payload).get("hard") is True
    except (orjson.JSONDecodeError, AttributeError):
        return False


class EventLog:
    """The ledger's log over one backend."""

    def __init__(self, backend: Backend, keyring: KeyRing | None = None) -> None:
        self.backend = backend
        self.keyring = keyring or KeyRing.from_environment()
        self.mapper = PydanticMapper()
        self.table = backend.events_table
        self._tip_query = (
            f"SELECT position, recorded_at, hash FROM {self.table} ORDER BY position DESC LIMIT 1"
        )
        self._opening_query = (
            "SELECT t.position, t.recorded_at, t.hash, w.memory_id AS wrapped_id, "
            "w.key_bytes AS wrapped_key FROM (SELECT 1 AS one) AS o "
            f"LEFT JOIN ({self._tip_query}) AS t ON 1 = 1 "
            f"LEFT JOIN ({WRAPPED_KEY}) AS w ON 1 = 1"
        )
        """What an append reads before it writes, in one statement: the log's tip and one
        wrapped key, if the store holds any (see :meth:`KeyRing.admit`). On PostgreSQL
        only: apart, the two cost its client a read each (80 to 100 µs of CPU). SQLite
        reads the tip alone and asks about wrapped keys only when the append stores
        keys: its reads cost little, and it ran the join for more than the two."""

    def append(
        self,
        build: EventBuilder,
        *,
        actor: str,
        namespace: str,
        clock: Callable[[], datetime],
        idempotency: Sequence[IdempotencyClaim] = (),
        erase: Sequence[UUID] = (),
        then: AfterInsert | None = None,
        ahead: Callable[[Sql], None] | None = None,
        expect: Mapping[UUID, int] | None = None,
    ) -> AppendResult:
        """Append the events ``build`` returns, atomically, at the next instants of the log:
        from ``max(clock(), last + 2 µs)``, the clock read once the write lock is held.

        Each new memory gets a key of its own, stored in the same transaction (refused,
        before anything is written, where the store's keys are wrapped under a master
        key this log's key ring lacks: see :meth:`KeyRing.admit`); the keys of ``erase``
        are destroyed in it. ``then`` (see :data:`AfterInsert`) runs last, in the
        same transaction (the ledger folds its projections there: one commit, one fsync).
        ``ahead`` runs first: it may send the reads ``then`` will make (see
        :meth:`Sql.prefetch`), which then travel with the reads of the idempotency
        claims and of the log's tip.
        If any idempotency key was claimed before, nothing is appended and the earlier
        claims are returned, for the caller to compare. ``expect`` names streams (by
        memory or proposal id) the write was decided on, each with the version it read:
        if another writer has appended to one since, nothing is appended and
        ``ConcurrencyConflict`` is raised (the events' own versions guard only the
        streams they append to).
        """
        with translated_errors(conflicts=True), self.backend.write() as sql:
            # Every read before the events are built goes out at once (one round trip
            # on PostgreSQL): the idempotency claims, what ``ahead`` sends, the tip.
            for claim in idempotency:
                sql.prefetch(CLAIMED, (claim.namespace, claim.key))
            if ahead is not None:
                ahead(sql)
            self._send_opening(sql)
            earlier = [self._claimed(sql, c.namespace, c.key) for c in idempotency]
            if any(claim is not None for claim in earlier):
                return AppendResult(replayed=tuple(c for c in earlier if c is not None))
            tip, admit = self._opening(sql)
            for stream, version in (expect or {}).items():
                if self._stream_version(sql, stream) != version:
                    raise ConcurrencyConflict(
                        f"another writer changed {stream} since this write read it; nothing "
                        "was stored (read again and retry)"
                    )
            # The clock is read here, holding the write lock: a write that waited for
            # the lock is stamped when it got it, not when it asked (a reader between
            # the two would otherwise see, later, a past it was never shown).
            now = clock()
            start = _start_after(tip, now)
            keys: dict[UUID, bytes] = {}
            built = build(start)
            _check_clock(now, len(built))
            _check_room(tip, len(built))
            if not built:
                return AppendResult()
            if any(isinstance(event, Asserted) for event in built):
                admit()  # each assertion brings a key
            stamping = self._stamp(built, tip, start, actor, namespace, keys)
            events: list[RecordedEvent] = []
            while part := list(islice(stamping, EVENTS_PER_INSERT)):
                self.backend.insert_events(sql, part)
                events += part
            self.keyring.store(sql, ((i, namespace, k) for i, k in keys.items()))
            self.keyring.destroy(sql, erase)
            self._erase_claims(sql, erase)
            for claim in idempotency:
                self._claim(sql, claim)
            if then is not None:
                then(sql, tip.position, list(zip(events, built, strict=True)))
            self.backend.notify(sql)
            return AppendResult(events=tuple(events))

    def _stamp(
        self,
        domain_events: Sequence[LedgerEvent],
        tip: LogTip,
        start: datetime,
        actor: str,
        namespace: str,
        keys: dict[UUID, bytes],
    ) -> Iterator[RecordedEvent]:
        previous, first = tip.hash, to_micros(start)
        for offset, event in enumerate(domain_events):
            key = None
            if isinstance(event, Asserted):
                key = keys[event.originator_id] = new_key()
            stored = self.mapper.encode(event, key)
            record = RecordedEvent(
                position=tip.position + 1 + offset,
                recorded_micros=first + offset,
                memory_key=str(event.originator_id),
                version=stored.originator_version,
                topic=stored.topic,
                schema_version=type(event).class_version,
                actor=actor,
                namespace=namespace,
                payload=stored.state,
                hash=b"",
                memory_id=event.originator_id,
                recorded_at=start + offset * ONE_MICROSECOND,
            )
            # The hash covers everything but itself: set on the record itself, which
            # nothing else holds yet, instead of on a copy.
            record.hash = previous = chain_hash(previous, record)
            yield record

    def position_at(self, sql: Sql, instant: datetime) -> int:
        """Return the position of the last event recorded at or before ``instant`` (0
        before the first), inside an open transaction, through the ``recorded_at``
        index."""
        sql.execute(
            f"SELECT position FROM {self.table} WHERE recorded_at <= ? "
            "ORDER BY recorded_at DESC LIMIT 1",
            (to_micros(instant),),
        )
        row = sql.fetchone()
        return 0 if row is None else int(row["position"])

    def start_now(self, sql: Sql, clock: Callable[[], datetime]) -> datetime:
        """The instant an append holding the write lock in ``sql``'s transaction starts
        at: the tip is read first, so on PostgreSQL, where the lock is asked for in the
        pipeline with the first statements, the clock is read once the lock is held."""
        tip = self.tip(sql)
        return _start_after(tip, clock())

    def next_start(self, sql: Sql, now: datetime) -> datetime:
        """The instant an append made now would start at, as the log stands in ``sql``'s
        transaction (the append itself, holding the write lock, has the last word)."""
        return _start_after(self.tip(sql), now)

    def _send_opening(self, sql: Sql) -> None:
        """Send ahead the reads :meth:`_opening` makes (see :meth:`Sql.prefetch`)."""
        if self.backend.dialect == "postgresql":
            sql.prefetch(self._opening_query)

    def _opening(self, sql: Sql) -> tuple[LogTip, Callable[[], None]]:
        """Read the log's tip; return it with what refuses, before anything is written,
        to store keys this log's key ring may not (see :meth:`KeyRing.admit`). On
        PostgreSQL the wrapped key it asks about came with the tip (``_opening_query``);
        SQLite asks only when the append stores keys."""
        if self.backend.dialect != "postgresql":
            return self.tip(sql), lambda: self.keyring.admit(sql)
        sql.execute(self._opening_query)
        row = sql.fetchone()
        wrapped = None if row["wrapped_id"] is None else (row["wrapped_id"], row["wrapped_key"])
        tip = _tip_of(None if row["position"] is None else row)
        return tip, lambda: self.keyring.admit_found(wrapped)

    def prefetch_tip(self, sql: Sql) -> None:
        """Send :meth:`tip`'s read ahead (see :meth:`Sql.prefetch`)."""
        sql.prefetch(self._tip_query)

    def tip(self, sql: Sql) -> LogTip:
        """Return the last event's position, instant and hash, inside an open transaction."""
        sql.execute(self._tip_query)
        return _tip_of(sql.fetchone())

    def _stream_version(self, sql: Sql, stream: UUID) -> int:
        """The version of a stream's last event (0 for a stream with none)."""
        sql.execute(
            f"SELECT max(originator_version) AS version FROM {self.table} WHERE originator_id = ?",
            (str(stream),),
        )
        row = sql.fetchone()
        return 0 if row is None or row["version"] is None else int(row["version"])

    def _claimed(self, sql: Sql, namespace: str, key: str) -> IdempotencyClaim | None:
        sql.execute(CLAIMED, (namespace, key))
        row = sql.fetchone()
        if row is None:
            return None
        return IdempotencyClaim(namespace, key, row["fingerprint"], UUID(str(row["memory_id"])))

    def _erase_claims(self, sql: Sql, erased: Sequence[UUID]) -> None:
        """Replace the payload fingerprints of erased memories' idempotency claims: a
        digest of the content would let anyone confirm a guess of it. The key stays
        claimed, so a retry cannot write the memory again."""
        for memory_id in erased:
            sql.execute(
                "UPDATE erstwhile_idempotency SET fingerprint = ? WHERE memory_id = ?",
                (ERASED_FINGERPRINT, str(memory_id)),
            )

    def _claim(self, sql: Sql, claim: IdempotencyClaim) -> None:
        sql.execute(
            "INSERT INTO erstwhile_idempotency (namespace, idempotency_key, fingerprint, memory_id)"
            " VALUES (?, ?, ?, ?)",
            (claim.namespace, claim.key, claim.fingerprint, str(claim.memory_id)),
        )

    def fingerprints(self, namespace: str | None) -> dict[str, str]:
        """The payload digests of the idempotency claims (of one namespace, or all), by
        the id of the memory each made."""
        condition, params = ("WHERE namespace = ?", [namespace]) if namespace else ("", [])
        with translated_errors(), self.backend.read() as sql:
            sql.execute(f"SELECT memory_id, fingerprint FROM erstwhile_idempotency {condition}",
                        params)  # fmt: skip
            return {str(row["memory_id"]): row["fingerprint"] for row in sql.fetchall()}

    def claimed(self, namespace: str, keys: Sequence[str]) -> list[IdempotencyClaim]:
        """Return the earlier writes made under these idempotency keys, read from one
        snapshot: a batch's claims commit together, so a batch is seen claimed whole or
        not at all, even while another process commits it."""
        with translated_errors(), self.backend.read() as sql:
            return self.claims_in(sql, namespace, keys)

    def claims_in(self, sql: Sql, namespace: str, keys: Sequence[str]) -> list[IdempotencyClaim]:
        """:meth:`claimed` inside an open transaction."""
        found = [self._claimed(sql, namespace, key) for key in keys]
        return [claim for claim in found if claim is not None]

    def head(self) -> int:
        """Return the position of the latest event (0 for an empty log), in one
        statement (no read transaction around it: see :meth:`Backend.read_one`)."""
        with translated_errors(), self.backend.read_one() as sql:
            return self.tip(sql).position

    def read(
        self, sql: Sql, selection: EventFilter, limit: int | None = None
    ) -> list[RecordedEvent]:
        """Return the selected events in log order, inside an open transaction."""
        rows = self._rows(sql, selection, limit)
        return [record for record, _ in _selected_rows(rows, selection)]

    def rest_of_append(self, sql: Sql, last: RecordedEvent, page: int = 500) -> list[RecordedEvent]:
        """Return the events after ``last`` that the append which wrote it wrote too.

        The log keeps no mark of where an append ends, but an append stamps its events
        at consecutive positions and microseconds, with one actor and namespace, and the
        next append starts at least :data:`APPEND_GAP` later; so the events that follow
        ``last`` that way are taken. (In a log written before that gap, two appends by one
        writer may touch, and are taken together: harmless, an append is never split.)"""
        rest: list[RecordedEvent] = []
        while True:
            following = self.read(sql, EventFilter(after=last.position), limit=page)
            for record in following:
                if not _same_append(last, record):
                    return rest
                rest.append(record)
                last = record
            if len(following) < page:
                return rest

    def count(self, sql: Sql, selection: EventFilter) -> int:
        """How many events the selection holds, inside an open transaction."""
        condition, params = selection.where(self.table)
        sql.execute(f"SELECT count(*) AS events FROM {self.table} WHERE {condition}", params)
        return int(sql.fetchone()["events"])

    def _rows(self, sql: Sql, selection: EventFilter, limit: int | None) -> list[Any]:
        """The stored rows of the selected events, in log order."""
        condition, params = selection.where(self.table)
        statement = f"SELECT * FROM {self.table} WHERE {condition} ORDER BY {selection.order}"
        if limit is not None:
            statement += " LIMIT ?"
            params.append(limit)
        sql.execute(statement, params)
        return sql.fetchall()

    def _rows_with_keys(self, sql: Sql, selection: EventFilter, limit: int) -> list[Any]:
        """:meth:`_rows`, each row with its memory's stored key (``sealing_key`` and
        ``sealing_key_wrapped``, NULL where the memory has none), in one statement. The
        events are selected first, as :meth:`_rows` selects them, and then joined: the
        selection's conditions name the events' columns, some of which the keys share."""
        condition, params = selection.where(self.table)
        sql.execute(
            "SELECT page.*, k.key_bytes AS sealing_key, k.wrapped AS sealing_key_wrapped FROM ("
            f"SELECT * FROM {self.table} WHERE {condition} ORDER BY {selection.order} LIMIT ?"
            f") page {KEYS_OF_PAGE[self.backend.dialect]} ORDER BY page.{selection.order}",
            [*params, limit],
        )
        return sql.fetchall()

    def events(
        self, selection: EventFilter, batch: int = 1000, first: int = 50
    ) -> Iterator[tuple[RecordedEvent, LedgerEvent]]:
        """Stream the selected events in log order with their decoded domain events, a
        page per statement (the events with the keys of their memories: one statement
        sees one snapshot, and needs no read transaction around it, which on PostgreSQL
        took longer than the read itself for one memory's events). Pages start at
        ``first`` events and grow fourfold up to ``batch``: a reader that takes a few
        events pays for a few (a page of 1,000 took 20 ms to read and decode), one that
        reads on soon reads whole batches."""
        after, size = selection.after, min(first, batch)
        while True:
            page = EventFilter(**{**selection.__dict__, "after": after})
            with translated_errors(), self.backend.read_one() as sql:
                rows = self._rows_with_keys(sql, page, size)
            selected = _selected_rows(rows, page)
            keys = self.keyring.opened(
                (record.memory_key, row["sealing_key"], row["sealing_key_wrapped"])
                for record, row in selected
                if record.type == "Asserted" and row["sealing_key"] is not None
            )
            records = [record for record, _ in selected]
            decoded = self.decode_with(records, keys)
            yield from zip(records, decoded, strict=True)
            if len(records) < size:
                return
            after, size = records[-1].position, min(size * 4, batch)

    def decode_many(self, sql: Sql, records: Sequence[RecordedEvent]) -> list[LedgerEvent]:
        """Decode records inside an open transaction, fetching the keys they need at once.

        An ``Asserted`` whose key was destroyed decodes with ``erased=True``. A payload
        changed behind the ledger's back is ``StoreUnavailable``, naming the event.
        """
        asserted = [r.memory_key for r in records if r.type == "Asserted"]
        return self.decode_with(records, self.keyring.fetch_by_text(sql, asserted))

    def decode_with(
        self, records: Sequence[RecordedEvent], keys: Mapping[str, bytes]
    ) -> list[LedgerEvent]:
        """:meth:`decode_many` with the keys already found (by memory id as text; an
        ``Asserted`` whose memory has none decodes erased)."""
        decode, events = self.mapper.decode_stored, []
        for r in records:
            try:
                events.append(decode(r.memory_ref, r.version, r.topic, r.payload,
                                     keys.get(r.memory_key)))  # fmt: skip
            except DECODE_ERRORS as error:
                raise _undecodable(r, error) from error
        return events

    def verify(self, batch: int = 5000, keys: bool = True) -> Verified:
        """Recompute the hash chain over the whole log; return how many events were
        checked and, at the first break, its position and why.

        Every row counts, whatever its position: one stored at 0 or below (no event's)
        is a break too, since the audit stream shows it. (Positions may have gaps: an
        import of one namespace keeps its events' positions.) With the chain intact, a
        memory whose sealed content has lost its key without a hard ``Forgotten`` in the
        log is a break at its ``Asserted`` (unless ``keys`` is False): deleting a key
        row erases a memory as a hard forget does, but leaves no proof of it in the log.
        So is a key that no longer opens its memory's seal (changed, or swapped with
        another memory's), which leaves the log unreadable from there: checked wherever
        the key can be read (a wrapped key needs the master key)."""
        previous, checked, after = GENESIS_HASH, 0, None
        seals = SealCheck()
        while True:
            with translated_errors(), self.backend.read() as sql:
                rows = self._rows(sql, EventFilter(after=after), limit=batch)
                records: list[RecordedEvent] = []
                for row in rows:
                    checked += 1
                    try:
                        record = RecordedEvent.from_row(row)
                        # Parsed here, not on first use: an id that is no UUID is a
                        # break at this row (from_row refuses a bad instant itself).
                        _ = record.memory_id
                        intact = chain_hash(previous, record) == record.hash
                    except (TypeError, ValueError, OverflowError):
                        # A column changed to what the ledger never writes (text for a
                        # number, bytes for text, say): a break at this row, not a crash
                        # of the check.
                        stored = row["position"]
                        at = stored if type(stored) is int else (after or 0) + 1
                        return Verified(checked, at, BROKEN_ROW)
                    if not intact or record.position < 1:
                        return Verified(checked, record.position, BROKEN_HASH)
                    records.append(record)
                    previous, after = record.hash, record.position
                sealed = {r.position: r.memory_key for r in records if keys and _sealed(r)}
                found = self.keyring.checkable(sql, sealed.values())
            seals.follow(records, sealed, found)
            if len(rows) < batch:
                break
        first = seals.first_break()
        return Verified(checked, None, None) if first is None else Verified(checked, *first)

    def restore(
        self, batches: Iterable[Sequence[Restored]], progress: Callable[[int], None] | None = None
    ) -> int:
        """Write events exported from another ledger into this empty log, keeping their
        positions, instants, ids and actors; payloads are sealed under fresh keys and the
        hashes rechained.

        The log must be empty under the write lock (``ValidationError`` otherwise): two
        imports that both found it empty before they started do not both go in. Every
        batch goes into one transaction: an entry that fails (a malformed line
        late in a file, an event out of order) leaves the log as it was. ``progress`` is
        called with the number of events written so far after each batch; return it.

        The idempotency claims come back with their memories (a retry after an import
        answers as it did before it), and a hard ``Forgotten`` destroys its memory's new
        key and erases its claim, as the forget did at the source: an export that ran
        while the forget committed may still carry the content it erased; the store is
        then scrubbed, as after a hard forget."""
        restored = erased = 0
        with translated_errors(conflicts=True), self.backend.write() as sql:
            tip = self.tip(sql)
            if tip.position != 0:
                raise ValidationError(
                    f"import needs an empty store; this one already holds events (its log "
                    f"reaches position {tip.position})"
                )
            for entries in batches:
                tip, destroyed = self._restore_batch(sql, tip, entries)
                restored, erased = restored + len(entries), erased + destroyed
                if progress is not None:
                    progress(restored)
            self.backend.notify(sql)
        if erased:
            with translated_errors():
                self.backend.scrub()
        return restored

    def _restore_batch(
        self, sql: Sql, tip: LogTip, entries: Sequence[Restored]
    ) -> tuple[LogTip, int]:
        """Stamp and insert one batch after ``tip``; return the new tip and how many keys
        its hard forgets destroyed."""
        previous, stamped = tip.hash, []
        keys: list[tuple[UUID, str, bytes]] = []
        claims: list[IdempotencyClaim] = []
        erased: list[UUID] = []
        for entry in entries:
            last = tip.recorded_at
            if entry.position <= tip.position or (
                last is not None and to_micros(entry.recorded_at) <= last
            ):
                raise ValidationError(
                    f"event at position {entry.position} does not come after the log's end"
                )
            stored = self._encode_restored(entry, keys)
            event = entry.event
            if isinstance(event, Asserted) and event.idempotency_key is not None:
                fingerprint = ERASED_FINGERPRINT if event.erased else entry.fingerprint
                claims.append(IdempotencyClaim(
                    entry.namespace, event.idempotency_key, fingerprint or UNKNOWN_FINGERPRINT,
                    event.originator_id,
                ))  # fmt: skip
            if isinstance(event, Forgotten) and event.hard:
                erased.append(event.originator_id)
            record = RecordedEvent(
                position=entry.position, recorded_micros=to_micros(entry.recorded_at),
                memory_key=str(entry.event.originator_id),
                version=entry.event.originator_version, topic=stored.topic,
                schema_version=type(entry.event).class_version, actor=entry.actor,
                namespace=entry.namespace, payload=stored.state, hash=b"",
                memory_id=entry.event.originator_id, recorded_at=entry.recorded_at,
            )  # fmt: skip
            record.hash = previous = chain_hash(previous, record)
            stamped.append(record)
            tip = LogTip(entry.position, to_micros(entry.recorded_at), previous)
        if keys:
            self.keyring.admit(sql)
        self.backend.insert_events(sql, stamped)
        self.keyring.store(sql, keys)
        for claim in claims:
            self._claim(sql, claim)
        self.keyring.destroy(sql, erased)
        self._erase_claims(sql, erased)
        return tip, len(erased)

    def _encode_restored(self, entry: Restored, keys: list[tuple[UUID, str, bytes]]) -> StoredEvent:
        event = entry.event
        if not isinstance(event, Asserted):
            return self.mapper.encode(event, None)
        if event.erased:
            return self.mapper.encode_erased(event)
        key = new_key()
        keys.append((event.originator_id, entry.namespace, key))
        return self.mapper.encode(event, key)


@dataclass(frozen=True)
class Restored:
    """One event to restore, with the coordinates it had in the exported ledger."""

    position: int
    recorded_at: datetime
    actor: str
    namespace: str
    event: LedgerEvent
    fingerprint: str | None = None
    """An ``Asserted``'s idempotency claim's payload digest, as exported."""
