"""The append-only log (the ledger's write-ahead log) on SQLite or PostgreSQL.

The URL picks the backend: ``sqlite:///path/ledger.db`` or
``postgresql://user@host:5432/db``; without one, ``$ERSTWHILE_URL``, else
``./erstwhile.db``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from erstwhile.domain.errors import StoreUnavailable
from erstwhile.eventstore.backend import (
    Backend,
    Sql,
    StoreBefore,
    in_lists,
    marks,
    translated_errors,
)
from erstwhile.eventstore.log import ERASED_FINGERPRINT, AppendResult, EventFilter, EventLog
from erstwhile.eventstore.records import IdempotencyClaim, RecordedEvent

DEFAULT_PATH = "erstwhile.db"
URL_VARIABLE = "ERSTWHILE_URL"

__all__ = [
    "ERASED_FINGERPRINT",
    "AppendResult",
    "Backend",
    "EventFilter",
    "EventLog",
    "IdempotencyClaim",
    "RecordedEvent",
    "Sql",
    "in_lists",
    "marks",
    "missing_store",
    "open_backend",
    "resolve_url",
    "sqlite_path",
    "store_before",
    "translated_errors",
    "undo_creation",
]


def resolve_url(url: str | os.PathLike[str] | None = None) -> str:
    """Return the URL to open: the one given, else ``$ERSTWHILE_URL``, else ``./erstwhile.db``.

    A bare path (no scheme) means a SQLite file.
    """
    chosen = _chosen(url)
    if "://" not in chosen:
        return f"sqlite:///{chosen}"
    return chosen


def _chosen(url: str | os.PathLike[str] | None) -> str:
    """The URL or bare path as given: the argument, else ``$ERSTWHILE_URL``, else the
    default path."""
    return os.fspath(url) if url is not None else os.environ.get(URL_VARIABLE) or DEFAULT_PATH


def sqlite_path(url: str | os.PathLike[str] | None = None) -> Path | None:
    """The SQLite file a URL names (None for another backend)."""
    scheme, _, rest = resolve_url(url).partition("://")
    if scheme != "sqlite":
        return None
    return Path(_file_of(rest)).expanduser()


def _file_of(rest: str) -> str:
    """The file of a SQLite URL's remainder (``sqlite:///a.db`` is ``a.db``,
    ``sqlite:////tmp/a.db`` is ``/tmp/a.db``)."""
    return rest[1:] if rest.startswith("/") else rest


def store_before(url: str | os.PathLike[str] | None = None) -> StoreBefore:
    """What the store a URL names holds, found without creating anything (see
    :class:`StoreBefore`). A SQLite file that cannot be read as a database is taken
    for a store (opening it says why)."""
    resolved = resolve_url(url)
    if not resolved.startswith(("postgresql://", "postgres://")):
        from erstwhile.eventstore.sqlite import file_before

        path = sqlite_path(url)
        try:
            return file_before(path) if path is not None else StoreBefore(None)
        except sqlite3.Error:
            return StoreBefore(frozenset({"erstwhile_events"}))
    from erstwhile.eventstore.postgres import PostgresBackend

    with translated_errors():
        backend = PostgresBackend(resolved)
        try:
            return backend.before()
        finally:
            backend.close()


def missing_store(url: str | os.PathLike[str] | None = None) -> str | None:
    """Where the store a URL names would be, when it holds no ledger yet (None when it
    does), found without creating anything: a SQLite file that is not there or holds no
    log (another program's database, an empty file), or a PostgreSQL schema without the
    log's table (opening any of them would create the ledger's tables there)."""
    if store_before(url).holds_log:
        return None
    path = sqlite_path(url)
    if path is not None:
        return str(path)
    from erstwhile.eventstore.postgres import PostgresBackend

    with translated_errors():
        backend = PostgresBackend(resolve_url(url))
        try:
            return backend.where()
        finally:
            backend.close()


def undo_creation(url: str | os.PathLike[str] | None, before: StoreBefore) -> None:
    """Take away what opening the store as a ledger created, once a first write into it
    failed with its log still empty (see ``erstwhile.cli.context.first_write``): the
    SQLite file, or the tables added to one that held others; the PostgreSQL schema, or
    the tables added to it."""
    path = sqlite_path(url)
    if path is None:
        from erstwhile.eventstore.postgres import PostgresBackend

        with translated_errors():
            backend = PostgresBackend(resolve_url(url))
            try:
                backend.undo_creation(before)
            finally:
                backend.close()
    elif before.tables is None:
        for end in ("", "-wal", "-shm", "-journal"):
            path.with_name(path.name + end).unlink(missing_ok=True)
    else:
        from erstwhile.eventstore.sqlite import undo_creation as undo_sqlite

        with translated_errors():
            undo_sqlite(path, before)


def open_backend(url: str | os.PathLike[str] | None = None) -> Backend:
    """Open (creating tables if needed) the backend a URL names."""
    resolved = resolve_url(url)
    scheme, _, rest = resolved.partition("://")
    with translated_errors():
        if scheme == "sqlite":
            if "://" in _chosen(url) and "?" in rest:
                raise StoreUnavailable(
                    f"a SQLite URL takes no parameters: {resolved!r} (a file whose name has "
                    "a '?' is given as a bare path)"
                )
            backend: Backend = _sqlite(rest)
        elif scheme in ("postgresql", "postgres"):
            from erstwhile.eventstore.postgres import PostgresBackend

            backend = PostgresBackend(resolved)
        else:
            raise StoreUnavailable(
                f"unknown store URL scheme {scheme!r}: use sqlite:///path or postgresql://..."
            )
        try:
            backend.create_tables()
        except BaseException:
            backend.close()
            raise
    return backend


def _sqlite(rest: str) -> Backend:
    from erstwhile.eventstore.sqlite import SQLiteBackend

    path = _file_of(rest)
    if not path:
        raise StoreUnavailable("the SQLite URL names no file: give a path (sqlite:///ledger.db)")
    if path == ":memory:":
        raise StoreUnavailable("an in-memory SQLite ledger is not supported: give a file path")
    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise StoreUnavailable(f"cannot open {path!r}: folder {str(parent)!r} does not exist")
    return SQLiteBackend(str(Path(path).expanduser()))
