"""Every bad input of the contract gets a clear, one-line error and appends nothing."""

from __future__ import annotations

import io
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import psycopg
import pytest

from erstwhile import ErstwhileError, Ledger, NotFound, StoreUnavailable, ValidationError
from tests.conftest import ManualClock, OpenLedger, event_count
from tests.unit.test_memory_input import BAD_INPUTS

Command = Callable[[Ledger, Any, Any], object]
STOPPED = threading.Event()
STOPPED.set()


@pytest.fixture
def seeded(open_ledger: OpenLedger) -> tuple[Ledger, Any, Any]:
    """A ledger with one memory of its own and one in another namespace."""
    ledger = open_ledger(namespace="acme")
    mine = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                           value="Supabase", valid_from="2026-03-01T00:00:00Z")  # fmt: skip
    theirs = open_ledger(namespace="other").remember("not yours", subject="team")
    return ledger, mine, theirs


def answers(ledger: Ledger) -> dict[str, Any]:
    """The whole log (every namespace) and what the projections answer."""
    return {
        "events": event_count(ledger),
        "log": [e.model_dump() for e in ledger.events()],
        "facts": ledger.facts("team"),
        "search": ledger.search("", include_history=True),
        "conflicts": ledger.conflicts(),
        "proposals": ledger.proposals(),
    }


def assert_refused(ledger: Ledger, attempt: Callable[[], object], error: type[Exception],
                   match: str | None = None) -> None:  # fmt: skip
    before = answers(ledger)
    with pytest.raises(error, match=match) as refused:
        attempt()
    assert isinstance(refused.value, ErstwhileError)
    assert "\n" not in str(refused.value) and str(refused.value)
    assert answers(ledger) == before


KEYWORD_INPUTS = [(arguments, message) for arguments, message in BAD_INPUTS
                  if message != "unknown argument"]  # fmt: skip
"""The bad inputs that are parameters of ``remember``'s signature."""


@pytest.mark.parametrize(("arguments", "message"), KEYWORD_INPUTS)
def test_remember_refuses_bad_input(
    seeded: tuple[Ledger, Any, Any], arguments: dict[str, Any], message: str
) -> None:
    ledger, _, _ = seeded
    fields = dict(arguments)
    content = fields.pop("content")
    assert_refused(ledger, lambda: ledger.remember(content, **fields), ValidationError, message)
    assert_refused(
        ledger,
        lambda: ledger.remember_many([{"content": "ok"}, arguments]),
        ValidationError,
        f"^item 1: .*{message}",
    )


def test_an_unknown_argument_is_a_type_error_of_remember_and_refused_in_a_batch(
    seeded: tuple[Ledger, Any, Any],
) -> None:
    """``remember`` has a typed signature, so Python itself refuses a keyword it does not
    name; ``remember_many`` takes data, and refuses an unknown key as bad input."""
    ledger, _, _ = seeded
    before = event_count(ledger)
    with pytest.raises(TypeError, match="colour"):
        ledger.remember("x", colour="red")  # type: ignore[call-arg]
    assert event_count(ledger) == before
    batch = [{"content": "ok"}, {"content": "x", "colour": "red"}]
    assert_refused(ledger, lambda: ledger.remember_many(batch), ValidationError, "unknown argument")
    assert_refused(ledger, lambda: ledger.revise(ledger.facts("team")[0].id, "y", colour="red"),
                   ValidationError, "unknown argument")  # fmt: skip


BAD_COMMANDS: list[tuple[str, Command, type[Exception], str]] = [
    ("unknown id", lambda ledger, mine, theirs: ledger.revise(uuid4(), "x"), NotFound, "no memory"),
    ("malformed id", lambda ledger, mine, theirs: ledger.archive("42"), NotFound, "not a memory id"),
    ("other namespace", lambda ledger, mine, theirs: ledger.revise(theirs.id, "mine now"), NotFound, ""),
    ("other namespace supersedes", lambda ledger, mine, theirs: ledger.remember("x", supersedes=[theirs.id]), NotFound, ""),
    ("other namespace forget", lambda ledger, mine, theirs: ledger.forget(theirs.id), NotFound, ""),
    ("other namespace archive", lambda ledger, mine, theirs: ledger.archive(theirs.id), NotFound, ""),
    ("naive at", lambda ledger, mine, theirs: ledger.revise(mine.id, "x", value=1, at=datetime(2026, 7, 1)), ValidationError, "naive"),
    ("bare date", lambda ledger, mine, theirs: ledger.remember("x", valid_from="2026-07-01"), ValidationError, "valid_from: '2026-07-01' is naive"),
    ("bad at", lambda ledger, mine, theirs: ledger.revise(mine.id, "x", value=1, at="July"), ValidationError, "ISO 8601"),
    ("revise with supersedes", lambda ledger, mine, theirs: ledger.revise(mine.id, "x", supersedes=[mine.id]), ValidationError, "supersedes"),
    ("reason with NUL", lambda ledger, mine, theirs: ledger.archive(mine.id, reason="a\x00"), ValidationError, "NUL"),
    ("naive known_at", lambda ledger, mine, theirs: ledger.get(mine.id, known_at=datetime(2026, 1, 1)), ValidationError, "naive"),
    ("naive as_of", lambda ledger, mine, theirs: ledger.facts("team", as_of=datetime(2026, 1, 1)), ValidationError, "naive"),
    ("empty subject", lambda ledger, mine, theirs: ledger.facts(" "), ValidationError, "subject"),
    ("naive since", lambda ledger, mine, theirs: list(ledger.events(since=datetime(2026, 1, 1))), ValidationError, "naive"),
    ("unknown policy", lambda ledger, mine, theirs: ledger.remember("x", policy="yolo"), ValidationError, "policy"),
    ("bad supersedes id", lambda ledger, mine, theirs: ledger.remember("x", supersedes=["nope"]), NotFound, ""),
    ("observed_position past the head", lambda ledger, mine, theirs: ledger.remember("x", observed_position=ledger.head() + 1), ValidationError, "past the log's head"),
    ("observed_position too large", lambda ledger, mine, theirs: ledger.remember("x", observed_position=2**70), ValidationError, "log position"),
    ("idempotency key with a surrogate", lambda ledger, mine, theirs: ledger.remember("x", idempotency_key="\ud800"), ValidationError, "surrogate"),
    ("a batch item that is not a mapping", lambda ledger, mine, theirs: ledger.remember_many([{"content": "ok"}, "x"]), ValidationError, "item 1"),
    ("a batch that is not a list", lambda ledger, mine, theirs: ledger.remember_many(None), ValidationError, "list of mappings"),
    ("a batch that is one item", lambda ledger, mine, theirs: ledger.remember_many({"content": "x"}), ValidationError, "got one dict: for one memory, pass \\[item\\]"),
    ("a batch that is text", lambda ledger, mine, theirs: ledger.remember_many("x"), ValidationError, "got one str"),
    ("as_of beyond the calendar in UTC", lambda ledger, mine, theirs: ledger.facts("team", as_of="0001-01-01T00:00:00+01:00"), ValidationError, "years 1 to 9999"),
    ("facts attribute not text", lambda ledger, mine, theirs: ledger.facts("team", attribute=5), ValidationError, "attribute"),
    ("timeline attribute not text", lambda ledger, mine, theirs: ledger.timeline("team", attribute=5), ValidationError, "attribute"),
    ("search query not text", lambda ledger, mine, theirs: ledger.search(5), ValidationError, "query must be text, not int"),
    ("search query with NUL", lambda ledger, mine, theirs: ledger.search("te\x00am"), ValidationError, "query must not contain NUL"),
    ("reason not text", lambda ledger, mine, theirs: ledger.archive(mine.id, reason=5), ValidationError, "reason must be text, not int"),
    ("search subject not text", lambda ledger, mine, theirs: ledger.search("team", subject=5), ValidationError, "subject"),
    ("search attribute not text", lambda ledger, mine, theirs: ledger.search("team", attribute=["a"]), ValidationError, "attribute"),
    ("search entity not text", lambda ledger, mine, theirs: ledger.search("team", entities=[5]), ValidationError, "entities"),
    ("search entities one string", lambda ledger, mine, theirs: ledger.search("team", entities="bob"), ValidationError, "list of names"),
    ("search kinds not a list", lambda ledger, mine, theirs: ledger.search("team", kinds=5), ValidationError, "list of names"),
    ("reason with a surrogate", lambda ledger, mine, theirs: ledger.archive(mine.id, reason="\ud800"), ValidationError, "surrogate"),
    ("events after not a position", lambda ledger, mine, theirs: list(ledger.events(after="3")), ValidationError, "log position"),
    ("events until too large", lambda ledger, mine, theirs: list(ledger.events(until=2**70)), ValidationError, "log position"),
    ("events after negative", lambda ledger, mine, theirs: list(ledger.events(after=-1)), ValidationError, "log position"),
    ("events actor not text", lambda ledger, mine, theirs: list(ledger.events(actor=5)), ValidationError, "actor"),
    ("conflicts subject not text", lambda ledger, mine, theirs: ledger.conflicts(5), ValidationError, "subject"),
    ("conflicts subject a list", lambda ledger, mine, theirs: ledger.conflicts(["team"]), ValidationError, "subject"),
    ("conflicts subject empty", lambda ledger, mine, theirs: ledger.conflicts(""), ValidationError, "subject"),
    ("conflicts subject with NUL", lambda ledger, mine, theirs: ledger.conflicts("te\x00am"), ValidationError, "subject"),
    ("get id not an id", lambda ledger, mine, theirs: ledger.get(5), ValidationError, "memory_id"),
    ("get id a list", lambda ledger, mine, theirs: ledger.get([mine.id]), ValidationError, "memory_id"),
    ("history id None", lambda ledger, mine, theirs: ledger.history(None), ValidationError, "memory_id"),
    ("chain id a number", lambda ledger, mine, theirs: ledger.chain(1.5), ValidationError, "memory_id"),
    ("knows later_id not an id", lambda ledger, mine, theirs: ledger.knows(5, mine.id), ValidationError, "later_id"),
    ("knows earlier_id not an id", lambda ledger, mine, theirs: ledger.knows(mine.id, None), ValidationError, "earlier_id"),
    ("events memory_id not an id", lambda ledger, mine, theirs: list(ledger.events(memory_id=5)), ValidationError, "memory_id"),
    ("revise older_id not an id", lambda ledger, mine, theirs: ledger.revise(5, "x"), ValidationError, "older_id"),
    ("archive id not an id", lambda ledger, mine, theirs: ledger.archive(5), ValidationError, "memory_id"),
    ("forget id not an id", lambda ledger, mine, theirs: ledger.forget(b"x"), ValidationError, "memory_id"),
    ("accept id not an id", lambda ledger, mine, theirs: ledger.accept(5), ValidationError, "proposal_id"),
    ("reject id not an id", lambda ledger, mine, theirs: ledger.reject(5), ValidationError, "proposal_id"),
    ("forget hard not a flag", lambda ledger, mine, theirs: ledger.forget(mine.id, hard="no"), ValidationError, "hard"),
    ("search include_history not a flag", lambda ledger, mine, theirs: ledger.search("team", include_history="no"), ValidationError, "include_history"),
    ("remember supersedes not a list", lambda ledger, mine, theirs: ledger.remember("x", supersedes=5), ValidationError, "supersedes"),
    ("remember supersedes item a number", lambda ledger, mine, theirs: ledger.remember("x", supersedes=[5]), ValidationError, "supersedes"),
    ("remember supersedes one memory twice", lambda ledger, mine, theirs: ledger.remember("x", supersedes=[mine.id, str(mine.id)]), ValidationError, "twice"),
    ("export out not a file", lambda ledger, mine, theirs: ledger.export(5), ValidationError, "out"),
    ("export out a text file", lambda ledger, mine, theirs: ledger.export(io.StringIO()), ValidationError, "binary"),
    ("export all_namespaces not a flag", lambda ledger, mine, theirs: ledger.export(io.BytesIO(), all_namespaces="no"), ValidationError, "all_namespaces"),
    ("export progress not callable", lambda ledger, mine, theirs: ledger.export(io.BytesIO(), progress=5), ValidationError, "progress"),
    ("import lines not lines", lambda ledger, mine, theirs: ledger.import_events(5), ValidationError, "lines"),
    ("import progress not callable", lambda ledger, mine, theirs: ledger.import_events([], progress=5), ValidationError, "progress"),
    ("replay progress not callable", lambda ledger, mine, theirs: ledger.replay(mine.recorded_at, progress=5), ValidationError, "progress"),
    ("rebuild progress not callable", lambda ledger, mine, theirs: ledger.rebuild(progress=5), ValidationError, "progress"),
    ("wait_for position not a position", lambda ledger, mine, theirs: ledger.wait_for("1"), ValidationError, "position"),
    ("wait_for position negative", lambda ledger, mine, theirs: ledger.wait_for(-1), ValidationError, "position"),
    ("wait_for timeout not a number", lambda ledger, mine, theirs: ledger.wait_for(timeout="1"), ValidationError, "timeout"),
    ("wait_for timeout NaN", lambda ledger, mine, theirs: ledger.wait_for(timeout=float("nan")), ValidationError, "timeout"),
    ("remember idempotency_key too long", lambda ledger, mine, theirs: ledger.remember("x", idempotency_key="k" * 1025), ValidationError, "idempotency_key is longer than 1024 bytes"),
    ("remember_many idempotency_key too long in UTF-8", lambda ledger, mine, theirs: ledger.remember_many([{"content": "x"}, {"content": "y", "idempotency_key": "é" * 513}]), ValidationError, "1024 bytes"),
    ("wait_for position beyond the log's range", lambda ledger, mine, theirs: ledger.wait_for(2**62), ValidationError, r"from 0 to 4,611,686,018,427,387,903"),
    ("wait_for timeout beyond a float", lambda ledger, mine, theirs: ledger.wait_for(timeout=10**400), ValidationError, "timeout must be at most"),
    ("follow poll beyond a thread's wait", lambda ledger, mine, theirs: ledger.follow(stop=STOPPED, poll=10**12), ValidationError, "poll must be at most"),
    ("follow stop not an event", lambda ledger, mine, theirs: ledger.follow(stop=5), ValidationError, "stop"),
    ("follow poll not a number", lambda ledger, mine, theirs: ledger.follow(stop=STOPPED, poll="1"), ValidationError, "poll"),
    ("follow poll zero", lambda ledger, mine, theirs: ledger.follow(stop=STOPPED, poll=0), ValidationError, "poll"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "error", "match"),
    [pytest.param(c, e, m, id=name) for name, c, e, m in BAD_COMMANDS],
)
def test_commands_refuse_bad_arguments(
    seeded: tuple[Ledger, Any, Any], command: Command, error: type[Exception], match: str
) -> None:
    ledger, mine, theirs = seeded
    assert_refused(ledger, lambda: command(ledger, mine, theirs), error, match or None)


@pytest.mark.parametrize(
    "options",
    [{"namespace": ""}, {"namespace": "a\x00"}, {"actor": " "}, {"actor": "x" * 500}],
)
def test_open_refuses_bad_names(store_url: str, options: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Ledger.open(store_url, **options)  # type: ignore[arg-type]


def test_a_name_is_trimmed_before_its_length_counts_and_otherwise_kept_as_written(
    open_ledger: OpenLedger,
) -> None:
    """A name padded past the limit was refused though the name itself fits. Accents
    are not composed: a store's memories stay reachable under the name they were
    written under (two spellings of "café" are two namespaces, as two keys are)."""
    assert open_ledger(namespace=" " + "n" * 200 + " ").namespace == "n" * 200
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    written = open_ledger(namespace=decomposed, actor=f" {decomposed} ").remember("Hi")
    assert open_ledger(namespace=decomposed).get(written.id).actor == decomposed
    with pytest.raises(NotFound):
        open_ledger(namespace=composed).get(written.id)


def store_made(url: str) -> bool:
    """Whether anything of the store a URL names exists: the SQLite file, or the schema."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///")).exists()
    parts = urlsplit(url)
    schema = parts.query.removeprefix("schema=")
    with psycopg.connect(urlunsplit(parts._replace(query=""))) as connection:
        found = connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    return found != (0,)


@pytest.mark.parametrize(
    ("options", "named"),
    [({"clock": 5}, "clock"), ({"clock": "2026-01-01T00:00:00Z"}, "clock"),
     ({"sync_projections": "no"}, "sync_projections"), ({"url": 5}, "url"),
     ({"url": b"ledger.db"}, "url")],
)  # fmt: skip
def test_open_refuses_arguments_of_the_wrong_type_before_making_a_store(
    store_url: str, options: dict[str, Any], named: str
) -> None:
    """A clock that cannot be called failed at the first write, a truthy string for
    sync_projections meant True, a number for the URL was a raw TypeError."""
    arguments = {"url": store_url} | options
    with pytest.raises(ValidationError, match=named) as refused:
        Ledger.open(**arguments)
    assert "\n" not in str(refused.value)
    assert not store_made(store_url)


def test_a_clock_at_the_calendars_end_is_refused_and_leaves_room_for_later_writes(
    seeded: tuple[Ledger, Any, Any], open_ledger: OpenLedger
) -> None:
    """A clock reading the calendar's last second recorded a write there, after which
    nothing (not even a hard forget) could follow it, and a batch's stamps overflowed
    with a bare OverflowError. Now such a reading is refused, nothing stored; a write
    just before it leaves the log room to go on."""
    ledger, mine, _ = seeded
    end = datetime.max.replace(tzinfo=UTC)
    at_end = open_ledger(namespace="acme", clock=lambda: end)
    assert_refused(ledger, lambda: at_end.remember("one"), ValidationError, "calendar's end")
    assert_refused(ledger, lambda: at_end.remember_many([{"content": "a"}, {"content": "b"}]),
                   ValidationError, "calendar's end")  # fmt: skip
    assert_refused(ledger, lambda: at_end.archive(mine.id), ValidationError, "calendar's end")
    near = open_ledger(namespace="acme", clock=lambda: end - timedelta(seconds=2))
    made = near.remember_many([{"content": "a"}, {"content": "b"}])
    later = near.remember("after it, in the second kept for later writes")
    near.forget(made[0].id, hard=True)
    assert made[0].recorded_at < later.recorded_at < end


def test_events_refuses_bad_arguments_at_the_call(seeded: tuple[Ledger, Any, Any]) -> None:
    """Not only once the stream is read: a stream kept for later fails where it was made."""
    ledger, _, _ = seeded
    for arguments, named in [({"memory_id": 5}, "memory_id"), ({"after": -1}, "after"),
                             ({"since": "July"}, "since"), ({"actor": 5}, "actor")]:  # fmt: skip
        with pytest.raises(ValidationError, match=named):
            ledger.events(**arguments)


def test_an_id_is_read_in_its_usual_spellings_and_nothing_that_only_looks_like_one(
    seeded: tuple[Ledger, Any, Any],
) -> None:
    """``UUID(text)`` read " 1a2..." (a space for the leading zero) as "01a2...", and
    other scripts' digits and underscores as hex digits, yet refused ``URN:UUID:`` in
    capitals and an id pasted with its newline."""
    ledger, mine, _ = seeded
    text = str(mine.id)
    for spelling in (text, text.upper(), f" {text}\n", f"{{{text}}}", text.replace("-", ""),
                     f"urn:uuid:{text}", f"URN:UUID:{text.upper()}"):  # fmt: skip
        assert ledger.get(spelling).id == mine.id, spelling
    arabic_zero = "\u0660"
    lookalikes = (
        f" {text[1:]}",  # a space where the leading zero is
        arabic_zero + text[1:],
        f"{text[:4]}_{text[5:]}",
        text[:-1] + "}",
        f"{{{text}",
        text.replace("-", "", 2),  # some dashes but not all
        f"uuid:{text}",
    )
    before = answers(ledger)
    for lookalike in lookalikes:
        with pytest.raises(NotFound, match="is not a memory id"):
            ledger.get(lookalike)
        with pytest.raises(NotFound, match="is not a memory id"):
            ledger.archive(lookalike)
        with pytest.raises(NotFound, match=r"supersedes: .* is not a memory id"):
            ledger.remember("MySQL now", subject="team", attribute="database", value="MySQL",
                            supersedes=[lookalike])  # fmt: skip
    assert answers(ledger) == before


def test_arguments_are_checked_before_a_no_op(seeded: tuple[Ledger, Any, Any]) -> None:
    """Archiving an archived memory, forgetting a forgotten one and rejecting a rejected
    proposal change nothing, but a bad argument to them is still refused, not ignored."""
    ledger, mine, _ = seeded
    ledger.remember("The team uses Neon", subject="team", attribute="database", value="Neon",
                    valid_from="2026-05-01T00:00:00Z")  # fmt: skip
    (proposal,) = ledger.proposals()
    ledger.reject(proposal.id)
    ledger.archive(mine.id)
    gone = ledger.remember("A typo", subject="team")
    ledger.forget(gone.id)
    for attempt, named in [
        (lambda: ledger.archive(mine.id, reason=5), "reason"),
        (lambda: ledger.forget(gone.id, reason=["why"]), "reason"),
        (lambda: ledger.forget(gone.id, hard=0), "hard"),
        (lambda: ledger.reject(proposal.id, reason=5), "reason"),
    ]:
        assert_refused(ledger, attempt, ValidationError, named)


@pytest.mark.parametrize(
    ("change", "reason"),
    [({"path": "/no_such_database"}, "does not exist"),
     ({"netloc": "no_such_role@127.0.0.1:5432"}, "does not exist"),
     ({"netloc": "postgres@127.0.0.1:1"}, "refused")],
)  # fmt: skip
def test_a_postgresql_store_that_cannot_be_reached_says_why_at_once(
    postgres_database: str, change: dict[str, str], reason: str
) -> None:
    """The server's own reason, not the connection pool's timeout ten seconds later."""
    url = urlunsplit(urlsplit(postgres_database)._replace(**change))
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=reason):
        Ledger.open(url)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("schema", ["hunt-2", "Mixed", "1st", "a b", "x" * 64])
def test_open_refuses_a_schema_name_postgresql_would_need_quoted(
    postgres_database: str, schema: str
) -> None:
    """Refused before connecting, with what to use instead, not the server's syntax
    error; and nothing is created on the server."""
    with pytest.raises(ValidationError, match="plain name"):
        Ledger.open(f"{postgres_database}?schema={schema}")
    with psycopg.connect(postgres_database) as connection:
        found = connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,)
        ).fetchone()
    assert found == (0,)


def test_a_postgresql_url_gives_libpq_its_own_parameters(postgres_url: str) -> None:
    """``sslmode``, ``application_name``, ``connect_timeout`` and the like reach every
    connection; a name libpq does not know (a misspelt ``schema``, or one of psycopg's
    own arguments) is refused before connecting, not dropped."""
    probe = f"{postgres_url}&application_name=erstwhile_probe&connect_timeout=3"
    ledger = Ledger.open(probe)
    with ledger, ledger.log.backend.read() as sql:
        sql.execute("SELECT current_setting('application_name') AS name")
        assert sql.fetchone()["name"] == "erstwhile_probe"
    for wrong in ("schem", "prepare_threshold"):
        refused = postgres_url.replace("?schema=", f"?{wrong}=") + "_refused"
        with pytest.raises(ValidationError, match=f"unknown parameter '{wrong}'"):
            Ledger.open(refused)
    server = urlunsplit(urlsplit(postgres_url)._replace(query=""))
    with psycopg.connect(server) as connection:  # refused before connecting: nothing made
        made = connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE %s",
            ("%_refused",),
        ).fetchone()
    assert made == (0,)


def test_a_postgresql_url_holding_a_nul_is_refused_before_connecting() -> None:
    """libpq reads its parameters as C strings: a database name cut at a NUL dropped
    the parameters after it, the host among them, and another server answered. (The
    host here routes nowhere: a connection attempt would end in StoreUnavailable.)"""
    server = "postgresql://postgres@10.255.255.1:5432"
    for url in (
        f"{server}/test%00?schema=s",
        "postgresql://po%00stgres@10.255.255.1/test",
        "postgresql://postgres:p%00w@10.255.255.1/test",
        f"{server}/test?application_name=a%00b",
    ):
        with pytest.raises(ValidationError, match=r"holds a NUL character \(%00\)"):
            Ledger.open(url)


FOREIGN_TABLES = [
    ("memories", "CREATE TABLE {schema}memories (id integer PRIMARY KEY, note text)",
     "holds no erstwhile log but already has tables of the names erstwhile makes "
     r"\(memories\)"),
    ("{tracking}", "CREATE TABLE {schema}{tracking} (job integer, note text)",
     r"already has tables .*\((erstwhile_)?tracking\)"),
    ("memory_search_data", "CREATE TABLE {schema}memory_search_data (id integer, block text)",
     r"already has tables .*\(memory_search_data\)"),
    ("Proposals", 'CREATE TABLE {schema}"Proposals" (id integer, note text)', None),
    ("erstwhile_events", "CREATE TABLE {schema}erstwhile_events (position integer, body text)",
     "holds a table 'erstwhile_events' that is not an erstwhile log "
     r"\(it has no originator_id, .*, hash column\)"),
]  # fmt: skip


@pytest.mark.parametrize(("table", "create", "message"), FOREIGN_TABLES)
def test_a_store_holding_another_programs_table_of_a_ledgers_name_is_refused_unchanged(
    store_url: str, table: str, create: str, message: str | None
) -> None:
    """Every table is made ``IF NOT EXISTS``: another program's ``memories`` was taken
    for the ledger's, the log's tables were added beside it, and the first write
    failed with "no such column: namespace". Now the opening refuses the store, names
    the table, and leaves the store as it was, the other program's row in it."""
    postgres = store_url.startswith("postgresql")
    schema = store_url.partition("?schema=")[2]

    def run(*statements: str) -> list[Any]:
        if postgres:
            with psycopg.connect(store_url.partition("?")[0], autocommit=True) as connection:
                cursors = [connection.execute(s) for s in statements]
                return [c.fetchall() if c.description else None for c in cursors]
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as connection:
            found: list[Any] = [connection.execute(s).fetchall() for s in statements]
        connection.close()
        return found

    listing = (
        f"SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE n.nspname = '{schema}' ORDER BY 1"
        if postgres
        else "SELECT name FROM sqlite_master ORDER BY 1"
    )
    prefix = f"{schema}." if postgres else ""
    tracking = "erstwhile_tracking" if postgres else "tracking"  # the log's own
    table, create = table.format(tracking=tracking), create.format(schema=prefix, tracking=tracking)
    if postgres:
        run(f"CREATE SCHEMA {schema}")
    quoted = f'{prefix}"{table}"'
    run(create, f"INSERT INTO {quoted} VALUES (7, 'theirs')")
    before = run(listing, f"SELECT * FROM {quoted}")
    if message is None and postgres:  # "Proposals" is not proposals there: no clash
        Ledger.open(store_url).close()
        return
    with pytest.raises(StoreUnavailable, match=message or r"already has tables .*\(proposals\)"):
        Ledger.open(store_url)  # SQLite's names ignore case: "Proposals" is proposals
    assert run(listing, f"SELECT * FROM {quoted}") == before


@pytest.mark.postgres
@pytest.mark.parametrize("encoding", ["LATIN1", "SQL_ASCII"])
def test_a_database_that_does_not_store_utf8_is_refused_before_anything_is_made(
    postgres_database: str, encoding: str
) -> None:
    """A LATIN1 database could not store a memory in Japanese (psycopg's raw
    UnicodeEncodeError); from a SQL_ASCII one psycopg reads text as bytes (a raw
    TypeError at the opening, after it had made tables)."""
    name = f"erstwhile_{encoding.lower()}_{uuid4().hex[:8]}"
    with psycopg.connect(postgres_database, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} ENCODING '{encoding}' LC_COLLATE 'C' "
                      "LC_CTYPE 'C' TEMPLATE template0")  # fmt: skip
    url = urlunsplit(urlsplit(postgres_database)._replace(path=f"/{name}", query="schema=s"))
    try:
        with pytest.raises(StoreUnavailable, match=f"encoding is {encoding}: .* UTF8 database"):
            Ledger.open(url)
        with psycopg.connect(url.partition("?")[0]) as connection:
            made = connection.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 's'")
            assert made.fetchone() == (0,)
    finally:
        with psycopg.connect(postgres_database, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.postgres
def test_another_client_encoding_set_outside_the_url_is_put_back_to_utf8(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGCLIENTENCODING", "LATIN1")
    with Ledger.open(postgres_url) as ledger:
        written = ledger.remember("東京のチーム uses Supabase", subject="チーム")
        assert ledger.get(written.id).content == "東京のチーム uses Supabase"
        assert [hit.memory.id for hit in ledger.search("東京のチーム")] == [written.id]


@pytest.mark.postgres
def test_sessions_the_server_ended_cost_one_failed_call_not_one_per_connection(
    postgres_url: str,
) -> None:
    """The server ends every session of the ledger (a restart, an administrator): the
    call that meets the first lost connection fails, and the pool's other idle ones
    are checked then, so the calls after it succeed. Each lost connection used to fail
    a call of its own, one after another."""
    name = f"erstwhile_lost_{uuid4().hex[:8]}"
    server = urlunsplit(urlsplit(postgres_url)._replace(query=""))
    with Ledger.open(f"{postgres_url}&application_name={name}", namespace="acme") as ledger:
        memory = ledger.remember("The team uses Supabase", subject="team")
        threads = [threading.Thread(target=ledger.head) for _ in range(4)]
        for thread in threads:  # several connections in the pool, all idle again
            thread.start()
        for thread in threads:
            thread.join()
        with psycopg.connect(server, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (name,),
            ).fetchone()
        assert ended is not None and ended[0] >= 1
        with pytest.raises(StoreUnavailable):
            ledger.remember("The team moved to AWS", subject="team")
        assert ledger.get(memory.id).id == memory.id
        assert ledger.remember("The team moved to AWS", subject="team").position == 2
        assert ledger.head() == 2


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://postgres@127.0.0.1:notaport/test", "malformed: Port could not be cast"),
        ("postgresql://postgres@127.0.0.1:99999/test", "malformed: Port out of range"),
        ("postgresql://postgres@[::1:5432/test", "malformed: Invalid IPv6 URL"),
        ("postgresql://postgres@127.0.0.1/test?schema=a&schema=b", "schema is given more than"),
        ("postgresql://postgres@127.0.0.1/test?scrub=full&scrub=vacuum", "scrub is given more"),
        ("postgresql://postgres@127.0.0.1/test?schema=a&dbname=postgres", "names its dbname twice"),
        ("postgresql://postgres@127.0.0.1/test?host=10.0.0.1", "names its host twice"),
        ("postgresql://postgres@127.0.0.1:5432/test?port=5433", "names its port twice"),
        ("postgresql://postgres@127.0.0.1/test?user=other", "names its user twice"),
        ("postgresql://postgres:a@127.0.0.1/test?password=b", "names its password twice"),
        ("postgresql://postgres@127.0.0.1/test?client_encoding=LATIN1", "leave client_encoding"),
        ("postgresql://postgres@127.0.0.1/test?schema=information_schema", "PostgreSQL's own"),
        ("postgresql://postgres@127.0.0.1/test?schema=pg_temp", "PostgreSQL's own"),
    ],
)
def test_a_malformed_postgresql_url_is_refused_before_connecting(url: str, message: str) -> None:
    """Once a raw ``ValueError`` from parsing the port or host (a traceback on the
    command line); a repeated parameter of the ledger's own took its first value."""
    with pytest.raises(ValidationError, match=message):
        Ledger.open(url)


def test_a_sqlite_url_with_parameters_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(StoreUnavailable, match="takes no parameters"):
        Ledger.open(f"sqlite:///{tmp_path}/ledger.db?scrub=full")
    assert list(tmp_path.iterdir()) == []
    # A bare path is a file's name, '?' and all, however it is given.
    monkeypatch.setenv("ERSTWHILE_URL", f"{tmp_path}/what?.db")
    with Ledger.open() as ledger:
        assert ledger.url == f"sqlite:///{tmp_path}/what?.db"


@pytest.mark.parametrize(
    ("url", "message"),
    [("", "names no file"), ("sqlite://", "names no file"), ("sqlite:///", "names no file"),
     (" ", "names no file"), ("sqlite:/// \t", "names no file"),
     ("sqlite:///:memory:", "in-memory SQLite ledger is not supported")],
)  # fmt: skip
def test_a_sqlite_url_without_a_file_says_which_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    """An empty URL was told it asked for an in-memory ledger; a blank one made a file
    whose name was a space."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreUnavailable, match=message):
        Ledger.open(url)
    assert list(tmp_path.iterdir()) == []


def test_a_closed_ledger_says_so(store_url: str) -> None:
    ledger = Ledger.open(store_url)
    memory = ledger.remember("written before closing")
    ledger.close()
    for use in (lambda: ledger.get(memory.id), ledger.head, lambda: ledger.remember("x"),
                lambda: list(ledger.events()), lambda: ledger.search("written")):  # fmt: skip
        with pytest.raises(StoreUnavailable, match="the ledger was closed"):
            use()
    with pytest.raises(StoreUnavailable, match="the ledger was closed"), ledger:
        pytest.fail("a closed ledger entered its with block")


@pytest.mark.parametrize("grace", [timedelta(days=-1), 30, "30 days", None])
def test_a_purge_with_a_bad_grace_is_refused_and_erases_nothing(
    seeded: tuple[Ledger, Any, Any], clock: ManualClock, grace: Any
) -> None:
    """A soft forget is due, and a purge with a grace that is not a non-negative
    timedelta is refused before anything is read or erased; a good one then erases it."""
    ledger, mine, _ = seeded
    ledger.forget(mine.id)
    clock.advance(days=31)
    assert_refused(ledger, lambda: ledger.purge(grace=grace), ValidationError, "grace")
    assert ledger.purge() == [mine.id]


def test_the_calendars_ends_are_answers_not_crashes(seeded: tuple[Ledger, Any, Any]) -> None:
    """A grace longer than the calendar finds nothing that old; a replay as known at
    the last instant there is holds the whole log."""
    ledger, mine, _ = seeded
    ledger.forget(mine.id)
    assert ledger.purge(grace=timedelta.max) == []
    with ledger.replay(known_at=datetime.max.replace(tzinfo=UTC)) as past:
        assert past.head() == ledger.head()


def _words(prefix: str, limit: int) -> str:
    """Distinct words (``c0 c1 ...``) filling ``limit`` bytes: the most lexemes a text of
    that size gives the full-text index."""
    text, n = [], 0
    size = -1
    while size + len(f" {prefix}{n}") <= limit:
        text.append(f"{prefix}{n}")
        size += len(f" {prefix}{n}")
        n += 1
    return " ".join(text)


def test_a_memory_at_every_size_limit_is_indexed_on_both_backends(
    open_ledger: OpenLedger,
) -> None:
    """Content, value, labels and entities at their limits make the largest full-text
    document a memory can have. PostgreSQL's ``tsvector`` (1 MiB at most) takes it, also
    from a writer that appends without folding (a document it refused there left a log
    that no later open could fold past)."""
    content = _words("c", 64 * 1024)
    value = _words("v", 64 * 1024 - 2)
    entities = [f"e{n:05}" for n in range(16 * 1024 // 9)]
    writer = open_ledger(namespace="acme", sync_projections=False)
    big = writer.remember(content, subject="s" * 700, attribute="a" * 700, value=value,
                          entities=entities)  # fmt: skip
    reader = open_ledger(namespace="acme")  # folds the log as it opens
    assert reader.get(big.id).value == value
    assert [hit.memory.id for hit in reader.search("c1234 v4321")] == [big.id]
    with pytest.raises(ValidationError, match="value is larger"):
        writer.remember("one byte more", value=value + "x" * 3)
    assert reader.head() == 1


def test_an_import_refuses_a_value_over_the_limit_and_the_store_still_opens(
    open_ledger: OpenLedger, tmp_path: Path, store_url: str
) -> None:
    """An export from a store written before the limit may hold a larger value: its import
    is refused before anything commits (into PostgreSQL it committed the log, then failed
    to fold it, and every later open failed too)."""
    with Ledger.open(f"sqlite:///{tmp_path}/source.db") as source:
        source.remember("a big value", value="v" * 100)
        buffer = io.BytesIO()
        source.export(buffer)
    (line,) = buffer.getvalue().splitlines()
    oversize = line.replace(b'"' + b"v" * 100 + b'"', b'"' + b"v w" * 40_000 + b'"')
    target = open_ledger(namespace="default")
    with pytest.raises(ValidationError, match=r"import line 1: .*value is larger"):
        target.import_events([oversize])
    assert target.head() == 0
    with Ledger.open(store_url) as reopened:
        assert reopened.import_events([line]) == 1
