"""Shared fixtures: a hand-driven clock, and ledgers on a real SQLite file and on a
real PostgreSQL server.

PostgreSQL: ``$ERSTWHILE_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``)
names a server; each test run creates a fresh database there and each test a fresh
schema in it. Without a server the PostgreSQL tests skip with the reason, unless
``$CI`` or ``$ERSTWHILE_REQUIRE_POSTGRES`` is set: then a missing server fails them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from erstwhile import Ledger

SERVER_URL = os.environ.get(
    "ERSTWHILE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REQUIRE_POSTGRES = bool(os.environ.get("CI") or os.environ.get("ERSTWHILE_REQUIRE_POSTGRES"))
START = datetime(2026, 9, 1, tzinfo=UTC)


class ManualClock:
    """A clock tests move by hand; it may step backwards, as real clocks do."""

    def __init__(self, start: datetime = START) -> None:
        self.current = start

    def __call__(self) -> datetime:
        return self.current

    def set(self, instant: datetime | str) -> None:
        self.current = datetime.fromisoformat(instant) if isinstance(instant, str) else instant

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh database for this test run, dropped at the end."""
    try:
        admin = psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        message = f"PostgreSQL is not reachable at {SERVER_URL}: {error}".splitlines()[0]
        if REQUIRE_POSTGRES:
            pytest.fail(message)
        pytest.skip(message)
    name = f"erstwhile_test_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(SERVER_URL, name)
    finally:
        with psycopg.connect(SERVER_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """A URL naming a fresh, empty schema in the run's database."""
    return f"{postgres_database}?schema=t_{secrets.token_hex(6)}"


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/ledger.db"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh store on each backend in turn."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(fixture))


OpenLedger = Callable[..., Ledger]


@pytest.fixture
def open_ledger(store_url: str, clock: ManualClock) -> Iterator[OpenLedger]:
    """Open ledgers on the test's store (closed at the end); defaults to the test clock."""
    opened: list[Ledger] = []

    def open_(**options: object) -> Ledger:
        options.setdefault("clock", clock)
        options.setdefault("actor", "tester")
        ledger = Ledger.open(store_url, **options)  # type: ignore[arg-type]
        opened.append(ledger)
        return ledger

    yield open_
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(open_ledger: OpenLedger) -> Ledger:
    """A ledger in namespace ``acme`` on a fresh store, driven by the test clock."""
    return open_ledger(namespace="acme")


def event_count(ledger: Ledger) -> int:
    """How many events the whole log holds, every namespace, counted one by one."""
    from erstwhile.eventstore import EventFilter

    return sum(1 for _ in ledger.log.events(EventFilter()))
