"""The append-only log (the ledger's write-ahead log) on SQLite or PostgreSQL.

The URL picks the backend: ``sqlite:///path/ledger.db`` or
``postgresql://user@host:5432/db``; without one, ``$ERSTWHILE_URL``, else
``./erstwhile.db``.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from erstwhile.domain.errors import StoreUnavailable
from erstwhile.eventstore.backend import (
    Backend,
    Sql,
    in_lists,
    marks,
    outcome_unknown,
    real_path,
    translated_errors,
)
from erstwhile.eventstore.log import ERASED_FINGERPRINT, AppendResult, EventFilter, EventLog
from erstwhile.eventstore.records import EVENT_COLUMNS, IdempotencyClaim, RecordedEvent

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
    "outcome_unknown",
    "real_path",
    "resolve_url",
    "translated_errors",
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


def local_file(path: str) -> Path:
    """The file a SQLite path names: ``~`` expanded, and a name starting ``file:`` made
    absolute (SQLite reads such a name as a URI of its own: ``file:z.db`` would open
    ``z.db``). ``StoreUnavailable`` for a ``~user`` whose home is unknown."""
    try:  # only a path that starts with it (pathlib would read ./~x as ~x)
        file = Path(path).expanduser() if path.startswith("~") else Path(path)
    except RuntimeError as error:  # pathlib's "Could not determine home directory"
        raise StoreUnavailable(f"cannot open {path!r}: {error}") from None
    return file.absolute() if str(file).startswith("file:") else file


def _file_of(rest: str) -> str:
    """The file of a SQLite URL's remainder (``sqlite:///a.db`` is ``a.db``,
    ``sqlite:////tmp/a.db`` is ``/tmp/a.db``)."""
    return rest[1:] if rest.startswith("/") else rest


def missing_store(url: str | os.PathLike[str] | None = None) -> str | None:
    """Where the store a URL names would be, when nothing has been written there (None
    when its log holds an event), found without creating anything: a SQLite file that is
    not there, holds no ledger (another program's database, an empty file) or a ledger
    whose log is empty; a PostgreSQL schema that is not there, holds no ledger, or one
    whose log is empty. A URL no store can be at is refused as opening it would be."""
    resolved = resolve_url(url)
    scheme = resolved.partition("://")[0]
    if scheme == "sqlite":
        from erstwhile.eventstore.sqlite import holds_events

        file = _sqlite_file(url, resolved)
        return None if holds_events(file) else str(file)
    if scheme not in ("postgresql", "postgres"):
        return None  # the opening names the scheme it does not know
    from erstwhile.eventstore.postgres import PostgresBackend

    with translated_errors():
        backend = PostgresBackend(resolved)
        try:
            return None if backend.holds_events() else backend.where()
        finally:
            backend.close()


def open_backend(
    url: str | os.PathLike[str] | None = None, claimed: Collection[str] = ()
) -> Backend:
    """Open (creating tables if needed) the backend a URL names.

    ``claimed`` names the tables the caller will make besides the log's (the
    projections'): a store that holds no log yet but holds a table of one of those
    names, or the log's, is another program's, and is refused before anything is
    created in it (see :func:`refuse_foreign_tables`).
    """
    resolved = resolve_url(url)
    scheme = resolved.partition("://")[0]
    with translated_errors():
        if scheme == "sqlite":
            backend: Backend = _sqlite(_sqlite_file(url, resolved))
        elif scheme in ("postgresql", "postgres"):
            from erstwhile.eventstore.postgres import PostgresBackend

            backend = PostgresBackend(resolved)
        else:
            raise StoreUnavailable(
                f"unknown store URL scheme {scheme!r}: use sqlite:///path or postgresql://..."
            )
        try:
            refuse_foreign_tables(backend, claimed)
            backend.create_tables()
        except BaseException:
            backend.close()
            raise
    return backend


def refuse_foreign_tables(backend: Backend, claimed: Collection[str]) -> None:
    """Refuse a store whose tables another program made under the ledger's names.

    Every table is created ``IF NOT EXISTS``, so a table of the same name made by
    another program would be taken for the ledger's own: the log's tables would be
    added beside it and the first write would fail on a missing column, leaving the
    store changed. So a store without the log must hold none of the names the ledger
    makes, and a store with one must have the log's columns in it.
    """
    with backend.read() as sql:
        present = backend.names_in_store(sql)
        if backend.events_table in present:
            columns = backend.column_names(sql, backend.events_table)
            missing = [name for name in EVENT_COLUMNS.split(", ") if name not in columns]
            if missing:
                raise StoreUnavailable(
                    f"{backend.where()} holds a table {backend.events_table!r} that is not "
                    f"an erstwhile log (it has no {', '.join(missing)} column): keep the "
                    "ledger in another file or schema"
                )
            return
    taken = sorted(present & {*backend.log_tables, *claimed})
    if taken:
        raise StoreUnavailable(
            f"{backend.where()} holds no erstwhile log but already has tables of the "
            f"names erstwhile makes ({', '.join(taken)}): keep the ledger in another "
            "file or schema"
        )


def _sqlite_file(url: str | os.PathLike[str] | None, resolved: str) -> Path:
    """The file a SQLite URL (``resolved``, from ``url`` as given) names, or
    ``StoreUnavailable`` when it names none a ledger can be kept in."""
    rest = resolved.partition("://")[2]
    if "://" in _chosen(url) and "?" in rest:
        raise StoreUnavailable(
            f"a SQLite URL takes no parameters: {resolved!r} (a file whose name has "
            "a '?' is given as a bare path)"
        )
    path = _file_of(rest)
    if not path.strip():
        raise StoreUnavailable("the SQLite URL names no file: give a path (sqlite:///ledger.db)")
    if path == ":memory:":
        raise StoreUnavailable("an in-memory SQLite ledger is not supported: give a file path")
    return local_file(path)


def _sqlite(file: Path) -> Backend:
    from erstwhile.eventstore.sqlite import SQLiteBackend

    try:
        parent = real_path(file).parent
    except OSError as error:
        raise StoreUnavailable(f"cannot open {str(file)!r}: {error.strerror}") from None
    if not parent.is_dir():
        raise StoreUnavailable(f"cannot open {str(file)!r}: folder {str(parent)!r} does not exist")
    return SQLiteBackend(str(file))
