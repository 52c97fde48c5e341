"""The small interface each database sits behind, and the translation of its errors.

A backend owns eventsourcing's datastore and recorders for one database and hands out
two kinds of transaction: ``write()``, serialised with every other writer of the same
database (appends and projection updates), and ``read()``, a consistent snapshot.
Both yield an :class:`Sql` cursor that takes ``?`` placeholders on every backend.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol, cast

from eventsourcing.persistence import (
    ConnectionPoolClosedError,
    IntegrityError,
    PersistenceError,
    Tracking,
)

from erstwhile.domain.errors import ConcurrencyConflict, ErstwhileError, StoreUnavailable
from erstwhile.eventstore.records import RecordedEvent


class Sql(Protocol):
    """The cursor surface projections and the log use; placeholders are ``?``."""

    raw: Any

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None: ...

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Send a read ahead of time, where waiting for answers costs round trips: the
        ``execute`` of the same statement with the same parameters, later in the
        transaction, then takes its answer. Only for reads whose answer nothing written
        before that ``execute`` changes. A read sent again before that ``execute`` is
        not sent twice: the first send answers. Elsewhere it does nothing."""

    def sent_ahead(self, statement: str, params: Sequence[Any] = ()) -> bool:
        """Whether a read of this statement and these parameters was sent ahead
        (:meth:`prefetch`) and its answer not taken yet: its ``execute`` would answer
        with what was read then, not now. Always False where nothing is sent ahead."""


class CursorSql:
    """The fetching half of a :class:`Sql` straight over a DB-API cursor, whose every
    statement goes as it is executed (none is sent ahead): the base of SQLite's, and of
    PostgreSQL's for a statement run alone, which each execute in their own way."""

    def __init__(self, cursor: Any) -> None:
        self.raw = cursor

    def fetchone(self) -> Any:
        return self.raw.fetchone()

    def fetchall(self) -> list[Any]:
        return cast(list[Any], self.raw.fetchall())

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Nothing to send ahead: a statement goes when it is executed."""

    def sent_ahead(self, statement: str, params: Sequence[Any] = ()) -> bool:
        return False


class PassingSql:
    """:class:`Sql` that hands every call on to another: the base of the wrappers that
    change some calls on the way (shadow tables' names, buffered writes, indexes left
    out)."""

    def __init__(self, sql: Sql) -> None:
        self.raw = sql.raw
        self._sql = sql

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self._sql.execute(statement, params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self._sql.executemany(statement, rows)

    def fetchone(self) -> Any:
        return self._sql.fetchone()

    def fetchall(self) -> list[Any]:
        return self._sql.fetchall()

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        self._sql.prefetch(statement, params)

    def sent_ahead(self, statement: str, params: Sequence[Any] = ()) -> bool:
        return self._sql.sent_ahead(statement, params)


class OneStatement(PassingSql):
    """The :class:`Sql` of :meth:`Backend.read_one`: it runs one statement and refuses a
    second (a read of two needs :meth:`Backend.read`, whose snapshot holds across them),
    and it refuses a statement that names the projections' tables out of the order a
    rebuild's swap locks them in (see :func:`lock_order_kept`)."""

    def __init__(self, sql: Sql, guarded: tuple[str, ...]) -> None:
        super().__init__(sql)
        self._guarded = guarded
        self._ran = False

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        if self._ran:
            raise RuntimeError("a one-statement read ran a second statement: use read()")
        if not lock_order_kept(statement, self._guarded):
            raise RuntimeError(
                "a one-statement read names the projections' tables out of the order "
                f"a swap locks them in ({', '.join(self._guarded)}): {statement}"
            )
        self._ran = True
        self._sql.execute(statement, params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        raise RuntimeError("a one-statement read writes nothing")

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Nothing to send ahead of a read of one statement."""


TABLE_NAMED = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)", re.IGNORECASE)
_ORDER_KEPT: dict[tuple[str, tuple[str, ...]], bool] = {}


def lock_order_kept(statement: str, guarded: tuple[str, ...]) -> bool:
    """Whether ``statement`` first names the ``guarded`` tables (after ``FROM`` and
    ``JOIN``) in their order: each one after those before it in ``guarded``.

    PostgreSQL locks a statement's tables as it meets them, left to right, and the
    swap locks the tables it replaces in ``guarded``'s order: a statement that held
    ``memory_versions`` while it waited for ``memories`` could wait for a swap holding
    ``memories`` and waiting for it (a deadlock, which PostgreSQL breaks by failing one).
    A read transaction locks them all up front, in that order (see
    ``PostgresBackend.guard_reads``); a one-statement read names them in it. (A table
    named in a select list before ``FROM`` is met after it: such a statement is refused,
    though it would keep the order.) The names are read as the ledger writes its
    statements: unquoted, each after ``FROM`` or ``JOIN`` (a comma join or a quoted name
    would go unseen), any ``WITH`` inside a subquery (a plan checked again locks a
    leading ``WITH``'s tables after the main query's)."""
    key = (statement, guarded)
    kept = _ORDER_KEPT.get(key)
    if kept is None:
        rank = {table: place for place, table in enumerate(guarded)}
        named = dict.fromkeys(n for n in TABLE_NAMED.findall(statement) if n in rank)
        places = [rank[name] for name in named]  # a table met again is held already
        kept = _ORDER_KEPT[key] = places == sorted(places)
    return kept


IN_LIST = 500
"""Values asked for in one ``IN (...)`` list at most: a list as long as the ids asked
for could pass the backends' limits on parameters (65,535 on PostgreSQL)."""


TAGGED = re.compile(r"(\w+)_[0-9a-f]{8}")
"""An index name a rebuild's shadow build gave: the index's own name and the build's
tag (index names belong to the schema, so the shadow's cannot be the live ones')."""


def marks(values: Sequence[object]) -> str:
    """The ``?, ?, ...`` of an ``IN`` list of these values."""
    return ", ".join("?" * len(values))


def in_lists(values: Sequence[str]) -> list[list[str]]:
    """The values in parts of at most :data:`IN_LIST`, one ``IN`` list each."""
    return [list(values[start : start + IN_LIST]) for start in range(0, len(values), IN_LIST)]


class Backend(ABC):
    """One database holding the log, the tracking table and the projections."""

    url: str
    dialect: str
    """``sqlite`` or ``postgresql``: which SQL the few backend-specific queries speak."""
    tracking_table: str
    """eventsourcing's tracking table: one row per projection and its position."""
    events_table = "erstwhile_events"
    guarded: tuple[str, ...] = ()
    """The projections' tables in the order reads and a rebuild's swap lock them (see
    :meth:`guard_reads`)."""
    writer_turn_seconds: float = 0.0
    """How long a long run of write transactions (a catch-up, a rebuild's build) leaves
    the lock free between two at least, so that a writer waiting for it gets it (the
    catch-up reads its next batch meanwhile, and pauses only for what is left of the
    turn): PostgreSQL grants its lock in the order asked, SQLite to whoever asks first
    once it is free."""
    scrub_wait_seconds: float = 30.0
    """How long a scrub waits for other connections' older snapshots, which still see
    the erased rows, to end (as long as a writer waits for the write lock)."""

    @abstractmethod
    def write(self, durable: bool = True, bulk: bool = False) -> AbstractContextManager[Sql]:
        """Open a transaction serialised with every other writer; commit on success.

        ``durable=False`` lets the commit return before it reaches the disk: for
        transactions that only fold the log into projections, which a crash can only
        set back to an earlier consistent position (rows and tracking go together), to
        be folded again from the log. Appends are always durable. ``bulk`` marks one of
        a long run of such transactions that a durable one will follow (a rebuild's
        shadow build, then its swap), which may leave more to the disk in between.
        """

    @abstractmethod
    def read(self) -> AbstractContextManager[Sql]:
        """Open a read-only transaction over one consistent snapshot."""

    @contextmanager
    def read_one(self) -> Iterator[Sql]:
        """A read of one statement (:class:`OneStatement` refuses a second): one
        statement sees one snapshot of its own, so it needs no transaction around it,
        which on PostgreSQL costs more than a point query itself (see
        :meth:`PostgresBackend.one_statement`)."""
        with self.one_statement() as sql:
            yield OneStatement(sql, self.guarded)

    def one_statement(self) -> AbstractContextManager[Sql]:
        """Where :meth:`read_one` runs its statement: a read transaction, unless the
        backend has a cheaper way."""
        return self.read()

    @abstractmethod
    def create_tables(self) -> None:
        """Create the log, idempotency and tracking tables if missing."""

    @abstractmethod
    def insert_events(self, sql: Sql, events: Sequence[RecordedEvent]) -> None:
        """Insert fully formed events into the log inside ``sql``'s transaction."""

    @abstractmethod
    def insert_tracking(self, sql: Sql, name: str, position: int) -> None:
        """Record that projection ``name`` has applied the log up to ``position``."""

    @abstractmethod
    def tracked_position(self, sql: Sql, name: str) -> int:
        """Return how far projection ``name`` has applied the log (0 if never)."""

    def advance_tracking(self, sql: Sql, names: Sequence[str], position: int) -> None:
        """Record that each named projection has applied the log up to ``position``, in
        one statement (the tracking rows are eventsourcing's single-row tracking)."""
        table = self.tracking_table
        sql.executemany(
            f"INSERT INTO {table} (application_name, notification_id) VALUES (?, ?) "
            "ON CONFLICT (application_name) DO UPDATE SET notification_id = "
            f"excluded.notification_id WHERE {table}.notification_id < excluded.notification_id",
            [(name, position) for name in names],
        )

    def tracked_positions(self, sql: Sql, names: Sequence[str]) -> dict[str, int]:
        """Return how far each named projection has applied the log, in one query."""
        sql.execute(*self._tracked_query(names))
        found = {row["application_name"]: row["notification_id"] for row in sql.fetchall()}
        return {name: found.get(name) or 0 for name in names}

    def prefetch_tracked_positions(self, sql: Sql, names: Sequence[str]) -> None:
        """Send :meth:`tracked_positions`' query ahead (see :meth:`Sql.prefetch`)."""
        sql.prefetch(*self._tracked_query(names))

    def _tracked_query(self, names: Sequence[str]) -> tuple[str, list[str]]:
        return (
            f"SELECT application_name, notification_id FROM {self.tracking_table} "
            f"WHERE application_name IN ({', '.join('?' * len(names))})",
            list(names),
        )

    @abstractmethod
    def reset_tracking(self, sql: Sql, name: str) -> None:
        """Forget how far projection ``name`` got, so it is rebuilt from position 0."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    @contextmanager
    def listener(self, stop: threading.Event) -> Iterator[Callable[[float], None]]:
        """Yield ``wait(seconds)``, which returns early when ``stop`` is set or, where the
        database can say so, when new events are committed; by default it polls."""

        def wait(seconds: float) -> None:
            stop.wait(seconds)

        yield wait

    @abstractmethod
    def scrub(self) -> None:
        """Make erased bytes unreadable in the database files (after a hard forget).

        Rows another connection's snapshot still sees cannot be removed: the scrub waits
        up to :attr:`scrub_wait_seconds` for such snapshots to end, then raises
        ``StoreUnavailable`` if one still holds them."""

    def clock_micros(self, sql: Sql) -> int:
        """The database's clock in µs (SQLite's is this machine's: the file is local)."""
        return time.time_ns() // 1_000

    def files(self) -> tuple[Path, ...]:
        """The files on this machine that hold the store (none for a server's)."""
        return ()

    @property
    def log_tables(self) -> tuple[str, ...]:
        """The tables the log keeps (the projections keep theirs)."""
        return (self.events_table, "erstwhile_keys", "erstwhile_idempotency", self.tracking_table)

    def where(self) -> str:
        """The store, to name in a message (SQLite: its file)."""
        return repr(self.url.removeprefix("sqlite:///"))

    def names_in_store(self, sql: Sql) -> set[str]:
        """The name of every table, view, index and trigger in the ledger's file, in
        lower case: SQLite's names ignore case, so ``Memories`` takes up ``memories``
        (PostgreSQL: of every relation in its schema, as they are)."""
        sql.execute("SELECT name FROM sqlite_master")
        return {row["name"].lower() for row in sql.fetchall()}

    def column_names(self, sql: Sql, table: str) -> set[str]:
        """The columns ``table`` has (SQLite; PostgreSQL looks in the ledger's schema)."""
        sql.execute("SELECT name FROM pragma_table_info(?)", (table,))
        return {row["name"].lower() for row in sql.fetchall()}

    def existing_tables(self, sql: Sql, names: Sequence[str]) -> set[str]:
        """Which of these tables exist (SQLite; PostgreSQL looks in the ledger's schema)."""
        if not names:
            return set()
        sql.execute(
            f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({marks(names)})",
            list(names),
        )
        return {row["name"] for row in sql.fetchall()}

    def indexes(self, sql: Sql) -> list[tuple[str, str]]:
        """Every index created by name (not by a key constraint), as (index, table)."""
        sql.execute(
            "SELECT name, tbl_name AS tbl FROM sqlite_master "
            "WHERE type = 'index' AND sql IS NOT NULL"
        )
        return [(row["name"], row["tbl"]) for row in sql.fetchall()]

    def guard_reads(self, tables: Sequence[str]) -> None:
        """Have every read transaction from now on lock ``tables`` (the projections'
        tables, in one fixed order) before it reads anything, and every one-statement
        read name them in that order (:func:`lock_order_kept`). Only PostgreSQL needs
        the lock: see :meth:`PostgresBackend.guard_reads`. A SQLite reader's snapshot
        covers the schema too, so a table replaced under it is still the old one to it;
        the order is checked there as well, so that either backend's tests find a read
        that breaks it."""
        self.guarded = tuple(tables)

    def lock_for_replace(  # noqa: B027 - SQLite's readers need no lock
        self, sql: Sql, tables: Sequence[str], patient: bool = True
    ) -> None:
        """Before a swap replaces ``tables`` (in the order reads lock them), lock them all
        against readers at once; unless ``patient``, give up soon when a read holds them
        (PostgreSQL; see there)."""

    def build_index(self, statement: str) -> None:
        """Run one of a rebuild's postponed ``CREATE INDEX`` statements on its build's
        tables, in a transaction of its own (on SQLite every write takes the file's one
        lock: see ``ProjectionRunner.finish_catching_up``)."""
        with self.write(durable=False, bulk=True) as sql:
            sql.execute(statement)

    def analyze_build(self, tables: Sequence[str]) -> None:  # noqa: B027 - SQLite keeps none
        """Refresh the planner's statistics of a build's tables before they are swapped in."""

    def replace_table(self, sql: Sql, live: str, shadow: str) -> None:
        """Replace ``live`` by ``shadow`` whole inside ``sql``'s transaction, whatever
        their columns (a projection whose schema changed, too): drop it and rename the
        shadow over it. SQLite's readers keep their snapshot of the old table meanwhile
        (PostgreSQL's lock the tables before theirs: see ``guard_reads``). The shadow's
        indexes keep their tagged names on SQLite, which cannot rename an index (see
        ``ProjectionRunner._rebuilt_indexes``)."""
        sql.execute(f"DROP TABLE IF EXISTS {live}")
        sql.execute(f"ALTER TABLE {shadow} RENAME TO {live}")

    def analyze(self) -> None:  # noqa: B027 - SQLite plans well enough without statistics
        """Refresh the planner's statistics after a table grew a lot."""

    def vacuum(self, table: str) -> int:
        """Reclaim a table's dead rows outside any transaction; return about how many
        rows it holds. Only PostgreSQL leaves dead rows behind; SQLite does nothing here."""
        return 0

    def notify(self, sql: Sql) -> None:  # noqa: B027 - optional hook; SQLite has no NOTIFY
        """Tell followers that new events were committed (LISTEN/NOTIFY where there is one)."""

    @staticmethod
    def tracking(name: str, position: int) -> Tracking:
        """Return eventsourcing's tracking record for a projection position."""
        return Tracking(application_name=name, notification_id=position)


def driver_errors() -> tuple[type[BaseException], ...]:
    """Return what the drivers and eventsourcing's recorders raise when the store fails."""
    return (PersistenceError, sqlite3.Error, OSError, *_loaded("psycopg", "Error"))


def integrity_errors() -> tuple[type[BaseException], ...]:
    """Return what the drivers and eventsourcing raise when a write breaks a constraint."""
    return (IntegrityError, sqlite3.IntegrityError, *_loaded("psycopg", "IntegrityError"))


def closed_errors() -> tuple[type[BaseException], ...]:
    """Return what the pools raise once the ledger is closed (eventsourcing wraps
    psycopg's)."""
    return (ConnectionPoolClosedError, *_loaded("psycopg_pool", "PoolClosed"))


def _loaded(module: str, name: str) -> tuple[type[BaseException], ...]:
    """Return the error class ``module.name`` in a tuple, empty until ``module`` is
    imported and defines it: the PostgreSQL driver is loaded with the PostgreSQL
    backend, and until then none of its errors can be raised. (Importing it up front
    cost every SQLite ledger, and every run of the command line, about 0.13 s.) A module
    another thread is still importing is in ``sys.modules`` before it defines its
    classes: none of them is in flight then."""
    found = getattr(sys.modules.get(module), name, None)
    return (found,) if found is not None else ()


UNKNOWN_OUTCOME_SQLSTATES = ("08", "57")
"""PostgreSQL's classes of errors after which a write may have committed unheard:
connection exceptions, and operator intervention (the server ended the session)."""


def outcome_unknown(error: BaseException) -> bool:
    """Tell whether a write that failed with ``error`` may have committed all the same: the
    connection was lost while it ran (on SQLite, the disk failed), so the store may have
    committed before its answer was lost. A refusal the store reported (a lock not
    granted in time, a constraint) means the write was rolled back."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, sqlite3.Error):
            return getattr(cause, "sqlite_errorname", "").startswith("SQLITE_IOERR")
        if isinstance(cause, _loaded("psycopg", "Error")):
            sqlstate = getattr(cause, "sqlstate", None)
            return sqlstate is None or sqlstate[:2] in UNKNOWN_OUTCOME_SQLSTATES
        cause = cause.__cause__
    return False


def real_path(path: Path) -> Path:
    """Return ``path`` with its links followed (:meth:`Path.resolve`).

    A loop of links raises the ``OSError`` the system gives for one: Python 3.11's
    pathlib raises ``RuntimeError``, which would reach the user as a traceback."""
    try:
        return path.resolve()
    except RuntimeError:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path)) from None


@contextmanager
def translated_errors(*, conflicts: bool = False) -> Iterator[None]:
    """Turn database driver errors into erstwhile's errors, so none leaks raw.

    With ``conflicts``, a uniqueness violation means another writer got there first.
    """
    try:
        yield
    except ErstwhileError:
        raise
    except integrity_errors() as error:
        if conflicts:
            raise ConcurrencyConflict(
                "another writer changed a memory this write depends on; nothing was stored "
                "(read again and retry)"
            ) from error
        raise StoreUnavailable(f"the store refused a write: {first_line(error)}") from error
    except (*driver_errors(), *closed_errors()) as error:
        closed = closed_errors()
        if isinstance(error, closed) or isinstance(error.__cause__, closed):
            raise StoreUnavailable("the ledger was closed; open it again") from error
        raise StoreUnavailable(f"the store failed: {first_line(error)}") from error


def first_line(error: BaseException) -> str:
    """Return the first line of an error's message."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
