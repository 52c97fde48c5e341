"""Answers to queries, read from the projections (never by replaying the log).

Transaction time is a parameter of every read: ``known_at=None`` reads the latest
versions; ``known_at=T`` reads the version rows whose recorded interval contains T.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

from erstwhile.domain.errors import NotFound
from erstwhile.domain.events import Asserted, LedgerEvent, Superseded
from erstwhile.domain.memory import Kind, Memory, State, claim_of, normalise_label
from erstwhile.domain.time import OPEN_END, Window, end_from_micros, from_micros, to_micros
from erstwhile.domain.views import Rectangle
from erstwhile.domain.writes import Existing
from erstwhile.eventstore import RecordedEvent, Sql, in_lists, marks
from erstwhile.projections.base import Folded
from erstwhile.projections.memories import JOINED_MEMORY_COLUMNS

LATEST = OPEN_END - 1
"""The recorded instant that selects every row still open: "as known now"."""


@dataclass(frozen=True)
class MemoryState:
    """A memory's latest state for a command: what the rules need, and the memory itself
    (None once forgotten)."""

    existing: Existing
    memory: Memory | None
    erased: bool = False
    kept: Memory | None = None
    """The memory as its row keeps it, forgotten or not, until erased (a soft forget
    hides a memory from reads but keeps its claim: a retried ``revise`` of it needs it)."""

    @property
    def id(self) -> UUID:
        return self.existing.id

    @property
    def state(self) -> State:
        return self.existing.state

    @property
    def version(self) -> int:
        return self.existing.version


def _json(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def _instant(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def rectangle_from_row(row: Any) -> Rectangle:
    """Build one version of the timeline from a ``memory_versions`` row joined with its
    memory's claim."""
    return Rectangle(  # the id and enum values as stored: the model parses them faster
        memory_id=row["memory_id"],
        kind=row["kind"],
        state=row["state"],
        content=row["content"],
        value=_json(row["value"]),
        valid_from=from_micros(row["valid_from"]),
        valid_until=end_from_micros(row["valid_until"]),
        recorded_from=from_micros(row["recorded_from"]),
        recorded_until=end_from_micros(row["recorded_until"]),
    )


def memory_from_row(row: Any, supersedes: Sequence[UUID]) -> Memory:
    """Build the public model from a ``memories`` row (overridden by version columns)."""
    keys = row.keys()
    state = row["v_state"] if "v_state" in keys else row["state"]
    valid_until = row["v_valid_until"] if "v_valid_until" in keys else row["valid_until"]
    successor = row["v_superseded_by"] if "v_superseded_by" in keys else row["superseded_by"]
    # Ids and enum values go in as stored: the model parses them faster than Python does.
    return Memory(
        id=row["id"],
        namespace=row["namespace"],
        kind=row["kind"],
        content=row["content"],
        subject=row["subject"],
        attribute=row["attribute"],
        value=_json(row["value"]),
        entities=_json(row["entities"]) or [],
        valid_from=from_micros(row["valid_from"]),
        valid_until=end_from_micros(valid_until),
        occurred_at=_instant(row["occurred_at"]),
        confidence=row["confidence"],
        evidence=_json(row["evidence"]) or [],
        extractor_id=row["extractor_id"],
        extracted_at=_instant(row["extracted_at"]),
        actor=row["actor"],
        metadata=_json(row["metadata"]),
        state=state,
        recorded_at=from_micros(row["recorded_at"]),
        position=row["position"],
        supersedes=list(supersedes),
        superseded_by=successor or None,
        forgotten_at=_instant(row["forgotten_at"]) if state == State.FORGOTTEN else None,
        vector_clock=_json(row["vector_clock"]) or {},
    )


@dataclass(frozen=True)
class NewLinks:
    """What the projections add to a memory the moment it is folded: its vector clock
    and the memories it superseded (in log order)."""

    vector_clock: dict[str, int]
    supersedes: list[UUID]


def links_from_fold(
    appended: Folded, clocks: Mapping[str, dict[str, int]], positions: Mapping[UUID, int]
) -> dict[UUID, NewLinks]:
    """Return the links of the memories an append asserted, without reading them back:
    each one's vector clock as its fold gave it (``clocks``, by id), and the memories it
    supersedes, which only this append's ``Superseded`` events can name (nothing older
    knew its id), listed in the order of their ``positions`` as reads list them."""
    superseded: dict[UUID, list[UUID]] = {}
    for record, event in appended:
        if isinstance(event, Superseded):
            superseded.setdefault(event.newer_id, []).append(record.memory_id)
    return {
        record.memory_id: NewLinks(
            clocks[record.memory_key],
            sorted(superseded.get(record.memory_id, []), key=positions.__getitem__),
        )
        for record, event in appended
        if isinstance(event, Asserted)
    }


def memories_from_append(
    appended: Sequence[tuple[RecordedEvent, LedgerEvent]],
    namespace: str,
    links: Mapping[UUID, NewLinks] | None = None,
) -> list[Memory]:
    """Build the memories an append asserted straight from its events, without reading
    them back. With ``links`` (read in the append's transaction, after the fold) they
    equal what ``get`` returns; without, as for a writer that does not wait for its
    projections, the vector clocks are left empty until a follower folds them. A memory
    a later item of the same append superseded (``timestamp_wins`` within a batch) is
    returned superseded."""
    replaced = {
        record.memory_id: event for record, event in appended if isinstance(event, Superseded)
    }
    found = []
    for record, event in appended:
        if isinstance(event, Asserted):
            link = (links or {}).get(record.memory_id)
            successor = replaced.get(record.memory_id)
            found.append(
                Memory(
                    id=record.memory_id, namespace=namespace, kind=event.kind,
                    content=event.content, subject=event.subject, attribute=event.attribute,
                    value=event.value, entities=list(event.entities),
                    valid_from=event.valid_from,
                    valid_until=successor.at if successor else event.valid_until,
                    occurred_at=event.occurred_at, confidence=event.confidence,
                    evidence=list(event.evidence), extractor_id=event.extractor_id,
                    extracted_at=event.extracted_at, actor=record.actor,
                    metadata=event.metadata,
                    state=State.SUPERSEDED if successor else State.CURRENT,
                    recorded_at=record.recorded_at, position=record.position,
                    supersedes=link.supersedes if link else list(event.supersedes),
                    superseded_by=successor.newer_id if successor else None,
                    vector_clock=link.vector_clock if link else {},
                )
            )  # fmt: skip
    return found


class MemoryReader:
    """Reads memories of one namespace from the core projections."""

    def __init__(self, namespace: str, dialect: str = "sqlite") -> None:
        self.namespace = namespace
        self._in_lineage = f"m.id IN ({LINEAGE})"
        if dialect == "postgresql":
            # PostgreSQL cannot tell how few rows the walk finds, and joined the lineage
            # to every memory of the table (2 ms at 10k); as an array it probes the
            # primary key for each (0.23 ms).
            self._in_lineage = f"m.id = ANY (ARRAY({LINEAGE}))"

    def state(self, sql: Sql, memory_id: UUID) -> MemoryState:
        """Return a memory's latest state for validating a command (forgotten included)."""
        return self._state_of(memory_id, *self._one_linked(sql, memory_id))

    def state_and_lag(
        self, sql: Sql, memory_id: UUID, lag: tuple[str, list[Any]]
    ) -> tuple[Callable[[], MemoryState], int, int]:
        """:meth:`state`, with the projections' lag behind the log (``lag``: a query of
        one row, ``lowest`` and ``head``), in one statement: its one snapshot tells
        whether the state read is the whole log's. Returns what gives the state (or
        refuses it, ``NotFound``: a memory the projections lack may be one they have
        not applied yet), the lowest tracked position and the head."""
        query, params = lag
        sql.execute(
            f"SELECT lag.lowest, lag.head, {JOINED_MEMORY_COLUMNS}, s.memory_id AS older "
            f"FROM ({query}) AS lag LEFT JOIN memories m ON m.id = ? {_SUPERSEDED_NOW} "
            "ORDER BY o.position",
            [*params, str(memory_id), LATEST, LATEST],
        )
        rows = sql.fetchall()
        first = rows[0]
        olders = [UUID(row["older"]) for row in rows if row["older"] is not None]

        def state() -> MemoryState:
            if first["id"] is None or first["namespace"] != self.namespace:
                raise self._unknown(memory_id)
            return self._state_of(memory_id, first, olders)

        return state, int(first["lowest"]), int(first["head"])

    def _state_of(self, memory_id: UUID, row: Any, olders: list[UUID]) -> MemoryState:
        """The state of the memory of a ``memories`` row (and what it supersedes)."""
        erased = row["erased_at"] is not None  # never shown, even if not forgotten (_shown)
        kept = None if erased else memory_from_row(row, olders)
        memory = kept if row["state"] != State.FORGOTTEN else None
        existing = Existing(
            id=memory_id,
            kind=Kind(row["kind"]),
            state=State(row["state"]),
            window=Window(from_micros(row["valid_from"]), end_from_micros(row["valid_until"])),
            claim=claim_of(
                row["subject"], row["attribute"], _json(row["value"]), row["content"] or ""
            ),
            version=row["version"],
            position=row["position"],
        )
        return MemoryState(existing=existing, memory=memory, erased=erased, kept=kept)

    def prefetch_state(self, sql: Sql, memory_id: UUID) -> None:
        """Send :meth:`state`'s read ahead (see :meth:`Sql.prefetch`): the memory's row
        and what it superseded come in one statement, which travels with any read sent
        before it (one round trip on PostgreSQL)."""
        sql.prefetch(*_linked_query("m.id IN (?)", [str(memory_id)]))

    def _one_linked(self, sql: Sql, memory_id: UUID) -> tuple[Any, list[UUID]]:
        """A memory's row with the ids of what it supersedes (see :meth:`_linked_by_id`);
        ``NotFound`` where this namespace holds no such memory."""
        found = self._linked_by_id(sql, [str(memory_id)])
        if not found or found[0][0]["namespace"] != self.namespace:
            raise self._unknown(memory_id)
        return found[0]

    def vector_clocks(self, sql: Sql, memory_ids: Sequence[UUID]) -> list[dict[str, int]]:
        """Return visible memories' vector clocks, in the order asked, in one statement,
        without building the memories; each memory refused as :meth:`get` refuses it,
        the first one asked first."""
        asked = list(dict.fromkeys(str(memory_id) for memory_id in memory_ids))
        sql.execute(
            "SELECT id, namespace, vector_clock, state, erased_at FROM memories "
            f"WHERE id IN ({marks(asked)}) AND namespace = ?",
            [*asked, self.namespace],
        )
        found = {str(row["id"]): row for row in sql.fetchall()}
        return [
            _json(self._visible_row(found.get(str(memory_id)), memory_id)["vector_clock"]) or {}
            for memory_id in memory_ids
        ]

    def _unknown(self, memory_id: UUID) -> NotFound:
        """The refusal of a memory this namespace does not hold."""
        return NotFound(f"no memory {memory_id} in namespace {self.namespace!r}")

    def get(self, sql: Sql, memory_id: UUID, known_at: datetime | None = None) -> Memory:
        """Return a visible memory as known at ``known_at`` (latest by default);
        ``NotFound`` if this namespace holds no such memory, or it was forgotten."""
        if known_at is None:
            return self._visible_one(self._linked_by_id(sql, [str(memory_id)]), memory_id)
        known = self._select_linked(
            sql, "v.memory_id = ?", [str(memory_id)], to_micros(known_at), order=""
        )
        if not known or known[0].state is State.FORGOTTEN:
            raise NotFound(
                f"no memory {memory_id} in namespace {self.namespace!r} "
                f"as known at {known_at.isoformat()}"
            )
        return known[0]

    def facts(
        self,
        sql: Sql,
        subject: str,
        attribute: str | None,
        valid_at: datetime | None,
        known_at: datetime | None,
        include_archived: bool,
        now: datetime | None = None,
    ) -> list[Memory]:
        """Return the memories about ``subject`` whose window contains ``valid_at``, or
        (None) the present: ``now`` (the clock), or the log's last recorded instant
        where that is later (:data:`PRESENT`), so that one statement answers."""
        if valid_at is None:
            if now is None:
                raise ValueError("facts of the present need the clock's now")
            instant, given = PRESENT, to_micros(now)
        else:
            instant, given = "?", to_micros(valid_at)
        conditions = [
            "v.subject_key = ?",
            f"v.valid_from <= {instant}",
            f"v.valid_until > {instant}",
        ]
        params: list[Any] = [normalise_label(subject), given, given]
        if attribute is not None:
            conditions.append("v.attribute_key = ?")
            params.append(normalise_label(attribute))
        hidden = [State.FORGOTTEN.value] + ([] if include_archived else [State.ARCHIVED.value])
        conditions.append(f"v.state NOT IN ({', '.join('?' for _ in hidden)})")
        params.extend(hidden)
        recorded = LATEST if known_at is None else to_micros(known_at)
        return self._select_linked(sql, " AND ".join(conditions), params, recorded)

    def timeline(self, sql: Sql, subject: str, attribute: str | None) -> list[Rectangle]:
        """Return every version of the memories about ``subject`` (and ``attribute``) in
        recorded order, as the other reads see them: a forgotten memory's versions stop
        at its forget (a soft-forgotten one was known until then), and a hard-forgotten
        memory has none (only the audit log keeps its skeleton)."""
        condition, params = (
            "v.namespace = ? AND v.subject_key = ? AND v.state <> ? AND m.erased_at IS NULL",
            [self.namespace, normalise_label(subject), State.FORGOTTEN.value],
        )
        if attribute is not None:
            condition += " AND v.attribute_key = ?"
            params.append(normalise_label(attribute))
        sql.execute(
            "SELECT v.memory_id, v.kind, v.state, v.valid_from, v.valid_until, "
            "v.recorded_from, v.recorded_until, m.content, m.value "
            "FROM memories m JOIN memory_versions v ON v.memory_id = m.id "
            f"WHERE {condition}",
            params,
        )
        versions = [rectangle_from_row(row) for row in sql.fetchall()]
        return sorted(versions, key=lambda r: (r.recorded_from, r.memory_id))

    def chain(self, sql: Sql, memory_id: UUID) -> list[Memory]:
        """Return a visible memory's whole lineage through supersession, both ways and at
        any distance, itself included, those of it not forgotten, in log order; refused
        as :meth:`get` refuses the memory. One statement: the walk (:data:`LINEAGE`) and
        the rows of every memory it reaches (a chain took three, in two transactions)."""
        rows = self._linked_rows(sql, self._in_lineage, [str(memory_id)])
        self._visible_one(rows, memory_id)
        return self._shown_in_order(rows)

    def history(self, sql: Sql, memory_id: UUID) -> tuple[Memory, list[Memory]]:
        """Return a visible memory and its neighbours one level each way, those not
        forgotten: what superseded it and what it superseded, as known now. One
        statement reads the memory's row and theirs."""
        rows = self._linked_rows(
            sql,
            "m.id IN (SELECT CAST(? AS TEXT) UNION ALL SELECT superseded_by FROM memories "
            "WHERE id = ? UNION ALL SELECT memory_id FROM memory_versions "
            "WHERE superseded_by = ? AND recorded_from <= ? AND recorded_until > ?)",
            [str(memory_id)] * 3 + [LATEST, LATEST],
        )
        memory = self._visible_one(rows, memory_id)
        neighbours = [pair for pair in rows if pair[0]["id"] != str(memory_id)]
        return memory, self._shown_in_order(neighbours)

    def _visible_one(self, rows: list[tuple[Any, list[UUID]]], memory_id: UUID) -> Memory:
        """The memory ``memory_id`` among ``rows``, refused as :meth:`get` refuses it."""
        found = [pair for pair in rows if pair[0]["id"] == str(memory_id)]
        row, olders = found[0] if found else (None, [])
        return memory_from_row(self._visible_row(row, memory_id), olders)

    def _visible_row(self, row: Any, memory_id: UUID) -> Any:
        """``memory_id``'s ``memories`` row (None where none was found), refused as
        :meth:`get` refuses it: unknown to this namespace, or forgotten."""
        if row is None or row["namespace"] != self.namespace:
            raise self._unknown(memory_id)
        if not _shown(row):
            raise _forgotten(memory_id)
        return row

    def _shown_in_order(self, rows: list[tuple[Any, list[UUID]]]) -> list[Memory]:
        """The memories of ``rows`` this namespace shows, in log order."""
        kept = [pair for pair in rows if pair[0]["namespace"] == self.namespace and _shown(pair[0])]
        kept.sort(key=lambda pair: pair[0]["position"])
        return [memory_from_row(row, olders) for row, olders in kept]

    def soft_forgotten_before(self, sql: Sql, cutoff: int) -> list[UUID]:
        """Return memories forgotten softly (content still sealed in the log) at or
        before ``cutoff``, oldest forget first."""
        sql.execute(
            "SELECT id FROM memories WHERE namespace = ? AND state = ? AND erased_at IS NULL "
            "AND forgotten_at <= ? ORDER BY forgotten_at",
            (self.namespace, State.FORGOTTEN.value, cutoff),
        )
        return [UUID(row["id"]) for row in sql.fetchall()]

    def visible(self, sql: Sql, ids: Sequence[UUID]) -> list[Memory]:
        """Return these memories of the namespace, those not forgotten, in log order,
        each with what it supersedes: one statement for every 500 of them (a chain read
        each one in a transaction of its own: on PostgreSQL 6 ms for a lineage of five;
        and the rows, then their links, took two statements). They are
        found by id alone and their namespace checked here: with the namespace in the
        query, SQLite (which keeps no statistics) walked the namespace's index."""
        return self._shown_in_order(self._linked_by_id(sql, [str(memory_id) for memory_id in ids]))

    def _linked_by_id(self, sql: Sql, ids: Sequence[str]) -> list[tuple[Any, list[UUID]]]:
        """The ``memories`` rows of these ids (any namespace, any state), each with the
        ids of the memories it supersedes as known now, in log order: one statement, one
        row per (memory, superseded memory), grouped back into one row each. The id alone
        finds a row, through the primary key (see :meth:`visible`)."""
        found = []
        for chunk in in_lists(list(dict.fromkeys(ids))):  # each id read once
            found += self._linked_rows(sql, f"m.id IN ({marks(chunk)})", chunk)
        return found

    def _linked_rows(
        self, sql: Sql, where: str, params: Sequence[Any]
    ) -> list[tuple[Any, list[UUID]]]:
        """The ``memories`` rows that meet ``where`` (any namespace, any state), each
        with the ids of what it supersedes as known now: one row per (memory, superseded
        memory) from :func:`_linked_query`, grouped back into one each."""
        grouped: dict[str, tuple[Any, list[UUID]]] = {}
        sql.execute(*_linked_query(where, params))
        for row in sql.fetchall():
            _, olders = grouped.setdefault(row["id"], (row, []))
            if row["older"] is not None:
                olders.append(UUID(row["older"]))
        return list(grouped.values())

    def _select_linked(
        self,
        sql: Sql,
        condition: str,
        params: list[Any],
        recorded: int,
        order: str = " ORDER BY m.valid_from DESC, m.position DESC",
    ) -> list[Memory]:
        """Return the memories whose version rows, as known at ``recorded``, meet
        ``condition``, each with the memories it superseded as known then: one query,
        one row per (memory, superseded memory), folded back into one memory each.

        As known now (:data:`LATEST`), the rows are those still open, asked for as such:
        the index then finds them by their end (``recorded_until``) and seeks the end of
        their valid window, so the versions of a key that ended before the instant asked
        about are not read one by one (a key revised 10,000 times: 5 ms a ``facts`` of
        the present, every superseded version read)."""
        if recorded == LATEST:
            known, known_params = f"v.recorded_until = {OPEN_END}", []
        else:
            known, known_params = "v.recorded_from <= ? AND v.recorded_until > ?", [recorded] * 2
        sql.execute(
            f"SELECT {JOINED_MEMORY_COLUMNS}, v.state AS v_state, v.valid_until AS v_valid_until, "
            "v.superseded_by AS v_superseded_by, s.memory_id AS v_older "
            "FROM memories m JOIN memory_versions v ON v.memory_id = m.id "
            "LEFT JOIN memory_versions s ON s.superseded_by = v.memory_id "
            "AND s.recorded_from <= ? AND s.recorded_until > ? "
            "LEFT JOIN memories o ON o.id = s.memory_id "
            f"WHERE v.namespace = ? AND {known} "
            f"AND m.erased_at IS NULL AND {condition}"
            f"{order or ' ORDER BY m.id'}, o.position",
            [recorded, recorded, self.namespace, *known_params, *params],
        )
        grouped: dict[str, tuple[Any, list[UUID]]] = {}
        for row in sql.fetchall():
            _, olders = grouped.setdefault(row["id"], (row, []))
            if row["v_older"] is not None:
                olders.append(UUID(row["v_older"]))
        return [memory_from_row(row, olders) for row, olders in grouped.values()]

    def with_links(self, sql: Sql, rows: Sequence[Any], recorded: int) -> list[Memory]:
        """Build the memories of memories/versions rows with their links as known then
        (one query for all of them, not one per memory: a search returns ten)."""
        olders = self._superseded_ids(sql, [UUID(row["id"]) for row in rows], recorded)
        return [memory_from_row(row, olders.get(row["id"], [])) for row in rows]

    def _superseded_ids(
        self, sql: Sql, memory_ids: Sequence[UUID], recorded: int
    ) -> dict[str, list[UUID]]:
        """Return the ids each of ``memory_ids`` supersedes, as known at ``recorded``, in
        log order (memories that supersede nothing are left out)."""
        found: dict[str, list[UUID]] = {}
        for chunk in in_lists([str(memory_id) for memory_id in memory_ids]):
            sql.execute(
                "SELECT v.superseded_by, v.memory_id FROM memory_versions v "
                "JOIN memories m ON m.id = v.memory_id "
                f"WHERE v.superseded_by IN ({marks(chunk)}) "
                "AND v.recorded_from <= ? AND v.recorded_until > ? ORDER BY m.position",
                [*chunk, recorded, recorded],
            )
            for row in sql.fetchall():
                found.setdefault(row["superseded_by"], []).append(UUID(row["memory_id"]))
        return found


PRESENT = (
    "(SELECT MAX(instant) FROM (SELECT CAST(? AS BIGINT) AS instant UNION ALL "
    "SELECT recorded_at FROM (SELECT recorded_at FROM erstwhile_events "
    "ORDER BY position DESC LIMIT 1) AS tip) AS instants)"
)
"""The instant "now" means to a read, inside its statement (see ``LedgerCore._present``):
the clock's, given as the parameter, unless the log's last event was recorded later
(a write is recorded at its clock's instant, but after the one before it), read in the
statement's own snapshot. ``facts`` uses it twice, and each use is computed once per
statement (a subquery that reads no row of the query: SQLite runs it once, PostgreSQL
as an InitPlan)."""


def _linked_query(where: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
    """The read of the ``memories`` rows that meet ``where``, each joined to what it
    supersedes as known now (through the versions' successor index), those in log
    order."""
    return (
        f"SELECT {JOINED_MEMORY_COLUMNS}, s.memory_id AS older FROM memories m "
        f"{_SUPERSEDED_NOW} WHERE {where} ORDER BY m.id, o.position",
        [LATEST, LATEST, *params],
    )


_SUPERSEDED_NOW = (
    "LEFT JOIN memory_versions s ON s.superseded_by = m.id "
    "AND s.recorded_from <= ? AND s.recorded_until > ? "
    "LEFT JOIN memories o ON o.id = s.memory_id"
)
"""The joins that bring each ``memories m`` row what it supersedes as known now (two
``LATEST`` parameters), ``o`` being the superseded memory."""


LINEAGE = (
    "WITH RECURSIVE lineage(id) AS (SELECT CAST(? AS TEXT) UNION "
    "SELECT n.id FROM lineage l JOIN memories x ON x.id = l.id "
    "JOIN memories n ON n.id = x.superseded_by OR n.superseded_by = x.id) "
    "SELECT id FROM lineage"
)
"""The ids of every memory linked to one through supersession, both ways and at any
distance, itself included (forgotten ones too: their links stay), each step through an
index: a memory's successor by its id, its predecessors by ``memories_successor``
(walked one memory at a time, a chain cost two round trips per memory on PostgreSQL).
Links never leave a namespace, so the namespace is not in the walk (with it, SQLite
walked the namespace's index instead); the reads check it on what they return."""


def _shown(row: Any) -> bool:
    """Whether reads show the memory of a ``memories`` row: not forgotten, and not erased
    (an erased claim in a row not yet marked forgotten is a fold of the log up to before
    the hard forget: a replay, a follower behind)."""
    return row["state"] != State.FORGOTTEN and row["erased_at"] is None


def _forgotten(memory_id: UUID) -> NotFound:
    """The refusal of a memory that was forgotten (softly, or erased)."""
    return NotFound(f"memory {memory_id} was forgotten")
