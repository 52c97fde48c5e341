"""The hard forget's scrub on PostgreSQL: VACUUM (and ANALYZE) of the tables that held
the erased content, once no older snapshot can see it, and the planner's statistics
that sampled it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

import psycopg
from psycopg.sql import SQL, Identifier, Literal

from erstwhile.domain.errors import StoreUnavailable
from erstwhile.eventstore.backend import driver_errors
from erstwhile.eventstore.postgres_store import (
    LedgerPostgresDatastore,
    caused_by,
    first_row,
    table_exists,
)

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

KEEP_EMPTY_PAGES = "TRUNCATE false"
"""VACUUM's option that leaves the empty pages at a table's end in its file rather than
cut them off. Cutting them takes the table's exclusive lock, which VACUUM tries for up
to 5 s while any other session holds or awaits a lock on the table: two hard forgets at
once (the second's VACUUM queued behind the first's) each took 10 to 20 s, and a
reader in a long transaction held a forget as long. A plain VACUUM leaves the erased
bytes in the freed space until it is reused anyway (docs/forgetting.md); ``FULL``
rewrites the table and cuts nothing."""

EMPTIED_LOCK_TIMEOUT = Literal("5s")
"""How long the scrub waits for the lock of a table the erase left empty, to drop its
statistics (see :meth:`PostgresScrub._drop_statistics_of_empty`); past it, the scrub
fails and says the files are not scrubbed yet."""

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


class PostgresScrub:
    """The scrub of a hard forget, for :class:`~erstwhile.eventstore.postgres.PostgresBackend`
    (a mixin: it reads the backend's datastore, scrub mode and patience)."""

    datastore: LedgerPostgresDatastore
    scrub_mode: str
    scrub_wait_seconds: float

    def scrub(self) -> None:
        """VACUUM and ANALYZE the tables a hard forget touched: the vacuum reclaims the
        dead row versions that held the erased content (and the destroyed key), the
        analyze replaces the planner's statistics, whose samples of column values
        (``pg_stats``) held them too: those of the columns that held them
        (:data:`SCRUBBED`; analyzing every column of ``memories`` took three times as
        long, 213 against 64 ms at 50k memories). With ``?scrub=full`` in the URL the
        vacuum is ``FULL``: the tables are rewritten, so no freed page keeps the bytes
        either (an exclusive lock on each table meanwhile; see docs/forgetting.md)."""
        options = "FULL, ANALYZE" if self.scrub_mode == "full" else f"ANALYZE, {KEEP_EMPTY_PAGES}"
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
                if not sampled or not first_row(connection.execute(empty))["empty"]:
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
                    if first_row(connection.execute(empty))["empty"]:
                        connection.execute(SQL("ALTER TABLE {0} {1}").format(name, changes))
        except driver_errors() as error:
            if caused_by(error, psycopg.errors.InsufficientPrivilege):
                if self.scrub_mode == "full":
                    raise StoreUnavailable(
                        f"the erase committed, but the planner's statistics of {table}, "
                        "which the erase left empty, could not be dropped (the table's owner "
                        "may): they may still hold the erased content"
                    ) from None
                return
            with self.datastore.get_connection() as connection:
                if not table_exists(connection, table):  # dropped meanwhile: a rebuild's shadow
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
                            else f"VACUUM ({KEEP_EMPTY_PAGES}) pg_catalog.pg_statistic"
                        )  # fmt: skip
                    finally:
                        connection.remove_notice_handler(heard)
                break
            except driver_errors() as error:
                if not caused_by(error, psycopg.errors.DeadlockDetected):
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

    def vacuum(
        self, table: str, options: str = KEEP_EMPTY_PAGES, columns: Sequence[str] = ()
    ) -> int:
        """See :meth:`Backend.vacuum`; ``options`` go between VACUUM's parentheses
        (``ANALYZE``, ``FULL, ANALYZE``; by default the empty pages at the end are kept:
        :data:`KEEP_EMPTY_PAGES`); with ``ANALYZE``, ``columns`` names the columns whose
        statistics are replaced (all, when none are named)."""
        statement = SQL("VACUUM ({0}) {1}.{2}{3}" if options else "VACUUM {1}.{2}{3}")
        named = (
            SQL(" ({0})").format(SQL(", ").join(map(Identifier, columns))) if columns else SQL("")
        )
        try:
            with self.datastore.get_connection() as connection:
                if not table_exists(connection, table):
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
                if not table_exists(connection, table):  # dropped meanwhile: a rebuild's shadow
                    return 0
            raise
        return int(row["size"]) if row else 0
