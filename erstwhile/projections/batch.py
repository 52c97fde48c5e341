"""Grouping a batch's writes into one ``executemany`` per statement.

A projection folds a batch of events with the same per-event code it would use for one
event, but its writes go through :class:`BufferedSql`: consecutive writes of the same
statement become one ``executemany`` (one call into SQLite, one pipelined round trip on
PostgreSQL) instead of one call per event. Order is kept exactly, and any read flushes
the buffer first, so a fold reads what every earlier event of the batch wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from erstwhile.eventstore import Sql

READS = ("SELECT", "WITH")


class BufferedSql:
    """:class:`Sql` that defers writes until a read or :meth:`flush`."""

    def __init__(self, sql: Sql) -> None:
        self.raw = sql.raw
        self._sql = sql
        self._groups: list[tuple[str, list[Sequence[Any]]]] = []

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        if statement.lstrip()[:6].upper().startswith(READS):
            self.flush()
            self._sql.execute(statement, params)
            return
        self._add(statement, [params])

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self._add(statement, rows)

    def fetchone(self) -> Any:
        return self._sql.fetchone()

    def fetchall(self) -> list[Any]:
        return self._sql.fetchall()

    def flush(self) -> None:
        """Run every deferred write, in the order it was made."""
        groups, self._groups = self._groups, []
        for statement, rows in groups:
            if len(rows) == 1:
                self._sql.execute(statement, rows[0])
            else:
                self._sql.executemany(statement, rows)

    def _add(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if self._groups and self._groups[-1][0] == statement:
            self._groups[-1][1].extend(rows)
        else:
            self._groups.append((statement, list(rows)))
