"""What erstwhile is compared with: the same work done raw, on the same database.

``RawStore`` is a plain table (or full-text table) driven through the bare driver:
``sqlite3`` in WAL mode with ``synchronous=FULL``, or psycopg in autocommit. Each method
does the least a hand-written program would do to answer the same question.
``ReplayBaseline`` is the plain eventsourcing approach: one ``Aggregate`` per subject,
stored by eventsourcing's ``Application`` on the same backend, replayed per question.
"""

from __future__ import annotations

import sqlite3
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import psycopg
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from psycopg.sql import SQL, Identifier

from benchmarks.datasets import VERSIONS, Claim, chunks, claim, round_claims, subject_count
from erstwhile.projections.recall import OPEN_PROPOSALS

OPEN_END = 2**62
"""The stored "until" of a row whose window or recorded interval is still open."""
RECORDED_BASE = datetime(2026, 1, 1, tzinfo=UTC)
SEARCH_LIMIT = 10

RawRow = tuple[str, bytes, int, bytes]
"""A raw log row: memory id, payload, recorded instant (µs), 32-byte hash."""
FactRow = tuple[str, str, str, str, int, int, int, int]
"""subject, attribute, value, content, valid_from, valid_until, recorded_from, recorded_until."""


def micros(instant: datetime) -> int:
    """Return an aware instant as integer microseconds since the epoch."""
    return int(instant.timestamp()) * 1_000_000 + instant.microsecond


def recorded_mark(version: int) -> int:
    """Return the synthetic instant (µs) at which the raw table learnt version ``version``."""
    return micros(RECORDED_BASE + timedelta(days=version))


def raw_row(item: Claim, position: int) -> RawRow:
    """Return a log row carrying ``item`` as JSON with every field an ``Asserted`` event
    stores, so the raw row is about as large as erstwhile's."""
    payload = {
        "originator_id": str(uuid.UUID(int=position)), "originator_version": 1, "kind": "fact",
        **item.arguments(), "valid_until": None, "occurred_at": None, "confidence": 1.0,
        "evidence": [], "extractor_id": None, "extracted_at": None, "metadata": None,
        "supersedes": [], "idempotency_key": None, "observed_position": None,
    }  # fmt: skip
    body = orjson.dumps(payload)
    return (str(uuid.UUID(int=position)), body, position, bytes(32))


def fact_rows(memories: int, seed: int) -> Iterable[FactRow]:
    """Yield the bitemporal rectangles of a data set as a plain table would hold them.

    Version ``k`` is one row valid ``[from_k, open)`` while it was the newest, then one
    row valid ``[from_k, from_k+1)`` from the instant its successor was recorded.
    """
    for index in range(subject_count(memories)):
        for version in range(VERSIONS):
            c = claim(index, version, seed)
            start, learnt = micros(c.valid_from), recorded_mark(version)
            last = version == VERSIONS - 1
            replaced = OPEN_END if last else recorded_mark(version + 1)
            yield (c.subject, c.attribute, c.value, c.content, start, OPEN_END, learnt, replaced)
            if not last:
                end = micros(claim(index, version + 1, seed).valid_from)
                yield (c.subject, c.attribute, c.value, c.content, start, end, replaced, OPEN_END)


def documents(memories: int, seed: int) -> Iterable[str]:
    """Yield the text of every memory of a data set, as erstwhile's search indexes it."""
    for version in range(VERSIONS):
        for c in round_claims(memories, version, seed):
            yield " ".join((c.content, c.subject, c.attribute, c.subject, c.value))


class RawStore(ABC):
    """Plain tables on one backend, written and read through the bare driver."""

    connection: Any
    """The bare driver's connection (sqlite3's or psycopg's), in autocommit."""
    mark: str
    """The driver's parameter placeholder."""
    scrub: tuple[str, ...]
    """The statements that clear erased text from the store's files."""

    @abstractmethod
    def commit_one(self, row: RawRow) -> None:
        """Insert one log row and commit it durably."""

    @abstractmethod
    def commit_many(self, rows: Sequence[RawRow]) -> None:
        """Insert many log rows with ``executemany`` in one transaction."""

    @abstractmethod
    def load_facts(self, rows: Iterable[FactRow]) -> None:
        """Create and fill the indexed plain table of bitemporal rows."""

    @abstractmethod
    def lookup(self, subject: str, attribute: str, valid: int, recorded: int) -> list[Any]:
        """Return the value rows true at ``valid`` as recorded at ``recorded``."""

    @abstractmethod
    def rectangles(self, subject: str, attribute: str) -> list[Any]:
        """Return every row about ``subject`` and ``attribute``, in recorded order."""

    def conflicting_keys(self) -> list[tuple[str, str]]:
        """Return the (subject, attribute) keys of which two rows known now disagree on
        the value over overlapping valid windows."""
        rows = self.connection.execute(CONFLICTING_KEYS.format(OPEN_END)).fetchall()
        return sorted((row[0], row[1]) for row in rows)

    def retire(self, subject: str, attribute: str) -> None:
        """Close the recorded window of the subject's current row, durably: a plain
        table's archive (or soft forget)."""
        statement = RETIRE.format(self.mark, OPEN_END)
        self.connection.execute(statement, (OPEN_END - 1, subject, attribute))

    def revise(self, subject: str, attribute: str, revision: FactRow) -> None:
        """Replace the subject's current row with ``revision`` in one durable
        transaction, as a plain bitemporal table records a new version: the current
        row's valid window, closed where the revision's opens, is kept as a new row
        recorded now, the current row's recorded interval is closed, and the revision's
        row is added."""
        valid_from, recorded = revision[4], revision[6]
        with self.transaction():
            self.connection.execute(REVISE_KEEP.format(self.mark, OPEN_END),
                                    (valid_from, recorded, subject, attribute))  # fmt: skip
            self.connection.execute(RETIRE.format(self.mark, OPEN_END),
                                    (recorded, subject, attribute))  # fmt: skip
            self.connection.execute(f"INSERT INTO raw_facts VALUES ({', '.join([self.mark] * 8)})",
                                    revision)  # fmt: skip

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """One transaction, committed durably at the end (rolled back on an error)."""

    def erase(self, subject: str, attribute: str) -> None:
        """Wipe the text of the subject's current rows, durably, then scrub the files as
        the store allows: a plain table's hard forget."""
        self.erase_many([(subject, attribute)])

    def erase_many(self, keys: Sequence[tuple[str, str]]) -> None:
        """Wipe the text of each subject's current rows, each durably, then scrub the
        files once: a plain table's purge."""
        for subject, attribute in keys:
            self.connection.execute(ERASE.format(self.mark, OPEN_END), (subject, attribute))
        for statement in self.scrub:
            self.connection.execute(statement)

    @abstractmethod
    def load_documents(self, texts: Iterable[str]) -> None:
        """Create and fill the full-text table."""

    @abstractmethod
    def match(self, terms: Sequence[str]) -> list[Any]:
        """Return the best-ranked documents sharing any of ``terms``."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""


LOG_TABLE = (
    "CREATE TABLE raw_log (position INTEGER PRIMARY KEY, memory_id TEXT NOT NULL, "
    "state BLOB NOT NULL, recorded_at BIGINT NOT NULL, hash BLOB NOT NULL)"
)
FACTS_TABLE = (
    "CREATE TABLE raw_facts (subject TEXT, attribute TEXT, value TEXT, content TEXT, "
    "valid_from BIGINT, valid_until BIGINT, recorded_from BIGINT, recorded_until BIGINT)"
)
FACTS_INDEX = "CREATE INDEX raw_facts_key ON raw_facts (subject, attribute, valid_from)"
RECTANGLES = (
    "SELECT value, valid_from, valid_until, recorded_from, recorded_until FROM raw_facts "
    "WHERE subject = {0} AND attribute = {0} ORDER BY recorded_from"
)
CONFLICTING_KEYS = (
    "SELECT DISTINCT a.subject, a.attribute FROM raw_facts a JOIN raw_facts b "
    "ON b.subject = a.subject AND b.attribute = a.attribute AND b.valid_from < a.valid_until "
    "AND a.valid_from < b.valid_until AND b.value <> a.value "
    "WHERE a.recorded_until = {0} AND b.recorded_until = {0}"
)
"""Keys with two rows known now that disagree over a shared valid window (a self-join
through the key index)."""
RETIRE = (
    "UPDATE raw_facts SET recorded_until = {0} WHERE subject = {0} AND attribute = {0} "
    "AND valid_until = {1} AND recorded_until = {1}"
)
"""Close the recorded window of a subject's current row (``{0}``: the driver's
placeholder, ``{1}``: the open end)."""
REVISE_KEEP = (
    "INSERT INTO raw_facts SELECT subject, attribute, value, content, valid_from, {0}, {0}, "
    "{1} FROM raw_facts WHERE subject = {0} AND attribute = {0} AND valid_until = {1} "
    "AND recorded_until = {1}"
)
"""Keep a subject's current row as recorded from now on, its valid window closed where a
revision's opens (``{0}``: the driver's placeholder, ``{1}``: the open end)."""
ERASE = (
    "UPDATE raw_facts SET content = NULL, value = NULL WHERE subject = {0} "
    "AND attribute = {0} AND valid_until = {1}"
)
"""Wipe the text of a subject's current rows (as ``RETIRE``)."""
FACTS_LOOKUP = (
    "SELECT value, content FROM raw_facts WHERE subject = {0} AND attribute = {0} "
    "AND valid_from <= {0} AND valid_until > {0} AND recorded_from <= {0} "
    "AND recorded_until > {0}"
)


class RawSQLite(RawStore):
    """Plain tables in one SQLite file: WAL, ``synchronous=FULL``, ``secure_delete``
    (as the ledger's store), autocommit."""

    mark = "?"
    scrub = ("VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)")  # see SQLiteBackend.scrub

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("PRAGMA secure_delete=ON")
        self.connection.execute(LOG_TABLE)

    def commit_one(self, row: RawRow) -> None:
        self.connection.execute("INSERT INTO raw_log VALUES (NULL, ?, ?, ?, ?)", row)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.connection:
            self.connection.execute("BEGIN")
            yield

    def commit_many(self, rows: Sequence[RawRow]) -> None:
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany("INSERT INTO raw_log VALUES (NULL, ?, ?, ?, ?)", rows)

    def load_facts(self, rows: Iterable[FactRow]) -> None:
        self.connection.execute(FACTS_TABLE)
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany("INSERT INTO raw_facts VALUES (?,?,?,?,?,?,?,?)", rows)
        self.connection.execute(FACTS_INDEX)
        self.connection.execute("ANALYZE")

    def lookup(self, subject: str, attribute: str, valid: int, recorded: int) -> list[Any]:
        statement = FACTS_LOOKUP.format("?")
        params = (subject, attribute, valid, valid, recorded, recorded)
        rows: list[Any] = self.connection.execute(statement, params).fetchall()
        return rows

    def rectangles(self, subject: str, attribute: str) -> list[Any]:
        rows: list[Any] = self.connection.execute(
            RECTANGLES.format("?"), (subject, attribute)
        ).fetchall()
        return rows

    def load_documents(self, texts: Iterable[str]) -> None:
        self.connection.execute(
            "CREATE VIRTUAL TABLE raw_docs USING fts5(body, tokenize = 'porter unicode61')"
        )
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany("INSERT INTO raw_docs (body) VALUES (?)",
                                        ((text,) for text in texts))  # fmt: skip

    def match(self, terms: Sequence[str]) -> list[Any]:
        expression = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        rows: list[Any] = self.connection.execute(
            "SELECT rowid, bm25(raw_docs) AS score FROM raw_docs WHERE raw_docs MATCH ? "
            "ORDER BY score LIMIT ?",
            (expression, SEARCH_LIMIT),
        ).fetchall()
        return rows

    def close(self) -> None:
        self.connection.close()


class RawPostgres(RawStore):
    """Plain tables in one PostgreSQL schema, through a psycopg autocommit connection."""

    mark = "%s"
    scrub = ("VACUUM raw_facts",)

    def __init__(self, url: str, schema: str) -> None:
        self.connection = psycopg.connect(url, autocommit=True)
        self.connection.execute(SQL("CREATE SCHEMA IF NOT EXISTS {0}").format(Identifier(schema)))
        self.connection.execute(SQL("SET search_path TO {0}").format(Identifier(schema)))
        self.connection.execute(
            "CREATE TABLE raw_log (position BIGSERIAL PRIMARY KEY, memory_id TEXT NOT NULL, "
            "state BYTEA NOT NULL, recorded_at BIGINT NOT NULL, hash BYTEA NOT NULL)"
        )

    def commit_one(self, row: RawRow) -> None:
        self.connection.execute(
            "INSERT INTO raw_log (memory_id, state, recorded_at, hash) VALUES (%s, %s, %s, %s)",
            row,
        )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.connection.transaction():
            yield

    def commit_many(self, rows: Sequence[RawRow]) -> None:
        with self.connection.transaction(), self.connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO raw_log (memory_id, state, recorded_at, hash) VALUES (%s, %s, %s, %s)",
                rows,
            )

    def load_facts(self, rows: Iterable[FactRow]) -> None:
        self.connection.execute(FACTS_TABLE)
        with self.connection.cursor() as cursor, cursor.copy(
            "COPY raw_facts FROM STDIN"
        ) as copy:  # fmt: skip
            for row in rows:
                copy.write_row(row)
        self.connection.execute(FACTS_INDEX)
        self.connection.execute("ANALYZE raw_facts")

    def lookup(self, subject: str, attribute: str, valid: int, recorded: int) -> list[Any]:
        statement = FACTS_LOOKUP.format("%s")
        params = (subject, attribute, valid, valid, recorded, recorded)
        rows: list[Any] = self.connection.execute(statement, params).fetchall()
        return rows

    def rectangles(self, subject: str, attribute: str) -> list[Any]:
        rows: list[Any] = self.connection.execute(
            RECTANGLES.format("%s"), (subject, attribute)
        ).fetchall()
        return rows

    def load_documents(self, texts: Iterable[str]) -> None:
        self.connection.execute("CREATE TABLE raw_docs_text (body TEXT)")
        with self.connection.cursor() as cursor, cursor.copy(
            "COPY raw_docs_text FROM STDIN"
        ) as copy:  # fmt: skip
            for text in texts:
                copy.write_row((text,))
        self.connection.execute(
            "CREATE TABLE raw_docs AS SELECT row_number() OVER () AS id, "
            "to_tsvector('english', body) AS body FROM raw_docs_text"
        )
        self.connection.execute("CREATE INDEX raw_docs_body ON raw_docs USING GIN (body)")
        self.connection.execute("ANALYZE raw_docs")

    def match(self, terms: Sequence[str]) -> list[Any]:
        rows: list[Any] = self.connection.execute(
            "SELECT id, ts_rank(body, q) AS score FROM raw_docs, to_tsquery('english', %s) q "
            "WHERE body @@ q ORDER BY score DESC LIMIT %s",
            (" | ".join(terms), SEARCH_LIMIT),
        ).fetchall()
        return rows

    def close(self) -> None:
        self.connection.close()


def read_sqlite_log(path: str, table: str) -> int:
    """Read every row of a SQLite file's ``table`` in position order; return how many."""
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sum(1 for _ in reader.execute(f"SELECT * FROM {table} ORDER BY position"))
    finally:
        reader.close()


def read_postgres_log(url: str, schema: str, table: str) -> int:
    """Read every row of a PostgreSQL ``schema.table`` in position order; return how many."""
    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(SQL("SELECT * FROM {0}.{1} ORDER BY position").format(
            Identifier(schema), Identifier(table)))  # fmt: skip
        return sum(1 for _ in cursor)


class RawEventReader:
    """One memory's rows of a ledger store's events table, read through the table's own
    (memory id, version) index on a connection kept open, as a hand-written audit query
    would; the event type is the last part of each row's topic."""

    def __init__(self, connection: Any, table: str, marker: str, ids_as_text: bool) -> None:
        self.connection = connection
        self.ids_as_text = ids_as_text
        self.statement = (
            f"SELECT topic FROM {table} WHERE originator_id = {marker} ORDER BY originator_version"
        )

    @classmethod
    def sqlite(cls, path: str, table: str) -> RawEventReader:
        return cls(sqlite3.connect(f"file:{path}?mode=ro", uri=True), table, "?", True)

    @classmethod
    def postgres(cls, url: str, schema: str, table: str) -> RawEventReader:
        qualified = SQL("{0}.{1}").format(Identifier(schema), Identifier(table))
        connection = psycopg.connect(url, autocommit=True)
        return cls(connection, qualified.as_string(connection), "%s", False)

    def types(self, memory_id: uuid.UUID) -> list[str]:
        """The types of one memory's events, in log order."""
        key: Any = str(memory_id) if self.ids_as_text else memory_id
        rows = self.connection.execute(self.statement, (key,)).fetchall()
        return [row[0].rsplit(":", 1)[-1].rsplit(".", 1)[-1] for row in rows]

    def close(self) -> None:
        self.connection.close()


class RawLedgerReader:
    """Queries of a ledger store's own projection tables, run through the bare driver on
    a connection kept open: the same rows erstwhile reads, without the ledger."""

    def __init__(self, connection: Any, marker: str) -> None:
        self.connection = connection
        self.marker = marker

    @classmethod
    def sqlite(cls, path: str) -> RawLedgerReader:
        return cls(sqlite3.connect(f"file:{path}?mode=ro", uri=True), "?")

    @classmethod
    def postgres(cls, url: str, schema: str) -> RawLedgerReader:
        connection = psycopg.connect(url, autocommit=True)
        connection.execute(SQL("SET search_path TO {0}").format(Identifier(schema)))
        return cls(connection, "%s")

    def open_proposals(self, namespace: str) -> list[Any]:
        """The open proposals whose memories are both current, oldest first."""
        statement = OPEN_PROPOSALS.replace("?", self.marker)  # the ledger's own query
        return list(self.connection.execute(statement, (namespace,)))

    def knows(self, later: uuid.UUID, earlier: uuid.UUID) -> bool:
        """Whether ``later``'s vector clock dominates ``earlier``'s, read from the
        memories' rows by primary key."""
        clocks = {}
        for memory_id in (later, earlier):
            (text,) = self.connection.execute(
                f"SELECT vector_clock FROM memories WHERE id = {self.marker}", (str(memory_id),)
            ).fetchone()
            clocks[memory_id] = orjson.loads(text)
        newer, older = clocks[later], clocks[earlier]
        return all(newer.get(actor, 0) >= count for actor, count in older.items())

    def close(self) -> None:
        self.connection.close()


class SubjectHistory(Aggregate):
    """The plain eventsourcing model: one aggregate per subject, one event per version."""

    def __init__(
        self, subject: str, attribute: str, value: str, content: str, valid_from: datetime
    ) -> None:
        self.subject = subject
        self.attribute = attribute
        self.versions: list[tuple[datetime, str]] = [(valid_from, value)]

    @staticmethod
    def create_id(subject: str, attribute: str) -> uuid.UUID:
        """Derive the aggregate's id from its subject and attribute, to find it again."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"erstwhile-bench:{subject}:{attribute}")

    @event("Revised")
    def revise(self, value: str, content: str, valid_from: datetime) -> None:
        """Record a new version of the attribute's value."""
        self.versions.append((valid_from, value))

    def value_as_of(self, instant: datetime) -> str | None:
        """Return the value of the latest version opened at or before ``instant``."""
        found = None
        for opened, value in self.versions:
            if opened <= instant:
                found = value
        return found


class ReplayBaseline:
    """eventsourcing's ``Application`` holding one :class:`SubjectHistory` per subject;
    each question replays the subject's events."""

    def __init__(self, env: dict[str, str]) -> None:
        self.app: Application[uuid.UUID] = Application(env=env)
        self.marks: list[datetime] = []

    def load(self, memories: int, seed: int, batch: int) -> None:
        """Store every version of every subject, a round (one version each) at a time,
        noting after each round the instant the store had learnt it."""
        aggregates: dict[str, SubjectHistory] = {}
        for version in range(VERSIONS):
            for part in chunks(list(round_claims(memories, version, seed)), batch):
                changed = [self._revise(aggregates, c) for c in part]
                self.app.save(*changed)
            self.marks.append(datetime.now(UTC))

    @staticmethod
    def _revise(aggregates: dict[str, SubjectHistory], c: Claim) -> SubjectHistory:
        """Create the subject's aggregate with its first version, or revise it."""
        aggregate = aggregates.get(c.subject)
        if aggregate is None:
            aggregate = SubjectHistory(c.subject, c.attribute, c.value, c.content, c.valid_from)
            aggregates[c.subject] = aggregate
        else:
            aggregate.revise(c.value, c.content, c.valid_from)
        return aggregate

    def value_as_of(self, subject: str, attribute: str, instant: datetime) -> str | None:
        """Replay the subject's aggregate and fold its versions up to ``instant``."""
        aggregate_id = SubjectHistory.create_id(subject, attribute)
        history: SubjectHistory = self.app.repository.get(aggregate_id)
        return history.value_as_of(instant)

    def values(self, subject: str, attribute: str) -> list[str]:
        """Replay the subject's aggregate; return every version's value, oldest first."""
        history: SubjectHistory = self.app.repository.get(
            SubjectHistory.create_id(subject, attribute)
        )
        return [value for _, value in history.versions]

    def value_known_at(self, subject: str, attribute: str, known: datetime) -> str | None:
        """Fold only the events recorded at or before ``known``; answer for that instant."""
        aggregate: Any = None
        events: Any = self.app.events.get(SubjectHistory.create_id(subject, attribute))
        for domain_event in events:
            if domain_event.timestamp > known:
                break
            aggregate = domain_event.mutate(aggregate)
        return None if aggregate is None else aggregate.value_as_of(known)

    def close(self) -> None:
        """Release the application's connections."""
        self.app.close()


def sqlite_replay_env(path: str) -> dict[str, str]:
    """Return the environment that stores eventsourcing's application in a SQLite file."""
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": path}


def postgres_replay_env(database: str, schema: str, host: str, port: int, user: str,
                        password: str) -> dict[str, str]:  # fmt: skip
    """Return the environment that stores eventsourcing's application in a PostgreSQL
    schema (which must exist)."""
    return {
        "PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": database,
        "POSTGRES_HOST": host, "POSTGRES_PORT": str(port), "POSTGRES_USER": user,
        "POSTGRES_PASSWORD": password, "POSTGRES_SCHEMA": schema,
    }  # fmt: skip
