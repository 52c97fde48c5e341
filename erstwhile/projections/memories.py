"""The two core read models.

``memories``: one row per memory with its claim, provenance and current state and links,
for ``get``, ``history`` and ``chain``.

``memory_entities`` (part of ``memories``): one row per entity a memory names, the index
that finds memories about the same thing without scanning a namespace.

``actor_writes`` (part of ``memories``): each actor's running count of asserted memories,
from which every memory's vector clock is computed when it is asserted.

``memory_versions``: the bitemporal picture. Every event on a memory closes the row that
described it (``recorded_until`` = the event's ``recorded_at``) and opens a new one, so
each row is a rectangle: valid window ``[valid_from, valid_until)`` by recorded interval
``[recorded_from, recorded_until)``. "What was true at V, as known at T" is an index
range scan over these rectangles, never a replay.
"""

from __future__ import annotations

from datetime import datetime

import orjson

from erstwhile.domain.events import Archived, Asserted, Forgotten, LedgerEvent, Superseded
from erstwhile.domain.memory import State, normalise_label
from erstwhile.domain.time import OPEN_END, end_to_micros, to_micros
from erstwhile.eventstore import RecordedEvent, Sql, in_lists, marks
from erstwhile.projections.base import Folded, Projection
from erstwhile.projections.batch import BufferedSql

MEMORY_COLUMNS = (
    "id, namespace, kind, content, subject, attribute, subject_key, attribute_key, value, "
    "entities, valid_from, valid_until, occurred_at, confidence, evidence, extractor_id, "
    "extracted_at, actor, metadata, state, recorded_at, position, version, superseded_by, "
    "forgotten_at, vector_clock, erased_at"
)
JOINED_MEMORY_COLUMNS = ", ".join("m." + column for column in MEMORY_COLUMNS.split(", "))
"""The same columns of ``memories m`` in a join. Statements name their columns, never
``m.*``: PostgreSQL re-plans a prepared statement whose table another process replaced,
but refuses one whose result would change type ("cached plan must not change result
type"), which ``*`` over a table with a column more does."""


INSERT_MEMORY = (
    f"INSERT INTO memories ({MEMORY_COLUMNS}) VALUES "
    "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
CURRENT, SUPERSEDED = State.CURRENT.value, State.SUPERSEDED.value
ARCHIVED, FORGOTTEN = State.ARCHIVED.value, State.FORGOTTEN.value


def json_text(value: object) -> str | None:
    """Store a JSON value as text; ``None`` (no value) stays NULL."""
    return None if value is None else orjson.dumps(value).decode()


def json_list(values: tuple[str, ...]) -> str:
    """Store a tuple of names as a JSON array (most are empty)."""
    return orjson.dumps(values).decode() if values else "[]"


def label_key(label: str | None) -> str | None:
    """The indexed comparison form of a subject or attribute."""
    return None if label is None else normalise_label(label)


def optional_micros(instant: object) -> int | None:
    """Stored form of an optional instant."""
    return to_micros(instant) if isinstance(instant, datetime) else None


class MemoriesProjection(Projection):
    """One row per memory: the claim, its provenance, its current state and links."""

    name = "memories"
    version = 6  # 6: subject, attribute and entity keys composed (NFC)
    tables = ("memories", "memory_entities", "actor_writes")
    reader_indexes = (
        "memories_subject", "memories_successor", "memories_position", "memories_attribute",
        "memories_kind",
    )  # fmt: skip

    def create(self, sql: Sql) -> None:
        sql.execute(
            "CREATE TABLE IF NOT EXISTS memories ("
            "id TEXT PRIMARY KEY, namespace TEXT NOT NULL, kind TEXT NOT NULL, "
            "content TEXT, subject TEXT, attribute TEXT, subject_key TEXT, attribute_key TEXT, "
            "value TEXT, entities TEXT, valid_from BIGINT NOT NULL, valid_until BIGINT NOT NULL, "
            "occurred_at BIGINT, confidence DOUBLE PRECISION NOT NULL, evidence TEXT, "
            "extractor_id TEXT, extracted_at BIGINT, actor TEXT NOT NULL, metadata TEXT, "
            "state TEXT NOT NULL, recorded_at BIGINT NOT NULL, position BIGINT NOT NULL, "
            "version BIGINT NOT NULL, superseded_by TEXT, forgotten_at BIGINT, "
            "vector_clock TEXT, erased_at BIGINT)"
        )
        sql.execute(
            "CREATE TABLE IF NOT EXISTS memory_entities (memory_id TEXT NOT NULL, "
            "namespace TEXT NOT NULL, entity TEXT NOT NULL, keyed INTEGER NOT NULL, "
            f"PRIMARY KEY (memory_id, entity)){self.keyed_table}"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memory_entities_entity "
            "ON memory_entities (namespace, entity, keyed)"
        )
        sql.execute(
            "CREATE TABLE IF NOT EXISTS actor_writes (namespace TEXT NOT NULL, "
            "actor TEXT NOT NULL, position BIGINT NOT NULL, writes BIGINT NOT NULL, "
            f"PRIMARY KEY (namespace, actor, position)){self.keyed_table}"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memories_subject "
            "ON memories (namespace, subject_key, attribute_key)"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memories_successor ON memories (superseded_by) "
            "WHERE superseded_by IS NOT NULL"
        )
        # Search finds memories by position (its full-text rowids are positions) and
        # lists a namespace by recency.
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memories_position ON memories (namespace, position)"
        )
        # A search filtered by attribute alone, or by one kind alone, walks that
        # attribute's or kind's memories newest first, not the whole namespace (84 ms p50
        # at 100k memories for an attribute forty of them have, against 0.3).
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memories_attribute "
            "ON memories (namespace, attribute_key, position)"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memories_kind ON memories (namespace, kind, position)"
        )

    def drop(self, sql: Sql) -> None:
        for table in ("memories", "memory_entities", "actor_writes"):
            sql.execute(f"DROP TABLE IF EXISTS {table}")

    def __init__(self, dialect: str) -> None:
        super().__init__(dialect)
        self.clocks: dict[str, dict[str, int]] = {}
        """The vector clocks the latest fold gave the memories it asserted, by id: an
        append that folds itself returns its memories with them instead of reading them
        back (its transaction holds the write lock, so no other fold runs in between)."""

    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        self.apply_many(sql, [(record, event)])

    def prefetch(self, sql: Sql, namespace: str, actor: str) -> None:
        """Send ahead the read of an actor's write count that a fold of its writes
        starts with (see :meth:`Sql.prefetch`)."""
        sql.prefetch(WRITES_SO_FAR, (namespace, actor))

    def apply_many(self, sql: Sql, batch: Folded) -> None:
        """Fold a batch with writes grouped, reading each actor's write count once.

        New memories' rows are written before the changes to memories: a change only
        ever touches a memory asserted before it, so hoisting the inserts keeps every
        row's history, and the inserts go as one group instead of one call each between
        the updates of the supersessions that come with them.
        """
        added, changed = BufferedSql(sql), BufferedSql(sql)
        counts: dict[tuple[str, str], int] = {}
        self.clocks = {}
        for record, event in batch:
            if isinstance(event, Asserted):
                self._assert(added, record, event, counts)
            else:
                self._change(changed, record, event)
        added.flush()
        changed.flush()

    def _assert(
        self,
        sql: Sql,
        record: RecordedEvent,
        event: Asserted,
        counts: dict[tuple[str, str], int],
    ) -> None:
        memory_id = record.memory_key
        clock = self.clocks[memory_id] = self._vector_clock(sql, record, event, counts)
        sql.execute(
            INSERT_MEMORY,
            (
                memory_id, record.namespace, event.kind.value, event.content,
                event.subject, event.attribute, label_key(event.subject),
                label_key(event.attribute), json_text(event.value),
                json_list(event.entities), to_micros(event.valid_from),
                end_to_micros(event.valid_until), optional_micros(event.occurred_at),
                event.confidence, json_list(event.evidence), event.extractor_id,
                optional_micros(event.extracted_at), record.actor,
                json_text(event.metadata), CURRENT,
                record.recorded_micros, record.position, record.version, None, None,
                json_text(clock),
                record.recorded_micros if event.erased else None,
            ),
        )  # fmt: skip
        keyed = int(bool(event.subject and event.attribute))
        sql.executemany(
            "INSERT INTO memory_entities (memory_id, namespace, entity, keyed) VALUES (?, ?, ?, ?)",
            [(memory_id, record.namespace, entity, keyed) for entity in event.entities],
        )

    def _change(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        memory_id = record.memory_key
        if isinstance(event, Superseded):
            sql.execute(
                "UPDATE memories SET state = ?, valid_until = ?, superseded_by = ?, version = ? "
                "WHERE id = ?",
                (SUPERSEDED, to_micros(event.at), str(event.newer_id),
                 record.version, memory_id),
            )  # fmt: skip
        elif isinstance(event, Archived):
            sql.execute(
                "UPDATE memories SET state = ?, version = ? WHERE id = ?",
                (ARCHIVED, record.version, memory_id),
            )
        elif isinstance(event, Forgotten):
            self._forget(sql, record, event, memory_id)

    def _forget(self, sql: Sql, record: RecordedEvent, event: Forgotten, memory_id: str) -> None:
        """Hide the memory; a hard forget also wipes its claim, keeping the skeleton.

        ``erased_at`` is the hard forget's instant. A fold of the log after the key was
        destroyed (a rebuild, a follower behind) meets the ``Asserted`` already erased
        and marks it at once with its own instant, which the forget then replaces, so
        every fold ends with the same row (a memory is hard-forgotten at most once)."""
        instant = record.recorded_micros
        sql.execute(
            "UPDATE memories SET state = ?, forgotten_at = COALESCE(forgotten_at, ?), version = ? "
            "WHERE id = ?",
            (FORGOTTEN, instant, record.version, memory_id),
        )
        if event.hard:
            self.erase(sql, memory_id, instant)

    def erase(self, sql: Sql, memory_id: str, instant: int) -> None:
        """Wipe the claim, keeping the skeleton, and mark the row erased at ``instant``."""
        sql.execute(
            "UPDATE memories SET content = NULL, value = NULL, entities = '[]', "
            "evidence = '[]', metadata = NULL, erased_at = ? "
            "WHERE id = ?",
            (instant, memory_id),
        )
        sql.execute("DELETE FROM memory_entities WHERE memory_id = ?", (memory_id,))

    def _vector_clock(
        self,
        sql: Sql,
        record: RecordedEvent,
        event: Asserted,
        counts: dict[tuple[str, str], int],
    ) -> dict[str, int]:
        """Count this write for its actor; for every other actor, count its writes at or
        before the position the writer said it had read (``observed_position``).

        ``counts`` carries each actor's running count through a batch, so the count is
        read from the table once per actor and batch, not once per write.
        """
        actor = (record.namespace, record.actor)
        if actor not in counts:
            sql.execute(WRITES_SO_FAR, actor)
            row = sql.fetchone()
            counts[actor] = row["writes"] if row else 0
        own = counts[actor] = counts[actor] + 1
        sql.execute(
            "INSERT INTO actor_writes (namespace, actor, position, writes) VALUES (?, ?, ?, ?)",
            (record.namespace, record.actor, record.position, own),
        )
        clock = {record.actor: own}
        if event.observed_position is not None:
            sql.execute(
                "SELECT actor, MAX(writes) AS writes FROM actor_writes "
                "WHERE namespace = ? AND actor <> ? AND position <= ? GROUP BY actor",
                (record.namespace, record.actor, event.observed_position),
            )
            clock.update({r["actor"]: r["writes"] for r in sql.fetchall()})
        return clock


WRITES_SO_FAR = (
    "SELECT writes FROM actor_writes WHERE namespace = ? AND actor = ? "
    "ORDER BY position DESC LIMIT 1"
)
"""How many memories an actor has asserted in a namespace (its vector clock's count)."""

VERSION_COLUMNS = (
    "memory_id, seq, namespace, kind, subject_key, attribute_key, state, valid_from, "
    "valid_until, superseded_by, recorded_from, recorded_until"
)


class VersionsProjection(Projection):
    """The bitemporal rectangles: one row per version of each memory."""

    name = "memory_versions"
    version = 5  # 3: keys composed (NFC); 4: memory_versions_current; 5: valid_until indexed
    tables = ("memory_versions",)
    reader_indexes = ("memory_versions_successor",)

    def create(self, sql: Sql) -> None:
        sql.execute(
            "CREATE TABLE IF NOT EXISTS memory_versions ("
            "memory_id TEXT NOT NULL, seq BIGINT NOT NULL, namespace TEXT NOT NULL, "
            "kind TEXT NOT NULL, subject_key TEXT, attribute_key TEXT, state TEXT NOT NULL, "
            "valid_from BIGINT NOT NULL, valid_until BIGINT NOT NULL, superseded_by TEXT, "
            "recorded_from BIGINT NOT NULL, recorded_until BIGINT NOT NULL, "
            f"PRIMARY KEY (memory_id, seq)){self.keyed_table}"
        )
        # The rows open now are found by their end (equal for all of them), then by the
        # end of their valid window: a point read of the present skips the versions that
        # ended before it (see MemoryReader._select_linked).
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memory_versions_subject ON memory_versions "
            "(namespace, subject_key, attribute_key, recorded_until, valid_until, recorded_from)"
        )
        # A write's candidates are the current versions sharing its key: without the
        # state in an index, a key revised a thousand times has a thousand superseded
        # versions open in recorded time, every one read to find the one current.
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memory_versions_current ON memory_versions "
            "(namespace, subject_key, attribute_key, recorded_until, recorded_from) "
            "WHERE state = 'current'"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memory_versions_successor "
            "ON memory_versions (superseded_by) WHERE superseded_by IS NOT NULL"
        )

    def drop(self, sql: Sql) -> None:
        sql.execute("DROP TABLE IF EXISTS memory_versions")

    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        self.apply_many(sql, [(record, event)])

    def apply_many(self, sql: Sql, batch: Folded) -> None:
        """Fold a batch without reading: an ``Asserted`` opens a row; any other event
        copies the memory's open row into a new version with its changes and closes the
        old one, both in SQL. Events are written in runs that touch each memory at most
        once, each run as three grouped statements (open, copy, close), in that order."""
        run = VersionRun(self.dialect)
        for record, event in batch:
            if record.memory_key in run.touched:
                run.write(sql)
                run = VersionRun(self.dialect)
            run.add(record, event)
        run.write(sql)


OPEN_VERSION = f"INSERT INTO memory_versions ({VERSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
"""A new memory's first version."""

COPY_OPEN_VERSION = (
    f"INSERT INTO memory_versions ({VERSION_COLUMNS}) "
    "SELECT memory_id, ?, namespace, kind, subject_key, attribute_key, ?, valid_from, "
    "COALESCE(?, valid_until), COALESCE(?, superseded_by), ?, ? FROM memory_versions "
    "WHERE memory_id = ? AND recorded_until = ?"
)
"""A memory's next version: its open row with the new state (and, for a supersession,
the new end of its window and its successor), recorded from the event's instant.

PostgreSQL runs it pipelined, without a wait. SQLite materializes the ``SELECT`` of a
table being inserted into for every row (17 µs a row against 6 for a plain insert in a
rebuild), so there the open rows are read first and inserted as plain rows
(:data:`OPEN_ROWS`)."""

OPEN_ROWS = (
    f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE recorded_until = ? "
    "AND memory_id IN ({})"
)
"""SQLite: the open rows of some memories, to be copied into their next versions."""

CLOSE_OLDER_VERSION = (
    "UPDATE memory_versions SET recorded_until = ? "
    "WHERE memory_id = ? AND recorded_until = ? AND seq <> ?"
)
"""Close the version a new one replaces: it stops being what the ledger knows."""


class VersionRun:
    """Version rows for events that touch distinct memories, written together."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.touched: set[str] = set()
        self.opened: list[list[object]] = []
        self.copied: list[list[object]] = []
        self.closed: list[list[object]] = []

    def add(self, record: RecordedEvent, event: LedgerEvent) -> None:
        memory_id, recorded = record.memory_key, record.recorded_micros
        self.touched.add(memory_id)
        if isinstance(event, Asserted):
            self.opened.append([
                memory_id, record.version, record.namespace, event.kind.value,
                label_key(event.subject), label_key(event.attribute), CURRENT,
                to_micros(event.valid_from), end_to_micros(event.valid_until), None,
                recorded, OPEN_END,
            ])  # fmt: skip
            return
        changes = self._changes(event)
        if changes is None:
            return
        state, valid_until, successor = changes
        self.copied.append([record.version, state, valid_until, successor, recorded, OPEN_END,
                            memory_id, OPEN_END])  # fmt: skip
        self.closed.append([recorded, memory_id, OPEN_END, record.version])

    @staticmethod
    def _changes(event: LedgerEvent) -> tuple[str, int | None, str | None] | None:
        """The new state, window end and successor an event gives (None: unchanged), or
        None for an event that does not change a memory's version."""
        if isinstance(event, Superseded):
            return SUPERSEDED, to_micros(event.at), str(event.newer_id)
        if isinstance(event, Archived):
            return ARCHIVED, None, None
        if isinstance(event, Forgotten):
            return FORGOTTEN, None, None
        return None

    def write(self, sql: Sql) -> None:
        if self.opened:
            sql.executemany(OPEN_VERSION, self.opened)
        if self.copied:
            if self.dialect == "sqlite":
                sql.executemany(OPEN_VERSION, self._copies(sql))
            else:
                sql.executemany(COPY_OPEN_VERSION, self.copied)
            sql.executemany(CLOSE_OLDER_VERSION, self.closed)

    def _copies(self, sql: Sql) -> list[list[object]]:
        """The rows ``COPY_OPEN_VERSION`` would insert, built from the open rows read
        first (a memory with no open row gets none, as with the copy)."""
        wanted = {str(copy[6]): copy for copy in self.copied}
        rows: list[list[object]] = []
        for chunk in in_lists(list(wanted)):
            sql.execute(OPEN_ROWS.format(marks(chunk)), [OPEN_END, *chunk])
            for row in sql.fetchall():
                seq, state, valid_until, successor, recorded, until, _, _ = wanted[row[0]]
                rows.append([
                    row[0], seq, row[2], row[3], row[4], row[5], state, row[7],
                    row[8] if valid_until is None else valid_until,
                    row[9] if successor is None else successor, recorded, until,
                ])  # fmt: skip
        return rows
