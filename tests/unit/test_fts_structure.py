"""The compaction of an FTS5 index's structure record after an optimize (SQLite), under
the names a rebuild's build gives the indexes."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from erstwhile.eventstore.sqlite import SQLiteSql
from erstwhile.projections import search
from erstwhile.projections.shadow import SUFFIX, Shadow


def structure_size(raw: sqlite3.Connection, table: str) -> int:
    row = raw.execute(f"SELECT length(block) FROM {table}_data WHERE id = {search.STRUCTURE_ROW}")
    return int(row.fetchone()[0])


def grown_index(raw: sqlite3.Connection, table: str, cycles: int) -> None:
    """An FTS5 index of 400 rows (more than one page: a one-page index does not grow)
    whose structure record grew by ``cycles`` deletes, each followed by an optimize
    (what a hard forget does)."""
    raw.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(body)")
    raw.execute("BEGIN")
    for rowid in range(1, 401):
        raw.execute(f"INSERT INTO {table} (rowid, body) VALUES (?, ?)", (rowid, f"heron {rowid}"))
    raw.execute("COMMIT")
    for rowid in range(1, cycles + 1):
        raw.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
        raw.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


@pytest.mark.parametrize("renamed", [False, True])
def test_an_optimize_compacts_the_index_it_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renamed: bool
) -> None:
    """Past the bound, the index merged is rebuilt and its record written anew. Under a
    build's names (``memory_search`` spelled ``memory_search__shadow``), the record read
    is the build's: here no other index exists, so reading another would fail."""
    monkeypatch.setattr(search, "STRUCTURE_BOUND", 100)
    with closing(sqlite3.connect(tmp_path / "fts.db", isolation_level=None)) as raw:
        raw.row_factory = sqlite3.Row
        stored = search.FULL + SUFFIX if renamed else search.FULL
        grown_index(raw, stored, cycles=60)
        assert structure_size(raw, stored) > 100  # the levels grew, as on SQLite 3.40
        sql = SQLiteSql(raw.cursor())
        wrapped = Shadow({search.FULL: stored}, "t").wrap(sql) if renamed else sql
        search.optimize(wrapped, search.FULL)
        assert structure_size(raw, stored) <= 64
        rows = raw.execute(f"SELECT rowid FROM {stored} WHERE {stored} MATCH 'heron'")
        assert [row[0] for row in rows] == list(range(61, 401))
        raw.execute(f"INSERT INTO {stored} ({stored}) VALUES ('integrity-check')")


def test_an_optimize_leaves_a_small_record_alone(tmp_path: Path) -> None:
    """Under the bound, an optimize is all there is: no rebuild (its record, merged
    into one segment, is as the optimize wrote it)."""
    with closing(sqlite3.connect(tmp_path / "fts.db", isolation_level=None)) as raw:
        raw.row_factory = sqlite3.Row
        grown_index(raw, search.FULL, cycles=5)
        before = structure_size(raw, search.FULL)
        search.optimize(SQLiteSql(raw.cursor()), search.FULL)
        assert structure_size(raw, search.FULL) >= before
