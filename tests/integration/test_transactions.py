"""Store transactions on a SQLite file and on PostgreSQL: a failed write leaves nothing
behind, wherever the driver reports the failure, and the connection serves on.

PostgreSQL sends a transaction's writes in pipeline mode, so a failing INSERT is only
reported at the next read or at the COMMIT; COPY (for 16 rows or more) leaves the
pipeline while it runs. Both must still roll back every write of the transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from erstwhile import ConcurrencyConflict
from erstwhile.eventstore import Backend, open_backend, translated_errors

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
        sql.execute(KEY_OF, ("a",))  # taken once: this one runs again
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["a"]
        # A read sent again before it is taken is sent once: the first send answers (so
        # a read sent ahead must be one nothing written before its execute changes).
        sql.prefetch(KEY_OF, ("d",))
        sql.execute(CLAIM, row("d"))
        sql.prefetch(KEY_OF, ("d",))
        sql.execute(KEY_OF, ("d",))
        sent_ahead = backend.dialect == "postgresql"
        assert [r["idempotency_key"] for r in sql.fetchall()] == ([] if sent_ahead else ["d"])
        sql.execute(KEY_OF, ("d",))
        assert [r["idempotency_key"] for r in sql.fetchall()] == ["d"]
    assert claims(backend) == ["a", "b", "d"]
