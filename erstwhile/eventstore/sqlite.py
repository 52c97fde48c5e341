"""The SQLite backend: eventsourcing's SQLite datastore and recorders, with the columns
the ledger adds (recorded_at, actor, namespace, schema version, hash).

The file runs in WAL mode with ``synchronous=FULL`` (a committed append survives power
loss), ``secure_delete`` (erased pages are zeroed) and a busy timeout, so racing
processes queue for the write lock instead of failing. Writers take the lock up front
(``BEGIN IMMEDIATE``) because the append reads the tip of the log before writing.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import InterfaceError
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteDatastore,
    SQLiteTrackingRecorder,
)

from erstwhile.domain.errors import StoreUnavailable
from erstwhile.eventstore.backend import Backend, CursorSql, Sql, real_path
from erstwhile.eventstore.records import EVENT_COLUMNS, RecordedEvent

BUSY_TIMEOUT_SECONDS = 30
WRITER_POLL_SECONDS = 0.001
"""How often a writer asks again for the write lock while another holds it. SQLite's
own busy handler asks at growing intervals, every 100 ms after the first half second,
so a writer waiting behind a rebuild's back-to-back transactions found the lock free
almost never: it waited seconds (up to most of a build) for a lock no transaction held
longer than 0.2 s. Asking every millisecond, it takes the lock in the pause a run of
transactions leaves between two (:attr:`SQLiteBackend.writer_turn_seconds`)."""
CHECKPOINT_RETRY_SECONDS = 0.005
"""How often a scrub asks again to checkpoint while another connection checkpoints."""

APPEND_ONLY_TRIGGERS = [
    "CREATE TRIGGER IF NOT EXISTS erstwhile_events_no_update BEFORE UPDATE ON erstwhile_events "
    "BEGIN SELECT RAISE(ABORT, 'erstwhile_events is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS erstwhile_events_no_delete BEFORE DELETE ON erstwhile_events "
    "BEGIN SELECT RAISE(ABORT, 'erstwhile_events is append-only'); END",
]


CHECKPOINT_PAGES = 1_000
"""SQLite's default: a commit that leaves the WAL longer than this checkpoints it."""

BULK_CHECKPOINT_PAGES = 10_000
"""The same during a rebuild's shadow build: a tenth of the checkpoints, each syncing
the WAL and the file (rebuilds of 18,000 events: 18,700 against 17,300 events/s, medians
of three interleaved rounds of five, measured with 4 KB pages), for a WAL of up to
10,000 pages (20 MB of a new store's 2 KB pages, 40 MB of an older store's 4 KB ones)
until the swap's durable commit checkpoints it (and the next write cuts the file back
to :data:`WAL_SIZE_LIMIT`)."""

WAL_SIZE_LIMIT = 16 * 1024 * 1024
"""Bytes a WAL file keeps once checkpointed and restarted. SQLite reuses a WAL from its
start without shrinking it, so one large transaction or a rebuild (up to 20 or 40 MB,
see :data:`BULK_CHECKPOINT_PAGES`) would otherwise leave the file that large for as long
as the ledger stays open."""

PAGE_SIZE = 2048
"""The page size of a new store (SQLite's default is 4096; a store keeps the size it was
made with). A durable commit writes every page it changed to the WAL and syncs it, and
a ``remember`` changes one page in each of about 25 tables and indexes (the log, the
key, the read models, two full-text indexes): 32 pages at 2,000 memories. The sync's
cost grows with the bytes it writes (30 pages committed: 0.42 ms at 2 KB, 0.73 ms at
4 KB on the same disk), so halving the page halves the bytes: ``remember`` p50 against
a raw durable commit 5.49x -> 4.75x, with the other workloads' ratios unchanged (a
medium SQLite run of each, one after the other: docs/performance-history.md). Not
1 KB: a full-text index block (up to 1,000 bytes) would no longer fit in one page."""

STATEMENT_CACHE = 512
"""Prepared statements each connection keeps. (eventsourcing's pool asks for
``cached_statements=True``, a cache of one: every statement of an append and its fold
would be parsed and planned again, which costs more than running most of them.)"""


def bind_as_is(kind: type, same: Callable[[Any], Any]) -> None:
    """Have the sqlite3 module bind ``kind``'s values without first asking whether they
    adapt (unless an adapter for ``kind`` is registered already); ``same`` returns the
    value it is given, in C.

    The module binds a parameter of exactly ``int``, ``float`` or ``str`` as it is, but
    for any other, ``None`` and ``bytes`` included, it looks up an adapter and then
    asks the protocol and the value for one by attribute, each failing lookup building
    an ``AttributeError`` and its message: 620 instructions a parameter, 4% of a
    ``remember_many`` (hashes, payloads, keys, every NULL column) and 2% of a rebuild.
    A registered adapter is found first, and these give back the value itself, so
    every value binds exactly as before. The registry is the module's, for every
    connection in the process: the adapters change no value anyone binds.
    """
    if (kind, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(kind, same)


bind_as_is(bytes, bytes)  # bytes() of a bytes object is that object
bind_as_is(type(None), {}.get)  # anything's value in an empty dict is None


def enter_wal(raw: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode, retrying while another process is busy switching it.

    While one connection turns a new file's journal into a WAL, another's switch can
    fail with "database is locked" at once, without waiting in the busy handler (seen
    with four processes opening a new file together); so the switch is retried, with a
    growing pause, until the busy timeout has passed.
    """
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            (mode,) = raw.execute("PRAGMA journal_mode=WAL").fetchone()
        except sqlite3.OperationalError as error:
            busy = error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY  # BUSY_RECOVERY too
            if not busy or time.monotonic() > deadline:
                raise
        else:
            if mode == "wal":
                return
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError(f"could not enter WAL mode (still {mode})")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class DurableConnectionPool(SQLiteConnectionPool):
    """eventsourcing's pool, with every connection set up for durability and erasure,
    and a statement cache that holds every statement the ledger runs."""

    def _create_connection(self) -> SQLiteConnection:
        try:
            raw = sqlite3.connect(
                database=self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                cached_statements=STATEMENT_CACHE,
                timeout=self.lock_timeout or BUSY_TIMEOUT_SECONDS,
            )
        except (sqlite3.Error, TypeError) as error:
            raise InterfaceError(error) from error
        raw.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file's; an existing one keeps its own
        if not self.is_sqlite_memory_mode:
            enter_wal(raw, self.lock_timeout or BUSY_TIMEOUT_SECONDS)
            self.is_journal_mode_wal = True
        raw.row_factory = sqlite3.Row
        connection = SQLiteConnection(sqlite_conn=raw, max_age=self.max_age)
        raw.execute("PRAGMA synchronous=FULL")
        raw.execute("PRAGMA secure_delete=ON")
        raw.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")
        return connection


class LedgerSQLiteDatastore(SQLiteDatastore):
    """A datastore whose pool is :class:`DurableConnectionPool`."""

    def __init__(self, path: str) -> None:
        super().__init__(path, lock_timeout=BUSY_TIMEOUT_SECONDS)
        self.pool.close()
        # Threads of one process queue for the writer in the pool, processes in SQLite's
        # busy handler: both wait as long (the pool's own default is 5 s).
        self.pool = DurableConnectionPool(
            db_name=path, lock_timeout=BUSY_TIMEOUT_SECONDS, pool_timeout=BUSY_TIMEOUT_SECONDS
        )


class LedgerSQLiteRecorder(SQLiteApplicationRecorder):
    """The application recorder with the ledger's columns and an explicit position."""

    def __init__(self, datastore: SQLiteDatastore) -> None:
        super().__init__(datastore, events_table_name=Backend.events_table)
        self.insert_events_statement = (
            f"INSERT INTO {self.events_table_name} ({EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)"
        )
        self.select_max_notification_id_statement = (
            f"SELECT MAX(position) FROM {self.events_table_name}"
        )

    def construct_create_table_statements(self) -> list[str]:
        table = Backend.events_table
        return [
            f"CREATE TABLE IF NOT EXISTS {table} ("
            "position INTEGER PRIMARY KEY, "
            "originator_id TEXT NOT NULL, "
            "originator_version INTEGER NOT NULL, "
            "topic TEXT NOT NULL, "
            "schema_version INTEGER NOT NULL, "
            "state BLOB NOT NULL, "
            "recorded_at INTEGER NOT NULL, "
            "actor TEXT NOT NULL, "
            "namespace TEXT NOT NULL, "
            "hash BLOB NOT NULL, "
            "UNIQUE (originator_id, originator_version))",
            f"CREATE INDEX IF NOT EXISTS {table}_recorded_at ON {table} (recorded_at)",
            f"CREATE INDEX IF NOT EXISTS {table}_namespace ON {table} (namespace, position)",
            "CREATE TABLE IF NOT EXISTS erstwhile_keys (memory_id TEXT PRIMARY KEY, "
            "namespace TEXT NOT NULL, key_bytes BLOB NOT NULL, wrapped INTEGER NOT NULL) "
            "WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS erstwhile_keys_wrapped ON erstwhile_keys (memory_id) "
            "WHERE wrapped = 1",
            "CREATE TABLE IF NOT EXISTS erstwhile_idempotency ("
            "namespace TEXT NOT NULL, idempotency_key TEXT NOT NULL, "
            "fingerprint TEXT NOT NULL, memory_id TEXT NOT NULL, "
            "PRIMARY KEY (namespace, idempotency_key)) WITHOUT ROWID",
            *APPEND_ONLY_TRIGGERS,
        ]

    def insert_recorded(self, cursor: Any, events: Sequence[RecordedEvent]) -> None:
        """Insert fully formed events (position, time and hash already assigned)."""
        cursor.executemany(self.insert_events_statement, [e.as_row(e.memory_key) for e in events])


class SQLiteSql(CursorSql):
    """:class:`Sql` over a sqlite3 cursor (which already speaks ``?``)."""

    raw: sqlite3.Cursor

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self.raw.execute(statement, params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self.raw.executemany(statement, rows)


# SQLite has no UUID type: UUIDs are stored as their canonical text. (An adapter, not a
# conversion of every parameter in Python: sqlite3 consults it only for UUIDs.)
sqlite3.register_adapter(UUID, str)


def _identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (None when there is none)."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def holds_events(path: Path) -> bool:
    """Whether the SQLite file at ``path`` holds a ledger with at least one event, found
    without creating or changing anything (read-only; a file in WAL mode is read with
    its WAL). A file that is not there, another program's database, an empty file and a
    ledger nothing was written to hold none. A file that is no database at all is taken
    to hold some: opening it says what it is. ``StoreUnavailable`` when another
    connection keeps the file locked past the busy timeout."""
    if not path.exists():
        return False
    # Without a WAL beside it (beside the file a link names: SQLite keeps it there), the
    # file is all there is: read it as immutable, which takes no lock and leaves no -wal
    # or -shm beside it (read-only alone makes both). With one, SQLite reads it through
    # its index, the -shm, and makes that if it is missing (a copy without it).
    real = real_path(path)
    if real.is_dir():  # `/` has no name to put -wal after: opening says what it is
        return True
    quiet = "" if real.with_name(real.name + "-wal").exists() else "&immutable=1"
    try:
        raw = sqlite3.connect(
            f"{real.as_uri()}?mode=ro{quiet}", uri=True, timeout=BUSY_TIMEOUT_SECONDS
        )
    except sqlite3.Error:
        return True
    try:
        found = raw.execute(f"SELECT 1 FROM {Backend.events_table} LIMIT 1").fetchone()
        return found is not None
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return False
        if "locked" in str(error) or "busy" in str(error):
            raise StoreUnavailable(f"{path} is locked by another connection: {error}") from None
        return True
    except sqlite3.Error:
        return True
    finally:
        raw.close()


def _begin_immediate(raw: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, asking every :data:`WRITER_POLL_SECONDS` while another
    connection holds the write lock, for at most the busy timeout."""
    raw.execute("PRAGMA busy_timeout=0")
    try:
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                raw.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
            time.sleep(WRITER_POLL_SECONDS)
    finally:
        raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")


class SQLiteBackend(Backend):
    """A ledger in one SQLite file."""

    dialect = "sqlite"
    tracking_table = "tracking"
    writer_turn_seconds = 0.002

    def __init__(self, path: str) -> None:
        if Path(path).is_dir():  # SQLite's own word for it: "unable to open database file"
            inside = Path(path) / "erstwhile.db"
            raise StoreUnavailable(f"{path} is a directory: name a file in it (sqlite:///{inside})")
        self.url = f"sqlite:///{path}"
        self.path = path
        self.opened_as: tuple[int, int] | None = None
        """The file's device and inode once the tables exist: a follower follows that
        file, even when it is deleted before the follower starts."""
        self.datastore = LedgerSQLiteDatastore(path)
        self.recorder = LedgerSQLiteRecorder(self.datastore)
        self.tracker = SQLiteTrackingRecorder(self.datastore)

    @contextmanager
    def listener(self, stop: threading.Event) -> Iterator[Callable[[float], None]]:
        """Poll (see :meth:`Backend.listener`), and fail once the file the store was
        followed in is no longer at its path: its connections would go on reading the
        deleted (or replaced) file, its lag 0, while writers write elsewhere.

        A connection of its own holds the followed file open meanwhile: once the pool's
        connections had all closed, a file created at the path after a deletion could
        get the deleted one's inode back, and pass for it. (A SQLite connection, not a
        file Python opens: closing that would drop the locks SQLite holds on it.)"""
        gone = StoreUnavailable(
            f"{self.path} was deleted or replaced while it was followed; "
            "follow the store where it is now"
        )
        followed = self.opened_as or _identity(Path(self.path))
        pin = self._pin(followed, gone)
        try:

            def wait(seconds: float) -> None:
                stop.wait(seconds)
                if not stop.is_set() and _identity(Path(self.path)) != followed:
                    raise gone

            try:
                yield wait
            except Exception:
                # A fold that met the deleted files first fails on them ("disk I/O
                # error"): what happened is the deletion.
                if _identity(Path(self.path)) != followed:
                    raise gone from None
                raise
        finally:
            pin.close()

    def _pin(self, followed: tuple[int, int] | None, gone: StoreUnavailable) -> sqlite3.Connection:
        """A read-only connection holding the followed file open; ``gone`` when the file
        at the path is no longer the one opened (deleted between the opening and now,
        when the follower may have said it follows already)."""
        try:
            pin = sqlite3.connect(f"{real_path(Path(self.path)).as_uri()}?mode=ro", uri=True)
        except (sqlite3.Error, OSError):
            if _identity(Path(self.path)) != followed:
                raise gone from None
            raise
        try:
            pin.execute("PRAGMA schema_version").fetchone()  # opens the file
        except sqlite3.Error:
            pin.close()
            if _identity(Path(self.path)) != followed:
                raise gone from None
            raise
        if _identity(Path(self.path)) != followed:
            pin.close()
            raise gone
        return pin

    def files(self) -> tuple[Path, ...]:
        """The database file and the ones SQLite keeps beside it."""
        store = Path(self.path)
        return (store, *(store.with_name(store.name + end) for end in ("-wal", "-shm", "-journal")))

    def create_tables(self) -> None:
        """Create the tables in one ``BEGIN IMMEDIATE`` transaction, so processes opening
        a new file at once queue for the write lock instead of racing on the DDL.

        (No file lock: opening and closing the database file from Python would drop the
        POSIX locks SQLite's own connections in this process hold.)
        """
        with self.write() as sql:
            for statement in self.recorder.create_table_statements:
                sql.execute(statement)
            for statement in self.tracker.create_table_statements:
                sql.execute(statement)
            sql.execute(
                "INSERT INTO tracking (application_name, notification_id) "
                "VALUES ('__migration__', 1) ON CONFLICT DO NOTHING"
            )
        self.opened_as = _identity(Path(self.path))

    @contextmanager
    def write(self, durable: bool = True, bulk: bool = False) -> Iterator[Sql]:
        """A ``BEGIN IMMEDIATE`` transaction. Not ``durable``: WAL with
        ``synchronous=NORMAL``, atomic and consistent but not yet synced. ``bulk`` (and
        not durable): the commit checkpoints the WAL only past
        :data:`BULK_CHECKPOINT_PAGES`, since each checkpoint syncs the WAL and the file;
        the durable commit that follows a bulk run checkpoints the rest."""
        with self.datastore.get_connection(commit=True) as connection:
            raw = connection._sqlite_conn
            if not durable:
                raw.execute("PRAGMA synchronous=NORMAL")
                if bulk:
                    raw.execute(f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")
            try:
                _begin_immediate(raw)
                try:
                    yield SQLiteSql(raw.cursor())
                except BaseException:
                    raw.rollback()
                    raise
                raw.commit()
            finally:
                if not durable:
                    raw.execute("PRAGMA synchronous=FULL")
                    if bulk:
                        raw.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")

    @contextmanager
    def read(self) -> Iterator[Sql]:
        """A snapshot read: a pooled connection, ``BEGIN`` ... ``ROLLBACK``.

        (The same as eventsourcing's ``transaction(commit=False)`` without its layers of
        context managers, which cost more than a point query.)
        """
        pool = self.datastore.pool
        connection = pool.get_connection(is_writer=False)
        try:
            raw = connection._sqlite_conn
            cursor = raw.cursor()
            cursor.execute("BEGIN")
            try:
                yield SQLiteSql(cursor)
            finally:
                raw.rollback()
        finally:
            pool.put_connection(connection)

    @contextmanager
    def one_statement(self) -> Iterator[Sql]:
        """Run :meth:`Backend.read_one`'s statement on a pooled connection in autocommit:
        SQLite gives it a read transaction of its own, which ends when the statement
        does (closing the cursor ends one whose rows were not all fetched)."""
        pool = self.datastore.pool
        connection = pool.get_connection(is_writer=False)
        try:
            cursor = connection._sqlite_conn.cursor()
            try:
                yield SQLiteSql(cursor)
            finally:
                cursor.close()
        finally:
            pool.put_connection(connection)

    def scrub(self) -> None:
        """Rewrite the file without its free space (``VACUUM``), then checkpoint the WAL
        into it and truncate the WAL.

        ``secure_delete`` zeroes the cells a delete or an update frees, but not the old
        copies of cells a page split or merge moved to another page: those stay in the
        unused middle of the page they left, and a row later erased on its new page
        stays readable there (1 hard forget in about 300 left one; a purge of 2,500
        memories left 16). ``VACUUM`` writes every page anew from the live rows alone.
        The checkpoint moves the new pages home and empties the ``-wal`` file, which
        held the old ones. Each waits up to :attr:`scrub_wait_seconds` of its own (in
        the busy handler): the ``VACUUM`` for a writer holding the lock, the checkpoint
        for readers whose snapshot still needs the old pages, asking again while
        another connection runs one (SQLite says "busy" at once then); past it,
        ``StoreUnavailable`` says which step did not finish.
        """
        with self.datastore.get_connection(commit=True) as connection:
            raw = connection._sqlite_conn
            try:
                raw.execute(f"PRAGMA busy_timeout={int(self.scrub_wait_seconds * 1000)}")
                try:
                    raw.execute("VACUUM")
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) and "busy" not in str(error):
                        raise
                    raise StoreUnavailable(
                        f"the file could not be rewritten within {self.scrub_wait_seconds:g} "
                        "s (another connection kept the write lock), so copies of the "
                        "erased rows may stay in it"
                    ) from None
                deadline = time.monotonic() + self.scrub_wait_seconds
                while True:
                    left = max(deadline - time.monotonic(), 0.0)
                    raw.execute(f"PRAGMA busy_timeout={int(left * 1000)}")
                    busy, _, _ = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    # Busy at once, past the busy handler, while another connection runs
                    # a checkpoint of its own (another process's scrub): ask again.
                    if not busy or time.monotonic() >= deadline:
                        break
                    time.sleep(CHECKPOINT_RETRY_SECONDS)
            finally:
                raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")
        if busy:
            raise StoreUnavailable(
                f"the WAL could not be checkpointed within {self.scrub_wait_seconds:g} s "
                "(another connection kept reading from before the erase, or kept "
                "checkpointing), so the old pages stay in the -wal file"
            )

    def insert_events(self, sql: Sql, events: Sequence[RecordedEvent]) -> None:
        self.recorder.insert_recorded(sql.raw, events)

    def insert_tracking(self, sql: Sql, name: str, position: int) -> None:
        self.tracker._insert_tracking(sql.raw, self.tracking(name, position))

    def tracked_position(self, sql: Sql, name: str) -> int:
        return self.tracker._max_tracking_id(name, sql.raw) or 0

    def reset_tracking(self, sql: Sql, name: str) -> None:
        sql.execute("DELETE FROM tracking WHERE application_name = ?", (name,))

    def close(self) -> None:
        self.datastore.close()
