"""What the backends make of the drivers' errors: PostgreSQL's recognised when
eventsourcing's pool wrapped them, and translated raw; and the PostgreSQL driver left
unloaded by a SQLite ledger."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from eventsourcing.persistence import OperationalError, ProgrammingError
from psycopg_pool import PoolClosed

from erstwhile import ConcurrencyConflict, StoreUnavailable
from erstwhile.eventstore import outcome_unknown, translated_errors
from erstwhile.eventstore.postgres_store import caused_by


def wrapped(error: Exception, wrapper: type[Exception]) -> Exception:
    """``error`` as eventsourcing's ``get_connection()`` re-raises it."""
    try:
        try:
            raise error
        except psycopg.Error as raised:
            raise wrapper(str(raised)) from raised
    except wrapper as caught:
        return caught


@pytest.mark.parametrize(
    ("error", "wrapper", "kind"),
    [
        (psycopg.errors.DeadlockDetected("deadlock"), OperationalError,
         psycopg.errors.DeadlockDetected),
        (psycopg.errors.InsufficientPrivilege("must be owner"), ProgrammingError,
         psycopg.errors.InsufficientPrivilege),
    ],
)  # fmt: skip
def test_a_driver_error_is_recognised_raw_or_wrapped(
    error: Exception, wrapper: type[Exception], kind: type[Exception]
) -> None:
    """The pool turns psycopg's errors into eventsourcing's own, which are not psycopg's:
    an ``except`` naming the driver's class never met them (a deadlock's retry never
    ran). The driver's error is the wrapper's cause."""
    outer = wrapped(error, wrapper)
    assert not isinstance(outer, kind)
    assert caused_by(outer, kind) and caused_by(error, kind)
    assert not caused_by(outer, psycopg.errors.UndefinedTable)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (psycopg.OperationalError("server closed the connection"),
         "the store failed: server closed the connection"),
        (psycopg.errors.UniqueViolation("duplicate key"),
         "the store refused a write: duplicate key"),
        (PoolClosed("the pool is closed"), "the ledger was closed"),
    ],
)  # fmt: skip
def test_a_raw_driver_error_never_leaks(error: Exception, message: str) -> None:
    """The backends look psycopg's classes up once the driver is loaded (it is not,
    for a SQLite ledger): its errors, raw, still turn into erstwhile's."""
    with pytest.raises(StoreUnavailable, match=message), translated_errors():
        raise error
    with pytest.raises(ConcurrencyConflict), translated_errors(conflicts=True):
        raise psycopg.errors.UniqueViolation("duplicate key")


def test_a_sqlite_ledger_and_the_command_line_do_not_load_the_postgresql_driver(
    tmp_path: Path,
) -> None:
    """Loading psycopg costs a SQLite ledger (and each run of the command line) about a
    tenth of a second it has no use for: a write, a search and a command's whole run
    (its own imports included) leave it unloaded."""
    script = (
        "import sys\n"
        "from erstwhile import Ledger\n"
        f"with Ledger.open('sqlite:///{tmp_path}/l.db', namespace='a') as ledger:\n"
        "    ledger.remember('The team uses Supabase', subject='team')\n"
        "    assert [h.memory.subject for h in ledger.search('Supabase')] == ['team']\n"
        "from erstwhile.cli.app import main\n"
        f"sys.argv = ['erstwhile', '--db', 'sqlite:///{tmp_path}/l.db', '--namespace', 'a',\n"
        "            '--json', 'facts', 'team']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "             ('psycopg', 'psycopg_pool', 'psycopg_binary')\n"
        "             or m == 'eventsourcing.postgres'\n"
        "             or m.startswith('erstwhile.eventstore.postgres')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    *printed, loaded = done.stdout.strip().splitlines()
    assert "The team uses Supabase" in "".join(printed)  # the command ran and answered
    assert loaded == "[]"


def sqlite_error(name: str, message: str) -> sqlite3.Error:
    """A SQLite error as the driver raises it, its error name set."""
    error = sqlite3.OperationalError(message)
    error.sqlite_errorname = name
    return error


@pytest.mark.parametrize(
    ("error", "unknown"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (psycopg.errors.ConnectionFailure("connection failure"), True),
        (psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"), False),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
        (psycopg.errors.SerializationFailure("could not serialize"), False),
        (sqlite_error("SQLITE_IOERR_FSYNC", "disk I/O error"), True),
        (sqlite_error("SQLITE_BUSY", "database is locked"), False),
        (sqlite_error("SQLITE_FULL", "database or disk is full"), False),
        (ValueError("not a store's error"), False),
    ],
)
def test_whether_a_failed_write_may_have_committed(error: Exception, unknown: bool) -> None:
    """A lost connection (or a failed disk) leaves a write's outcome unknown, raw,
    wrapped by eventsourcing's pool and translated; a refusal the store reported does
    not (the write was rolled back)."""
    assert outcome_unknown(error) is unknown
    pooled = OperationalError(str(error))  # as eventsourcing's pool re-raises it
    pooled.__cause__ = error
    assert outcome_unknown(pooled) is unknown
    try:
        with translated_errors():
            raise error
    except StoreUnavailable as translated:
        assert outcome_unknown(translated) is unknown
    except ValueError:
        assert not unknown
    assert not outcome_unknown(StoreUnavailable("the ledger was closed"))
