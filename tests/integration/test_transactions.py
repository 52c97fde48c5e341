"""Store transactions on a SQLite file and on PostgreSQL: a failed write leaves nothing
behind, wherever the driver reports the failure, and the connection serves on.

PostgreSQL sends a transaction's writes in pipeline mode, so a failing INSERT is only
reported at the next read or at the COMMIT, and many rows of a plain INSERT go as one
statement taking them as JSON. Both must still roll back every write of the transaction,
and the rows must arrive exactly as given.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import orjson
import psycopg
import pytest

from erstwhile import ConcurrencyConflict, Kind
from erstwhile.eventstore import (
    Backend,
    Sql,
    json_rows,
    open_backend,
    postgres_statements,
    translated_errors,
)

CLAIM = (
    "INSERT INTO erstwhile_idempotency (namespace, idempotency_key, fingerprint, memory_id) "
    "VALUES (?, ?, ?, ?)"
)
MEMORY_ID = "01a22a78-0000-7000-8000-000000000001"


@pytest.fixture
def backend(store_url: str) -> Iterator[Backend]:
    opened = open_backend(store_url)
    yield opened
    opened.close()


def claims(backend: Backend) -> list[str]:
    with backend.read() as sql:
        sql.execute("SELECT idempotency_key FROM erstwhile_idempotency ORDER BY idempotency_key")
        return [row["idempotency_key"] for row in sql.fetchall()]


@contextmanager
def refused() -> Iterator[None]:
    """Expect the store to refuse a duplicate key, as the ledger reports it."""
    with pytest.raises(ConcurrencyConflict), translated_errors(conflicts=True):
        yield


def row(key: str) -> tuple[str, str, str, str]:
    return ("ns", key, "fingerprint", MEMORY_ID)


def test_a_write_reported_failed_at_commit_rolls_back_the_writes_before_it(
    backend: Backend,
) -> None:
    with refused(), backend.write() as sql:
        sql.execute(CLAIM, row("a"))
        sql.execute(CLAIM, row("b"))
        sql.execute(CLAIM, row("a"))  # the same key again: refused
    assert claims(backend) == []
    with backend.write() as sql:
        sql.execute(CLAIM, row("c"))
    assert claims(backend) == ["c"]


def test_a_read_after_a_failed_write_reports_it_and_nothing_stays(backend: Backend) -> None:
    with refused(), backend.write() as sql:
        sql.execute(CLAIM, row("a"))
        sql.execute(CLAIM, row("a"))
        sql.execute("SELECT count(*) AS n FROM erstwhile_idempotency")
        sql.fetchone()
    assert claims(backend) == []


def test_a_failed_bulk_load_rolls_back_with_what_came_before_it(backend: Backend) -> None:
    with refused(), backend.write() as sql:
        sql.execute(CLAIM, row("first"))
        sql.executemany(CLAIM, [row(f"k{n:02}") for n in range(20)] + [row("first")])
    assert claims(backend) == []
    with backend.write() as sql:
        sql.executemany(CLAIM, [row(f"k{n:02}") for n in range(20)])
        sql.execute("SELECT count(*) AS n FROM erstwhile_idempotency")
        assert sql.fetchone()["n"] == 20
    assert claims(backend) == [f"k{n:02}" for n in range(20)]


def test_an_error_raised_in_the_body_rolls_back_what_was_sent(backend: Backend) -> None:
    with pytest.raises(RuntimeError, match="changed my mind"), backend.write() as sql:
        sql.execute(CLAIM, row("a"))
        sql.executemany(CLAIM, [row(f"k{n:02}") for n in range(20)])
        raise RuntimeError("changed my mind")
    assert claims(backend) == []


def test_reads_and_writes_interleave_in_one_transaction(backend: Backend) -> None:
    with backend.write() as sql:
        for n in range(3):
            sql.execute(CLAIM, row(f"k{n}"))
            sql.execute("SELECT count(*) AS n FROM erstwhile_idempotency")
            assert sql.fetchone()["n"] == n + 1
        sql.execute("SELECT idempotency_key FROM erstwhile_idempotency WHERE idempotency_key = ?",
                    ("k1",))  # fmt: skip
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["k1"]
    assert claims(backend) == ["k0", "k1", "k2"]


KEY_OF = "SELECT idempotency_key FROM erstwhile_idempotency WHERE idempotency_key = ?"


def test_a_read_sent_ahead_answers_the_same_read_later(backend: Backend) -> None:
    with backend.write() as sql:
        sql.execute(CLAIM, row("a"))
        sql.execute(CLAIM, row("b"))
        sql.prefetch(KEY_OF, ("a",))
        sql.prefetch(KEY_OF, ("b",))
        sent_ahead = backend.dialect == "postgresql"
        assert sql.sent_ahead(KEY_OF, ("a",)) is sent_ahead
        assert not sql.sent_ahead(KEY_OF, ("c",))
        # a read of other parameters, and one whose parameters cannot be a key (an
        # array on PostgreSQL), run as usual while reads sent ahead wait
        sql.execute(KEY_OF, ("c",))
        assert sql.fetchall() == []
        if backend.dialect == "postgresql":
            sql.execute(
                "SELECT count(*) AS n FROM erstwhile_idempotency WHERE idempotency_key = ANY(?)",
                (["a", "b", "z"],),
            )
            assert sql.fetchone()["n"] == 2
        sql.execute(KEY_OF, ("b",))
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["b"]
        sql.execute(KEY_OF, ("a",))
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["a"]
        assert not sql.sent_ahead(KEY_OF, ("a",))  # taken
        sql.execute(KEY_OF, ("a",))  # taken once: this one runs again
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["a"]
        # A read sent again before it is taken is sent once: the first send answers (so
        # a read sent ahead must be one nothing written before its execute changes).
        sql.prefetch(KEY_OF, ("d",))
        sql.execute(CLAIM, row("d"))
        sql.prefetch(KEY_OF, ("d",))
        sql.execute(KEY_OF, ("d",))
        assert [r["idempotency_key"] for r in sql.fetchall()] == ([] if sent_ahead else ["d"])
        sql.execute(KEY_OF, ("d",))
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["d"]
    assert claims(backend) == ["a", "b", "d"]


TYPED = (
    "CREATE TABLE typed_rows (n INTEGER NOT NULL, t TEXT, b BIGINT, f DOUBLE PRECISION, "
    "y {blob}, u {uuid})"
)
TYPED_ROW = "INSERT INTO typed_rows (n, t, b, f, y, u) VALUES (?, ?, ?, ?, ?, ?)"
ROW_ID = UUID("01a22a78-0000-7000-8000-0000000000ff")


def typed_rows(postgres: bool) -> list[tuple[Any, ...]]:
    """Rows of every kind of value the ledger writes, with the awkward ones of each."""
    texts = ['quote " and \\ backslash', '{"json": [1]}', "naïve café ✓ 𝄞", "", None, "\\x41"]
    numbers = [2**63 - 1, -(2**63), 0, None, 1_767_225_600_000_000, 9_007_199_254_740_993]
    floats = [0.1, 1 / 3, 1e-300, 0.0, None, 0.9999999999999999]
    blobs = [bytes(range(256)), b"", b"\\x00", None, b"\x00" * 3, "é".encode()]
    uuid = ROW_ID if postgres else str(ROW_ID)
    uuids = [uuid, None, uuid, uuid, None, uuid]
    return [
        (n, *values)
        for n, values in enumerate(zip(texts, numbers, floats, blobs, uuids, strict=True))
    ]


def create_typed_rows(sql: Sql, postgres: bool) -> None:
    sql.execute(TYPED.format(blob="BYTEA" if postgres else "BLOB",
                             uuid="UUID" if postgres else "TEXT"))  # fmt: skip


def test_a_one_statement_read_answers_and_refuses_a_second(backend: Backend) -> None:
    with backend.write() as sql:
        sql.execute(CLAIM, row("a"))
    with backend.read_one() as sql:
        sql.execute("SELECT idempotency_key FROM erstwhile_idempotency")
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["a"]
        with pytest.raises(RuntimeError, match="second statement"):
            sql.execute("SELECT idempotency_key FROM erstwhile_idempotency")
        with pytest.raises(RuntimeError, match="writes nothing"):
            sql.executemany(CLAIM, [row("b")])
    assert claims(backend) == ["a"]


def test_a_one_statement_read_names_guarded_tables_in_the_swaps_order(backend: Backend) -> None:
    """A statement that met ``memory_versions`` before ``memories`` could hold the one
    and wait for the other while a swap held the other and waited for the one."""
    backend.guard_reads(["memories", "memory_versions"])
    out_of_order = "SELECT 1 FROM memory_versions v JOIN memories m ON m.id = v.memory_id"
    with pytest.raises(RuntimeError, match="out of the order"), backend.read_one() as sql:
        sql.execute(out_of_order)
    in_order = (
        "SELECT 1 FROM memories m JOIN memory_versions v ON v.memory_id = m.id "
        "LEFT JOIN memories o ON o.id = v.superseded_by"  # met again: held already
    )
    with backend.write() as sql:
        sql.execute("CREATE TABLE memories (id TEXT)")
        sql.execute("CREATE TABLE memory_versions (memory_id TEXT, superseded_by TEXT)")
    with backend.read_one() as sql:
        sql.execute(in_order)
        assert sql.fetchall() == []


def test_many_rows_arrive_exactly_as_given(backend: Backend) -> None:
    postgres = backend.dialect == "postgresql"
    rows = typed_rows(postgres)
    more = [(n + 10, *rest) for n, *rest in rows[:2]]
    with backend.write() as sql:
        create_typed_rows(sql, postgres)
        sql.executemany(TYPED_ROW, rows)
        sql.executemany(TYPED_ROW, more)  # the statement a second time
    with backend.read() as sql:
        sql.execute("SELECT n, t, b, f, y, u FROM typed_rows ORDER BY n")
        stored = [tuple(r[column] for column in "ntbfyu") for r in sql.fetchall()]
    assert [(*r[:4], None if r[4] is None else bytes(r[4]), r[5]) for r in stored] == rows + more


@pytest.mark.postgres
def test_a_read_sent_before_many_rows_go_in_still_answers_after_them(postgres_url: str) -> None:
    """PostgreSQL: a pipelined read is fetched after later writes, and the first many-row
    INSERT into a table reads the table's column types on the way."""
    backend = open_backend(postgres_url)
    try:
        with backend.write() as sql:
            create_typed_rows(sql, postgres=True)
            sql.execute(CLAIM, row("a"))
            sql.execute(KEY_OF, ("a",))
            sql.executemany(TYPED_ROW, typed_rows(postgres=True))
            assert [r["idempotency_key"] for r in sql.fetchall()] == ["a"]
    finally:
        backend.close()


@pytest.mark.postgres
def test_rows_past_one_arrays_size_go_in_parts_and_all_arrive(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: a ``jsonb`` value holds at most 256 MB, so rows whose JSON would pass
    ``JSON_ARRAY_BYTES`` go as several statements (halved until each part fits)."""
    monkeypatch.setattr(json_rows, "JSON_ARRAY_BYTES", 2_000)
    rows = [(n, "x" * 90 + str(n), n, 0.5, bytes([n]), ROW_ID) for n in range(60)]
    parts = list(json_rows.json_arrays(rows))
    assert len(parts) > 4 and all(len(part.encode()) <= 2_000 for part in parts)
    assert [row for part in parts for row in orjson.loads(part)] == orjson.loads(
        orjson.dumps(rows, default=json_rows.json_value)
    )
    backend = open_backend(postgres_url)
    try:
        with backend.write() as sql:
            create_typed_rows(sql, postgres=True)
            sql.executemany(TYPED_ROW, rows)
        with backend.read() as sql:
            sql.execute("SELECT n, t, b, f, y, u FROM typed_rows ORDER BY n")
            stored = [tuple(r[column] for column in "ntbfyu") for r in sql.fetchall()]
    finally:
        backend.close()
    assert [(*r[:4], bytes(r[4]), r[5]) for r in stored] == rows


def test_a_value_json_would_spell_its_own_way_is_refused() -> None:
    """An instant in the rows of a plain INSERT would be written in orjson's spelling,
    not the driver's: refused instead (no caller passes one). A ``str`` enum goes as its
    value, as psycopg sends it."""
    with pytest.raises(TypeError, match="not JSON serializable"):
        list(json_rows.json_arrays([(1, datetime(2026, 1, 1, tzinfo=UTC))]))
    assert list(json_rows.json_arrays([(1, Kind.FACT)])) == ['[[1,"fact"]]']


NOTE = "INSERT INTO typed_rows (n, t) VALUES (?, ?)"


def test_one_row_inserts_are_stored_in_order_and_seen_by_the_next_read(
    backend: Backend,
) -> None:
    """On PostgreSQL one-row plain INSERTs are held back and sent together, as one
    statement, before the next statement of another kind: a read, an UPDATE, a read sent
    ahead, the COMMIT. What the transaction does must not tell the difference, and each
    table's rows go in the order they were written."""
    postgres = backend.dialect == "postgresql"
    with backend.write() as sql:
        create_typed_rows(sql, postgres)
        for n in range(3):
            sql.execute(NOTE, (n, f"note {n}"))
            sql.execute(CLAIM, row(f"k{n}"))
        sql.execute("SELECT count(*) AS n FROM typed_rows")  # sees the three held ones
        assert sql.fetchone()["n"] == 3
        sql.execute(NOTE, (3, "note 3"))
        sql.execute("UPDATE typed_rows SET t = t || ' (seen)' WHERE n = 3")  # after it
        for n in range(4, 24):  # more than one statement takes
            sql.execute(NOTE, (n, f"note {n}"))
        sql.executemany(NOTE, [(24, "note 24")])  # one row of many: held as well
        sql.prefetch("SELECT count(*) AS n FROM typed_rows")  # sent ahead: sees them all
        sql.execute("SELECT count(*) AS n FROM typed_rows")
        assert sql.fetchone()["n"] == 25
        sql.execute(NOTE, (25, "note 25"))  # held until the COMMIT
    with backend.read() as sql:
        sql.execute("SELECT n, t FROM typed_rows ORDER BY n")
        stored = [(r["n"], r["t"]) for r in sql.fetchall()]
        if postgres:  # the physical order: each table's rows in the order written
            sql.execute("SELECT n FROM typed_rows ORDER BY ctid")
            assert [r["n"] for r in sql.fetchall()] == list(range(26))
    expected = [(n, f"note {n}") for n in range(26)]
    expected[3] = (3, "note 3 (seen)")
    assert stored == expected
    assert claims(backend) == ["k0", "k1", "k2"]


@pytest.mark.postgres
def test_writes_held_together_stay_a_statement_psycopg_parses_once(postgres_url: str) -> None:
    """PostgreSQL: one-row INSERTs held back go in one statement only while it has at
    most 50 parameters: past that psycopg parses the statement again at every run, which
    costs more than the statement saved (the ones held so far go first)."""
    sent: list[int] = []

    class Counting(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            sent.append(len(params or ()))
            return super().execute(query, params, **options)

    backend = open_backend(postgres_url)
    columns = ", ".join(f"c{n}" for n in range(20))
    try:
        with backend.write() as sql:
            for table in ("wide_a", "wide_b", "wide_c"):
                sql.execute(f"CREATE TABLE {table} ({columns.replace(',', ' int,')} int)")
            held = postgres_statements.own(sql)
            held.raw = Counting(held.raw.connection)
            for table in ("wide_a", "wide_b", "wide_c"):
                sql.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * 20)})",
                            list(range(20)))  # fmt: skip
            sql.execute("SELECT count(*) AS n FROM wide_c")
            assert sql.fetchone()["n"] == 1
            assert sent == [40, 20]
        with backend.read() as sql:
            sql.execute("SELECT (SELECT count(*) FROM wide_a) + (SELECT count(*) FROM wide_b) AS n")
            assert sql.fetchone()["n"] == 2
    finally:
        backend.close()
