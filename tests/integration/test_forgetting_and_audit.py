"""Forgetting and the audit trail (SPEC sections 4-6): crypto-shredding, the hash chain,
replay, export and import, on both backends."""

from __future__ import annotations

import base64
import gc
import io
import json
import os
import random
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from erstwhile import (
    ConcurrencyConflict,
    IdempotencyMismatch,
    Ledger,
    NotFound,
    State,
    StoreUnavailable,
    ValidationError,
)
from erstwhile.domain.views import VerifyReport
from erstwhile.domain.writes import WritePlan
from erstwhile.eventstore import log as log_module
from erstwhile.eventstore.log import EVENTS_PER_INSERT, EventLog
from erstwhile.ledger import writes
from erstwhile.ledger.audit import IMPORT_BATCH
from erstwhile.projections import MemoriesProjection, search
from erstwhile.projections.base import ProjectionRunner
from tests.conftest import ManualClock, OpenLedger, event_count

MAR = "2026-03-01T00:00:00Z"
JUL = "2026-07-01T00:00:00Z"
SECRETS = {
    "content": "Ada's passport is XK-CONTENTSECRET-991",
    "value": "VALUESECRET-4471",
    "entity": "EntitySecretZed",
    "evidence": "EvidenceSecretWx",
    "metadata": "MetadataSecretQv",
}


def remember_secret(ledger: Ledger) -> Any:
    return ledger.remember(
        SECRETS["content"], subject="ada", attribute="passport", value=SECRETS["value"],
        entities=["Ada", SECRETS["entity"]], evidence=[SECRETS["evidence"]],
        metadata={"note": SECRETS["metadata"]}, valid_from=MAR,
    )  # fmt: skip


def stored_bytes(url: str) -> bytes:
    """Every byte the store holds: the SQLite files, or a pg_dump of the ledger's schema."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    plain = parts._replace(query="").geturl()
    dump = subprocess.run(
        ["pg_dump", "--data-only", f"--schema={schema}", plain],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return dump.stdout


def leaked(url: str) -> list[str]:
    data = stored_bytes(url)
    return [name for name, text in SECRETS.items() if text.encode() in data]


def test_story_7_hard_forget(store_url: str, open_ledger: OpenLedger, clock: ManualClock) -> None:
    ledger = open_ledger(namespace="acme")
    keep = ledger.remember("The team uses Supabase", subject="team", valid_from=MAR)
    secret = remember_secret(ledger)
    recorded = secret.recorded_at
    clock.advance(hours=1)
    assert "content" in leaked(store_url)  # the live projection holds it: the scan sees it
    ledger.forget(secret.id, hard=True, reason="GDPR request 17")

    for known_at in (None, recorded, clock()):
        with pytest.raises(NotFound):
            ledger.get(secret.id, known_at=known_at)
        assert ledger.facts("ada", as_of=MAR, known_at=known_at) == []
        assert ledger.facts("ada", known_at=known_at) == []
    for query in ("passport", "", "Ada"):
        for kwargs in ({"include_history": True}, {"as_of": MAR, "known_at": recorded}):
            assert secret.id not in [h.memory.id for h in ledger.search(query, **kwargs)]
    assert [e.type for e in ledger.events(memory_id=secret.id)] == ["Asserted", "Forgotten"]
    asserted, forgotten = ledger.events(memory_id=secret.id)
    assert asserted.data is None and asserted.actor == "tester"
    assert forgotten.data == {"hard": True, "reason": "GDPR request 17"}
    assert ledger.verify().ok
    assert leaked(store_url) == []
    ledger.rebuild()
    assert leaked(store_url) == []
    with pytest.raises(NotFound):
        ledger.get(secret.id, known_at=recorded)
    assert ledger.get(keep.id).content == "The team uses Supabase"


class Interrupted(Exception):
    """Stands for a rebuild's process dying half-way."""


def test_a_hard_forget_wipes_the_tables_of_a_rebuild_left_half_done(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild folds beside the live tables; one that dies leaves its tables, with
    every memory's content in plain text, until the next rebuild. A hard forget wipes
    its memory there too (and on PostgreSQL vacuums them)."""
    ledger = open_ledger(namespace="acme")
    secret = remember_secret(ledger)

    def die(self: ProjectionRunner, *args: Any) -> None:
        raise Interrupted

    with monkeypatch.context() as patch:
        patch.setattr(ProjectionRunner, "finish_catching_up", die)
        # A process killed outright runs no cleanup (one that fails drops its tables).
        patch.setattr(ProjectionRunner, "_drop_build", lambda self, sql, builder: None)
        with pytest.raises(Interrupted):
            ledger.rebuild()
    assert "content" in leaked(store_url)
    ledger.forget(secret.id, hard=True)
    assert leaked(store_url) == []
    if not store_url.startswith("sqlite:///"):  # dead row versions hold it until a vacuum
        shadows = [table + "__shadow" for table in HELD]
        assert vacuumed(store_url, shadows) == dict.fromkeys(shadows, True)
    ledger.rebuild()
    assert leaked(store_url) == []
    with pytest.raises(NotFound):
        ledger.get(secret.id)


def test_a_hard_forget_between_reading_a_batch_and_folding_it_keeps_its_content_out(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build reads and decodes its next batch before it takes the write lock. A hard
    forget that commits in between has wiped the build's tables and destroyed the key:
    the batch must then be folded as the forget left it, erased, not with the content
    it was decoded with."""
    ledger = open_ledger(namespace="acme")
    secret = remember_secret(ledger)
    other = open_ledger(namespace="acme")  # another writer, with connections of its own
    # PostgreSQL grants its lock in order and reads each batch in its transaction; a
    # writer's turn makes it read ahead too, so the path is tested on both backends.
    monkeypatch.setattr(type(ledger.runner.backend), "writer_turn_seconds", 0.001)
    prepare, apply_batch = ProjectionRunner._prepare, ProjectionRunner.apply_batch
    decoded_with_content: list[bool] = []
    content_folded: list[str | None] = []

    def forget_meanwhile(runner: ProjectionRunner, until: int) -> Any:
        prepared = prepare(runner, until)
        if runner.shadow is not None and prepared is not None and not decoded_with_content:
            (event,) = [e for r, e in zip(prepared.records, prepared.decoded, strict=True)
                        if r.memory_id == secret.id]  # fmt: skip
            decoded_with_content.append(event.content == SECRETS["content"])
            other.forget(secret.id, hard=True)
        return prepared

    def look_after(
        runner: ProjectionRunner, sql: Any, until: Any = None, prepared: Any = None
    ) -> int:
        reached = apply_batch(runner, sql, until, prepared)
        if runner.shadow is not None and prepared is not None:
            sql.execute(
                f"SELECT content FROM {runner.shadow_name('memories')} WHERE id = ?",
                (str(secret.id),),
            )
            content_folded.append(sql.fetchone()["content"])
        return reached

    monkeypatch.setattr(ProjectionRunner, "_prepare", forget_meanwhile)
    monkeypatch.setattr(ProjectionRunner, "apply_batch", look_after)
    ledger.rebuild()
    assert decoded_with_content == [True]  # read before the forget: the content was there
    assert len(content_folded) == 1 and not content_folded[0]  # folded erased: no content
    assert leaked(store_url) == []
    with pytest.raises(NotFound):
        ledger.get(secret.id)


def rows_now(url: str, scratch: Path) -> bytes:
    """The bytes of the rows the store holds now (not its freed pages, nor the WAL's
    earlier frames, which the scrub after a forget clears): a ``VACUUM INTO`` copy of
    the SQLite file, or a dump of the PostgreSQL schema."""
    if not url.startswith("sqlite:///"):
        return stored_bytes(url)
    copy = scratch / "rows-now.db"
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("VACUUM INTO ?", (str(copy),))
    connection.close()
    return copy.read_bytes()


def test_a_hard_forget_left_unfolded_wipes_the_projections_in_its_own_transaction(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A writer that leaves folding to others (``sync_projections=False``) folds the log
    up to its forget after the commit. Should it die there, the content must not wait
    in the projections until some process folds again: the forget's own transaction
    wipes it, with the key."""
    remember_secret(open_ledger(namespace="acme"))  # folded: the projections hold it
    writer = open_ledger(namespace="acme", sync_projections=False)
    (secret,) = writer.facts("ada")
    append = type(writer)._append_committed

    def dies_after_the_commit(ledger: Ledger, *args: Any, **kwargs: Any) -> int:
        position = append(ledger, *args, **kwargs)
        monkeypatch.setattr(ledger.runner, "catch_up", lambda *a, **k: _die())
        return position

    def _die() -> None:
        raise Interrupted

    monkeypatch.setattr(type(writer), "_append_committed", dies_after_the_commit)
    with pytest.raises(Interrupted):
        writer.forget(secret.id, hard=True)
    held = rows_now(store_url, tmp_path)
    assert [name for name, text in SECRETS.items() if text.encode() in held] == []
    monkeypatch.undo()
    follower = open_ledger(namespace="acme")  # folds the forget: the same rows as ever
    with pytest.raises(NotFound):
        follower.get(secret.id)
    assert follower.facts("ada") == []
    assert follower.search("passport") == []
    assert [e.type for e in follower.events(memory_id=secret.id)] == ["Asserted", "Forgotten"]


def lost_store(store_url: str) -> Exception:
    """The driver's error when the store stops answering mid-commit: on SQLite a disk
    that failed, on PostgreSQL a connection the server closed."""
    if store_url.startswith("sqlite:///"):
        failed = sqlite3.OperationalError("disk I/O error")
        failed.sqlite_errorname = "SQLITE_IOERR_FSYNC"  # as the driver sets it
        return failed
    return psycopg.OperationalError("server closed the connection unexpectedly")


@pytest.mark.parametrize("committed", [True, False])
def test_a_hard_forget_that_loses_the_store_in_its_commit_says_to_forget_again(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """The connection may drop during the commit, so the forget cannot tell whether it
    committed: the error names the memory and says to forget it again, and that forget
    (once the store answers) erases it if needed and scrubs the files. The same for a
    purge's group."""
    ledger = open_ledger(namespace="acme")
    secret = remember_secret(ledger)
    others = [ledger.remember(f"Bob's note {n}", kind="note") for n in range(2)]
    for other in others:
        ledger.forget(other.id)
    append = EventLog.append

    def loses_the_store(log: EventLog, *args: Any, **kwargs: Any) -> Any:
        if committed:
            append(log, *args, **kwargs)
        raise StoreUnavailable("the store failed: the connection was lost") from lost_store(
            store_url
        )

    with monkeypatch.context() as patch:
        patch.setattr(EventLog, "append", loses_the_store)
        with pytest.raises(StoreUnavailable) as lost:
            ledger.forget(secret.id, hard=True)
        with pytest.raises(StoreUnavailable) as lost_group:
            ledger.purge(grace=timedelta(0))
    assert lost.value.__notes__ == [
        f"the hard forget of memory {secret.id} may have committed before the store "
        "stopped answering: once it answers, forget it again (hard), which erases it if "
        "it is not erased yet and scrubs the database files"
    ]
    (note,) = lost_group.value.__notes__
    assert note.startswith(f"the hard forget of memories {others[0].id}, {others[1].id} may")
    appended = [e.type for e in ledger.events(memory_id=secret.id)]
    assert appended == (["Asserted", "Forgotten"] if committed else ["Asserted"])
    for memory in (secret, *others):
        ledger.forget(memory.id, hard=True)
    assert leaked(store_url) == []
    assert [e.type for e in ledger.events(memory_id=secret.id)] == ["Asserted", "Forgotten"]
    for other in others:
        forgets = [e.data for e in ledger.events(memory_id=other.id)][1:]
        assert [forget["hard"] for forget in forgets] == [False, True]
    for memory in (secret, *others):
        with pytest.raises(NotFound):
            ledger.get(memory.id)


def test_a_hard_forget_the_store_refused_carries_no_note(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal the store reported (here a lock not granted in time) rolled the forget
    back: nothing may have committed, so the error says nothing of the kind."""
    ledger = open_ledger(namespace="acme")
    secret = remember_secret(ledger)
    refused: Exception = (
        psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
        if not store_url.startswith("sqlite:///")
        else sqlite3.OperationalError("database is locked")
    )
    if isinstance(refused, sqlite3.OperationalError):
        refused.sqlite_errorname = "SQLITE_BUSY"

    def refuses(log: EventLog, *args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable(f"the store failed: {refused}") from refused

    monkeypatch.setattr(EventLog, "append", refuses)
    with pytest.raises(StoreUnavailable) as failed:
        ledger.forget(secret.id, hard=True)
    assert not hasattr(failed.value, "__notes__")
    monkeypatch.undo()
    assert ledger.get(secret.id).content == SECRETS["content"]


@pytest.mark.postgres
def test_a_hard_forget_whose_session_the_server_ends_says_to_forget_again(
    postgres_url: str, postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server ends the ledger's sessions just as the forget appends: its connection
    is gone, the error carries the note, and the forget again erases and scrubs."""
    name = f"erstwhile_lost_{secrets.token_hex(4)}"
    with Ledger.open(f"{postgres_url}&application_name={name}", namespace="acme") as ledger:
        secret = remember_secret(ledger)
        append = type(ledger)._append_committed

        def sessions_ended(self: Ledger, *args: Any, **kwargs: Any) -> int:
            with psycopg.connect(postgres_database, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (name,),
                )
            return append(self, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(type(ledger), "_append_committed", sessions_ended)
            with pytest.raises(StoreUnavailable) as lost:
                ledger.forget(secret.id, hard=True)
        assert [f"memory {secret.id} may have committed" in n for n in lost.value.__notes__] == [
            True
        ]
        assert ledger.get(secret.id).content == SECRETS["content"]  # it had not
        ledger.forget(secret.id, hard=True)
        assert leaked(postgres_url) == []
        with pytest.raises(NotFound):
            ledger.get(secret.id)


@pytest.mark.parametrize("hard", [True, False])
def test_a_forget_racing_the_same_forget_is_a_no_op(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch, hard: bool
) -> None:
    """Another process's forget commits between this one's checks and its append: the
    append meets a newer version of the memory. The memory is forgotten as asked, so
    the loser succeeds without appending (it raised ConcurrencyConflict)."""
    mine, theirs = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    secret = remember_secret(mine)
    append = type(mine)._append_committed

    def forgotten_meanwhile(ledger: Ledger, *args: Any, **kwargs: Any) -> int:
        if ledger is mine:  # (both ledgers share the patched class)
            theirs.forget(secret.id, hard=hard)
        return append(ledger, *args, **kwargs)

    monkeypatch.setattr(type(mine), "_append_committed", forgotten_meanwhile)
    mine.forget(secret.id, hard=hard)
    assert [e.type for e in mine.events(memory_id=secret.id)] == ["Asserted", "Forgotten"]


def test_a_hard_forget_racing_a_soft_forget_upgrades_it(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's soft forget commits between this hard forget's checks and its
    append. Run one after the other the two succeed (soft may be upgraded to hard); so
    they do racing: the hard forget raised ConcurrencyConflict and left the content
    readable in the log."""
    mine, theirs = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    secret = remember_secret(mine)
    append = type(mine)._append_committed
    raced: list[bool] = []

    def softly_forgotten_meanwhile(ledger: Ledger, *args: Any, **kwargs: Any) -> int:
        if ledger is mine and not raced:  # (both ledgers share the patched class)
            raced.append(True)
            theirs.forget(secret.id, reason="asked to hide it")
        return append(ledger, *args, **kwargs)

    monkeypatch.setattr(type(mine), "_append_committed", softly_forgotten_meanwhile)
    mine.forget(secret.id, hard=True, reason="GDPR request 18")
    logged = [(e.type, e.data) for e in mine.events(memory_id=secret.id)]
    assert logged == [
        ("Asserted", None),
        ("Forgotten", {"hard": False, "reason": "asked to hide it"}),
        ("Forgotten", {"hard": True, "reason": "GDPR request 18"}),
    ]
    assert leaked(store_url) == []


def test_a_hard_forget_of_a_softly_forgotten_memory_that_conflicts_is_not_retried(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory was forgotten softly before the hard forget read it: a conflict then
    says something else changed, and is raised, once (not retried until the stack ran
    out), with nothing appended."""
    ledger = open_ledger(namespace="acme")
    secret = remember_secret(ledger)
    ledger.forget(secret.id)
    attempts: list[int] = []

    def conflicts(*args: Any, **kwargs: Any) -> int:
        attempts.append(1)
        raise ConcurrencyConflict("another writer changed it; nothing was stored (retry)")

    monkeypatch.setattr(type(ledger), "_append_committed", conflicts)
    with pytest.raises(ConcurrencyConflict):
        ledger.forget(secret.id, hard=True)
    assert attempts == [1]
    monkeypatch.undo()
    assert [e.type for e in ledger.events(memory_id=secret.id)] == ["Asserted", "Forgotten"]


def test_a_hard_forget_that_another_process_made_first_is_a_no_op(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between reading the memory and looking for its key, another process erased it:
    the key is gone because of that forget, not because the memory predates keys."""
    mine, theirs = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    secret = remember_secret(mine)
    has_key = type(mine)._has_key

    def forgotten_meanwhile(ledger: Ledger, memory_id: Any) -> bool:
        if ledger is mine:  # (both ledgers share the patched class)
            theirs.forget(secret.id, hard=True)
        return has_key(ledger, memory_id)

    monkeypatch.setattr(type(mine), "_has_key", forgotten_meanwhile)
    mine.forget(secret.id, hard=True)
    assert [e.type for e in mine.events(memory_id=secret.id)] == ["Asserted", "Forgotten"]


@pytest.mark.postgres
def test_a_scrub_skips_a_shadow_table_a_rebuild_drops_meanwhile(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scrub looks for each table, then vacuums it; a rebuild in another process
    may drop its shadow tables between the two."""
    from erstwhile.eventstore import postgres_scrub

    with Ledger.open(postgres_url) as ledger:
        seen = iter([True, False])  # there when looked for, gone when vacuumed
        monkeypatch.setattr(postgres_scrub, "table_exists", lambda connection, table: next(seen))
        assert ledger.log.backend.vacuum("memories__shadow") == 0


@pytest.mark.postgres
def test_a_hard_forget_vacuums_every_table_that_held_the_text(
    postgres_url: str, clock: ManualClock
) -> None:
    """PostgreSQL: the deleted and overwritten row versions are dead rows until a VACUUM
    (pg_dump does not show them, the data files still do), so the forget vacuums every
    table that held the memory's text, the live search table included."""
    ledger = Ledger.open(postgres_url, namespace="acme", actor="tester", clock=clock)
    try:
        secret = remember_secret(ledger)
        assert vacuumed(postgres_url, HELD) == dict.fromkeys(HELD, False)
        ledger.forget(secret.id, hard=True, reason="GDPR request 18")
        assert vacuumed(postgres_url, HELD) == dict.fromkeys(HELD, True)
    finally:
        ledger.close()


HELD = ["memories", "memory_entities", "memory_search", "memory_search_live"]
"""PostgreSQL: the projections' tables that hold a memory's text."""


@pytest.mark.postgres
def test_a_scrub_keeps_the_empty_pages_at_a_tables_end(
    postgres_url: str, clock: ManualClock
) -> None:
    """PostgreSQL: cutting a table's empty last pages off takes its exclusive lock, which
    VACUUM tries for up to 5 s while another session holds or awaits any lock on the
    table: two hard forgets at once each waited 10 to 20 s for the other's VACUUM. The
    scrub leaves those pages (their bytes are freed space, as a plain VACUUM leaves
    any; ``?scrub=full`` rewrites the tables)."""
    ledger = Ledger.open(postgres_url, namespace="acme", actor="tester", clock=clock)
    tables = [*HELD, "erstwhile_keys"]
    sized = "SELECT relname, pg_relation_size(oid) FROM pg_class WHERE relnamespace = " \
            "to_regnamespace(%s) AND relname = ANY(%s)"  # fmt: skip
    try:
        secret = remember_secret(ledger)  # the only memory: every page of it empties
        before = dict(server_rows(postgres_url, sized, tables))
        ledger.forget(secret.id, hard=True, reason="GDPR request 19")
        assert vacuumed(postgres_url, tables) == dict.fromkeys(tables, True)
        assert dict(server_rows(postgres_url, sized, tables)) == before
        assert all(before.values())
    finally:
        ledger.close()


def server_rows(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """PostgreSQL: run ``query`` on the store's server, with the ledger's schema as its
    first parameter."""
    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    with psycopg.connect(parts._replace(query="").geturl(), autocommit=True) as db:
        return db.execute(query, (schema, *params)).fetchall()


def vacuumed(url: str, tables: list[str]) -> dict[str, bool]:
    """PostgreSQL: whether each table was ever vacuumed by hand."""
    return dict(server_rows(
        url, "SELECT relname, last_vacuum IS NOT NULL FROM pg_stat_user_tables "
             "WHERE schemaname = %s AND relname = ANY(%s)", tables,
    ))  # fmt: skip


def planner_samples(url: str) -> str:
    """PostgreSQL: every value the planner's statistics hold for the ledger's schema."""
    rows = server_rows(
        url, "SELECT concat_ws(' ', most_common_vals::text, histogram_bounds::text, "
             "most_common_elems::text) FROM pg_stats WHERE schemaname = %s",
    )  # fmt: skip
    return " ".join(row[0] for row in rows)


def relation_files(url: str, tables: list[str]) -> dict[str, int]:
    parts = urlsplit(url)
    with psycopg.connect(parts._replace(query="").geturl(), autocommit=True) as db:
        db.execute(f"SET search_path TO {parse_qs(parts.query)['schema'][0]}")
        return {t: db.execute("SELECT pg_relation_filenode(%s)", (t,)).fetchone()[0]
                for t in tables}  # fmt: skip


@pytest.mark.postgres
@pytest.mark.parametrize("scrub", ["vacuum", "full"])
def test_a_hard_forget_leaves_nothing_in_the_planner_statistics(
    postgres_url: str, clock: ManualClock, scrub: str
) -> None:
    """ANALYZE keeps samples of column values (``pg_stats``): after a hard forget they
    are taken again, without the erased content or the destroyed key. With
    ``?scrub=full`` the tables that held them are rewritten too."""
    url = f"{postgres_url}&scrub={scrub}"
    held = ["memories", "memory_entities", "memory_search", "memory_search_live"]
    with Ledger.open(url, namespace="acme", actor="tester", clock=clock) as ledger:
        secret = remember_secret(ledger)
        # Fillers with values of their own in every field: each column has enough
        # distinct values for the samples to hold the secret's.
        ledger.remember_many(
            {"content": f"filler {n}", "value": n, "entities": [f"filler{n}"],
             "evidence": [f"ev-{n}"], "metadata": {"note": f"md-{n}"}}
            for n in range(50)
        )  # fmt: skip
        with psycopg.connect(urlsplit(url)._replace(query="").geturl(), autocommit=True) as db:
            db.execute(f"SET search_path TO {parse_qs(urlsplit(url).query)['schema'][0]}")
            key = db.execute("SELECT key_bytes FROM erstwhile_keys WHERE memory_id = %s",
                             (str(secret.id),)).fetchone()[0]  # fmt: skip
            db.execute("ANALYZE")
        sampled = planner_samples(url).lower()  # entities are kept case-folded
        assert [name for name, text in SECRETS.items() if text.lower() not in sampled] == []
        assert bytes(key).hex() in sampled
        files = relation_files(url, held)
        ledger.forget(secret.id, hard=True)
        sampled = planner_samples(url).lower()
        assert [name for name, text in SECRETS.items() if text.lower() in sampled] == []
        assert bytes(key).hex() not in sampled
        rewritten = {t for t, node in relation_files(url, held).items() if node != files[t]}
        assert rewritten == (set(held) if scrub == "full" else set())


@pytest.mark.postgres
def test_a_purge_that_empties_the_tables_leaves_nothing_in_the_planner_statistics(
    postgres_url: str, clock: ManualClock
) -> None:
    """ANALYZE of a table with no row left keeps the samples it took before: where the
    erasures empty a table (the keys, the entities, the search indexes here), the scrub
    drops its statistics."""
    with Ledger.open(postgres_url, namespace="acme", actor="tester", clock=clock) as ledger:
        made = [
            ledger.remember(f"vault code {n} is QQJX{n}SECRET", value=f"VALUE{n}QQJX",
                            entities=[f"Holder{n}Qqjx"], evidence=[f"EVIDENCE{n}QQJX"],
                            metadata={"note": f"META{n}QQJX"})
            for n in range(3)
        ]  # fmt: skip
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as db:
            db.execute(f"SET search_path TO {parse_qs(urlsplit(postgres_url).query)['schema'][0]}")
            db.execute("ANALYZE")
        assert "qqjx" in planner_samples(postgres_url).lower()
        for memory in made:
            ledger.forget(memory.id)
        clock.advance(days=31)
        assert sorted(ledger.purge()) == sorted(memory.id for memory in made)
    assert "qqjx" not in planner_samples(postgres_url).lower()


@pytest.mark.postgres
def test_a_full_scrub_leaves_nothing_in_the_statistics_catalogs_file(
    postgres_url: str, clock: ManualClock
) -> None:
    """Each ANALYZE replaces a table's rows of ``pg_statistic``; the old versions, with
    the values sampled then, stay in the catalog's file as dead rows. A hard forget
    with ``?scrub=full`` rewrites the catalog, so no erased value is left in its file
    (the erased ones were sampled while they lived)."""
    url = f"{postgres_url}&scrub=full"
    markers = [f"MARK{n:02d}X{secrets.token_hex(4).upper()}" for n in range(30)]
    with Ledger.open(url, namespace="acme", actor="tester", clock=clock) as ledger:
        made = ledger.remember_many(
            {"content": f"note {n}", "subject": f"s{n}", "attribute": "code", "value": m}
            for n, m in enumerate(markers)
        )
        ledger.log.backend.analyze()  # as the ledger does when the log has grown
        for memory in made[:5]:
            ledger.forget(memory.id, hard=True)
    erased = markers[:5]
    with psycopg.connect(urlsplit(url)._replace(query="").geturl(), autocommit=True) as db:
        db.execute("CHECKPOINT")
        (catalog,) = db.execute(
            "SELECT pg_read_binary_file(pg_relation_filepath('pg_catalog.pg_statistic'))"
        ).fetchone()
    assert markers[-1].encode() in bytes(catalog)  # a live value, sampled
    assert [m for m in erased if m.encode() in bytes(catalog)] == []


@pytest.mark.postgres
def test_a_full_scrub_that_may_not_rewrite_the_statistics_catalog_says_so(
    postgres_database: str, clock: ManualClock
) -> None:
    """Only a superuser or the database's owner may vacuum ``pg_statistic``; PostgreSQL
    skips it for anyone else with a warning. A full scrub by such a role erases the
    memory, then says it could not keep its promise instead of passing in silence."""
    role = f"erstwhile_plain_{secrets.token_hex(3)}"
    with psycopg.connect(postgres_database, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        database = urlsplit(postgres_database).path.lstrip("/")
        admin.execute(f'GRANT CREATE ON DATABASE "{database}" TO "{role}"')
    parts = urlsplit(postgres_database)
    url = parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}").geturl()
    url += f"?schema=plain_{secrets.token_hex(3)}&scrub=full"
    try:
        with Ledger.open(url, namespace="acme", actor="tester", clock=clock) as ledger:
            secret = remember_secret(ledger)
            with pytest.raises(StoreUnavailable, match="the erase committed, but the planner"):
                ledger.forget(secret.id, hard=True)
            with pytest.raises(NotFound):
                ledger.get(secret.id)
            assert [e.type for e in ledger.events(memory_id=secret.id)][-1] == "Forgotten"
    finally:
        with psycopg.connect(postgres_database, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


@contextmanager
def older_snapshot(url: str) -> Iterator[Callable[[], None]]:
    """Hold a read snapshot of the store in another connection, as a long report would,
    until the yielded ``release`` is called (or the block ends)."""
    if url.startswith("sqlite:///"):
        reader: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None,
                                      check_same_thread=False)  # fmt: skip
        reader.execute("BEGIN")
    else:
        parts = urlsplit(url)
        reader = psycopg.connect(parts._replace(query="").geturl(), autocommit=True)
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        reader.execute(f"SET LOCAL search_path TO {parse_qs(parts.query)['schema'][0]}")
    reader.execute("SELECT count(*) FROM memories").fetchall()
    lock, released = threading.Lock(), []

    def release() -> None:
        with lock:
            if not released:
                released.append(True)
                reader.execute("ROLLBACK")
                reader.close()

    try:
        yield release
    finally:
        release()


def tuples_holding(url: str, needles: list[bytes]) -> list[str]:
    """The tables whose row versions, live or dead but not yet removed, hold any of
    ``needles``: every heap page of the tables that held a memory's text or key, read
    raw (``pageinspect``); for SQLite, the database files."""
    if url.startswith("sqlite:///"):
        data = stored_bytes(url)
        return ["files"] if any(needle in data for needle in needles) else []
    schema = parse_qs(urlsplit(url).query)["schema"][0]
    found = []
    for table in [*HELD, "erstwhile_keys"]:
        for needle in needles:
            (count,) = server_rows(
                url, "SELECT count(*) FROM generate_series(0, pg_relation_size("
                     "format('%%I.%%I', %s::text, %s::text)::regclass) / 8192 - 1) AS block, "
                     "LATERAL heap_page_items(get_raw_page(format('%%I.%%I', %s::text, %s::text), "
                     "block::int)) AS row WHERE position(%s::bytea IN row.t_data) > 0",
                table, schema, table, needle,
            )[0]  # fmt: skip
            if count:
                found.append(table)
    return sorted(set(found))


def forgettable(url: str, ledger: Ledger) -> tuple[Any, list[bytes]]:
    """A memory holding the secrets, and what a scan must not find after its hard
    forget: its content and its key's bytes."""
    secret = remember_secret(ledger)
    with ledger.log.backend.read() as sql:
        sql.execute("SELECT key_bytes FROM erstwhile_keys WHERE memory_id = ?", [str(secret.id)])
        key = bytes(sql.fetchone()["key_bytes"])
    if not url.startswith("sqlite:///"):
        with psycopg.connect(urlsplit(url)._replace(query="").geturl(), autocommit=True) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
    return secret, [SECRETS["content"].encode(), key]


def test_a_purge_leaves_no_copy_a_page_split_made_in_the_sqlite_file(sqlite_url: str) -> None:
    """``secure_delete`` zeroes the cell a delete or update frees, not the old copy a
    page split or merge left in the unused middle of the page the cell moved from: a
    purge of 400 of 1,500 memories left 2 of their contents readable in the file, until
    the scrub rewrote it (``VACUUM``). (SQLite's B-tree alone keeps such copies.)"""
    rng = random.Random(9)
    with Ledger.open(sqlite_url, actor="a") as ledger:
        made = []
        for batch in range(3):
            made += ledger.remember_many(
                [{"content": f"pg b{batch} i{i} sec{rng.getrandbits(64):016x}7",
                  "subject": f"ps{batch}x{i}", "entities": [f"pe{batch}x{i}"]}
                 for i in range(500)]
            )  # fmt: skip
        erased = rng.sample(made, 400)
        for memory in erased:
            ledger.forget(memory.id)
        assert len(ledger.purge(grace=timedelta(0))) == 400
    data = stored_bytes(sqlite_url)
    assert [m.id for m in erased if m.content.split()[-1].encode() in data] == []
    kept = {m.id for m in made} - {m.id for m in erased}
    assert all(m.content.encode() in data for m in made if m.id in kept)  # the scan sees


def test_a_hard_forget_whose_file_cannot_be_rewritten_says_which_step_waited(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection taking SQLite's write lock once the forget committed, and
    keeping it past the wait, keeps the scrub's VACUUM from rewriting the file: the
    forget says so, not that a reader kept the WAL (the two steps shared one wait, and
    the checkpoint's message was given either way); forgetting it again, once the lock
    is free, scrubs the files."""
    ledger = Ledger.open(sqlite_url, namespace="acme", actor="tester")
    holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    with closing(ledger), closing(holder):
        ledger.log.backend.scrub_wait_seconds = 0.3
        secret, needles = forgettable(sqlite_url, ledger)
        backend, scrub = type(ledger.log.backend), type(ledger.log.backend).scrub

        def scrub_behind_a_writer(self: Any) -> None:
            holder.execute("BEGIN IMMEDIATE")
            try:
                scrub(self)
            finally:
                holder.execute("ROLLBACK")

        monkeypatch.setattr(backend, "scrub", scrub_behind_a_writer)
        with pytest.raises(StoreUnavailable, match=r"could not be rewritten .* write lock"):
            ledger.forget(secret.id, hard=True)
        monkeypatch.undo()
        with pytest.raises(NotFound):
            ledger.get(secret.id)
        assert tuples_holding(sqlite_url, needles) != []  # the files are not scrubbed yet
        ledger.forget(secret.id, hard=True)
        assert tuples_holding(sqlite_url, needles) == []


def test_a_hard_forget_waits_for_an_older_snapshot_before_it_scrubs(
    store_url: str, open_ledger: OpenLedger
) -> None:
    """A row deleted after another connection's snapshot was taken stays visible to it,
    so a scrub meanwhile left it in the files (PostgreSQL: VACUUM kept it, VACUUM FULL
    copied it, key bytes included; SQLite: the checkpoint left the old pages in the
    -wal). The scrub now waits for such snapshots to end."""
    ledger = open_ledger(namespace="acme")
    secret, needles = forgettable(store_url, ledger)
    with older_snapshot(store_url) as release:
        threading.Timer(0.5, release).start()
        ledger.forget(secret.id, hard=True)
    assert tuples_holding(store_url, needles) == []


def test_a_hard_forget_says_when_an_older_snapshot_keeps_it_from_scrubbing(
    store_url: str, open_ledger: OpenLedger
) -> None:
    """Past the wait, the forget (committed: the memory is gone from every read) says the
    files are not scrubbed yet; forgetting it again scrubs them."""
    ledger = open_ledger(namespace="acme")
    ledger.log.backend.scrub_wait_seconds = 0.3
    secret, needles = forgettable(store_url, ledger)
    with older_snapshot(store_url):
        with pytest.raises(StoreUnavailable, match=r"is erased .* forget it again"):
            ledger.forget(secret.id, hard=True)
        with pytest.raises(NotFound):
            ledger.get(secret.id)
    assert tuples_holding(store_url, needles) != []
    ledger.forget(secret.id, hard=True)
    assert tuples_holding(store_url, needles) == []
    assert [e.type for e in ledger.events(memory_id=secret.id)] == ["Asserted", "Forgotten"]


def test_a_purge_erases_every_memory_due_then_scrubs_the_files_once(
    store_url: str, open_ledger: OpenLedger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge makes a hard forget of each memory due, then scrubs the files once for
    them all (a scrub each made a purge of many cost as many scrubs of the whole
    tables). When that scrub cannot finish, it names every memory erased, and a hard
    forget of any of them scrubs the files of all."""
    ledger = open_ledger(namespace="acme")
    ledger.log.backend.scrub_wait_seconds = 0.3
    made = [forgettable(store_url, ledger) for _ in range(3)]
    needles = [needle for _, found in made for needle in found]
    ids = [secret.id for secret, _ in made]
    for memory_id in ids:
        ledger.forget(memory_id)
    clock.advance(days=31)
    scrubs: list[object] = []
    backend, scrub = type(ledger.log.backend), type(ledger.log.backend).scrub
    monkeypatch.setattr(backend, "scrub", lambda self: (scrubs.append(self), scrub(self))[1])
    with older_snapshot(store_url):
        with pytest.raises(StoreUnavailable, match=r"memories .* are erased .* them again") as e:
            ledger.purge()
        for memory_id in ids:
            assert str(memory_id) in str(e.value)
            with pytest.raises(NotFound):
                ledger.get(memory_id)
    assert len(scrubs) == 1
    assert tuples_holding(store_url, needles) != []
    ledger.forget(ids[-1], hard=True)
    assert len(scrubs) == 2
    assert tuples_holding(store_url, needles) == []
    assert ledger.purge() == [] and len(scrubs) == 2


@pytest.mark.parametrize("sync", [True, False])
def test_a_purge_appends_its_hard_forgets_at_once_and_merges_the_text_indexes_once(
    sync: bool, store_url: str, open_ledger: OpenLedger, clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The memories due go in one append (a group of up to ``PURGED_PER_APPEND``), so
    SQLite merges its full-text indexes once for them all, whether the append folds
    itself or leaves it to a catch-up: each hard forget of its own had rewritten both
    indexes. Every byte of them is gone; what was not due stays found."""
    ledger = open_ledger(namespace="acme", sync_projections=sync)
    made = [forgettable(store_url, ledger) for _ in range(3)]
    kept = ledger.remember("the lighthouse keeper logs the tides", subject="log")
    for secret, _ in made:
        ledger.forget(secret.id)
    clock.advance(days=31)
    merges: list[object] = []
    merge = search.SearchProjection._merge_erased
    monkeypatch.setattr(
        search.SearchProjection,
        "_merge_erased",
        staticmethod(lambda sql: (merges.append(sql), merge(sql))),
    )
    head = ledger.head()
    assert sorted(ledger.purge()) == sorted(secret.id for secret, _ in made)
    forgets = list(ledger.events(after=head))
    assert [(e.type, e.memory_id) for e in forgets] == [
        ("Forgotten", secret.id) for secret, _ in made
    ]
    # One append: its events are a microsecond apart (appends, at least two).
    steps = {b.recorded_at - a.recorded_at for a, b in pairwise(forgets)}
    assert steps == {timedelta(microseconds=1)}
    assert len(merges) == (1 if store_url.startswith("sqlite:///") else 0)
    assert tuples_holding(store_url, [needle for _, found in made for needle in found]) == []
    assert [hit.memory.id for hit in ledger.search("lighthouse tides")] == [kept.id]
    assert ledger.purge() == []


def segments(url: str) -> bytes:
    """SQLite: the blocks of both full-text indexes' segments, as stored."""
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        return b"".join(
            bytes(block)
            for table in (search.FULL, search.LIVE)
            for (block,) in db.execute(f"SELECT block FROM {table}_data")
            if block
        )


@pytest.mark.parametrize("sync", [True, False])
def test_a_purge_leaves_no_token_of_its_memories_in_the_full_text_segments(
    sync: bool, sqlite_url: str, clock: ManualClock
) -> None:
    """SQLite's full-text indexes keep a deleted row's tokens in their segments until
    they are merged: a purge (whose group is folded once, or erased by a writer that
    leaves folding to others) merges them after the deletes, so no token is left. The
    tokens are spelt so that no other term shares their start (a segment stores a term
    after the prefix it shares with the term before)."""
    with Ledger.open(sqlite_url, namespace="acme", actor="tester", clock=clock,
                     sync_projections=sync) as ledger:  # fmt: skip
        made = [ledger.remember(f"the vault code is qqjx{n}zsecret7731") for n in range(3)]
        ledger.remember_many({"content": f"an ordinary note {n}"} for n in range(30))
        for memory in made:
            ledger.forget(memory.id)
        clock.advance(days=31)
        assert b"zsecret7731" in segments(sqlite_url)  # the probe sees the segments
        assert sorted(ledger.purge()) == sorted(memory.id for memory in made)
        assert b"zsecret7731" not in stored_bytes(sqlite_url)
        assert len(ledger.search("ordinary note", limit=50)) == 30


def test_a_purge_whose_memory_another_writer_erased_meanwhile_erases_the_rest_one_by_one(
    store_url: str, open_ledger: OpenLedger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's append is refused when another writer appended to one of its memories
    since the purge read them (here, a hard forget of the first): the purge then
    forgets each on its own, read again, and appends no second forget."""
    ledger = open_ledger(namespace="acme")
    other = open_ledger(namespace="acme", actor="other")
    made = [forgettable(store_url, ledger)[0] for _ in range(3)]
    for secret in made:
        ledger.forget(secret.id)
    clock.advance(days=31)
    append = type(ledger)._append_committed
    raced: list[int] = []

    def racing(self: Ledger, events: Any, **options: Any) -> Any:
        if not raced:
            raced.append(len(events))
            other.forget(made[0].id, hard=True)
        return append(self, events, **options)

    monkeypatch.setattr(type(ledger), "_append_committed", racing)
    assert sorted(ledger.purge()) == sorted(secret.id for secret in made)
    assert raced == [3]
    for secret in made:
        forgets = [e for e in ledger.events(memory_id=secret.id) if e.type == "Forgotten"]
        assert [e.actor for e in forgets if (e.data or {}).get("hard")] == (
            ["other"] if secret is made[0] else ["tester"]
        )
        with pytest.raises(NotFound):
            ledger.get(secret.id)


def test_a_purge_that_fails_after_a_commit_scrubs_what_that_commit_erased(
    store_url: str, open_ledger: OpenLedger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What follows a group's commit (its fold's upkeep, a catch-up) may fail on its
    own: the memories the commit erased are scrubbed all the same before the error is
    raised, and the next purge has nothing left to erase."""
    ledger = open_ledger(namespace="acme")
    made = [forgettable(store_url, ledger) for _ in range(2)]
    for secret, _ in made:
        ledger.forget(secret.id)
    clock.advance(days=31)

    def interrupted(self: Ledger, position: int) -> None:
        raise Interrupted

    monkeypatch.setattr(type(ledger), "_after_append", interrupted)
    with pytest.raises(Interrupted):
        ledger.purge()
    monkeypatch.undo()
    assert tuples_holding(store_url, [needle for _, found in made for needle in found]) == []
    assert ledger.purge() == []


def test_a_purge_whose_one_by_one_erases_fail_part_way_scrubs_those_made(
    store_url: str, open_ledger: OpenLedger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group refused (another writer erased one of its memories meanwhile) is erased
    one memory at a time; when one of those erases fails, the ones made before it are
    scrubbed before the error is raised, and the memory that failed stays due."""
    ledger = open_ledger(namespace="acme")
    other = open_ledger(namespace="acme", actor="other")
    keys = {secret.id: found[1] for secret, found in
            (forgettable(store_url, ledger) for _ in range(3))}  # fmt: skip
    for memory_id in keys:
        ledger.forget(memory_id)
    clock.advance(days=31)
    append = type(ledger)._append_committed
    calls: list[list[Any]] = []
    raced = next(iter(keys))

    def racing_then_failing(self: Ledger, events: Any, **options: Any) -> Any:
        if self is not ledger:  # (both ledgers share the patched class)
            return append(self, events, **options)
        calls.append([event.originator_id for event in events])
        if len(calls) == 1:
            other.forget(raced, hard=True)
        if len(calls) == 3:
            raise StoreUnavailable("the store went away")
        return append(self, events, **options)

    monkeypatch.setattr(type(ledger), "_append_committed", racing_then_failing)
    with pytest.raises(StoreUnavailable, match="went away"):
        ledger.purge()
    monkeypatch.undo()
    # The group, then each memory the other writer left, alone.
    group, [made], [failed] = calls
    assert sorted(group) == sorted(keys) and {made, failed} == set(keys) - {raced}
    assert tuples_holding(store_url, [keys[raced], keys[made]]) == []
    assert tuples_holding(store_url, [keys[failed]]) != []
    assert ledger.purge() == [failed]


def test_a_purge_that_fails_part_way_scrubs_what_it_erased_before(
    store_url: str, open_ledger: OpenLedger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that fails in the middle of a purge (its hard forgets go a group at a
    time) stops it with its own error, once the memories erased before it are scrubbed;
    the rest stay soft-forgotten, due at the next purge."""
    ledger = open_ledger(namespace="acme")
    needles = dict((secret.id, found) for secret, found in
                   (forgettable(store_url, ledger) for _ in range(2)))  # fmt: skip
    for memory_id in needles:
        ledger.forget(memory_id)
    clock.advance(days=31)
    tried: list[Any] = []
    append = type(ledger)._append_committed

    def failing_second(self: Ledger, events: Any, **options: Any) -> Any:
        tried.extend(event.originator_id for event in events)
        if len(tried) == 2:
            raise StoreUnavailable("the store went away")
        return append(self, events, **options)

    monkeypatch.setattr(writes, "PURGED_PER_APPEND", 1)
    monkeypatch.setattr(type(ledger), "_append_committed", failing_second)
    with pytest.raises(StoreUnavailable, match="went away"):
        ledger.purge()
    monkeypatch.undo()
    first, second = tried
    content, first_key = needles[first]  # the second memory holds the same content
    assert tuples_holding(store_url, [first_key]) == []
    assert tuples_holding(store_url, [content]) != []
    assert [e.type for e in ledger.events(memory_id=second)] == ["Asserted", "Forgotten"]
    assert ledger.purge() == [second]
    assert tuples_holding(store_url, [content, first_key, needles[second][1]]) == []


@pytest.mark.postgres
def test_a_hard_forget_waits_for_a_transaction_that_wrote_but_holds_no_snapshot(
    postgres_url: str, clock: ManualClock
) -> None:
    """A session idle in a READ COMMITTED transaction that wrote anything (here, in
    another schema) holds no snapshot between its statements, but its transaction id
    still keeps VACUUM from removing the erased rows, and VACUUM FULL copied them, key
    bytes included, while the forget reported success. The scrub waits for it too, and
    says so when it does not end."""
    url = postgres_url.replace("?schema=", "?scrub=full&schema=")
    with Ledger.open(url, namespace="acme", clock=clock) as ledger:
        ledger.log.backend.scrub_wait_seconds = 0.3  # type: ignore[attr-defined]
        secret, needles = forgettable(url, ledger)
        plain = urlsplit(url)._replace(query="").geturl()
        with psycopg.connect(plain) as holder:  # READ COMMITTED, not autocommit
            holder.execute("CREATE TEMPORARY TABLE held (n int)")
            holder.execute("INSERT INTO held VALUES (1)")
            with pytest.raises(StoreUnavailable, match="not scrubbed yet"):
                ledger.forget(secret.id, hard=True)
            assert tuples_holding(url, needles) != []
            holder.rollback()
        ledger.forget(secret.id, hard=True)
        assert tuples_holding(url, needles) == []


def test_verify_checks_a_row_stored_before_the_first_position(store_url: str) -> None:
    """The triggers refuse UPDATE and DELETE, not INSERT: a row forged at position 0
    (or below) shows in the audit stream, and the check began after position 0."""
    with Ledger.open(store_url, namespace="acme", actor="alice") as ledger:
        memory = ledger.remember("The team uses Supabase", subject="team")
        ledger.archive(memory.id)
        with ledger.log.backend.write() as sql:
            sql.execute(
                "INSERT INTO erstwhile_events SELECT 0, originator_id, 9, topic, "
                "schema_version, state, recorded_at - 1000, 'mallory', namespace, hash "
                "FROM erstwhile_events WHERE position = 2"
            )
        forged, *_ = ledger.events()
        assert (forged.position, forged.actor) == (0, "mallory")
        report = ledger.verify()
        assert (report.ok, report.checked, report.first_break) == (False, 1, 0)
        assert report.reason is not None and "stored hash" in report.reason


def test_verify_finds_a_key_deleted_without_a_hard_forget(store_url: str) -> None:
    """Deleting a key row erases a memory as a hard forget does, with no proof of it in
    the log; a hard forget's missing key is explained by its event."""
    with Ledger.open(store_url, namespace="acme", actor="alice") as ledger:
        gone = ledger.remember("The team uses Supabase", subject="team")
        forgotten = remember_secret(ledger)
        ledger.forget(forgotten.id, hard=True)
        assert ledger.verify().ok
        with ledger.log.backend.write() as sql:
            sql.execute("DELETE FROM erstwhile_keys WHERE memory_id = ?", [str(gone.id)])
        report = ledger.verify()
        assert (report.ok, report.first_break) == (False, 1)
        assert report.reason is not None and "no event forgets" in report.reason


def test_verify_finds_a_key_that_no_longer_opens_its_memory(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key changed (one byte) or swapped with another memory's leaves the log
    unreadable from its memory's Asserted on (events, export, rebuild all fail there),
    yet verify passed. A wrapped key is checked where the master key unwraps it."""

    def keys(ledger: Ledger) -> dict[str, bytes]:
        with ledger.log.backend.read() as sql:
            sql.execute("SELECT memory_id, key_bytes FROM erstwhile_keys")
            return {str(row["memory_id"]): bytes(row["key_bytes"]) for row in sql.fetchall()}

    for master, url in plain_then_wrapped(store_url, monkeypatch):
        with Ledger.open(url, namespace="acme", actor="alice") as ledger:
            first = ledger.remember("The team uses Supabase", subject="team")
            second = ledger.remember("The team moved to AWS", subject="team")
            assert ledger.verify().ok
            stored = keys(ledger)
            flipped = bytes([stored[str(second.id)][0] ^ 1]) + stored[str(second.id)][1:]
            set_key(ledger, second.id, flipped)
            report = ledger.verify()
            assert (report.ok, report.first_break) == (False, second.position)
            assert report.reason is not None and "does not open" in report.reason
            set_key(ledger, second.id, stored[str(first.id)])  # another memory's key
            assert ledger.verify().first_break == second.position
            set_key(ledger, second.id, stored[str(second.id)])
            assert ledger.verify().ok
            if master is not None:  # without the master key, a wrapped key is not read
                set_key(ledger, second.id, flipped)
                monkeypatch.delenv("ERSTWHILE_MASTER_KEY")
                with Ledger.open(url, namespace="acme") as auditor:
                    assert auditor.verify().ok


def test_events_open_each_memory_with_its_own_key(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of events reads each memory's key with its events, in one statement: over
    pages, wrapped or not, each event opens with its own memory's key, an erased one
    reads as erased, a key that does not open its memory's events stops the stream at
    them, and a wrapped key needs the master key."""

    def contents(ledger: Ledger, **selection: Any) -> list[Any]:
        return [e.data and e.data["content"] for e in ledger.events(**selection)
                if e.type == "Asserted"]  # fmt: skip

    def key_of(ledger: Ledger, memory_id: Any) -> bytes:
        with ledger.log.backend.read() as sql:
            sql.execute("SELECT key_bytes FROM erstwhile_keys WHERE memory_id = ?",
                        [str(memory_id)])  # fmt: skip
            return bytes(sql.fetchone()["key_bytes"])

    for master, url in plain_then_wrapped(store_url, monkeypatch):
        written = [f"note {n} about the launch" for n in range(120)]  # pages of 50, then 200
        with (
            Ledger.open(url, namespace="acme", actor="alice") as ledger,
            Ledger.open(url, namespace="other", actor="bob") as other,
        ):
            made = ledger.remember_many([{"content": text} for text in written])
            theirs = other.remember("another namespace's note")
            assert contents(ledger) == written
            assert contents(ledger, memory_id=made[70].id) == [written[70]]
            with pytest.raises(NotFound):
                list(ledger.events(memory_id=theirs.id))
            ledger.forget(made[3].id, hard=True)
            assert contents(ledger) == [*written[:3], None, *written[4:]]
            ledger.archive(made[5].id)
            archived = ledger.head()
            set_key(ledger, made[60].id, key_of(ledger, made[61].id))  # another's key
            # (A wrapped key is bound to its memory: it no longer unwraps.)
            broken = "position 61 .*cannot be read" if master is None else "does not unwrap"
            with pytest.raises(StoreUnavailable, match=broken):
                contents(ledger)
            with pytest.raises(StoreUnavailable, match=broken):
                contents(ledger, memory_id=made[60].id)
            assert contents(ledger, memory_id=made[61].id) == [written[61]]
            assert contents(other) == ["another namespace's note"]
        if master is not None:  # without the master key, a wrapped key is not read
            monkeypatch.delenv("ERSTWHILE_MASTER_KEY")
            with Ledger.open(url, namespace="acme") as auditor:
                with pytest.raises(StoreUnavailable, match="wrapped"):
                    contents(auditor, memory_id=made[0].id)
                # Only what is shown is opened: another namespace's memory is unknown
                # here, and events that seal nothing read without the master key.
                with pytest.raises(NotFound):
                    list(auditor.events(memory_id=theirs.id))
                assert [e.type for e in auditor.events(after=archived - 1)] == ["Archived"]


def test_verify_finds_a_log_shorter_than_the_projections_applied(tmp_path: Path) -> None:
    """A chain cannot prove its own tail, but the projections say how far they applied
    the log; the next write, which found its own events folded already, failed with a
    raw KeyError."""
    path = tmp_path / "cut.db"
    with Ledger.open(path, actor="a") as ledger:
        ledger.remember("first", subject="s")
        ledger.remember("second claim", subject="s")
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TRIGGER erstwhile_events_no_delete")
        raw.execute("DELETE FROM erstwhile_events WHERE position = 2")
    raw.close()
    with Ledger.open(path, actor="a") as ledger:
        report = ledger.verify()
        assert (report.ok, report.first_break) == (False, 2)
        assert report.reason is not None and "removed from its end" in report.reason
        with pytest.raises(StoreUnavailable, match="removed from its end"):
            ledger.remember("third", subject="s")
        assert ledger.head() == 1


def test_a_rebuild_refuses_a_log_that_lost_its_end(store_url: str, clock: ManualClock) -> None:
    """The projections' positions are the only trace of events cut from the log's end
    (verify reports the cut from them): a rebuild, which would fold the shorter log and
    set them back, is refused, and leaves the projections and the trace as they were."""
    with Ledger.open(store_url, actor="a", clock=clock) as ledger:
        ledger.remember("The team uses Supabase", subject="team", attribute="database")
        ledger.remember("The office is in Lisbon", subject="office", attribute="city")
        head = ledger.head()
    tamper(store_url, f"DELETE FROM erstwhile_events WHERE position = {head}")
    with Ledger.open(store_url, actor="a", clock=clock) as ledger:
        before = (ledger.verify(), ledger.projection_status(), ledger.facts("team"))
        assert (before[0].ok, before[0].first_break) == (False, head)
        for name in (None, "memories"):
            with pytest.raises(StoreUnavailable, match=r"removed from its end.* nothing was "
                               r"rebuilt"):  # fmt: skip
                ledger.rebuild(name)
            assert (ledger.verify(), ledger.projection_status(), ledger.facts("team")) == before
        assert [f.content for f in before[2]] == ["The team uses Supabase"]


def test_an_opening_that_would_rebuild_a_cut_log_opens_without_rebuilding(
    store_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new projection version rebuilds at the opening, but not a log cut at its end:
    the opening goes on without it (refusing it would refuse verify too), verify still
    finds the cut, and a rebuild asked for is refused, as is an export (whose import
    would verify)."""
    with Ledger.open(store_url, actor="a", clock=clock) as ledger:
        ledger.remember("The team uses Supabase", subject="team", attribute="database")
        ledger.remember("The office is in Lisbon", subject="office", attribute="city")
        head = ledger.head()
    tamper(store_url, f"DELETE FROM erstwhile_events WHERE position = {head}")
    monkeypatch.setattr(MemoriesProjection, "version", MemoriesProjection.version + 1)
    with Ledger.open(store_url, actor="a", clock=clock) as ledger:
        report = ledger.verify()
        assert (report.ok, report.first_break) == (False, head)
        assert ledger.runner.versions()["memories"] == MemoriesProjection.version - 1
        with pytest.raises(StoreUnavailable, match=r"removed from its end.* nothing was "
                           r"rebuilt"):  # fmt: skip
            ledger.rebuild()
        with pytest.raises(StoreUnavailable, match=r"removed from its end.*export refused"):
            ledger.export(io.BytesIO())


def test_an_event_moved_behind_the_ledgers_back_is_named_when_the_fold_meets_it(
    store_url: str, clock: ManualClock
) -> None:
    """The log's last event moved to a later position: the projections applied it
    already, and folding it again clashes with their rows. The opening says what that
    means instead of the database's complaint alone, writes nothing, and an opening
    without folding still verifies the log."""
    with Ledger.open(store_url, actor="a", clock=clock) as ledger:
        for n in range(3):
            ledger.remember(f"claim {n}", subject=f"s{n}", attribute="a")
    tamper(store_url, "UPDATE erstwhile_events SET position = 30 WHERE position = 3")
    with pytest.raises(StoreUnavailable, match=r"refused a write: .*folding the log after "
                       r"position 3 into the projections: the log or the projections may "
                       r"have been changed behind the ledger's back \(`erstwhile audit "
                       r"verify` checks the log, `erstwhile projections rebuild`"):  # fmt: skip
        Ledger.open(store_url, actor="a", clock=clock)
    with Ledger.open(store_url, actor="a", clock=clock, sync_projections=False) as auditor:
        report = auditor.verify()
        assert (report.ok, report.first_break) == (False, 30)
        assert [(s.position, s.lag) for s in auditor.projection_status()] == [(3, 1)] * len(
            auditor.projection_status()
        )


def test_a_write_past_the_logs_last_position_is_refused(
    store_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Positions end below 2**62, the number the queries read as "no such event": a
    write whose events would reach it is refused, and nothing is stored (the bound is
    made 4 here, as a million events cannot be written in a test)."""
    monkeypatch.setattr(log_module, "NO_POSITION", 4)
    with Ledger.open(store_url, actor="a", clock=clock) as ledger:
        office = ledger.remember("The office is in Lisbon", subject="office")
        ledger.remember("The desk is oak", subject="desk")
        before = [(e.position, e.type) for e in ledger.events()], ledger.facts("desk")
        writes = (
            lambda: ledger.remember_many([{"content": "The desk is pine", "subject": "desk"},
                                          {"content": "The desk is white", "subject": "d"}]),
            lambda: ledger.revise(office.id, "The office is in Porto"),
        )  # fmt: skip
        for write, count in zip(writes, (2, 2), strict=True):
            with pytest.raises(StoreUnavailable, match=f"positions end below 4: its last "
                               f"event is at 2, so {count} more do not fit; nothing"):  # fmt: skip
                write()
            assert ([(e.position, e.type) for e in ledger.events()], ledger.facts("desk")) == before
        ledger.archive(office.id)  # position 3, the last there is
        assert ledger.head() == 3


def structure_sizes(path: Path) -> dict[str, int]:
    """The size of each FTS5 index's structure record (see ``search.STRUCTURE_BOUND``)."""
    with closing(sqlite3.connect(path)) as raw:
        return {
            table: raw.execute(
                f"SELECT length(block) FROM {table}_data WHERE id = {search.STRUCTURE_ROW}"
            ).fetchone()[0]
            for table in (search.FULL, search.LIVE)
        }


def test_many_hard_forgets_leave_a_sqlite_store_usable(tmp_path: Path) -> None:
    """Each hard forget optimizes both full-text indexes, and the SQLite linked here
    (3.40.1) adds a level to an index's structure at every such optimize: at about the
    1,000th hard forget the record read as corrupt, the forget failed ("database disk
    image is malformed"), and so did every later write and the store's opening."""
    path = tmp_path / "erasures.db"
    with Ledger.open(path, namespace="acme", actor="dpo") as ledger:
        users = ledger.remember_many(
            {"content": f"user {i} writes from u{i}@example.com", "subject": f"user{i}",
             "attribute": "email", "value": f"u{i}@example.com"}
            for i in range(1_100)
        )  # fmt: skip
        for place, user in enumerate(users):
            if place % 10 == 0:
                ledger.remember(f"unrelated note {place}")
            ledger.forget(user.id, hard=True)
        kept = ledger.remember("a kept note about the lighthouse")
        assert [hit.memory.id for hit in ledger.search("lighthouse")] == [kept.id]
        assert ledger.search("example") == []
        assert ledger.verify().ok
    assert all(size <= search.STRUCTURE_BOUND for size in structure_sizes(path).values())
    with Ledger.open(path, namespace="acme", actor="dpo") as ledger:
        assert len(ledger.search("unrelated", limit=200)) == 110
        ledger.rebuild()
        assert [hit.memory.id for hit in ledger.search("lighthouse")] == [kept.id]


def test_a_hard_forget_whose_merge_rebuilds_the_indexes_leaves_no_secret_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hard forget whose merge takes an index's structure record past the bound
    rebuilds the index: the rebuilt indexes hold what they held, less the erased memory,
    and no byte of it is left in the files."""
    path = tmp_path / "rebuilt.db"
    with Ledger.open(path, namespace="acme", actor="dpo") as ledger:
        notes = ledger.remember_many(  # more than a page of index: its levels grow
            {"content": f"note {i} on the herons"} for i in range(400)
        )
        secret = remember_secret(ledger)
        for note in notes[:20]:
            ledger.forget(note.id, hard=True)
        grown = structure_sizes(path)
        # The secret's forget is the first whose merge finds the records past the bound.
        monkeypatch.setattr(search, "STRUCTURE_BOUND", min(grown.values()))
        ledger.forget(secret.id, hard=True)
        assert len(ledger.search("herons", limit=500)) == 380
        assert ledger.search("passport", include_history=True) == []
    assert leaked(f"sqlite:///{path}") == []
    rebuilt = structure_sizes(path)
    assert all(rebuilt[table] < grown[table] for table in grown), (grown, rebuilt)


BUSY_ON_THE_STORE = """
import sys
from erstwhile import ErstwhileError, Ledger
with Ledger.open(sys.argv[1], actor=sys.argv[2]) as ledger:
    n = 0
    while True:
        n += 1
        memory = ledger.remember(f"busy {n}", subject="busy", attribute=f"a{n}", value=n)
        if sys.argv[2] == "forgetter":
            try:
                ledger.forget(memory.id, hard=True)
            except ErstwhileError as error:
                print(error, flush=True)
"""


def test_hard_forgets_in_two_processes_at_once_both_scrub(tmp_path: Path) -> None:
    """SQLite answers a checkpoint "busy" at once, past the busy handler, while another
    connection runs one: with another process hard-forgetting (and one writing), most
    forgets failed within milliseconds, their content left in the -wal."""
    url = f"sqlite:///{tmp_path}/busy.db"
    with Ledger.open(url, actor="me") as ledger:
        ledger.remember("seed")
        others = [subprocess.Popen([sys.executable, "-c", BUSY_ON_THE_STORE, url, role],
                                   stdout=subprocess.PIPE, text=True)
                  for role in ("forgetter", "writer")]  # fmt: skip
        try:
            while ledger.head() < 20:  # both at work
                time.sleep(0.05)
            markers = []
            for n in range(12):
                markers.append(f"zqx{n}marker{os.getpid()}")
                ledger.forget(ledger.remember(f"my secret {markers[-1]}").id, hard=True)
        finally:
            for other in others:
                other.kill()
        complaints = [other.communicate(timeout=10)[0] for other in others]
        assert complaints == ["", ""]  # the other forgetter's scrubs all finished too
        data = stored_bytes(url)
        assert [marker for marker in markers if marker.encode() in data] == []


def test_a_scrub_mode_must_be_known(postgres_url: str) -> None:
    with pytest.raises(ValidationError, match="scrub 'weekly'"):
        Ledger.open(f"{postgres_url}&scrub=weekly")


def test_a_hard_forget_erases_the_digest_of_an_idempotent_write(
    store_url: str, open_ledger: OpenLedger
) -> None:
    """The idempotency claim keeps a digest of the payload (content included), which
    would let anyone confirm a guess of the content: a hard forget replaces it, and the
    key stays claimed, so a retry is refused rather than writing the memory again."""
    ledger = open_ledger(namespace="acme")
    arguments = {"content": SECRETS["content"], "idempotency_key": "msg-7"}
    memory = ledger.remember(**arguments)
    digest = WritePlan.parse(arguments).fingerprint
    ledger.close()  # SQLite: the digest is in the file after a checkpoint
    ledger = open_ledger(namespace="acme")
    assert digest.encode() in stored_bytes(store_url)
    ledger.forget(memory.id, hard=True)
    assert digest.encode() not in stored_bytes(store_url)
    before = event_count(ledger)
    with pytest.raises(NotFound, match="forgotten for good"):
        ledger.remember(**arguments)
    assert event_count(ledger) == before
    softly = ledger.remember("Bob's desk is 4B", idempotency_key="msg-8")
    ledger.forget(softly.id)
    with pytest.raises(NotFound, match=f"key 'msg-8' made memory {softly.id}, which was forgotten"):
        ledger.remember("Bob's desk is 4B", idempotency_key="msg-8")
    assert event_count(ledger) == before + 2


def test_forget_lifecycle(ledger: Ledger, clock: ManualClock) -> None:
    memory = remember_secret(ledger)
    ledger.forget(memory.id)
    before = event_count(ledger)
    ledger.forget(memory.id)
    assert event_count(ledger) == before
    ledger.forget(memory.id, hard=True)
    assert event_count(ledger) == before + 1
    ledger.forget(memory.id, hard=True)
    ledger.forget(memory.id)
    assert event_count(ledger) == before + 1
    assert [
        e.data["hard"] for e in ledger.events(memory_id=memory.id) if e.type == "Forgotten"
    ] == [False, True]  # type: ignore[index]


def test_a_chain_through_a_forgotten_memory_stays_intact(ledger: Ledger) -> None:
    a = ledger.remember("v1", subject="x", attribute="y", value=1, valid_from=MAR)
    b = ledger.revise(a.id, "v2", value=2, at="2026-04-01T00:00:00Z")
    c = ledger.revise(b.id, "v3", value=3, at=JUL)
    ledger.forget(b.id, hard=True)
    assert [m.id for m in ledger.chain(a.id)] == [a.id, c.id]
    assert ledger.get(c.id).supersedes == [b.id]
    assert ledger.get(a.id).superseded_by == b.id
    assert ledger.history(c.id).supersedes == []


def test_purge_hardens_soft_forgets_after_the_grace_period(
    ledger: Ledger, clock: ManualClock
) -> None:
    old = remember_secret(ledger)
    ledger.forget(old.id)
    clock.advance(days=10)
    recent = ledger.remember("recent slip", subject="ada")
    ledger.forget(recent.id)
    assert ledger.purge(grace=timedelta(days=30)) == []
    clock.advance(days=25)
    assert ledger.purge() == [old.id]
    assert next(e.data for e in ledger.events(memory_id=old.id)) is None
    assert ledger.purge(grace=timedelta(0)) == [recent.id]
    with pytest.raises(ValidationError):
        ledger.purge(grace=timedelta(days=-1))


def test_purge_counts_ages_to_the_ledgers_now_when_the_clock_runs_behind(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Writes are recorded at the clock, but never behind the log: with the clock set
    back a day, a soft forget is still recorded after the last event, and with no grace
    it is due at once (counted to the clock, it would be a day in the future)."""
    made = ledger.remember("a slip", subject="ada")
    clock.advance(days=-1)
    ledger.forget(made.id)
    head = ledger.head()
    assert ledger.purge(grace=timedelta(0)) == [made.id]
    assert ledger.head() == head + 1 and ledger.verify().ok


# ------------------------------------------------------------------- hash chain


def tamper(store_url: str, statement: str) -> None:
    """Change a stored event behind the ledger's back (the table refuses it otherwise)."""
    if store_url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as db:
            db.execute("DROP TRIGGER erstwhile_events_no_update")
            db.execute("DROP TRIGGER erstwhile_events_no_delete")
            db.execute(statement.replace("%s", "?"))
        return
    parts = urlsplit(store_url)
    schema = parse_qs(parts.query)["schema"][0]
    with psycopg.connect(parts._replace(query="").geturl(), autocommit=True) as db:
        db.execute(f'SET search_path TO "{schema}"')
        db.execute("ALTER TABLE erstwhile_events DISABLE TRIGGER erstwhile_events_append_only")
        db.execute(statement)


def test_the_log_refuses_updates_and_deletes(store_url: str, ledger: Ledger) -> None:
    ledger.remember("x")
    statements = ["UPDATE erstwhile_events SET actor = 'x'", "DELETE FROM erstwhile_events"]
    if not store_url.startswith("sqlite:///"):
        statements.append("TRUNCATE erstwhile_events")  # no row trigger sees it
    for statement in statements:
        with pytest.raises((Exception,), match="append-only"):
            if store_url.startswith("sqlite:///"):
                import sqlite3

                with sqlite3.connect(store_url.removeprefix("sqlite:///")) as db:
                    db.execute(statement)
            else:
                parts = urlsplit(store_url)
                schema = parse_qs(parts.query)["schema"][0]
                with psycopg.connect(parts._replace(query="").geturl()) as db:
                    db.execute(f'SET search_path TO "{schema}"')
                    db.execute(statement)
    assert event_count(ledger) == 1


@pytest.mark.postgres
def test_a_store_set_up_before_the_truncate_guard_gets_it_on_open(
    postgres_url: str, clock: ManualClock
) -> None:
    Ledger.open(postgres_url, clock=clock).close()
    parts = urlsplit(postgres_url)
    schema = parse_qs(parts.query)["schema"][0]
    guards = (
        "SELECT count(*) FROM pg_trigger WHERE tgname = 'erstwhile_events_no_truncate' "
        "AND tgrelid = 'erstwhile_events'::regclass"
    )
    with psycopg.connect(parts._replace(query="").geturl(), autocommit=True) as db:
        db.execute(f'SET search_path TO "{schema}"')
        db.execute("DROP TRIGGER erstwhile_events_no_truncate ON erstwhile_events")
        assert db.execute(guards).fetchone() == (0,)
        Ledger.open(postgres_url, clock=clock).close()
        assert db.execute(guards).fetchone() == (1,)


@pytest.mark.parametrize(
    ("change", "broken_at"),
    [
        ("UPDATE erstwhile_events SET actor = 'mallory' WHERE position = 3", 3),
        ("UPDATE erstwhile_events SET namespace = 'other' WHERE position = 2", 2),
        ("UPDATE erstwhile_events SET recorded_at = recorded_at + 1 WHERE position = 4", 4),
        ("UPDATE erstwhile_events SET position = 100 WHERE position = 5", 6),
        ("UPDATE erstwhile_events SET originator_version = 9 WHERE position = 1", 1),
    ],
)
def test_verify_finds_a_changed_column(
    store_url: str, ledger: Ledger, change: str, broken_at: int
) -> None:
    for n in range(6):
        ledger.remember(f"memory {n}")
    assert ledger.verify().ok and ledger.verify().checked == 6
    tamper(store_url, change)
    report = ledger.verify()
    assert (report.ok, report.first_break) == (False, broken_at)


def tampered_log(url: str, clock: ManualClock, change: str) -> VerifyReport:
    """Write three memories, change the log behind the ledger's back, and verify it
    from a ledger that leaves folding to others."""
    with Ledger.open(url, namespace="acme", actor="tester", clock=clock) as ledger:
        for n in range(3):
            ledger.remember(f"memory {n}")
    tamper(url, change)
    with Ledger.open(url, sync_projections=False) as ledger:
        return ledger.verify()


def test_verify_reports_an_event_moved_past_the_projections(
    store_url: str, clock: ManualClock
) -> None:
    """Folding a moved event again fails, so a fresh ledger that folds on opening
    cannot open; one that leaves folding to others still verifies the log."""
    report = tampered_log(store_url, clock, "UPDATE erstwhile_events SET position = 10 "
                                            "WHERE position = 2")  # fmt: skip
    assert (report.ok, report.first_break) == (False, 3)
    with pytest.raises(StoreUnavailable):
        Ledger.open(store_url).close()


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE erstwhile_events SET recorded_at = 'abc' WHERE position = 2",
        "UPDATE erstwhile_events SET namespace = CAST(namespace AS BLOB) WHERE position = 2",
        "UPDATE erstwhile_events SET topic = CAST(topic AS BLOB) WHERE position = 2",
    ],
)
def test_verify_reports_a_value_of_the_wrong_type_as_a_break(
    sqlite_url: str, clock: ManualClock, change: str
) -> None:
    """SQLite keeps any type in any column: text where an instant was, or bytes where
    text was, is a break of the chain, not a crash of the check."""
    report = tampered_log(sqlite_url, clock, change)
    assert (report.ok, report.first_break) == (False, 2)


def test_verify_finds_a_memory_id_rewritten_in_capitals(
    sqlite_url: str, clock: ManualClock
) -> None:
    # SQLite stores ids as text: the chain covers the text as stored, so an id rewritten
    # to another spelling of the same UUID breaks it too.
    ledger = Ledger.open(sqlite_url, namespace="acme", actor="tester", clock=clock)
    for n in range(3):
        ledger.remember(f"memory {n}")
    tamper(sqlite_url, "UPDATE erstwhile_events SET originator_id = upper(originator_id) "
                       "WHERE position = 2")  # fmt: skip
    report = ledger.verify()
    ledger.close()
    assert (report.ok, report.first_break) == (False, 2)


@pytest.mark.parametrize("change", ["an actor", "a cut end", "a key gone"])
def test_export_and_replay_refuse_a_log_that_does_not_verify(
    store_url: str, ledger: Ledger, change: str
) -> None:
    """An import chains the events it restores anew, so the export of a log changed
    behind the ledger's back made a store that verified (the change laundered); a
    replay answered an audit from the changed log (its own prefix's chain was all it
    checked: a cut end or a key deleted without a hard forget went unseen). Both are
    refused, nothing written; a replay of the prefix before the change still answers."""
    made = [ledger.remember(f"memory {n}", subject=f"s{n}") for n in range(3)]
    statement, broken = {
        "an actor": ("UPDATE erstwhile_events SET actor = 'mallory' WHERE position = 2", 2),
        "a cut end": ("DELETE FROM erstwhile_events WHERE position = 3", 3),
        "a key gone": (f"DELETE FROM erstwhile_keys WHERE memory_id = '{made[1].id}'", 2),
    }[change]
    if change == "a key gone":
        with ledger.log.backend.write() as sql:
            sql.execute(statement)
    else:
        tamper(store_url, statement)
    before = list(ledger.events())
    out = io.BytesIO()
    with pytest.raises(StoreUnavailable, match=rf"broken at position {broken} .*: export refused"):
        ledger.export(out, all_namespaces=True)
    assert out.getvalue() == b""
    with pytest.raises(StoreUnavailable, match=rf"broken at position {broken} .*: replay refused"):
        ledger.replay()
    with ledger.replay(known_at=made[0].recorded_at) as past:
        assert [m.content for m in past.facts("s0")] == ["memory 0"]
    assert list(ledger.events()) == before


def test_verify_finds_a_flipped_payload_byte(store_url: str, ledger: Ledger) -> None:
    for n in range(4):
        ledger.remember(f"memory {n}")
    flip = (
        "UPDATE erstwhile_events SET state = "
        + ("substr(state, 1, 10) || X'00' || substr(state, 12)" if store_url.startswith("sqlite")
           else "overlay(state placing '\\x00'::bytea from 11 for 1)")
        + " WHERE position = 3"
    )  # fmt: skip
    tamper(store_url, flip)
    assert ledger.verify().first_break == 3


# ----------------------------------------------------------- replay, export, import


def answers(ledger: Ledger, subject: str = "team") -> tuple[Any, ...]:
    return (
        [m.model_dump() for m in ledger.facts(subject)],
        [m.model_dump() for m in ledger.facts(subject, as_of=MAR)],
        [(h.memory.id, h.tier) for h in ledger.search("team database", include_history=True)],
        [p.model_dump() for p in ledger.proposals()],
        [c.model_dump() for c in ledger.conflicts()],
    )


def story(ledger: Ledger, clock: ManualClock) -> list[Any]:
    """A history with every kind of event; returns the instant after each write."""
    instants = []
    old = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                          value="Supabase", valid_from=MAR, entities=["team"])  # fmt: skip
    instants.append(clock.advance(hours=1))
    new = ledger.revise(old.id, "The team moved to AWS", value="AWS", at=JUL)
    instants.append(clock.advance(hours=1))
    ledger.remember("The team database is Neon", subject="team", attribute="database",
                    value="Neon", valid_from="2026-08-01T00:00:00Z")  # fmt: skip
    ledger.archive(ledger.remember("retro", kind="note", subject="team").id)
    instants.append(clock.advance(hours=1))
    ledger.forget(ledger.remember("typo", subject="team").id)
    ledger.forget(remember_secret(ledger).id, hard=True)
    (proposal,) = ledger.proposals()
    ledger.reject(proposal.id, "not sure yet")
    instants.append(clock.advance(hours=1))
    assert new.id
    return instants


def test_replay_agrees_with_known_at(ledger: Ledger, clock: ManualClock) -> None:
    for instant in story(ledger, clock):
        with ledger.replay(known_at=instant) as past:
            assert [m.id for m in past.facts("team")] == [
                m.id for m in ledger.facts("team", known_at=instant)
            ]
            assert [m.id for m in past.facts("team", as_of=MAR)] == [
                m.id for m in ledger.facts("team", as_of=MAR, known_at=instant)
            ]
            assert past.head() <= ledger.head()
            with pytest.raises(ValidationError, match="read-only"):
                past.remember("nope")
            folder = past.folder
        assert not folder.exists()


def test_a_replay_audits_the_log_as_it_stood(ledger: Ledger, clock: ManualClock) -> None:
    """A replay answers the audit methods too (they raised ``AttributeError``): its
    copied prefix verifies, exports as the live log's first events, and replays further
    back; an import into it is refused like every other write."""
    first, second, *_ = story(ledger, clock)
    whole = io.BytesIO()
    ledger.export(whole)
    with ledger.replay(known_at=second) as past:
        report = past.verify()
        assert report.ok and report.checked == past.head()
        prefix = io.BytesIO()
        assert past.export(prefix) == len(prefix.getvalue().splitlines())
        exported = whole.getvalue().splitlines()[: len(prefix.getvalue().splitlines())]
        assert prefix.getvalue().splitlines() == exported
        with past.replay(known_at=first) as earlier:
            assert [m.id for m in earlier.facts("team")] == [
                m.id for m in ledger.facts("team", known_at=first)
            ]
        head = past.head()
        with pytest.raises(ValidationError, match="read-only"):
            past.import_events(whole.getvalue().splitlines())
        assert past.head() == head


def test_a_replay_copies_a_log_whose_memories_span_its_batches(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log is copied into the replay's store in batches: a memory asserted in one
    and superseded, archived or forgotten in a later one has its key copied once."""
    from erstwhile.ledger import audit

    monkeypatch.setattr(audit, "IMPORT_BATCH", 3)
    first = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                            value="Supabase", valid_from=MAR)  # fmt: skip
    notes = [ledger.remember(f"note {i}", subject=f"note {i}") for i in range(4)]
    clock.advance(hours=1)
    second = ledger.revise(first.id, "The team moved to AWS", value="AWS", at=JUL)
    ledger.archive(notes[0].id)
    ledger.forget(notes[1].id)
    clock.advance(hours=1)
    with ledger.replay(known_at=ledger.now()) as past:
        assert past.head() == ledger.head()
        assert [m.id for m in past.facts("team")] == [second.id]
        assert [m.id for m in past.chain(second.id)] == [first.id, second.id]
        assert past.get(notes[2].id).content == "note 2"


def test_export_then_import_gives_the_same_answers(
    open_ledger: OpenLedger, clock: ManualClock, tmp_path: Path
) -> None:
    source = open_ledger(namespace="acme")
    story(source, clock)
    buffer = io.BytesIO()
    counted: list[int] = []
    written = source.export(buffer, progress=counted.append)
    assert written == event_count(source) and counted[-1] == written
    assert SECRETS["content"].encode() not in buffer.getvalue()
    for url in (f"sqlite:///{tmp_path}/copy.db", *_other_backend(source)):
        target = Ledger.open(url, namespace="acme", actor="importer", clock=clock)
        with target:
            assert target.import_events(buffer.getvalue().splitlines()) == written
            assert answers(target) == answers(source)
            assert [(e.position, e.recorded_at, e.type, e.memory_id, e.actor, e.data)
                    for e in target.events()] == [
                (e.position, e.recorded_at, e.type, e.memory_id, e.actor, e.data)
                for e in source.events()
            ]  # fmt: skip
            assert target.verify().ok
            before = event_count(target)
            with pytest.raises(ValidationError, match="empty store") as refused:
                target.import_events(buffer.getvalue().splitlines())
            assert f"reaches position {target.head()}" in str(refused.value)
            assert event_count(target) == before


def _other_backend(source: Ledger) -> list[str]:
    """Also import into a fresh PostgreSQL schema when the source is PostgreSQL."""
    if not source.url.startswith("postgresql"):
        return []
    base = source.url.split("?")[0]
    return [f"{base}?schema=import_{os.urandom(4).hex()}"]


def test_an_export_keeps_the_claims_of_writes_made_while_it_runs(
    store_url: str, open_ledger: OpenLedger, tmp_path: Path
) -> None:
    """A keyed write committed after the export began, in a page it reads later, is
    exported with its claim's digest: a retry after the import returns that memory."""
    source, rival = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    source.remember_many([{"content": f"note {i}", "subject": f"n{i}"} for i in range(60)])
    written: list[Any] = []

    class WriteOnFirstLine(io.BytesIO):
        def write(self, data: Any) -> int:
            if data and not written:  # the first line (an empty write checks the mode)
                written.append(rival.remember("The team uses AWS", idempotency_key="k9"))
            return super().write(data)

    buffer = WriteOnFirstLine()
    assert source.export(buffer) == 61
    (line,) = [json.loads(x) for x in buffer.getvalue().splitlines() if b'"k9"' in x]
    assert line["memory_id"] == str(written[0].id) and line["fingerprint"]
    target = Ledger.open(f"sqlite:///{tmp_path}/copy.db", namespace="acme", actor="importer")
    with target:
        target.import_events(buffer.getvalue().splitlines())
        head = target.head()
        assert target.remember("The team uses AWS", idempotency_key="k9").id == written[0].id
        assert target.head() == head


def test_an_import_keeps_the_idempotency_claims(
    store_url: str, open_ledger: OpenLedger, tmp_path: Path
) -> None:
    """A retry after an import answers as before it: the first memory, a mismatch, or
    NotFound for one forgotten for good; never a second write."""
    source = open_ledger(namespace="acme")
    first = source.remember("The team uses Supabase", subject="team", idempotency_key="k1")
    secret = remember_secret(source)
    gone = source.remember("Ada's address is 1 Elm St", idempotency_key="k2")
    source.forget(gone.id, hard=True)
    buffer = io.BytesIO()
    source.export(buffer)
    target = Ledger.open(f"sqlite:///{tmp_path}/copy.db", namespace="acme", actor="importer")
    with target:
        target.import_events(buffer.getvalue().splitlines())
        head = target.head()
        retried = target.remember("The team uses Supabase", subject="team", idempotency_key="k1")
        assert retried.id == first.id and target.head() == head
        with pytest.raises(IdempotencyMismatch):
            target.remember("The team uses AWS", subject="team", idempotency_key="k1")
        with pytest.raises(NotFound):
            target.remember("Ada's address is 1 Elm St", idempotency_key="k2")
        assert target.head() == head and target.get(secret.id).content == SECRETS["content"]


def test_an_export_that_met_a_hard_forget_imports_the_content_erased(
    store_url: str, open_ledger: OpenLedger, tmp_path: Path
) -> None:
    """An export reads the log page by page: a hard forget committing meanwhile leaves
    the memory's content in the file before its Forgotten event. The import erases it
    as the forget did: its new key destroyed, no byte of it left in the store."""
    source = open_ledger(namespace="acme")
    secret = remember_secret(source)
    before, after = io.BytesIO(), io.BytesIO()
    source.export(before)  # the page with the content, read before the forget
    source.forget(secret.id, hard=True)
    source.export(after)
    lines = before.getvalue().splitlines() + after.getvalue().splitlines()[1:]
    url = f"sqlite:///{tmp_path}/copy.db"
    with Ledger.open(url, namespace="acme", actor="importer") as target:
        target.import_events(lines)
        with pytest.raises(NotFound):
            target.get(secret.id)
        assert [e.data for e in target.events(memory_id=secret.id)] == [
            None, {"hard": True, "reason": None}]  # fmt: skip
        assert target.verify().ok
    assert leaked(url) == []


def test_the_deepest_value_the_ledger_takes_exports_and_imports(tmp_path: Path) -> None:
    from tests.unit.test_memory_input import nested

    source = Ledger.open(f"sqlite:///{tmp_path}/deep.db")
    with source:
        deep = source.remember("deep", value=nested(200), metadata={"n": nested(199)})
        buffer = io.BytesIO()
        assert source.export(buffer) == 1
    with Ledger.open(f"sqlite:///{tmp_path}/copy.db") as target:
        target.import_events(buffer.getvalue().splitlines())
        assert target.get(deep.id).value == nested(200)


def test_import_refuses_garbage_and_writes_nothing(tmp_path: Path, clock: ManualClock) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/x.db", actor="i", clock=clock) as target:
        for lines in ([b"not json"], [b'{"type": "Exploded"}'], [b'{"position": 1}']):
            with pytest.raises(ValidationError, match="import line 1"):
                target.import_events(lines)
            assert event_count(target) == 0
        with pytest.raises(ValidationError, match="not an exported event \\(no field 'type'\\)"):
            target.import_events([b'{"x": 1}'])
        assert event_count(target) == 0


def test_import_refuses_a_schema_version_newer_than_it_reads(tmp_path: Path) -> None:
    """A line from a later erstwhile (``"schema_version": 99``) was imported as the
    current schema, its data read as this version's."""
    with Ledger.open(f"sqlite:///{tmp_path}/source.db") as source:
        source.remember("a note")
        buffer = io.BytesIO()
        source.export(buffer)
    (line,) = buffer.getvalue().splitlines()
    current = json.loads(line)["schema_version"]
    newer = line.replace(f'"schema_version":{current}'.encode(), b'"schema_version":99')
    assert newer != line
    with Ledger.open(f"sqlite:///{tmp_path}/copy.db") as target:
        with pytest.raises(ValidationError, match=r"import line 1: .*schema_version 99 of "
                           r"Asserted is newer than this erstwhile reads"):  # fmt: skip
            target.import_events([newer])
        assert target.head() == 0
        assert target.import_events([line]) == 1


@pytest.mark.parametrize("version", [b"true", b"1.0", b'"1"'])
def test_import_refuses_a_version_that_is_no_integer_and_writes_nothing(
    tmp_path: Path, version: bytes
) -> None:
    """A position that is no integer was refused, but a version of ``true`` or ``1.0``
    imported as 1 (pydantic's lax reading)."""
    with Ledger.open(f"sqlite:///{tmp_path}/source.db") as source:
        source.remember("a note")
        buffer = io.BytesIO()
        source.export(buffer)
    (line,) = buffer.getvalue().splitlines()
    bad = line.replace(b'"version":1', b'"version":' + version)
    assert bad != line
    with Ledger.open(f"sqlite:///{tmp_path}/copy.db") as target:
        with pytest.raises(ValidationError, match=r"import line 1: .*version must be an integer"):
            target.import_events([bad])
        assert target.head() == 0
        assert target.import_events([line]) == 1


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**30])
def test_import_refuses_an_integer_beyond_64_bits_and_writes_nothing(
    tmp_path: Path, big: int
) -> None:
    """orjson reads such an integer as a float: the import stored it rounded, without a
    word, where ``remember`` refuses it."""
    with Ledger.open(f"sqlite:///{tmp_path}/source.db") as source:
        source.remember("fits", value=2**64 - 1, metadata={"n": -(2**63)})
        buffer = io.BytesIO()
        source.export(buffer)
    (line,) = buffer.getvalue().splitlines()
    with Ledger.open(f"sqlite:///{tmp_path}/copy.db") as target:
        for bad in (line.replace(b"18446744073709551615", str(big).encode()),
                    line.replace(b"-9223372036854775808", str(big).encode())):  # fmt: skip
            assert bad != line
            with pytest.raises(ValidationError, match=r"import line 1: .*64 bits"):
                target.import_events([bad])
            assert target.head() == 0
        assert target.import_events([line]) == 1
        (copied,) = target.search("fits")
        assert copied.memory.value == 2**64 - 1 and copied.memory.metadata == {"n": -(2**63)}


def test_an_import_that_fails_late_writes_nothing(
    open_ledger: OpenLedger, clock: ManualClock, tmp_path: Path
) -> None:
    """A bad line after more events than one batch holds: the batches before it are
    not left behind, so the store stays empty and the corrected import can run."""
    source = open_ledger(namespace="acme")
    source.remember_many([{"content": f"memory {n}", "subject": "batch"}
                          for n in range(IMPORT_BATCH + 200)])  # fmt: skip
    buffer = io.BytesIO()
    source.export(buffer)
    lines = buffer.getvalue().splitlines()
    for url in (f"sqlite:///{tmp_path}/copy.db", *_other_backend(source)):
        with Ledger.open(url, namespace="acme", actor="importer", clock=clock) as target:
            with pytest.raises(ValidationError, match=f"import line {len(lines) + 1}"):
                target.import_events([*lines, b"{not json"])
            assert target.head() == 0 and target.facts("batch") == []
            assert target.import_events(lines) == len(lines) == source.head()
            assert len(target.facts("batch")) == IMPORT_BATCH + 200


def test_keys_can_be_wrapped_with_a_master_key(
    sqlite_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master)
    with Ledger.open(sqlite_url, actor="a", clock=clock) as ledger:
        memory = remember_secret(ledger)
    with Ledger.open(sqlite_url, actor="a", clock=clock) as ledger:
        ledger.rebuild()
        assert ledger.get(memory.id).content == SECRETS["content"]
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", base64.urlsafe_b64encode(os.urandom(32)).decode())
    with (
        pytest.raises(StoreUnavailable, match="does not unwrap"),
        Ledger.open(sqlite_url) as ledger,
    ):
        ledger.rebuild()
    monkeypatch.delenv("ERSTWHILE_MASTER_KEY")
    with pytest.raises(StoreUnavailable, match="wrapped"), Ledger.open(sqlite_url) as ledger:
        ledger.rebuild()
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", "too-short")
    with pytest.raises(StoreUnavailable, match="32 bytes"):
        Ledger.open(sqlite_url)


def new_master_key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def plain_then_wrapped(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str | None, str]]:
    """The test's store, its keys plain; then a store of its own whose keys are wrapped,
    with a new master key set from then on: ``(master key or None, url)`` each."""
    for master in (None, new_master_key()):
        if master is not None:
            monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master)
        url = store_url if master is None else store_url.replace("schema=", "schema=w")
        if url.startswith("sqlite:///"):
            url = url.replace(".db", "-wrapped.db") if master else url
        yield master, url


def set_key(ledger: Ledger, memory_id: Any, key: bytes) -> None:
    """Change a memory's stored key behind the ledger's back."""
    with ledger.log.backend.write() as sql:
        sql.execute("UPDATE erstwhile_keys SET key_bytes = ? WHERE memory_id = ?",
                    [key, str(memory_id)])  # fmt: skip


def key_rows(ledger: Ledger) -> list[int]:
    """The ``wrapped`` flag of every key the store holds."""
    with ledger.log.backend.read() as sql:
        sql.execute("SELECT wrapped FROM erstwhile_keys ORDER BY memory_id")
        return [int(row["wrapped"]) for row in sql.fetchall()]


def refused_writes(ledger: Ledger, older: Any, match: str) -> None:
    """Every write that stores a new memory's key is refused, and the log is unchanged."""
    head, keys = ledger.head(), key_rows(ledger)
    writes = (
        lambda: ledger.remember("Bob is on call", subject="bob"),
        lambda: ledger.remember_many([{"content": "Bob is on call", "subject": "bob"}]),
        lambda: ledger.revise(older.id, "Ada's passport is XK-NEW"),
    )
    for write in writes:
        with pytest.raises(StoreUnavailable, match=match):
            write()
    assert ledger.head() == head and key_rows(ledger) == keys
    assert ledger.facts("bob") == []


def test_a_ledger_without_the_master_key_stores_nothing_in_a_wrapped_store(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the store's keys are wrapped, a ledger with no master key, or the wrong
    one, is refused every write that would store a key (a plain key beside the wrapped
    ones would leave that memory unprotected); the right key writes on."""
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master := new_master_key())
    older = remember_secret(open_ledger())
    before = event_count(open_ledger())
    monkeypatch.delenv("ERSTWHILE_MASTER_KEY")
    refused_writes(open_ledger(), older, r"wrapped: set \$ERSTWHILE_MASTER_KEY to write")
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", new_master_key())
    refused_writes(open_ledger(), older, r"\$ERSTWHILE_MASTER_KEY does not unwrap")
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master)
    ledger = open_ledger()
    assert event_count(ledger) == before
    ledger.remember("Bob is on call", subject="bob")
    ledger.revise(older.id, "Ada's passport is XK-NEW")
    assert event_count(ledger) == before + 3
    assert [m.content for m in ledger.facts("bob")] == ["Bob is on call"]
    assert key_rows(ledger) == [1, 1, 1]


def test_verify_with_a_master_key_that_is_not_the_stores_says_so(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A master key that unwraps none of the wrapped keys is not the store's (or every
    key was changed): verify says that, instead of reporting the log broken at its
    first memory; with the store's key, a wrapped key changed is a break at its memory,
    and without a master key the wrapped keys are checked for presence."""
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master := new_master_key())
    ledger = open_ledger()
    first, second = (ledger.remember(f"Claim {n}", subject=f"s{n}") for n in range(2))
    assert ledger.verify().ok
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", new_master_key())
    with pytest.raises(StoreUnavailable, match=r"\$ERSTWHILE_MASTER_KEY unwraps none of the "
                       r"memory keys it was tried on \(2\): it is not the store's"):  # fmt: skip
        open_ledger().verify()
    monkeypatch.delenv("ERSTWHILE_MASTER_KEY")
    assert open_ledger().verify().ok
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master)
    ledger = open_ledger()
    set_key(ledger, second.id, os.urandom(60))  # no longer unwraps
    report = ledger.verify()
    assert (report.ok, report.first_break) == (False, ledger.history(second.id).memory.position)
    assert first.position < report.first_break


def test_verify_finds_a_plain_key_emptied_behind_the_ledgers_back(ledger: Ledger) -> None:
    """No master key, no wrapped key: a plain key changed to no bytes at all is a break
    at its memory (it once stood for a key the master key did not unwrap, and verify
    then blamed a master key the store does not have)."""
    first, second = (ledger.remember(f"Claim {n}", subject=f"s{n}") for n in range(2))
    set_key(ledger, second.id, b"")
    report = ledger.verify()
    assert (report.ok, report.first_break) == (False, ledger.history(second.id).memory.position)
    assert report.reason is not None and "does not open its sealed content" in report.reason
    assert first.position < report.first_break


def test_a_master_key_wraps_the_keys_written_from_then_on(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store first used without a master key keeps its plain keys when one is set:
    the keys written from then on are wrapped, and from the first of them on a ledger
    without the master key may not write."""
    monkeypatch.delenv("ERSTWHILE_MASTER_KEY", raising=False)
    older = remember_secret(open_ledger())
    open_ledger().remember("Cy is on leave", subject="cy")
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", new_master_key())
    open_ledger().remember("Bob is on call", subject="bob")
    assert sorted(key_rows(open_ledger())) == [0, 0, 1]
    monkeypatch.delenv("ERSTWHILE_MASTER_KEY")
    ledger = open_ledger()
    head = ledger.head()
    with pytest.raises(StoreUnavailable, match="ERSTWHILE_MASTER_KEY"):
        ledger.revise(older.id, "Ada's passport is XK-NEW")
    assert ledger.head() == head and sorted(key_rows(ledger)) == [0, 0, 1]


def test_state_after_soft_forget_is_forgotten_in_history(ledger: Ledger) -> None:
    memory = ledger.remember("x", subject="s")
    ledger.forget(memory.id)
    assert ledger.get(memory.id, known_at=memory.recorded_at).state is State.CURRENT


def test_one_memorys_events_are_read_in_its_own_namespace_only(open_ledger: OpenLedger) -> None:
    mine, rival = open_ledger(namespace="acme"), open_ledger(namespace="rival")
    theirs = rival.remember("the rival roadmap", kind="note")
    rival.archive(theirs.id)
    ours = mine.remember("our roadmap", kind="note")
    with pytest.raises(NotFound, match="in namespace 'acme'"):
        list(mine.events(memory_id=theirs.id))
    assert [e.type for e in rival.events(memory_id=theirs.id)] == ["Asserted", "Archived"]
    assert [e.memory_id for e in mine.events(memory_id=ours.id)] == [ours.id]
    assert list(mine.events(memory_id=ours.id, after=10**9)) == []


def test_replay_before_a_hard_forget_shows_nothing_of_the_memory(
    ledger: Ledger, clock: ManualClock
) -> None:
    """A replay to an instant before a hard forget folds the assertion without its
    content (the key is gone) and never the forget: the memory must stay unseen."""
    kept = ledger.remember("The plan is called beta", subject="plan", attribute="code",
                           value="beta", valid_from=MAR)  # fmt: skip
    erased = ledger.remember("Project alpha is secret", subject="project", attribute="name",
                             value="alpha", valid_from=MAR)  # fmt: skip
    instant = clock.advance(days=1)
    clock.advance(days=1)
    ledger.forget(erased.id, hard=True)
    with ledger.replay(known_at=instant) as past:
        with pytest.raises(NotFound):
            past.get(erased.id)
        with pytest.raises(NotFound):
            past.get(erased.id, known_at=instant)
        assert past.facts("project") == []
        assert past.search("secret alpha") == []
        assert [m.id for m in past.chain(kept.id)] == [kept.id]
        assert past.get(kept.id).content == "The plan is called beta"


UNCLOSED_REPLAY = """
import sys
from erstwhile import Ledger
ledger = Ledger.open(sys.argv[1], namespace="acme")
past = ledger.replay()
print(past.folder, flush=True)
"""


def test_a_replay_never_closed_leaves_no_scratch_store(tmp_path: Path) -> None:
    """A replay's scratch store holds ciphertext and today's keys: one dropped without
    ``close`` (or left open when its process exits) stayed on disk, where a memory
    hard-forgotten later could still be read."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path, namespace="acme") as ledger:
        ledger.remember("Project alpha is secret", subject="project")
        past = ledger.replay()
        folder = past.folder
        assert (folder / "replay.db").exists()
        del past
        gc.collect()
        assert not folder.exists()
    exited = subprocess.run([sys.executable, "-c", UNCLOSED_REPLAY, str(path)],
                            capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    left = Path(exited.stdout.strip())
    assert left.name.startswith("erstwhile-replay-") and not left.exists()


def test_a_replay_before_a_hard_forget_leaves_it_out_of_links_and_proposals(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Links and proposals name the erased memory too: a chain walks through it, a
    history and the proposals list leave it out, as the live ledger does."""
    first = ledger.remember("HQ in Oslo", subject="hq", attribute="city", value="Oslo",
                            valid_from=MAR)  # fmt: skip
    middle = ledger.revise(first.id, "HQ in Bergen", value="Bergen", at="2026-05-01T00:00:00Z")
    last = ledger.revise(middle.id, "HQ in Tromso", value="Tromso", at="2026-07-01T00:00:00Z")
    older = ledger.remember("Team uses Supabase", subject="team", attribute="db",
                            value="Supabase", valid_from=MAR)  # fmt: skip
    ledger.remember("Team uses AWS", subject="team", attribute="db", value="AWS",
                    valid_from="2026-07-01T00:00:00Z")  # fmt: skip
    assert len(ledger.proposals()) == 1
    instant = clock.advance(days=1)
    clock.advance(days=1)
    ledger.forget(middle.id, hard=True)
    ledger.forget(older.id, hard=True)
    with ledger.replay(known_at=instant) as past:
        assert [m.id for m in past.chain(last.id)] == [first.id, last.id]
        assert past.history(last.id).supersedes == []
        assert past.history(first.id).superseded_by is None
        assert past.proposals() == []
    assert [m.id for m in ledger.chain(last.id)] == [first.id, last.id]
    assert ledger.proposals() == []


def test_replay_reports_its_progress_as_rebuild_does(ledger: Ledger, clock: ManualClock) -> None:
    instant = story(ledger, clock)[-1]
    seen: list[tuple[str, int, int]] = []
    with ledger.replay(known_at=instant, progress=lambda *step: seen.append(step)) as past:
        head = past.head()
    assert head > 0
    assert {name for name, _, _ in seen} == {p.name for p in ledger.runner.projections}
    assert all(total == head for _, _, total in seen)
    assert max(reached for _, reached, _ in seen) == head


# ------------------------------------------------------------------ corrupt payloads

CORRUPT_PAYLOADS = {
    "not JSON": b"\x00\xff",
    "not an object": b"[1]",
    "fields missing": b"{}",
    "a field of the wrong type": b'{"kind": 5, "subject": ["team"]}',
    "a seal that is not base64": b'{"sealed": "not base64!"}',
}
OUTSIDE_TOPIC = "this:s"
"""A topic naming a module outside the ledger (one that prints when imported)."""
CORRUPTIONS = [*CORRUPT_PAYLOADS, "an unknown topic", "a topic outside the ledger"]


def corrupt_first_event(store_url: str, how: str) -> None:
    """Change the first event's payload (or its topic) to one the ledger never writes."""
    if how == "an unknown topic":
        change = "topic = 'erstwhile.domain.events:Renamed'"
    elif how == "a topic outside the ledger":
        change = f"topic = '{OUTSIDE_TOPIC}'"
    else:
        data = CORRUPT_PAYLOADS[how].hex()
        change = "state = " + (f"X'{data}'" if store_url.startswith("sqlite")
                               else f"'\\x{data}'::bytea")  # fmt: skip
    tamper(store_url, f"UPDATE erstwhile_events SET {change} WHERE position = 1")


def stored_events(ledger: Ledger) -> int:
    """How many events the log table holds, counted without decoding any."""
    with ledger.log.backend.read() as sql:
        sql.execute("SELECT count(*) AS n FROM erstwhile_events")
        return int(sql.fetchone()["n"])


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupt_payload_is_a_clear_error_that_changes_nothing(
    store_url: str, ledger: Ledger, clock: ManualClock, how: str,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Every read of the log that meets an event changed outside the ledger is
    StoreUnavailable naming the event; a rebuild leaves the live projections and a
    replay its scratch store as they were."""
    story(ledger, clock)
    first = next(ledger.events()).memory_id
    before, count = answers(ledger), stored_events(ledger)
    corrupt_first_event(store_url, how)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    reads = {
        "events": lambda: list(ledger.events()),
        "one memory's events": lambda: list(ledger.events(memory_id=first)),
        "export": lambda: ledger.export(io.BytesIO()),
        "rebuild": ledger.rebuild,
        "rebuild again (the first let go of its claim)": ledger.rebuild,
        "replay": lambda: ledger.replay(known_at=ledger.now()),
    }
    for name, read in reads.items():
        with pytest.raises(StoreUnavailable) as raised:
            read()
        message = str(raised.value)
        assert f"event at position 1 (memory {first})" in message, name
        assert "audit verify" in message and "\n" not in message, name
    assert answers(ledger) == before and stored_events(ledger) == count
    assert list(scratch.iterdir()) == []
    assert ledger.verify().first_break == 1
    assert OUTSIDE_TOPIC.split(":")[0] not in sys.modules  # never imported to be read


def test_a_memory_id_that_is_no_uuid_is_named_as_such_though_its_key_is_not_found(
    sqlite_url: str, clock: ManualClock
) -> None:
    """Keys are found by the memory id as stored, so an id rewritten to text that is no
    UUID finds none: its event is still refused as one the ledger never writes (as it
    is with a key), not as a payload that does not fit its type; nothing changes."""
    ledger = Ledger.open(sqlite_url, namespace="acme", actor="tester", clock=clock)
    for n in range(3):
        ledger.remember(f"memory {n}")
    count = stored_events(ledger)
    tamper(sqlite_url, "UPDATE erstwhile_events SET originator_id = 'not-a-uuid' "
                       "WHERE position = 2")  # fmt: skip
    with pytest.raises(StoreUnavailable) as raised:
        list(ledger.events())
    message = str(raised.value)
    assert "position 2 (memory not-a-uuid) cannot be read: it is not an event" in message
    assert stored_events(ledger) == count
    ledger.close()


@pytest.mark.parametrize(
    ("stored", "shown"),
    [("'soon'", "'soon'"), ("1.5", "1.5"), ("4611686018427387904", "4611686018427387904")],
)
def test_a_row_of_the_wrong_type_is_a_clear_error_that_changes_nothing(
    sqlite_url: str, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    stored: str, shown: str,
) -> None:  # fmt: skip
    """SQLite keeps any type in any column: an event whose instant was overwritten with
    text, a fraction or a number no date holds is StoreUnavailable naming it, for every
    read of the log, as a corrupt payload is; nothing changes."""
    ledger = Ledger.open(sqlite_url, namespace="acme", actor="tester", clock=clock)
    story(ledger, clock)
    first = next(ledger.events()).memory_id
    before, count = answers(ledger), stored_events(ledger)
    tamper(sqlite_url, f"UPDATE erstwhile_events SET recorded_at = {stored} WHERE position = 1")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    reads = {
        "events": lambda: list(ledger.events()),
        "export": lambda: ledger.export(io.BytesIO()),
        "rebuild": ledger.rebuild,
    }
    for name, read in reads.items():
        with pytest.raises(StoreUnavailable) as raised:
            read()
        message = str(raised.value)
        assert f"event at position 1 (memory {first})" in message, name
        assert f"recorded_at is {shown}" in message and "audit verify" in message, name
    assert answers(ledger) == before and stored_events(ledger) == count
    assert list(scratch.iterdir()) == []
    assert ledger.verify().first_break == 1
    ledger.close()


def test_an_append_inserted_a_part_at_a_time_chains_and_opens_as_one(ledger: Ledger) -> None:
    """An append stamps and inserts its events a part at a time: the parts chain on one
    another at consecutive positions and instants, and every memory opens with its own
    key, as if the batch had gone in at once."""
    count = 2 * EVENTS_PER_INSERT + 17
    older = ledger.remember(content="the first note", kind="note")
    made = ledger.remember_many(
        [{"content": "the first note, revised", "kind": "note", "supersedes": [older.id]}]
        + [{"content": f"note {n}", "kind": "note"} for n in range(1, count)]
    )
    appended = list(ledger.events(after=1))
    assert [e.position for e in appended] == list(range(2, count + 3))  # with the supersession
    steps = {b.recorded_at - a.recorded_at for a, b in pairwise(appended)}
    assert steps == {timedelta(microseconds=1)}
    assert ledger.verify() == VerifyReport(ok=True, checked=count + 2)
    assert [ledger.get(m.id).content for m in made] == ["the first note, revised"] + [
        f"note {n}" for n in range(1, count)
    ]
