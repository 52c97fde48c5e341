"""Floors: the very rows erstwhile writes, written raw into its own tables.

A memory is more than one row: the log's row, the memory's key, its rows in the
memories and versions projections (each with its indexes), its two full-text rows
(every memory, and the live ones), the writer's count, the projections' tracked
positions. The floor captures those rows from a ledger that wrote the same batches,
then writes them with the bare driver into a store holding the ledger's own tables and
indexes, each table's rows in the order of its primary key (the order a B-tree and
FTS5 take fastest), one transaction per batch committed as erstwhile commits it, with
no Python between: ``executemany`` on SQLite; ``COPY`` on PostgreSQL, with the GIN
pending lists merged at the end of each batch as erstwhile merges them. Beside erstwhile
it tells how much of a bulk write is erstwhile's own work; beside raw ``executemany`` of
one row per memory, how far the schema alone stands from it.

One piece of work is left out, so the PostgreSQL floor is higher than any program keeping
these tables could reach: the full-text vectors are copied as erstwhile's store holds
them, where erstwhile (as any program would) has the server compute them with
``to_tsvector`` (about 26 to 33 µs a memory on the machines measured).

The writers that put captured rows back raw are in :mod:`benchmarks.floor_writers`.

A rebuild has a floor too: reading the log raw, then writing every row the rebuilt
projections hold into empty tables, in transactions of about as many events as the
build folds in one, committed as the build commits them (not synced one by one).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier

from erstwhile import Ledger


def floor_row(what: str) -> str:
    """The name of a floor's row: its figure against the raw baseline."""
    return f"the rows of {what}, written raw (the floor)"


def against_floor_row(what: str) -> str:
    """The name of erstwhile's row against its floor."""
    return f"{what} against its rows written raw"


LOG_TABLES = ("erstwhile_events", "erstwhile_keys", "erstwhile_idempotency")
"""The tables a rebuild reads or leaves alone: everything else is its projections'."""
FTS5_SHADOWS = ("_data", "_idx", "_docsize", "_content", "_config")
"""The tables FTS5 keeps behind each full-text table: written through the table itself."""


@dataclass(frozen=True)
class TableRows:
    """What one batch did to one table, each list in the order of the table's primary
    key: rows it added, rows it changed in place, and the keys of rows it removed. A
    table without a primary key whose rows changed is ``replaced``: emptied, then given
    all its rows again as added ones."""

    columns: tuple[str, ...]
    key: tuple[int, ...]
    """The primary key, as positions in ``columns`` (empty: the table has none)."""
    added: list[tuple[Any, ...]]
    changed: list[tuple[Any, ...]]
    removed: list[tuple[Any, ...]] = field(default_factory=list)
    replaced: bool = False


Batch = dict[str, TableRows]
"""What one batch wrote, by table."""


def capture(
    ledger: Ledger, snapshot: TableReader, batches: Sequence[list[dict[str, Any]]]
) -> list[Batch]:
    """Run ``remember_many`` for every batch on ``ledger`` (a fresh one) and return what
    each batch wrote, table by table, read through ``snapshot`` before and after it."""
    captured = []
    before = snapshot.rows()
    for batch in batches:
        ledger.remember_many(batch)
        after = snapshot.rows()
        captured.append(difference(snapshot, before, after))
        before = after
    return captured


def difference(
    reader: TableReader,
    before: dict[str, set[tuple[Any, ...]]],
    after: dict[str, set[tuple[Any, ...]]],
) -> Batch:
    """What turns ``before`` into ``after``, table by table: rows added, rows whose
    primary key ``before`` already had, keys ``after`` no longer has."""
    written: Batch = {}
    for table, rows in after.items():
        old = before.get(table, set())
        if rows == old:
            continue
        columns, positions = reader.columns[table], reader.keys[table]
        if not positions:
            if old - rows:
                written[table] = TableRows(columns, (), in_order(rows), [], replaced=True)
            else:
                written[table] = TableRows(columns, (), in_order(rows - old), [])
            continue
        key = reader.key_of(table)
        known, kept = {key(row) for row in old}, {key(row) for row in rows}
        new = rows - old
        written[table] = TableRows(
            columns,
            positions,
            in_order((row for row in new if key(row) not in known), key),
            in_order((row for row in new if key(row) in known), key),
            in_order(known - kept),
        )
    return written


def in_order(rows: Iterable[tuple[Any, ...]], key: Any = None) -> list[tuple[Any, ...]]:
    """The rows sorted by ``key`` (by default the whole row), ``None`` before any value."""
    pick = key or (lambda row: row)
    return sorted(rows, key=lambda row: tuple((v is not None, v) for v in pick(row)))


def split(batch: Batch, parts: int) -> list[Batch]:
    """Cut one batch into ``parts`` batches, each with its share of every table's rows."""
    return [
        {
            table: TableRows(
                written.columns,
                written.key,
                _share(written.added, part, parts),
                _share(written.changed, part, parts),
                _share(written.removed, part, parts),
                written.replaced and part == 0,
            )
            for table, written in batch.items()
        }
        for part in range(parts)
    ]


def _share(rows: list[tuple[Any, ...]], part: int, parts: int) -> list[tuple[Any, ...]]:
    return rows[part * len(rows) // parts : (part + 1) * len(rows) // parts]


def projection_rows(held: dict[str, set[tuple[Any, ...]]], empty: TableReader) -> Batch:
    """A batch that brings the store ``empty`` reads (one a ledger created, without
    events) to the projections' rows ``held``."""
    theirs = {t: rows for t, rows in empty.rows().items() if t not in LOG_TABLES}
    return difference(empty, theirs, held)


class TableReader:
    """Reads every row of every table of one ledger store, as sets of tuples."""

    columns: dict[str, tuple[str, ...]]
    keys: dict[str, tuple[int, ...]]
    """Each table's primary key, as the positions of its columns."""

    def rows(self) -> dict[str, set[tuple[Any, ...]]]:
        raise NotImplementedError

    def key_of(self, table: str) -> Any:
        positions = self.keys[table]
        return lambda row: tuple(row[i] for i in positions) if positions else row

    def close(self) -> None:
        raise NotImplementedError


class SQLiteTables(TableReader):
    """The tables of a SQLite ledger file (full-text tables by rowid and columns; their
    FTS5 shadow tables and SQLite's own left out)."""

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        listed = self.connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        full_text = {name for name, sql in listed if "fts5" in (sql or "").lower()}
        shadows = {f + end for f in full_text for end in FTS5_SHADOWS}
        self.columns, self.keys = {}, {}
        for name, _ in listed:
            if name in shadows:
                continue
            info = self.connection.execute(f"PRAGMA table_info({name})").fetchall()
            columns = tuple(row[1] for row in info)
            if name in full_text:
                self.columns[name], self.keys[name] = ("rowid", *columns), (0,)
                continue
            primary = sorted((row[5], i) for i, row in enumerate(info) if row[5])
            self.columns[name], self.keys[name] = columns, tuple(i for _, i in primary)

    def rows(self) -> dict[str, set[tuple[Any, ...]]]:
        return {
            table: set(self.connection.execute(f"SELECT {', '.join(columns)} FROM {table}"))
            for table, columns in self.columns.items()
        }

    def close(self) -> None:
        self.connection.close()


class PostgresTables(TableReader):
    """The tables of a PostgreSQL ledger schema."""

    def __init__(self, database_url: str, schema: str) -> None:
        self.connection = psycopg.connect(database_url, autocommit=True)
        self.schema = schema
        tables = [
            row[0]
            for row in self.connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                (schema,),
            )
        ]
        self.columns, self.keys = {}, {}
        for table in tables:
            relation = f"{schema}.{table}"
            columns = tuple(
                row[0]
                for row in self.connection.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                    "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (relation,),
                )
            )
            primary = [
                row[0]
                for row in self.connection.execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                    "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                    "WHERE i.indrelid = %s::regclass AND i.indisprimary "
                    "ORDER BY array_position(i.indkey, a.attnum)",
                    (relation,),
                )
            ]
            self.columns[table] = columns
            self.keys[table] = tuple(columns.index(name) for name in primary)

    def rows(self) -> dict[str, set[tuple[Any, ...]]]:
        return {
            table: set(
                self.connection.execute(
                    SQL("SELECT {0} FROM {1}.{2}").format(
                        SQL(", ").join(map(Identifier, columns)),
                        Identifier(self.schema),
                        Identifier(table),
                    )
                )
            )
            for table, columns in self.columns.items()
        }

    def close(self) -> None:
        self.connection.close()


def row_counts(reader: TableReader) -> dict[str, int]:
    """How many rows each table of a store holds."""
    return {table: len(rows) for table, rows in reader.rows().items()}
