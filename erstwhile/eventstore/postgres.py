"""The PostgreSQL backend: eventsourcing's datastore (a psycopg 3 pool) and recorders,
with the ledger's columns.

Appends take ``LOCK TABLE ... IN EXCLUSIVE MODE`` (as eventsourcing's own recorder does)
so commits happen in position order and readers never skip a gap that fills later;
plain reads are not blocked. Projection updates take the same lock, so each applies
events in log order exactly once.
A ``schema`` in the URL (``?schema=name``) keeps a ledger in its own schema.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit
from weakref import WeakKeyDictionary

import psycopg
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresTrackingRecorder,
)
from psycopg import Connection, Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier, Literal
from psycopg_pool import PoolTimeout

from erstwhile.domain.errors import StoreUnavailable, ValidationError
from erstwhile.eventstore.backend import TAGGED, Backend, Sql, driver_errors
from erstwhile.eventstore.json_rows import json_arrays
from erstwhile.eventstore.records import EVENT_COLUMNS, RecordedEvent

NO_TRUNCATE = "erstwhile_events_no_truncate"
"""The trigger that refuses TRUNCATE of the log (row triggers do not see one)."""
SETUP_LOCK_KEY = 0x6572737477686C65  # "erstwhle": serialises table creation
HELD_CONTENT: dict[str, tuple[str, ...]] = {
    "memories": ("content", "value", "entities", "evidence", "metadata"),
    "memory_entities": ("entity",),
    "memory_search": ("body",),
    "memory_search_live": ("body",),
}
"""The projections' tables that hold a memory's content, each with the columns that hold
it: the columns a hard forget wipes (an erased memory keeps its row in ``memories``, its
other columns as they were), or those of the rows it deletes whose other columns hold
ids and positions only."""
SCRUBBED: dict[str, tuple[str, ...]] = {
    **{table + "__shadow": columns for table, columns in HELD_CONTENT.items()},
    **HELD_CONTENT, "erstwhile_keys": ("key_bytes",), "erstwhile_idempotency": (),
}  # fmt: skip
"""The tables that hold a memory's content, key or payload digest, which a hard forget
scrubs, each with the columns whose planner statistics may hold them (none: every
column, for the idempotency claims, whose rows go whole): first the projections'
shadows (the tables a rebuild folds beside them, when one is running or was left
half-done), then the projections' tables, the key ring and the idempotency claims.
Shadows first: a rebuild may swap them in at any moment, and one swapped in after its
shadows were scrubbed is clean, while one swapped in before is scrubbed under the live
name (shadows last, a swap between the two left the erased rows' dead versions in the
new live tables, vacuumed under neither name)."""
STATISTICS_ATTEMPTS = 3
"""How often the scrub vacuums ``pg_statistic`` before giving up: a rebuild's swap,
dropping tables, can deadlock with it (PostgreSQL cancels one of the two)."""
SCRUB_MODES = ("vacuum", "full")
EMPTIED_LOCK_TIMEOUT = Literal("5s")
"""How long the scrub waits for the lock of a table the erase left empty, to drop its
statistics (see :meth:`PostgresBackend._drop_statistics_of_empty`); past it, the scrub
fails and says the files are not scrubbed yet."""
OURS = ("schema", "scrub")
"""The URL's parameters erstwhile reads itself; the rest are libpq's."""
CONNECT_TIMEOUT_SECONDS = 10
"""How long opening a connection may take before the store is reported unreachable."""
PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A schema name PostgreSQL takes as it is, quoted or not (eventsourcing's recorders
write it unquoted into some statements, where another name would fail or fold case)."""
WRITE_LOCK_WAIT = "30s"
"""How long a write waits for the write lock (and the tables it touches)."""
SWAP_LOCK_WAIT = "200ms"
"""How long a rebuild's swap waits for the reads in flight before it tries again later
(all but its last attempt): the longest any read or write waits behind it then."""
BEGIN_READ = ("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",)
OLDER_SNAPSHOTS = (
    "SELECT pid, application_name FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) "
    "AND backend_type <> 'autovacuum worker' "
    "AND xact_start < %s ORDER BY xact_start LIMIT 1"
)
"""Another session of this database whose transaction began before the given instant
and holds a snapshot (``backend_xmin``) or a transaction id (``backend_xid``: a session
idle in a transaction that wrote, between two READ COMMITTED statements, has no
snapshot, yet holds back what VACUUM may remove just the same): what it can see,
VACUUM cannot remove."""
SNAPSHOT_POLL_SECONDS = 0.05


class LedgerPostgresDatastore(PostgresDatastore):
    """A datastore whose connections resolve unqualified names in the ledger's schema
    and run READ COMMITTED unless told otherwise."""

    def after_connect_func(self) -> Callable[[Connection[Any]], None]:
        setup = super().after_connect_func()
        search_path = SQL("SET search_path TO {0}").format(Identifier(self.schema))

        def after_connect(conn: Connection[DictRow]) -> None:
            setup(conn)
            conn.execute(search_path)
            # Whatever the server's default: writes serialise on a lock, not on
            # serialization failures, and a statement run alone must take its snapshot
            # after locking its tables (see PostgresBackend.one_statement).
            conn.execute("SET default_transaction_isolation TO 'read committed'")

        return after_connect


class LedgerPostgresRecorder(PostgresApplicationRecorder):
    """The application recorder with the ledger's columns and an explicit position."""

    def __init__(self, datastore: PostgresDatastore) -> None:
        super().__init__(datastore, events_table_name=Backend.events_table)
        schema, table = Identifier(datastore.schema), Identifier(self.events_table_name)
        self.sql_create_statements = [
            SQL(statement).format(schema=schema, table=table)
            for statement in (
                "CREATE TABLE IF NOT EXISTS {schema}.{table} ("
                "position bigint PRIMARY KEY, "
                "originator_id uuid NOT NULL, "
                "originator_version bigint NOT NULL, "
                "topic text NOT NULL, "
                "schema_version integer NOT NULL, "
                "state bytea NOT NULL, "
                "recorded_at bigint NOT NULL, "
                "actor text NOT NULL, "
                "namespace text NOT NULL, "
                "hash bytea NOT NULL, "
                "UNIQUE (originator_id, originator_version))",
                "CREATE INDEX IF NOT EXISTS erstwhile_events_recorded_at "
                "ON {schema}.{table} (recorded_at)",
                "CREATE INDEX IF NOT EXISTS erstwhile_events_namespace "
                "ON {schema}.{table} (namespace, position)",
                "CREATE TABLE IF NOT EXISTS {schema}.erstwhile_keys (memory_id text PRIMARY KEY, "
                "namespace text NOT NULL, key_bytes bytea NOT NULL, wrapped integer NOT NULL)",
                "CREATE INDEX IF NOT EXISTS erstwhile_keys_wrapped "
                "ON {schema}.erstwhile_keys (memory_id) WHERE wrapped = 1",
                "CREATE TABLE IF NOT EXISTS {schema}.erstwhile_idempotency ("
                "namespace text NOT NULL, idempotency_key text NOT NULL, "
                "fingerprint text NOT NULL, memory_id uuid NOT NULL, "
                "PRIMARY KEY (namespace, idempotency_key))",
                "CREATE OR REPLACE FUNCTION {schema}.erstwhile_refuse_change() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'erstwhile_events is append-only'; END $$",
                "DO $$ BEGIN CREATE TRIGGER erstwhile_events_append_only "
                "BEFORE UPDATE OR DELETE ON {schema}.{table} "
                "FOR EACH ROW EXECUTE FUNCTION {schema}.erstwhile_refuse_change(); "
                "EXCEPTION WHEN duplicate_object THEN NULL; END $$",
                "DO $$ BEGIN CREATE TRIGGER " + NO_TRUNCATE + " "
                "BEFORE TRUNCATE ON {schema}.{table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.erstwhile_refuse_change(); "
                "EXCEPTION WHEN duplicate_object THEN NULL; END $$",
            )
        ]
        self.insert_recorded_statement = (
            SQL(
                "INSERT INTO {schema}.{table} (" + EVENT_COLUMNS + ")"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            )
            .format(schema=schema, table=table)
            .as_string(None)
        )
        """Composed once (psycopg quotes the names without a connection): composing
        it again at every append cost about 6 µs."""
        self.max_notification_id_statement = SQL(
            "SELECT MAX(position) AS max FROM {schema}.{table}"
        ).format(schema=schema, table=table)

    def insert_recorded(self, sql: PostgresSql, events: Sequence[RecordedEvent]) -> None:
        """Insert fully formed events (position, time and hash already assigned)."""
        sql.run_many(self.insert_recorded_statement, [e.as_row(e.memory_id) for e in events])


PLAIN_INSERT = re.compile(
    r"\s*INSERT\s+INTO\s+(\S+)\s*\(([^)]*)\)\s*VALUES\s*\(\s*%s(?:\s*,\s*%s)*\s*\)\s*",
    re.IGNORECASE,
)
"""An INSERT of one row of plain parameters: its table and its columns. One row is held
back to go with others (:meth:`PostgresSql.send_held`), many go as one statement of JSON
rows (:meth:`PostgresSql.run_many`)."""

BLIND_WRITE = re.compile(
    r"\s*(?:WITH\b.*\)\s*)?(?:INSERT|UPDATE|DELETE)\b(?!.*\bRETURNING\b)",
    re.IGNORECASE | re.DOTALL,
)
"""A statement whose result nobody fetches (an INSERT, UPDATE or DELETE without
``RETURNING``, after ``WITH`` queries or not); any other gets a cursor of its own."""

PARSED_ONCE_PARAMS = 50
PARSED_ONCE_CHARACTERS = 4096
"""psycopg parses a query's ``%s`` placeholders once and keeps the result only for a
query of at most 4,096 bytes and 50 parameters; past either, it parses it again at
every execution (a regular expression over the whole text). Writes held back that would
make a larger statement go in more than one (:meth:`PostgresSql.hold`): a remember's
five one-row INSERTs as one statement of 56 parameters cost the client 31% more
instructions than as two statements."""
NOTIFY = "SELECT pg_notify(%s, '')"
"""NOTIFY as a query, for the writes held back to go with
(:meth:`PostgresSql.send_held_and_notify`)."""
HELD_AT_MOST = 8
"""How many writes held back one statement takes (:meth:`PostgresSql.send_held`): a
``remember`` holds five at most in a row; a long run of them, one statement of hundreds
of ``WITH`` queries, would cost more to plan than it saves."""
COLUMN_TYPES = (
    "SELECT attname AS name, format_type(atttypid, NULL) AS type FROM pg_attribute "
    "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
)
"""A table's column types, without their modifiers (a cast to ``varchar(n)`` would cut a
longer value short, where the column itself refuses it)."""
TRACKING_TABLE = "erstwhile_tracking"
ADVANCE_TRACKING = (
    f"INSERT INTO {TRACKING_TABLE} (application_name, notification_id) "
    "SELECT name, %s::bigint FROM unnest(%s::text[]) AS name "
    "ON CONFLICT (application_name) DO UPDATE SET notification_id = "
    f"excluded.notification_id WHERE {TRACKING_TABLE}.notification_id < "
    "excluded.notification_id"
)
"""Move projections (names, an array) to a position: never back."""


class SoloSql:
    """:class:`Sql` over a psycopg cursor outside pipeline mode, for one statement that
    runs alone in its own implicit transaction (see :meth:`PostgresBackend.one_statement`)."""

    def __init__(self, cursor: Cursor[DictRow]) -> None:
        self.raw = cursor

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self.raw.execute(PostgresSql._convert(statement), params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self.raw.executemany(PostgresSql._convert(statement), rows)

    def fetchone(self) -> Any:
        return self.raw.fetchone()

    def fetchall(self) -> list[Any]:
        return self.raw.fetchall()

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Nothing to send ahead: the statement goes when it is executed."""

    def sent_ahead(self, statement: str, params: Sequence[Any] = ()) -> bool:
        return False


class PostgresSql:
    """:class:`Sql` over a psycopg cursor, turning ``?`` placeholders into ``%s``.

    The cursor's connection is in pipeline mode: a statement is sent without waiting for
    the one before, and only a fetch waits (for everything sent so far), so the writes
    between two reads cost no round trip of their own. Every statement but an INSERT,
    UPDATE or DELETE whose result nobody fetches (:data:`BLIND_WRITE`) gets a cursor of
    its own: psycopg hands each result to the cursor that sent the statement, as it
    arrives, so a write's late result would take the place of a read's on a shared one.
    A one-row plain INSERT (and a write that asks for it: :meth:`hold`) is held back to
    go with the next ones (:meth:`send_held`), and many rows of a plain INSERT go as one
    statement taking them all (:meth:`run_many`).
    """

    _statements: dict[str, str] = {}
    _fetched: dict[str, bool] = {}
    _plain: dict[str, tuple[str, str] | None] = {}
    _as_json: WeakKeyDictionary[Connection[Any], dict[str, str]] = WeakKeyDictionary()
    """Per connection (whose schema names the tables), each plain INSERT's statement that
    takes its rows as one JSON array. A statement keeps
    the column types its connection first read: a table replaced by one whose columns
    have other types (a new version's rebuild, run by a newer process) needs the process
    restarted, as its reads do (docs/decisions.md)."""

    def __init__(self, cursor: Cursor[DictRow]) -> None:
        self.raw = cursor
        """The cursor that sends writes (and the statements of the transaction itself)."""
        self.notify = False
        """Set by :meth:`PostgresBackend.notify`: send NOTIFY with the COMMIT."""
        self._pipeline = ExitStack()
        self._read = cursor
        self._early: dict[tuple[str, tuple[Any, ...]], Cursor[DictRow]] = {}
        """Reads sent ahead by :meth:`prefetch`, by statement and parameters."""
        self._held: list[tuple[str, Sequence[Any]]] = []
        """Writes not yet sent (see :meth:`hold`)."""
        self._held_tables: set[str] = set()
        self._held_params = 0
        self._held_characters = 0
        """How large the statement of the writes held is (see :meth:`_fits`)."""

    def reader(self) -> Cursor[DictRow]:
        """A new cursor for a statement whose rows will be fetched."""
        self._read = self.raw.connection.cursor()
        return self._read

    def start_pipeline(self) -> None:
        """Send statements without waiting for each one's result (pipeline mode)."""
        self._pipeline.enter_context(self.raw.connection.pipeline())

    def end_pipeline(self) -> None:
        """Leave pipeline mode: wait for every statement sent (one round trip), raising
        the first error among them."""
        self._pipeline.close()

    @classmethod
    def _convert(cls, statement: str) -> str:
        """The statement with psycopg's placeholders (``%s``) for the ledger's (``?``)."""
        converted = cls._statements.get(statement)
        if converted is None:
            converted = statement.replace("%", "%%").replace("?", "%s")
            cls._statements[statement] = converted
        return converted

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        if self._early and (early := self._take_early(statement, params)) is not None:
            self._read = early
            return
        converted = self._convert(statement)
        if (plain := self._plain_insert(converted)) is not None:
            self.hold(converted, plain[0], params)
            return
        fetched = self._fetched.get(statement)
        if fetched is None:
            fetched = self._fetched[statement] = not BLIND_WRITE.match(statement)
        self.send_held()
        (self.reader() if fetched else self.raw).execute(converted, params)

    def _plain_insert(self, query: str) -> tuple[str, str] | None:
        """The table and columns of a plain INSERT (:data:`PLAIN_INSERT`); None for any
        other statement."""
        if query not in self._plain:
            match = PLAIN_INSERT.fullmatch(query)
            self._plain[query] = (match[1], match[2]) if match else None
        return self._plain[query]

    def hold(self, query: str, table: str, params: Sequence[Any]) -> None:
        """Send a write with the next ones, as one statement (:meth:`send_held`): a
        psycopg query (``%s`` placeholders) that writes ``table`` alone and reads no row
        written before it in this transaction but ``table``'s own, and whose result
        nobody fetches. One-row plain INSERTs are held by :meth:`execute`."""
        if table in self._held_tables or not self._fits(query, params):
            self.send_held()
        self._held.append((query, params))
        self._held_tables.add(table)
        self._held_params += len(params)
        self._held_characters += len(query) + len(" w99 AS (),")  # its WITH wrapping
        if len(self._held) >= HELD_AT_MOST:
            self.send_held()

    def _fits(self, query: str, params: Sequence[Any]) -> bool:
        """Whether the writes held and this one go in a statement psycopg parses once
        (see :data:`PARSED_ONCE_PARAMS`)."""
        return (
            self._held_params + len(params) <= PARSED_ONCE_PARAMS
            and self._held_characters + len(query) <= PARSED_ONCE_CHARACTERS
        )

    def send_held(self) -> None:
        """Send the writes held back since the last statement sent (:meth:`hold`), as
        one statement: the first ones as data-modifying ``WITH`` queries of the last.
        psycopg handles each statement of a pipeline, and its result, on its own, the
        largest share of a ``remember``'s client work; a ``remember`` of a new subject
        without entities sends its event and key as one statement, its write count,
        memory and version as another, its tracking with the NOTIFY as a third (12
        statements instead of 17).

        The writes held read no row written before them but their own table's, so one
        snapshot for them all changes nothing, but PostgreSQL runs a statement's
        ``WITH`` queries after its main one: so a held INSERT into a table already held
        sends the others first, and each table's rows go in the order they were
        written. So does one that would make the statement larger than psycopg parses
        once (:data:`PARSED_ONCE_PARAMS`). Any other statement, a read sent ahead, a
        fetch and the COMMIT send them first; an error in a held row's values (a NUL
        byte, say) is raised by whichever call sends it."""
        if self._held:
            self._send(self._take_held())

    def send_held_and_notify(self, channel: str) -> None:
        """Send the writes held back, and a NOTIFY on ``channel`` (``pg_notify``, the
        statement the writes go with as ``WITH`` queries: a statement fewer for the
        pipeline)."""
        notify = (NOTIFY, (channel,))
        if not self._fits(*notify):
            self.send_held()
        self._send([*self._take_held(), notify])

    def _take_held(self) -> list[tuple[str, Sequence[Any]]]:
        """The writes held, no longer held."""
        held, self._held = self._held, []
        self._held_tables.clear()
        self._held_params = self._held_characters = 0
        return held

    def _send(self, held: list[tuple[str, Sequence[Any]]]) -> None:
        """Send ``held`` as one statement: every one but the last as a ``WITH`` query."""
        if len(held) == 1:
            self.raw.execute(*held[0])
            return
        *first, (last, _) = held
        queries = ", ".join(f"w{n} AS ({query})" for n, (query, _) in enumerate(first))
        self.raw.execute(f"WITH {queries} {last}", [p for _, params in held for p in params])

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Send a read now, on a cursor of its own, and answer the ``execute`` of the
        same statement and parameters with it: reads sent together wait for one round
        trip, not one each. A read already on its way is not sent again."""
        key = (statement, tuple(params))
        if key in self._early:
            return
        self.send_held()
        cursor = self.raw.connection.cursor()
        cursor.execute(self._convert(statement), params)
        self._early[key] = cursor

    def sent_ahead(self, statement: str, params: Sequence[Any] = ()) -> bool:
        try:
            return (statement, tuple(params)) in self._early
        except TypeError:  # unhashable parameters (arrays) are never sent ahead
            return False

    def _take_early(self, statement: str, params: Sequence[Any]) -> Cursor[DictRow] | None:
        try:
            return self._early.pop((statement, tuple(params)), None)
        except TypeError:  # unhashable parameters (arrays) are never sent ahead
            return None

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self.run_many(self._convert(statement), rows)

    def fetchone(self) -> Any:
        self.send_held()  # with the wait the fetch begins anyway
        return self._read.fetchone()

    def fetchall(self) -> list[Any]:
        self.send_held()
        return list(self._read.fetchall())

    def run_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute a psycopg query (``%s`` placeholders) once per row.

        The rows of a plain INSERT (every value a parameter) go as one statement, their
        values one JSON array (:func:`json_arrays`) the server casts to the table's
        column types, sent down the pipeline like any other write: the server inserts
        them while the client goes on folding (only a connection's first such INSERT
        into a table waits, for the column types). A COPY would leave the pipeline, and
        wait for the server, every time; and psycopg formats a COPY's rows (3.8 to 4.6
        µs a row of ``memories``) slower than orjson serializes them (1.5 to 1.8)."""
        if not rows:
            return
        plain = self._plain_insert(query)
        if plain is not None and len(rows) == 1:
            self.hold(query, plain[0], rows[0])
            return
        self.send_held()
        if plain is not None:
            insert = self._as_json_of(query, *plain)
            for array in json_arrays(rows):
                self.raw.execute(insert, (array,))
        elif len(rows) == 1:
            self.raw.execute(query, rows[0])
        else:
            self.raw.executemany(query, rows)

    def _as_json_of(self, text: str, table: str, columns: str) -> str:
        """The statement that inserts a plain INSERT's rows given as one JSON array of
        rows. The column types are read from the catalog once per connection and
        statement."""
        known = self._as_json.setdefault(self.raw.connection, {})
        if text not in known:
            known[text] = self._insert_from_json(table, columns)
        return known[text]

    def _insert_from_json(self, table: str, columns: str) -> str:
        reader = self.raw.connection.cursor()  # not :meth:`reader`: a read may be pending
        reader.execute(COLUMN_TYPES, (table,))
        types = {row["name"]: row["type"] for row in reader.fetchall()}
        names = [name.strip().strip('"') for name in columns.split(",")]
        values = ", ".join(f"(r->>{i})::{types[name]}" for i, name in enumerate(names))
        return (
            f"INSERT INTO {table} ({columns}) SELECT {values} "
            "FROM jsonb_array_elements(%s::jsonb) AS r"
        )


def own(sql: Sql) -> PostgresSql:
    """The :class:`PostgresSql` of a PostgreSQL transaction (what write() and read() yield)."""
    if not isinstance(sql, PostgresSql):
        raise TypeError(f"expected the PostgresSql of a PostgreSQL transaction, got {sql!r}")
    return sql


def scrub_mode(url: str) -> str:
    """How a hard forget scrubs the tables: ``?scrub=vacuum`` (the default) or ``full``."""
    mode = parse_qs(urlsplit(url).query).get("scrub", ["vacuum"])[0]
    if mode not in SCRUB_MODES:
        raise ValidationError(f"scrub {mode!r}: use one of {', '.join(SCRUB_MODES)}")
    return mode


def datastore_from_url(
    url: str, pool_size: int = 2, max_overflow: int = 8
) -> LedgerPostgresDatastore:
    """Return a datastore for ``postgresql://user[:password]@host[:port]/db[?schema=name]``
    (with ``scrub`` and any libpq parameter besides)."""
    try:
        parts = urlsplit(url)
        port = parts.port or 5432
    except ValueError as error:  # a port that is no number or out of range, a bad [host]
        raise ValidationError(f"the PostgreSQL URL is malformed: {error}") from None
    if not parts.path.strip("/"):
        raise StoreUnavailable(f"the PostgreSQL URL {url!r} names no database")
    query = parse_qs(parts.query, keep_blank_values=True)
    for name in OURS:
        if len(query.get(name, [])) > 1:
            raise ValidationError(f"{name} is given more than once in the PostgreSQL URL")
    schema = query.get("schema", ["public"])[0]
    if not PLAIN_NAME.fullmatch(schema):
        raise ValidationError(
            f"schema {schema!r}: use a plain name (lower-case letters, digits and _, "
            "at most 63, not starting with a digit)"
        )
    # Every other parameter must be libpq's (sslmode, sslrootcert, application_name,
    # connect_timeout, ...): it goes to every connection.
    connection = {name: values[-1] for name, values in query.items() if name not in OURS}
    unknown = sorted(set(connection) - libpq_parameters())
    if unknown:
        raise ValidationError(
            f"unknown parameter {unknown[0]!r} in the PostgreSQL URL: use schema, scrub or "
            "one of libpq's connection parameters (sslmode, application_name, ...)"
        )
    datastore = LedgerPostgresDatastore(
        dbname=unquote(parts.path.lstrip("/")),
        host=parts.hostname or "localhost",
        port=port,
        user=unquote(parts.username or "postgres"),
        password=unquote(parts.password or ""),
        pool_size=pool_size,
        max_overflow=max_overflow,
        schema=schema,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        pool_open_timeout=None,
        lock_timeout=30,
    )
    cast(dict[str, Any], datastore.pool.kwargs).update(connection)
    return datastore


def libpq_parameters() -> set[str]:
    """The connection parameters the installed libpq knows."""
    return {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}


class PostgresBackend(Backend):
    """A ledger in a PostgreSQL database (and schema)."""

    dialect = "postgresql"
    tracking_table = TRACKING_TABLE

    def __init__(self, url: str) -> None:
        self.url = url
        self.datastore = datastore_from_url(url)
        self.scrub_mode = scrub_mode(url)
        self._reach()
        self.recorder = LedgerPostgresRecorder(self.datastore)
        self.tracker = PostgresTrackingRecorder(self.datastore, tracking_table_name=TRACKING_TABLE)
        patience = f"SET LOCAL lock_timeout = '{WRITE_LOCK_WAIT}'"
        lock = (
            patience,
            SQL("LOCK TABLE {0}.{1} IN EXCLUSIVE MODE")
            .format(Identifier(self.datastore.schema), Identifier(self.events_table))
            .as_string(None),
        )
        # Each transaction's first statements, composed once (see insert_recorded_statement).
        self._begin_write = ("BEGIN", *lock)
        self._begin_read: tuple[str, ...] = BEGIN_READ
        self._begin_fold = ("BEGIN", "SET LOCAL synchronous_commit = off", *lock)
        self._begin_build = ("BEGIN", "SET LOCAL synchronous_commit = off", patience)

    def _reach(self) -> None:
        """Connect once, directly, and hang up: a server that does not answer, or a role
        or database it does not know, fails here at once with the server's own reason
        (through the pool it took the pool's whole 10 s timeout, then said only that)."""
        pool_arguments = cast(dict[str, Any], self.datastore.pool.kwargs)
        arguments = {k: v for k, v in pool_arguments.items() if k != "row_factory"}
        arguments.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
        psycopg.connect(**arguments).close()

    def create_tables(self) -> None:
        """Create the schema and tables once, even when several processes open at once.

        A session-level advisory lock serialises the setup across processes; once the
        tables exist, opening takes no DDL lock that would stall concurrent writers.
        """
        with self.datastore.get_connection() as guard:
            guard.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK_KEY,))
            try:
                if not self._is_set_up(guard):
                    guard.execute(
                        SQL("CREATE SCHEMA IF NOT EXISTS {0}").format(
                            Identifier(self.datastore.schema)
                        )
                    )
                    self.recorder.create_table()
                    self.tracker.create_table()
            finally:
                guard.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))

    def holds_events(self) -> bool:
        """Whether the schema holds a ledger with at least one event (nothing is created
        to say): not when the schema or the log's table is not there, nor when nothing
        was written to the log."""
        with self.datastore.get_connection() as connection:
            table = f'"{self.datastore.schema}".{self.events_table}'
            if not _exists(connection, table):
                return False
            row = connection.execute(
                SQL("SELECT EXISTS (SELECT 1 FROM {0}.{1}) AS found").format(
                    Identifier(self.datastore.schema), Identifier(self.events_table)
                )
            ).fetchone()
            return bool(row and row["found"])

    def where(self) -> str:
        """The server, database and schema, to name in a message (no password)."""
        info = cast(dict[str, Any], self.datastore.pool.kwargs)
        return (
            f"{info.get('host')}:{info.get('port')}/{info.get('dbname')} "
            f"(schema {self.datastore.schema})"
        )

    def _is_set_up(self, connection: Connection[DictRow]) -> bool:
        """Whether every table, the index of wrapped keys and the log's guards exist (a
        store set up before the TRUNCATE guard, or that index, gets it on its next open)."""
        schema = self.datastore.schema
        tables = ("erstwhile_events", "erstwhile_tracking", "erstwhile_keys",
                  "erstwhile_keys_wrapped")  # fmt: skip
        row = connection.execute(
            "SELECT " + ", ".join(f"to_regclass(%s) AS t{n}" for n in range(len(tables)))
            + ", (SELECT count(*) > 0 FROM pg_trigger WHERE tgname = %s "
            "AND tgrelid = to_regclass(%s)) AS guarded",
            [*(f'"{schema}".{table}' for table in tables), NO_TRUNCATE,
             f'"{schema}".erstwhile_events'],
        ).fetchone()  # fmt: skip
        return row is not None and all(row.values())

    @contextmanager
    def write(self, durable: bool = True, bulk: bool = False) -> Iterator[Sql]:
        with self._transaction(self._begin_write if durable else self._begin_fold) as sql:
            yield sql

    @contextmanager
    def read(self) -> Iterator[Sql]:
        """A REPEATABLE READ, READ ONLY transaction.

        Statements stay prepared on pooled connections (psycopg prepares one after a
        few runs) and, after a few more, PostgreSQL may run it on one generic plan,
        which saves planning a join (0.8 ms for the point query of ``facts``, 0.2 ms
        to run it).
        """
        with self._transaction(self._begin_read) as sql:
            yield sql

    def guard_reads(self, tables: Sequence[str]) -> None:
        """Have every read transaction lock the projections' tables (``ACCESS SHARE``, in
        one statement, in one fixed order) before its first query takes its snapshot.

        A rebuild (of a projection whose schema changed, or not) swaps its tables in by
        dropping the old ones and renaming the new ones over them. Without the lock, a
        read whose snapshot was taken
        before that swap committed (by its first query, of the log's tip say) and which
        reached the table after it read the new table as of that snapshot: without the
        rows the swap's own transaction folded in, so it missed memories it had just
        seen. With it, such a read holds the tables until it ends (the swap waits), or
        waits for the swap to commit before its snapshot is taken. The lock goes out in
        the pipeline with BEGIN: no round trip of its own."""
        names = SQL(", ").join(
            SQL("{0}.{1}").format(Identifier(self.datastore.schema), Identifier(table))
            for table in tables
        )
        guard = SQL("LOCK TABLE {0} IN ACCESS SHARE MODE").format(names).as_string(None)
        self._begin_read = (*BEGIN_READ, guard)
        super().guard_reads(tables)

    @contextmanager
    def one_statement(self) -> Iterator[Sql]:
        """Run :meth:`Backend.read_one`'s statement alone, on a pooled connection (which
        is in autocommit), outside pipeline mode: its own implicit transaction. A read
        transaction's ``BEGIN``, ``LOCK`` and ``COMMIT`` in a pipeline cost more than a
        point query itself (a bare lookup by subject: 284 against 101 µs, 236 against
        64 µs of the client's CPU; at 10k memories, p50 of ``get`` 0.43 to 0.56 ms
        against 0.24 to 0.27, of ``facts`` as of a valid time 0.46 to 0.56 against 0.31
        to 0.40).

        It needs no ``LOCK`` ahead (see :meth:`guard_reads`): under READ COMMITTED, which
        every connection sets as its default, PostgreSQL takes the statement's snapshot after
        it has locked its tables, so a swap that committed while it waited for one is
        seen whole; and a statement that names them in the swap's order cannot deadlock
        with it (:func:`~erstwhile.eventstore.backend.lock_order_kept`)."""
        with self.datastore.get_connection() as connection:
            try:
                yield SoloSql(connection.cursor())
            except BaseException as error:
                if connection.broken:
                    self._drop_lost_connections()
                elif isinstance(error, psycopg.Error):  # not a refusal of what was read
                    self._forget_prepared(connection)
                raise

    @staticmethod
    def _forget_prepared(connection: Connection[Any]) -> None:
        """After a statement failed outside a transaction, drop the connection's prepared
        statements, as a read transaction's ROLLBACK drops them: one prepared against a
        table a swap replaced with other column types ("cached plan must not change
        result type") then fails once per connection, not at every read that connection
        serves. psycopg forgets its own when it sees the ``DEALLOCATE ALL`` go through
        its cache of statements (so not with ``prepare=False``, which would leave it
        naming statements the server no longer has)."""
        with suppress(psycopg.Error):
            connection.execute("DEALLOCATE ALL")

    def build_index(self, statement: str) -> None:
        """See :meth:`Backend.build_index`; without the write lock, since no write
        touches a build's tables but a hard forget: its wipe of them waits for the index
        being built (holding the write lock, so the writes behind it wait too), and its
        scrub for the indexes built meanwhile (see docs/forgetting.md)."""
        with self._transaction(self._begin_build) as sql:
            sql.execute(statement)

    def analyze_build(self, tables: Sequence[str]) -> None:
        """ANALYZE these tables, those that exist: a build's before they are swapped in
        (their statistics go with them, so no query is planned on a swapped-in table
        without any), or the live ones (see :meth:`analyze`)."""
        with self.datastore.get_connection() as connection:
            for table in tables:
                if _exists(connection, table):
                    connection.execute(SQL("ANALYZE {0}").format(Identifier(table)))

    def lock_for_replace(self, sql: Sql, tables: Sequence[str], patient: bool = True) -> None:
        """Lock every table about to be replaced in one statement, in the order reads lock
        them (see :meth:`guard_reads`): a read holding some of them and waiting for the
        others could otherwise wait for the swap while the swap waited for it.

        The swap waits for the reads in flight to end, and every read begun meanwhile
        waits behind it (and every write, for the swap holds the write lock): one long
        read (a ``conflicts()`` of a large namespace, seconds) would hold them all up.
        So unless ``patient`` the wait is cut at :data:`SWAP_LOCK_WAIT` (the swap fails,
        and the rebuild tries again a little later); its last attempt waits."""
        present = self.existing_tables(sql, list(tables))  # a new version may add one
        tables = [table for table in tables if table in present]
        if not tables:
            return
        if not patient:
            sql.execute(f"SET LOCAL lock_timeout = '{SWAP_LOCK_WAIT}'")
        sql.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")
        if not patient:
            sql.execute(f"SET LOCAL lock_timeout = '{WRITE_LOCK_WAIT}'")

    @contextmanager
    def _transaction(self, begin: Sequence[str]) -> Iterator[PostgresSql]:
        """Run a transaction on a pooled connection in pipeline mode: ``begin`` goes out
        with the body's first statements, and the COMMIT (with the NOTIFY, if the body
        appended) with its last writes, so a transaction costs a round trip per read
        plus one; ROLLBACK if anything raises.

        Reads end with COMMIT too: their transactions are READ ONLY, so it writes nothing
        and costs no flush, and psycopg keeps the connection's prepared statements (it
        drops them all on every ROLLBACK, which re-plans each statement of the next
        transaction and never lets one reach its prepare threshold).
        """
        with self.datastore.get_connection() as connection:
            sql = PostgresSql(connection.cursor())
            try:
                sql.start_pipeline()
                for statement in begin:
                    sql.raw.execute(statement, prepare=False)
                yield sql
                if sql.notify:
                    sql.send_held_and_notify(self.recorder.channel_name)
                else:
                    sql.send_held()
                sql.raw.execute("COMMIT", prepare=False)
                sql.end_pipeline()
            except BaseException:
                with suppress(psycopg.Error):
                    sql.end_pipeline()
                with suppress(psycopg.Error):
                    connection.rollback()
                if connection.broken:
                    self._drop_lost_connections()
                raise

    def _drop_lost_connections(self) -> None:
        """After a connection was found lost (the server restarted, or ended the
        session), check the pool's idle ones at once: a server that ended one has
        usually ended them all, and each would otherwise fail the next call that takes
        it, one call after another. (Checking every connection as it is taken would
        cost each call a round trip.)"""
        with suppress(psycopg.Error, PoolTimeout):
            self.datastore.pool.check()

    def scrub(self) -> None:
        """VACUUM and ANALYZE the tables a hard forget touched: the vacuum reclaims the
        dead row versions that held the erased content (and the destroyed key), the
        analyze replaces the planner's statistics, whose samples of column values
        (``pg_stats``) held them too: those of the columns that held them
        (:data:`SCRUBBED`; analyzing every column of ``memories`` took three times as
        long, 213 against 64 ms at 50k memories). With ``?scrub=full`` in the URL the
        vacuum is ``FULL``: the tables are rewritten, so no freed page keeps the bytes
        either (an exclusive lock on each table meanwhile; see docs/forgetting.md)."""
        options = "FULL, ANALYZE" if self.scrub_mode == "full" else "ANALYZE"
        self._wait_for_older_snapshots()
        for table, columns in SCRUBBED.items():
            self.vacuum(table, options, columns)
            self._drop_statistics_of_empty(table, columns)
        self._scrub_statistics()

    def _drop_statistics_of_empty(self, table: str, columns: Sequence[str]) -> None:
        """Drop the planner's statistics of ``columns`` (every column, when none are
        named) of a table the hard forget left empty: ANALYZE finds no row to sample in
        it, and then leaves the statistics it took before as they were, samples of the
        erased rows included (a store's only memory naming entities, hard-forgotten,
        left its entities in ``pg_stats``). PostgreSQL drops a column's statistics when
        its type is set, here to the type it has (an empty table is not rewritten).

        Only a table with statistics and no row is locked (exclusively, waiting at most
        :data:`EMPTIED_LOCK_TIMEOUT` for it), and found empty again under the lock. A
        table dropped meanwhile (a rebuild's shadow, swapped in) needs nothing. Setting
        a column's type takes ownership: a role that does not own the table leaves the
        statistics to its owner, as it leaves ``pg_statistic`` (see
        :meth:`_scrub_statistics`), and says so with ``?scrub=full``."""
        name = SQL("{0}.{1}").format(Identifier(self.datastore.schema), Identifier(table))
        empty = SQL("SELECT NOT EXISTS (SELECT 1 FROM {0}) AS empty").format(name)
        try:
            with self.datastore.get_connection() as connection:
                sampled = connection.execute(
                    "SELECT s.attname AS name, format_type(a.atttypid, a.atttypmod) AS type "
                    "FROM pg_stats s JOIN pg_attribute a ON a.attrelid = to_regclass(%s) "
                    "AND a.attname = s.attname WHERE s.schemaname = %s AND s.tablename = %s "
                    "AND (cardinality(%s::text[]) = 0 OR s.attname = ANY(%s::text[]))",
                    (table, self.datastore.schema, table, list(columns), list(columns)),
                ).fetchall()
                if not sampled or not _first(connection.execute(empty))["empty"]:
                    return
                changes = SQL(", ").join(
                    SQL("ALTER COLUMN {0} TYPE {1}").format(
                        Identifier(row["name"]), SQL(row["type"])
                    )
                    for row in sampled
                )
                with connection.transaction():
                    connection.execute(
                        SQL("SET LOCAL lock_timeout = {0}").format(EMPTIED_LOCK_TIMEOUT)
                    )
                    connection.execute(SQL("LOCK TABLE {0} IN ACCESS EXCLUSIVE MODE").format(name))
                    if _first(connection.execute(empty))["empty"]:
                        connection.execute(SQL("ALTER TABLE {0} {1}").format(name, changes))
        except driver_errors() as error:
            if _caused_by(error, psycopg.errors.InsufficientPrivilege):
                if self.scrub_mode == "full":
                    raise StoreUnavailable(
                        f"the erase committed, but the planner's statistics of {table}, "
                        "which the erase left empty, could not be dropped (the table's owner "
                        "may): they may still hold the erased content"
                    ) from None
                return
            with self.datastore.get_connection() as connection:
                if not _exists(connection, table):  # dropped meanwhile: a rebuild's shadow
                    return
            raise

    def _scrub_statistics(self) -> None:
        """Vacuum the catalog of planner statistics after the tables' ANALYZE: every
        ANALYZE replaces a table's rows of ``pg_statistic``, whose old versions stay in
        its file as dead rows, with the sampled values of their day: the content of
        memories erased since, and their keys. With ``?scrub=full`` it is rewritten
        (``VACUUM FULL``, an exclusive lock on the catalog for a few milliseconds).
        PostgreSQL lets only a superuser or the database's owner vacuum it, and skips it
        for anyone else with a warning: with ``scrub=full`` that is ``StoreUnavailable``
        (the erase itself committed), since the promise of no bytes left is not kept."""
        full = self.scrub_mode == "full"
        warnings: list[str] = []

        def heard(notice: psycopg.errors.Diagnostic) -> None:
            if notice.severity_nonlocalized == "WARNING":
                warnings.append(notice.message_primary or "")

        for attempt in range(STATISTICS_ATTEMPTS):
            try:
                with self.datastore.get_connection() as connection:
                    connection.add_notice_handler(heard)
                    try:
                        connection.execute(
                            "VACUUM (FULL) pg_catalog.pg_statistic" if full
                            else "VACUUM pg_catalog.pg_statistic"
                        )  # fmt: skip
                    finally:
                        connection.remove_notice_handler(heard)
                break
            except driver_errors() as error:
                if not _caused_by(error, psycopg.errors.DeadlockDetected):
                    raise
                if attempt == STATISTICS_ATTEMPTS - 1:
                    raise
                time.sleep(0.1 * (attempt + 1))
        if full and warnings:
            raise StoreUnavailable(
                "the erase committed, but the planner's statistics could not be rewritten "
                f"({warnings[0]}): their old rows may still hold the erased content; run "
                "VACUUM FULL pg_catalog.pg_statistic as the database's owner"
            )

    def _wait_for_older_snapshots(self) -> None:
        """Wait until no other session of this database holds a snapshot taken before
        now (the erase has committed): a row deleted after a snapshot was taken stays
        visible to it, so VACUUM keeps it, and VACUUM FULL copies it into the rewritten
        table, key bytes and content alike. Polls :data:`OLDER_SNAPSHOTS` for at most
        :attr:`scrub_wait_seconds`, then raises ``StoreUnavailable``."""
        deadline = time.monotonic() + self.scrub_wait_seconds
        with self.datastore.get_connection() as connection:
            clock = connection.execute("SELECT clock_timestamp() AS now").fetchone()
            since = cast(dict[str, Any], clock)["now"]
            while True:
                holder = connection.execute(OLDER_SNAPSHOTS, (since,)).fetchone()
                if holder is None:
                    return
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"session {holder['pid']} ({holder['application_name'] or 'no name'})"
                        f" kept a transaction open from before the erase for "
                        f"{self.scrub_wait_seconds:g} s, and the erased rows stay in the "
                        "tables' files while it can see them"
                    )
                time.sleep(SNAPSHOT_POLL_SECONDS)

    def insert_events(self, sql: Sql, events: Sequence[RecordedEvent]) -> None:
        self.recorder.insert_recorded(own(sql), events)

    @contextmanager
    def listener(self, stop: threading.Event) -> Iterator[Callable[[float], None]]:
        """LISTEN on the log's channel; ``wait`` returns at the first NOTIFY, or when
        ``stop`` is set (checked every quarter second)."""
        with self.datastore.get_connection() as connection:
            connection.execute(SQL("LISTEN {0}").format(Identifier(self.recorder.channel_name)))

            def wait(seconds: float) -> None:
                deadline = time.monotonic() + seconds
                while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
                    for _ in connection.notifies(timeout=min(left, 0.25), stop_after=1):
                        return

            try:
                yield wait
            finally:
                connection.execute("UNLISTEN *")

    def clock_micros(self, sql: Sql) -> int:
        """The server's clock, shared by every client whatever their own clocks say."""
        sql.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now")
        return int(sql.fetchone()["now"])

    def existing_tables(self, sql: Sql, names: Sequence[str]) -> set[str]:
        if not names:
            return set()
        sql.execute(
            "SELECT table_name AS name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = ANY(?)",
            (list(names),),
        )
        return {row["name"] for row in sql.fetchall()}

    def indexes(self, sql: Sql) -> list[tuple[str, str]]:
        sql.execute(
            "SELECT indexname AS name, tablename AS tbl FROM pg_indexes "
            "WHERE schemaname = current_schema()"
        )
        return [(row["name"], row["tbl"]) for row in sql.fetchall()]

    def replace_table(self, sql: Sql, live: str, shadow: str) -> None:
        """Drop ``live`` and rename ``shadow`` over it, its indexes back to their own
        names. The swap has locked the tables against readers first (see
        :meth:`lock_for_replace`): a read begun before keeps the old tables until it
        ends, one begun after waits for the commit, then reads the new tables (see
        :meth:`guard_reads`). Until 2026-12-02 a rebuild of the same schema copied the
        rows over instead, holding off writers for seconds (7.8 s at 100,000 memories).
        A statement another process prepared against the
        old table is planned again on the new one; it keeps its result type because
        statements name their columns (``m.*`` would take in a column the new table
        added, and PostgreSQL refuses that: "cached plan must not change result type")."""
        sql.execute(f"DROP TABLE IF EXISTS {live}")
        sql.execute(f"ALTER TABLE {shadow} RENAME TO {live}")
        for index, table in self.indexes(sql):
            tagged = TAGGED.fullmatch(index)
            if table != live:
                continue
            if tagged is not None:
                sql.execute(f"ALTER INDEX {index} RENAME TO {tagged.group(1)}")
            elif index == f"{shadow}_pkey":  # renaming the index renames its constraint
                sql.execute(f"ALTER INDEX {index} RENAME TO {live}_pkey")

    def analyze(self) -> None:
        """ANALYZE the projections' tables; the live search table, which loses most rows
        it ever held, is vacuumed too."""
        tables = (
            "memories", "memory_entities", "memory_versions", "memory_search",
            "memory_search_live", "proposals",
        )  # fmt: skip
        self.analyze_build(tables)
        self.vacuum("memory_search_live")

    def vacuum(self, table: str, options: str = "", columns: Sequence[str] = ()) -> int:
        """See :meth:`Backend.vacuum`; ``options`` go between VACUUM's parentheses
        (``ANALYZE``, ``FULL, ANALYZE``); with ``ANALYZE``, ``columns`` names the columns
        whose statistics are replaced (all, when none are named)."""
        statement = SQL("VACUUM ({0}) {1}.{2}{3}" if options else "VACUUM {1}.{2}{3}")
        named = (
            SQL(" ({0})").format(SQL(", ").join(map(Identifier, columns))) if columns else SQL("")
        )
        try:
            with self.datastore.get_connection() as connection:
                if not _exists(connection, table):
                    return 0
                connection.execute(
                    statement.format(
                        SQL(options), Identifier(self.datastore.schema), Identifier(table), named
                    )
                )
                row = connection.execute(
                    "SELECT greatest(reltuples, 0)::bigint AS size FROM pg_class "
                    "WHERE oid = to_regclass(%s)",
                    (table,),
                ).fetchone()
        except driver_errors():
            with self.datastore.get_connection() as connection:
                if not _exists(connection, table):  # dropped meanwhile: a rebuild's shadow
                    return 0
            raise
        return int(row["size"]) if row else 0

    def notify(self, sql: Sql) -> None:
        """NOTIFY the log's channel; sent with the COMMIT (it is delivered then anyway)."""
        own(sql).notify = True

    def insert_tracking(self, sql: Sql, name: str, position: int) -> None:
        # The rows held so far go first (a wrapper's go at the COMMIT: no other table's
        # rows depend on the order against the tracking row).
        if isinstance(sql, PostgresSql):
            sql.send_held()
        self.tracker._insert_tracking(sql.raw, self.tracking(name, position))

    def advance_tracking(self, sql: Sql, names: Sequence[str], position: int) -> None:
        """One statement over an array of names, held back to go with the writes after
        it (:meth:`PostgresSql.hold`): it reads the tracking table alone. (psycopg's
        ``executemany`` would enter pipeline mode and sync it, which costs more here
        than the round trips it saves.)"""
        own(sql).hold(ADVANCE_TRACKING, TRACKING_TABLE, (position, list(dict.fromkeys(names))))

    def tracked_position(self, sql: Sql, name: str) -> int:
        return self.tracked_positions(sql, [name])[name]

    def reset_tracking(self, sql: Sql, name: str) -> None:
        sql.execute("DELETE FROM erstwhile_tracking WHERE application_name = ?", (name,))

    def close(self) -> None:
        self.datastore.close()


def _caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``error`` is a ``kind``, or wraps one: eventsourcing's pool turns psycopg's
    errors raised inside ``get_connection()`` into its own, the driver's as the cause."""
    return isinstance(error, kind) or isinstance(error.__cause__, kind)


def _first(cursor: Cursor[Any]) -> Any:
    """The row of a statement that always returns one."""
    return cast(Any, cursor.fetchone())


def _exists(connection: Connection[Any], table: str) -> bool:
    """Whether ``table`` exists in the connection's schema."""
    row = connection.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (table,)).fetchone()
    return bool(row and row["found"])
