"""What the PostgreSQL backend recognises of an error that eventsourcing's pool wrapped."""

from __future__ import annotations

import psycopg
import pytest
from eventsourcing.persistence import OperationalError, ProgrammingError

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
