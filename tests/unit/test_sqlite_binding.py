"""The SQLite backend's identity adapters: ``None`` and ``bytes`` bind without the
sqlite3 module's failing adapter lookups, and bind exactly as they did before."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from erstwhile.eventstore.sqlite import bind_as_is


def test_none_and_bytes_have_adapters_once_the_backend_is_imported() -> None:
    for kind in (bytes, type(None)):
        assert (kind, sqlite3.PrepareProtocol) in sqlite3.adapters


def test_none_and_bytes_bind_as_they_are() -> None:
    blob = bytes(range(256))
    with sqlite3.connect(":memory:") as connection:
        connection.execute("CREATE TABLE t (a, b, c)")
        connection.execute("INSERT INTO t VALUES (?, ?, ?)", (None, blob, b""))
        connection.executemany("INSERT INTO t VALUES (?, ?, ?)", [(None, blob, b"")] * 3)
        rows = connection.execute("SELECT a, b, c, typeof(a), typeof(b), typeof(c) FROM t")
        assert rows.fetchall() == [(None, blob, b"", "null", "blob", "blob")] * 4


class Tag:
    """A type of the caller's own, with an adapter of the caller's own."""


@pytest.fixture
def own_adapter() -> Iterator[None]:
    sqlite3.register_adapter(Tag, lambda _: "the caller's")
    yield
    del sqlite3.adapters[(Tag, sqlite3.PrepareProtocol)]


@pytest.mark.usefixtures("own_adapter")
def test_an_adapter_registered_already_is_kept() -> None:
    bind_as_is(Tag, lambda _: "the ledger's")
    with sqlite3.connect(":memory:") as connection:
        assert connection.execute("SELECT ?", (Tag(),)).fetchone() == ("the caller's",)
