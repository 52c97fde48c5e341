"""eventsourcing's PostgreSQL datastore and recorder as the ledger uses them: the
connection a URL names, in the ledger's schema, and the log's table with its columns
and guards.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, cast
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

import psycopg
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from psycopg import Connection, Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from erstwhile.domain.errors import StoreUnavailable, ValidationError
from erstwhile.eventstore.backend import Backend
from erstwhile.eventstore.postgres_statements import PostgresSql
from erstwhile.eventstore.records import EVENT_COLUMNS, RecordedEvent

NO_TRUNCATE = "erstwhile_events_no_truncate"
"""The trigger that refuses TRUNCATE of the log (row triggers do not see one)."""
SCRUB_MODES = ("vacuum", "full")
OURS = ("schema", "scrub")
"""The URL's parameters erstwhile reads itself; the rest are libpq's."""
CONNECT_TIMEOUT_SECONDS = 10
"""How long opening a connection may take before the store is reported unreachable."""
PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A schema name PostgreSQL takes as it is, quoted or not (eventsourcing's recorders
write it unquoted into some statements, where another name would fail or fold case)."""


class LedgerPostgresDatastore(PostgresDatastore):
    """A datastore whose connections resolve unqualified names in the ledger's schema
    and run READ COMMITTED unless told otherwise."""

    def after_connect_func(self) -> Callable[[Connection[Any]], None]:
        setup = super().after_connect_func()
        search_path = SQL("SET search_path TO {0}").format(Identifier(self.schema))

        def after_connect(conn: Connection[DictRow]) -> None:
            setup(conn)
            speak_utf8(conn)
            conn.execute(search_path)
            # Whatever the server's default: writes serialise on a lock, not on
            # serialization failures, and a statement run alone must take its snapshot
            # after locking its tables (see PostgresBackend.one_statement).
            conn.execute("SET default_transaction_isolation TO 'read committed'")

        return after_connect


def speak_utf8(conn: Connection[Any]) -> None:
    """Talk UTF-8 to the server, whatever set another client encoding
    (``PGCLIENTENCODING``; the URL may not name one: :func:`refuse_overridden_parts`)."""
    if conn.info.parameter_status("client_encoding") != "UTF8":
        conn.execute("SET client_encoding TO 'UTF8'")


def refuse_other_encodings(conn: Connection[Any]) -> None:
    """Refuse a database whose text is not UTF-8: a memory may hold any Unicode text,
    which a LATIN1 database cannot store (psycopg failed to encode it, a raw
    ``UnicodeEncodeError``) and a SQL_ASCII one does not check (its text then comes
    back as bytes)."""
    server = conn.info.parameter_status("server_encoding")
    if server != "UTF8":
        raise StoreUnavailable(
            f"the database's encoding is {server}: erstwhile stores any Unicode text and "
            "needs a UTF8 database (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)"
        )


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
    given = [unquote(parts.path), unquote(parts.username or ""), unquote(parts.password or ""),
             parts.hostname or "", *(v for values in query.values() for v in values)]  # fmt: skip
    if any("\x00" in value for value in given):
        # libpq reads its parameters as C strings: one would end at the NUL, and the
        # parameters after it be dropped (the host among them: another server answers).
        raise ValidationError("the PostgreSQL URL holds a NUL character (%00), which no "
                              "connection parameter can hold")  # fmt: skip
    for name in OURS:
        if len(query.get(name, [])) > 1:
            raise ValidationError(f"{name} is given more than once in the PostgreSQL URL")
    schema = query.get("schema", ["public"])[0]
    if not PLAIN_NAME.fullmatch(schema):
        raise ValidationError(
            f"schema {schema!r}: use a plain name (lower-case letters, digits and _, "
            "at most 63, not starting with a digit)"
        )
    if schema == "information_schema" or schema.startswith("pg_"):
        raise ValidationError(f"schema {schema!r} is PostgreSQL's own: name another")
    # Every other parameter must be libpq's (sslmode, sslrootcert, application_name,
    # connect_timeout, ...): it goes to every connection.
    connection = {name: values[-1] for name, values in query.items() if name not in OURS}
    unknown = sorted(set(connection) - libpq_parameters())
    if unknown:
        raise ValidationError(
            f"unknown parameter {unknown[0]!r} in the PostgreSQL URL: use schema, scrub or "
            "one of libpq's connection parameters (sslmode, application_name, ...)"
        )
    refuse_overridden_parts(parts, connection)
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


def refuse_overridden_parts(parts: SplitResult, connection: dict[str, str]) -> None:
    """Refuse a parameter that would override what the URL itself names (libpq lets
    ``?dbname=postgres`` win over the URL's ``/test``, and the ledger would then write
    to another database than the one its URL shows), and a client encoding but UTF-8
    (see :func:`speak_utf8`)."""
    named = {
        "dbname": parts.path.strip("/"),
        "host": parts.hostname,
        "port": parts.port,
        "user": parts.username,
        "password": parts.password,
    }
    for name, given in named.items():
        if name in connection and given:
            raise ValidationError(
                f"the PostgreSQL URL names its {name} twice, in itself and as ?{name}=: "
                "give it once"
            )
    encoding = connection.get("client_encoding", "UTF8").upper().replace("-", "")
    if encoding not in ("UTF8", "UNICODE"):
        raise ValidationError(
            f"client_encoding {connection['client_encoding']!r}: erstwhile speaks UTF-8 to "
            "the server; leave client_encoding out"
        )


def libpq_parameters() -> set[str]:
    """The connection parameters the installed libpq knows."""
    return {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}


def caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``error`` is a ``kind``, or wraps one: eventsourcing's pool turns psycopg's
    errors raised inside ``get_connection()`` into its own, the driver's as the cause."""
    return isinstance(error, kind) or isinstance(error.__cause__, kind)


def first_row(cursor: Cursor[Any]) -> Any:
    """The row of a statement that always returns one."""
    return cast(Any, cursor.fetchone())


def table_exists(connection: Connection[Any], table: str) -> bool:
    """Whether ``table`` exists in the connection's schema."""
    row = connection.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (table,)).fetchone()
    return bool(row and row["found"])
