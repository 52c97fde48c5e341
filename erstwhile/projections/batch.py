"""Grouping a batch's writes into one ``executemany`` per statement.

A projection folds a batch of events with the same per-event code it would use for one
event, but its writes go through :class:`BufferedSql`: consecutive writes of the same
statement to a table become one ``executemany`` (one call into SQLite, one pipelined
round trip on PostgreSQL) instead of one call per event.

Writes are kept in order per table, and any read flushes the buffer first, so a fold
reads what every earlier event of the batch wrote. Writes to different tables may run in
a different order than they were made: projection tables have no triggers or foreign
keys, so only the order within a table can change a result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from erstwhile.eventstore import Sql
from erstwhile.eventstore.backend import PassingSql

WRITE = re.compile(r"\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)
"""A statement the buffer may defer, and the table it writes."""

Group = tuple[str, list[Sequence[Any]]]


class BufferedSql(PassingSql):
    """:class:`Sql` that defers writes until a read or :meth:`flush`."""

    def __init__(self, sql: Sql) -> None:
        super().__init__(sql)
        self._tables: dict[str, list[Group]] = {}

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        table = self._table(statement)
        if table is None:
            self.flush()
            self._sql.execute(statement, params)
            return
        # The common case, one more row of the statement last written to the table, is
        # spelled out here: a fold makes several of these calls per event.
        groups = self._tables.get(table)
        if groups and groups[-1][0] == statement:
            groups[-1][1].append(params)
        else:
            self._add(table, statement, [params])

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        table = self._table(statement)
        if table is None:
            self.flush()
            self._sql.executemany(statement, rows)
            return
        self._add(table, statement, rows)

    def flush(self) -> None:
        """Run every deferred write, table by table, each table's in the order made."""
        tables, self._tables = self._tables, {}
        for groups in tables.values():
            for statement, rows in groups:
                if len(rows) == 1:
                    self._sql.execute(statement, rows[0])
                else:
                    self._sql.executemany(statement, rows)

    _known: dict[str, str | None] = {}

    def _table(self, statement: str) -> str | None:
        """The table a deferrable write goes to; None for anything else (reads)."""
        try:
            return self._known[statement]
        except KeyError:
            match = WRITE.match(statement)
            table = self._known[statement] = match.group(1).lower() if match else None
            return table

    def _add(self, table: str, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        groups = self._tables.setdefault(table, [])
        if groups and groups[-1][0] == statement:
            groups[-1][1].extend(rows)
        else:
            groups.append((statement, list(rows)))
