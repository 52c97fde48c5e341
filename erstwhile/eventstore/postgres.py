"""The PostgreSQL backend: eventsourcing's datastore (a psycopg 3 pool) and recorders,
with the ledger's columns (:mod:`~erstwhile.eventstore.postgres_store`); transactions
whose statements go down psycopg's pipeline
(:mod:`~erstwhile.eventstore.postgres_statements`); and the hard forget's scrub
(:mod:`~erstwhile.eventstore.postgres_scrub`).

Appends take ``LOCK TABLE ... IN EXCLUSIVE MODE`` (as eventsourcing's own recorder does)
so commits happen in position order and readers never skip a gap that fills later;
plain reads are not blocked. Projection updates take the same lock, so each applies
events in log order exactly once.
A ``schema`` in the URL (``?schema=name``) keeps a ledger in its own schema.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, cast

import psycopg
from eventsourcing.postgres import PostgresTrackingRecorder
from psycopg import Connection
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier
from psycopg_pool import PoolTimeout

from erstwhile.eventstore.backend import TAGGED, Backend, Sql
from erstwhile.eventstore.postgres_scrub import PostgresScrub
from erstwhile.eventstore.postgres_statements import PostgresSql, SoloSql, own
from erstwhile.eventstore.postgres_store import (
    CONNECT_TIMEOUT_SECONDS,
    NO_TRUNCATE,
    LedgerPostgresRecorder,
    datastore_from_url,
    refuse_other_encodings,
    scrub_mode,
    table_exists,
)
from erstwhile.eventstore.records import RecordedEvent

SETUP_LOCK_KEY = 0x6572737477686C65  # "erstwhle": serialises table creation
WRITE_LOCK_WAIT = "30s"
"""How long a write waits for the write lock (and the tables it touches)."""
SWAP_LOCK_WAIT = "200ms"
"""How long a rebuild's swap waits for the reads in flight before it tries again later
(all but its last attempt): the longest any read or write waits behind it then."""
BEGIN_READ = ("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",)
TRACKING_TABLE = "erstwhile_tracking"
ADVANCE_TRACKING = (
    f"INSERT INTO {TRACKING_TABLE} (application_name, notification_id) "
    "SELECT name, %s::bigint FROM unnest(%s::text[]) AS name "
    "ON CONFLICT (application_name) DO UPDATE SET notification_id = "
    f"excluded.notification_id WHERE {TRACKING_TABLE}.notification_id < "
    "excluded.notification_id"
)
"""Move projections (names, an array) to a position: never back."""


class PostgresBackend(PostgresScrub, Backend):
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
        (through the pool it took the pool's whole 10 s timeout, then said only that),
        and so does a database that does not store UTF-8, before anything is created."""
        pool_arguments = cast(dict[str, Any], self.datastore.pool.kwargs)
        arguments = {k: v for k, v in pool_arguments.items() if k != "row_factory"}
        arguments.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
        with psycopg.connect(**arguments) as connection:
            refuse_other_encodings(connection)

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
            if not table_exists(connection, table):
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
                if table_exists(connection, table):
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

    def names_in_store(self, sql: Sql) -> set[str]:
        sql.execute(
            "SELECT c.relname AS name FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ?",
            (self.datastore.schema,),
        )
        return {row["name"] for row in sql.fetchall()}

    def column_names(self, sql: Sql, table: str) -> set[str]:
        # The catalog, not information_schema, which lists only the columns this role
        # may use: a role without rights on the log would be told it is no log.
        sql.execute(
            "SELECT a.attname AS name FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped",
            (self.datastore.schema, table),
        )
        return {row["name"] for row in sql.fetchall()}

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
