"""What the backends make of the drivers' errors: PostgreSQL's recognised when
eventsourcing's pool wrapped them, and translated raw; and the PostgreSQL driver left
unloaded by a SQLite ledger."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from eventsourcing.persistence import OperationalError, ProgrammingError
from psycopg_pool import PoolClosed

from erstwhile import ConcurrencyConflict, StoreUnavailable
from erstwhile.eventstore import translated_errors
from erstwhile.eventstore.postgres import _caused_by


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
    assert _caused_by(outer, kind) and _caused_by(error, kind)
    assert not _caused_by(outer, psycopg.errors.UndefinedTable)


@pytest.mark.parametrize(
    ("error", "translated", "message"),
    [
        (psycopg.OperationalError("server closed the connection"), StoreUnavailable,
         "the store failed: server closed the connection"),
        (psycopg.errors.UniqueViolation("duplicate key"), StoreUnavailable,
         "the store refused a write: duplicate key"),
        (PoolClosed("the pool is closed"), StoreUnavailable, "the ledger was closed"),
    ],
)  # fmt: skip
def test_a_raw_driver_error_never_leaks(
    error: Exception, translated: type[Exception], message: str
) -> None:
    """The backends look psycopg's classes up once the driver is loaded (it is not,
    for a SQLite ledger): its errors, raw, still turn into erstwhile's."""
    with pytest.raises(translated, match=message), translated_errors():
        raise error
    with pytest.raises(ConcurrencyConflict), translated_errors(conflicts=True):
        raise psycopg.errors.UniqueViolation("duplicate key")


def test_a_sqlite_ledger_and_the_command_line_do_not_load_the_postgresql_driver(
    tmp_path: Path,
) -> None:
    """Loading psycopg costs a SQLite ledger (and each run of the command line) about a
    tenth of a second it has no use for."""
    script = (
        "import sys\n"
        "from erstwhile import Ledger\n"
        f"with Ledger.open('sqlite:///{tmp_path}/l.db', namespace='a') as ledger:\n"
        "    ledger.remember('The team uses Supabase', subject='team')\n"
        "    assert [h.memory.subject for h in ledger.search('Supabase')] == ['team']\n"
        "    assert len(ledger.facts('team')) == 1\n"
        "import erstwhile.cli.app\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "             ('psycopg', 'psycopg_pool', 'psycopg_binary')\n"
        "             or m in ('eventsourcing.postgres', 'erstwhile.eventstore.postgres')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"
