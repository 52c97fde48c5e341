"""Projection lifecycle (SPEC section 7): shadow rebuild and swap under load, schema
version bumps, a follower process, and crash safety under SIGKILL, on both backends."""

from __future__ import annotations

import base64
import io
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import unicodedata
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from erstwhile import Ledger, NotFound, State, StoreUnavailable
from erstwhile.eventstore.backend import TAGGED, PassingSql
from erstwhile.eventstore.sqlite import WAL_SIZE_LIMIT
from erstwhile.projections import (
    MemoriesProjection,
    ProjectionRunner,
    ProposalsProjection,
    SearchProjection,
    VersionsProjection,
    search,
)
from tests.conftest import ManualClock, OpenLedger

MAR = "2026-03-01T00:00:00Z"
APR = "2026-04-01T00:00:00Z"
JUL = "2026-07-01T00:00:00Z"
TABLES = {
    "memories": "id", "memory_entities": "memory_id, entity", "actor_writes": "actor, position",
    "memory_versions": "memory_id, seq", "proposals": "id",
}  # fmt: skip
SEARCH_TABLES = {
    "sqlite": {"memory_search": "rowid", "memory_search_live": "rowid",
               "memory_search_keys": "memory_id", "memory_search_pending": "position"},
    "postgresql": {"memory_search": "memory_id", "memory_search_live": "memory_id"},
}  # fmt: skip


def dump(ledger: Ledger) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every projection table, in a stable order."""
    rows = {}
    dialect = ledger.log.backend.dialect
    with ledger.log.backend.read() as sql:
        for table, order in {**TABLES, **SEARCH_TABLES[dialect]}.items():
            columns = "*"
            if table in ("memory_search", "memory_search_live"):
                columns = "rowid, body" if dialect == "sqlite" else "memory_id, body::text AS body"
            sql.execute(f"SELECT {columns} FROM {table} ORDER BY {order}")
            rows[table] = [tuple(row[k] for k in row.keys()) for row in sql.fetchall()]  # noqa: SIM118 - sqlite3.Row iterates values
    return rows


def seed(ledger: Ledger, count: int) -> None:
    ledger.remember_many(
        {"content": f"fact {n} about widget {n % 300}", "subject": f"widget {n % 300}",
         "attribute": "colour", "value": f"c{n}", "entities": [f"w{n % 5}"],
         "valid_from": f"2026-0{1 + n % 8}-01T00:00:00Z"}
        for n in range(count)
    )  # fmt: skip


def test_a_rebuild_leaves_sqlite_connections_as_durable_as_before(
    tmp_path: Any,
) -> None:
    with Ledger.open(tmp_path / "ledger.db", namespace="acme") as ledger:
        seed(ledger, 1_500)
        ledger.rebuild()
        backend = ledger.log.backend
        for _ in range(3):  # every connection the pool hands out
            with backend.write() as sql:
                sql.execute("PRAGMA synchronous")
                assert sql.fetchone()[0] == 2  # FULL
                sql.execute("PRAGMA wal_autocheckpoint")
                assert sql.fetchone()[0] == 1_000


def test_a_rebuilds_claim_renewals_checkpoint_its_wal_no_sooner_than_it(tmp_path: Any) -> None:
    """A build checkpoints the WAL only past ``BULK_CHECKPOINT_PAGES`` (each checkpoint
    syncs the WAL and the file); the claim's renewals, in transactions of their own,
    keep to that too instead of checkpointing at SQLite's 1,000 pages."""
    wal = tmp_path / "ledger.db-wal"
    with Ledger.open(tmp_path / "ledger.db", namespace="acme") as ledger:
        seed(ledger, 3_000)
        ledger.remember("the seed's checkpoint is behind us")
        restarts, frames = [], []

        def report(name: str, position: int, head: int) -> None:
            restarted, in_use = wal_frames(wal)
            restarts.append(restarted)
            frames.append(in_use)
            if in_use > 1_000 and len(frames) == 1 + sum(f <= 1_000 for f in frames):
                time.sleep(1.05)  # the next report renews the claim

        ledger.rebuild(progress=report)
    assert max(frames) > 1_000  # a renewal's commit checkpointing at SQLite's would restart it
    assert len(set(restarts)) == 1


def wal_frames(wal: Path) -> tuple[int, int]:
    """The WAL file's checkpoint sequence (it grows each time a checkpointed WAL
    restarts from its start) and how many frames it holds since that restart (a frame
    carries the salts of the header it was written under)."""
    data = wal.read_bytes()
    frame = 24 + int.from_bytes(data[8:12], "big")
    held = sum(data[at + 8 : at + 16] == data[16:24] for at in range(32, len(data), frame))
    return int.from_bytes(data[12:16], "big"), held


def test_a_large_write_leaves_the_wal_file_no_larger_than_its_limit(tmp_path: Any) -> None:
    wal = tmp_path / "ledger.db-wal"
    with Ledger.open(tmp_path / "ledger.db", namespace="acme") as ledger:
        words = " ".join(f"word{n}" for n in range(6_000))  # about 60 KB a memory
        ledger.remember_many({"content": f"{n} {words}"} for n in range(400))
        assert wal.stat().st_size > WAL_SIZE_LIMIT  # one transaction: the WAL grew past it
        ledger.remember("the next write restarts the checkpointed WAL")
        assert wal.stat().st_size <= WAL_SIZE_LIMIT


def test_a_batch_read_ahead_that_another_process_folded_meanwhile_is_not_folded_again(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up reads and decodes its next batch before it takes the write lock (where
    the lock leaves writers a turn: SQLite). Another process may fold that batch in
    between; the catch-up then folds on from where that process left the projections,
    nothing twice."""
    follower, other = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    # PostgreSQL reads each batch in its transaction; a writer's turn makes it read
    # ahead too, so the path is tested on both backends.
    monkeypatch.setattr(type(follower.runner.backend), "writer_turn_seconds", 0.001)
    writer = open_ledger(namespace="acme", sync_projections=False)
    for _ in range(3):
        seed(writer, 400)
    prepare = follower.runner._prepare
    overtaken: list[int] = []

    def overtaken_meanwhile(until: int) -> Any:
        prepared = prepare(until)
        if not overtaken:
            overtaken.append(other.runner.catch_up())
        return prepared

    monkeypatch.setattr(follower.runner, "_prepare", overtaken_meanwhile)
    assert follower.runner.catch_up() == writer.head() == overtaken[0]
    folded = dump(follower)
    assert len(folded["memories"]) == 1200
    follower.rebuild()
    assert dump(follower) == folded


def test_a_build_started_over_while_its_next_batch_was_read_ahead_misses_no_event(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build reads its next batch ahead of the write lock. Should its tables be started
    over meanwhile (another process taking over a claim that lapsed drops them, creates
    them afresh and sets their tracking back to 0), the batch read ahead no longer
    follows what the tables hold: it must be read again from where they now are, or
    the build would fold on past the events it lost."""
    ledger = open_ledger(namespace="acme")
    monkeypatch.setattr(type(ledger.runner.backend), "writer_turn_seconds", 0.001)
    for _ in range(3):
        seed(ledger, 400)
    folded = dump(ledger)
    prepare = ProjectionRunner._prepare
    started_over: list[int] = []

    def started_over_meanwhile(runner: ProjectionRunner, *args: Any) -> Any:
        prepared = prepare(runner, *args)
        shadow, reached = runner.shadow, min(prepared.tracked.values()) if prepared else 0
        if shadow is not None and reached > 0 and not started_over:
            with runner.backend.write() as sql:
                for projection in runner.projections:
                    projection.drop(shadow.wrap(sql))
                    projection.create(shadow.wrap(sql))
                    runner.backend.reset_tracking(sql, runner._tracking_name(projection))
            started_over.append(reached)
        return prepared

    monkeypatch.setattr(ProjectionRunner, "_prepare", started_over_meanwhile)
    ledger.rebuild()
    assert started_over and started_over[0] > 0
    assert dump(ledger) == folded


def test_rebuild_runs_beside_readers_and_writers(open_ledger: OpenLedger) -> None:
    ledger = open_ledger(namespace="acme", clock=None)
    old = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                          value="Supabase", valid_from=MAR)  # fmt: skip
    new = ledger.revise(old.id, "The team moved to AWS", value="AWS", at="2026-07-01T00:00:00Z")
    seed(ledger, 600)
    writer, reader = (
        open_ledger(namespace="acme", clock=None),
        open_ledger(namespace="acme", clock=None),
    )
    stop, problems, written = threading.Event(), [], []

    def write() -> None:
        while not stop.is_set():
            memory = writer.remember(f"written during rebuild {len(written)}", subject="live")
            written.append(memory.id)
            if writer.get(memory.id).id != memory.id:
                problems.append("own write not readable")

    def read() -> None:
        while not stop.is_set():
            if [m.id for m in reader.facts("team", "database")] != [new.id]:
                problems.append("now")
            if [m.id for m in reader.facts("team", as_of="2026-03-15T00:00:00Z")] != [old.id]:
                problems.append("as of")
            if [h.memory.id for h in reader.search("team database")][:1] != [new.id]:
                problems.append("search")

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    try:
        ledger.rebuild()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert problems == [] and written
    assert {m.id for m in ledger.facts("live")} == set(written)
    after = dump(ledger)
    ledger.rebuild()
    assert dump(ledger) == after


def index_definitions(ledger: Ledger) -> Counter[tuple[str, str]]:
    """Every index of the ledger's tables by table and definition (its name left out),
    counted: an index built twice under two names counts twice."""
    found: Counter[tuple[str, str]] = Counter()
    with ledger.log.backend.read() as sql:
        if ledger.log.backend.dialect == "sqlite":
            sql.execute("SELECT name, tbl_name AS t, sql AS d FROM sqlite_master "
                        "WHERE type = 'index' AND sql IS NOT NULL")  # fmt: skip
        else:
            sql.execute("SELECT indexname AS name, tablename AS t, indexdef AS d "
                        "FROM pg_indexes WHERE schemaname = current_schema()")  # fmt: skip
        for row in sql.fetchall():
            name = re.escape(row["name"])
            # SQLite quotes the table's name in an index it renamed the table of.
            definition = re.sub(rf"INDEX {name}\b", "INDEX", row["d"].replace('"', ""))
            found[(row["t"], definition)] += 1
    return found


def test_a_rebuild_leaves_each_index_once_under_its_own_name(open_ledger: OpenLedger) -> None:
    """A rebuild builds its tables' indexes under tagged names beside the live ones; the
    swap must not leave the next opening to build each again under its own name."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 50)
    before = index_definitions(ledger)
    assert before and max(before.values()) == 1
    ledger.rebuild()
    assert index_definitions(ledger) == before
    reopened = open_ledger(namespace="acme")
    assert index_definitions(reopened) == before
    reopened.rebuild()
    assert index_definitions(open_ledger(namespace="acme")) == before


def test_the_indexes_a_rebuild_builds_last_are_the_projections_own(
    open_ledger: OpenLedger,
) -> None:
    """Every name in ``reader_indexes`` is an index its projection creates on this
    backend: a misspelt one would be built as the build folds, gaining nothing."""
    ledger = open_ledger(namespace="acme")
    with ledger.log.backend.read() as sql:
        created = {
            TAGGED.sub(r"\1", name): table for name, table in ledger.log.backend.indexes(sql)
        }
    for projection in ledger.runner.projections:
        for name in projection.reader_indexes:
            assert created.get(name) in projection.tables, (projection.name, name)


def test_a_rebuild_builds_the_indexes_only_reads_use_last_and_keeps_its_claim(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build folds without the indexes only reads use and builds them once it has
    caught up, one at a time, renewing its claim as it goes (a long index build must
    not let another process take the rebuild over); the swapped-in tables have them."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 20)
    before = index_definitions(ledger)
    postponed = {name for p in ledger.runner.projections for name in p.reader_indexes}
    backend, steps = ledger.log.backend, []
    build_index, renewal = type(backend).build_index, ProjectionRunner._renewal

    def building(self: Any, statement: str) -> None:
        with backend.read() as sql:
            present = {TAGGED.sub(r"\1", name) for name, _ in backend.indexes(sql)
                       if TAGGED.fullmatch(name)}  # fmt: skip
        steps.append(("build", statement, frozenset(present & postponed)))
        build_index(self, statement)

    def recorded(self: ProjectionRunner, token: int) -> Any:
        renew = renewal(self, token)

        def renewing() -> None:
            steps.append(("renew", "", frozenset()))
            renew()

        return renewing

    monkeypatch.setattr(type(backend), "build_index", building)
    monkeypatch.setattr(ProjectionRunner, "_renewal", recorded)
    ledger.rebuild()
    builds = [step for step in steps if step[0] == "build"]
    assert {re.search(r"INDEX IF NOT EXISTS (\w+)_[0-9a-f]{8}", s)[1] for _, s, _ in builds} == (
        postponed
    )
    assert (
        [present for _, _, present in builds]
        == [  # built one after the other
            frozenset(re.search(r"EXISTS (\w+)_[0-9a-f]{8}", s)[1] for _, s, _ in builds[:n])
            for n in range(len(builds))
        ]
    )
    tail = steps[steps.index(builds[0]) :]
    assert [kind for kind, _, _ in tail] == ["build", "renew"] * len(builds)
    assert index_definitions(ledger) == before


def test_opening_drops_the_second_copies_an_older_version_built(
    sqlite_url: str, clock: ManualClock
) -> None:
    """Until 2026-12-01 an opening after a rebuild built every index again under its own
    name; the next opening drops the rebuild's copies."""
    with Ledger.open(sqlite_url, clock=clock) as ledger:
        seed(ledger, 20)
        before = index_definitions(ledger)
        ledger.rebuild()
        with ledger.log.backend.write() as sql:
            sql.execute("CREATE INDEX memories_position ON memories (namespace, position)")
        assert index_definitions(ledger)[("memories", "CREATE INDEX ON memories "
                                          "(namespace, position)")] == 2  # fmt: skip
    with Ledger.open(sqlite_url, clock=clock) as reopened:
        assert index_definitions(reopened) == before


@pytest.mark.parametrize("rebuilt", [False, True], ids=["as created", "after a rebuild"])
def test_indexes_added_since_a_store_was_built_are_built_at_open(
    open_ledger: OpenLedger, rebuilt: bool
) -> None:
    """A store built before ``memories_attribute`` and ``memories_kind`` existed (its
    indexes under their own names, or under a rebuild's tags) gets them at its next
    opening, once, without a rebuild."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 20)
    if rebuilt:
        ledger.rebuild()
    before = index_definitions(ledger)
    added = [key for key in before
             if re.search(r"\(namespace, (attribute_key|kind), position\)", key[1])]  # fmt: skip
    assert len(added) == 2
    with ledger.log.backend.write() as sql:
        for name, _ in ledger.log.backend.indexes(sql):
            if name.startswith(("memories_attribute", "memories_kind")):
                sql.execute(f"DROP INDEX {name}")
    assert not set(added) & set(index_definitions(ledger))
    assert index_definitions(open_ledger(namespace="acme")) == before


def test_a_changed_schema_version_rebuilds_at_open(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = open_ledger(namespace="acme")
    seed(ledger, 50)
    before, rows = ledger.facts("widget 3", as_of="2026-08-15T00:00:00Z"), dump(ledger)
    monkeypatch.setattr(MemoriesProjection, "version", MemoriesProjection.version + 1)
    reopened = open_ledger(namespace="acme")
    assert reopened.runner.versions()["memories"] == MemoriesProjection.version
    assert reopened.facts("widget 3", as_of="2026-08-15T00:00:00Z") == before
    assert dump(reopened) == rows


def test_an_opening_that_cannot_read_the_log_for_its_rebuild_says_why_and_changes_nothing(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose keys are wrapped, opened by a newer version (a projection's schema
    changed) without the master key, or with a wrong one: the reads that need no key are
    refused until one opening with the store's key rebuilds, which the refusal says
    before the rebuild is claimed."""
    master = base64.urlsafe_b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master)
    ledger = open_ledger(namespace="acme")
    seed(ledger, 50)
    rows, versions = dump(ledger), ledger.runner.versions()
    old = MemoriesProjection.version
    monkeypatch.setattr(MemoriesProjection, "version", old + 1)
    refusals = {
        "": (
            r"the memory keys are wrapped: set \$ERSTWHILE_MASTER_KEY to rebuild this ledger's "
            rf"projections once: memories is at version {old} of its schema, this erstwhile "
            rf"reads version {old + 1}, .* after it, the store opens without it again "
            r"\(nothing was changed\)"
        ),
        base64.urlsafe_b64encode(os.urandom(32)).decode(): (
            r"does not unwrap the memory keys, and the store's own is needed to rebuild "
            rf"this ledger's projections once: memories is at version {old} .* "
            r"\(nothing was changed\)"
        ),
    }

    def no_claim(*_: object) -> None:
        raise AssertionError("the rebuild was claimed")

    for key, refusal in refusals.items():
        monkeypatch.setenv("ERSTWHILE_MASTER_KEY", key)
        with monkeypatch.context() as claims:
            claims.setattr(ProjectionRunner, "_write_claim", no_claim)
            with pytest.raises(StoreUnavailable, match=refusal):
                Ledger.open(store_url, namespace="acme")
        assert ledger.runner.versions() == versions
        assert shadow_tables(ledger) == set()
        assert dump(ledger) == rows
    monkeypatch.setenv("ERSTWHILE_MASTER_KEY", master)
    rebuilt = open_ledger(namespace="acme")
    assert rebuilt.runner.versions()["memories"] == old + 1
    monkeypatch.delenv("ERSTWHILE_MASTER_KEY")
    keyless = open_ledger(namespace="acme")
    assert keyless.facts("widget 3") == ledger.facts("widget 3") != []
    assert dump(keyless) == rows


def indexed_by_older_code(sqlite: bool) -> Callable[[str], str]:
    """What search version 6 gave its index for a document: on SQLite the text composed,
    which its own tokenizer split; on PostgreSQL the words folded, their vowel signs
    taken for separators."""

    def indexed(text: str) -> str:
        if sqlite:
            return search.composed(text)
        pieces = search.without_accents(" ".join(search.words(text)).casefold())
        return " ".join(search.LETTERS_AND_DIGITS.findall(pieces))

    return indexed


def test_a_search_index_built_by_older_code_is_built_again_at_open(
    store_url: str, open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose search index older code built gets the current index at its next
    opening: words with accents, or next to an emoji, found by their folded questions
    (SQLite), a Devanagari word found by itself, not its consonants (PostgreSQL)."""
    questions = ["йогурт", "Müller", "ẹ̀kọ́", "Erstwhile", "shipped", "पानी"]
    content = unicodedata.normalize(
        "NFD", "Erstwhile™ notes: йогурт for Herr Müller, ẹ̀kọ́, Shipped🙂 पानी"
    )
    sqlite = store_url.startswith("sqlite")
    with monkeypatch.context() as older:
        older.setattr(search, "indexed_text", indexed_by_older_code(sqlite))
        older.setattr(search, "TOKENIZER", "porter unicode61")
        older.setattr(SearchProjection, "version", SearchProjection.version - 1)
        ledger = open_ledger(namespace="acme")
        memory = ledger.remember(content, subject="notes")
        missed = [q for q in questions if [h.memory.id for h in ledger.search(q)] != [memory.id]]
        # What the older index could not find: a word beside an emoji, which SQLite's
        # own tokenizer kept as one, and a Cyrillic accent it kept; a Devanagari word,
        # which PostgreSQL's folding cut at its vowel signs.
        assert missed == (["йогурт", "shipped"] if sqlite else ["पानी"]), missed
        ledger.close()
    reopened = open_ledger(namespace="acme")
    assert reopened.runner.versions()["search"] == SearchProjection.version
    for question in questions:
        assert [h.memory.id for h in reopened.search(question)] == [memory.id], question
    assert reopened.get(memory.id).content == content
    rows = dump(reopened)
    reopened.rebuild()
    assert dump(reopened) == rows


def label_by_older_code(text: str) -> str:
    """Labels as versions before 2026-12-01 (night) compared them: not composed."""
    return " ".join(text.split()).casefold()


def test_labels_stored_by_older_code_are_composed_at_open(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose keys and entities older code kept decomposed as typed gets them
    composed at its next opening: the events' entities as they are read, the keys by
    the projections' new versions."""
    from erstwhile.domain import bar, memory
    from erstwhile.projections import memories, reader, recall

    subject, entity = "Frau Mu\u0308ller", "Zoe\u0308"
    with monkeypatch.context() as older:
        for module in (bar, memory, memories, reader, recall):
            older.setattr(module, "normalise_label", label_by_older_code)
        for projection in (MemoriesProjection, VersionsProjection, ProposalsProjection):
            older.setattr(projection, "version", projection.version - 1)
        ledger = open_ledger(namespace="acme")
        written = ledger.remember("She lives in Berlin", subject=subject, attribute="city",
                                  value="Berlin", entities=[entity])  # fmt: skip
        assert written.entities == ["zoe\u0308"]
        assert ledger.facts("Frau Müller") == []  # what older code could not find
        ledger.close()
    reopened = open_ledger(namespace="acme")
    assert [m.id for m in reopened.facts("Frau Müller", "city")] == [written.id]
    assert [h.memory.id for h in reopened.search("lives", entities=["Zoë"])] == [written.id]
    assert reopened.get(written.id).entities == ["zoë"]
    assert reopened.get(written.id).subject == subject  # kept as written
    moved = reopened.remember("She moved to Munich", subject="Frau Müller", attribute="city",
                              value="Munich")  # fmt: skip
    assert [(p.older_id, p.newer_id) for p in reopened.proposals()] == [(written.id, moved.id)]


def test_readers_keep_their_answers_while_a_schema_change_rebuilds_at_open(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The opening that meets a new schema version builds the new tables beside the
    old ones, which a process still running the older code goes on reading."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 3_000)
    old = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                          value="Supabase", valid_from=MAR)  # fmt: skip
    new = ledger.revise(old.id, "The team moved to AWS", value="AWS", at=JUL)
    rows = dump(ledger)
    reader = open_ledger(namespace="acme")
    stop, problems, reads = threading.Event(), [], [0]

    def read() -> None:
        while not stop.is_set():
            if [m.id for m in reader.facts("team", "database")] != [new.id]:
                problems.append("now")
            if reader.get(old.id).superseded_by != new.id:
                problems.append("get")
            reads[0] += 1

    thread = threading.Thread(target=read)
    thread.start()
    try:
        monkeypatch.setattr(MemoriesProjection, "version", MemoriesProjection.version + 1)
        reopened = open_ledger(namespace="acme")
    finally:
        stop.set()
        thread.join(timeout=60)
    assert problems == [] and reads[0] > 0
    assert reopened.runner.versions()["memories"] == MemoriesProjection.version
    assert dump(reopened) == rows


def test_a_schema_change_that_adds_a_column_replaces_the_table_whole(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows cannot be copied from a shadow with other columns: the new table replaces
    the old one, its indexes under their own names on PostgreSQL."""
    ledger = open_ledger(namespace="acme")
    lisbon = ledger.remember("I live in Lisbon", subject="me", attribute="city", value="Lisbon",
                             valid_from=MAR)  # fmt: skip
    ledger.remember("I live in Berlin", subject="me", attribute="city", value="Berlin",
                    valid_from=JUL)  # fmt: skip
    create = ProposalsProjection.create

    def with_a_note(self: ProposalsProjection, sql: Any) -> None:
        sql.execute(
            "CREATE TABLE IF NOT EXISTS proposals (id TEXT PRIMARY KEY, namespace TEXT NOT NULL, "
            "older_id TEXT NOT NULL, newer_id TEXT NOT NULL, confidence DOUBLE PRECISION NOT NULL, "
            "status TEXT NOT NULL, position BIGINT NOT NULL, note TEXT)"
        )
        create(self, sql)  # the rest (the table exists by then)

    monkeypatch.setattr(ProposalsProjection, "create", with_a_note)
    monkeypatch.setattr(ProposalsProjection, "version", ProposalsProjection.version + 1)
    reopened = open_ledger(namespace="acme")
    with reopened.log.backend.read() as sql:
        sql.execute("SELECT older_id, note FROM proposals")
        assert [(row["older_id"], row["note"]) for row in sql.fetchall()] == [
            (str(lisbon.id), None)
        ]
        every = [name for name, table in reopened.log.backend.indexes(sql) if table == "proposals"]
        indexes = [name for name in every if name.startswith("proposals_open")]
    assert [p.older_id for p in reopened.proposals()] == [lisbon.id]
    # PostgreSQL renames the index back; SQLite keeps the tagged name, taken as its own.
    assert len(indexes) == 1
    if reopened.log.backend.dialect == "postgresql":
        assert indexes == ["proposals_open"]
        # the primary key's index (and constraint) too, not "proposals__shadow_pkey"
        assert sorted(every) == ["proposals_newer", "proposals_older", "proposals_open",
                                 "proposals_pkey"]  # fmt: skip
    open_ledger(namespace="acme")  # and the next opening builds none a second time
    counts = [n for (table, _), n in index_definitions(reopened).items() if table == "proposals"]
    assert counts and set(counts) == {1}


class WithANote(PassingSql):
    """What a newer projection's ``create`` sends: every table it makes has a column
    more, put first, so each of the others moves along."""

    def execute(self, statement: str, params: Any = ()) -> None:
        super().execute(re.sub(r"^(CREATE TABLE IF NOT EXISTS \w+ \()", r"\1note TEXT, ",
                               statement), params)  # fmt: skip


def test_a_ledger_left_running_answers_after_another_opening_replaced_its_tables(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process whose statements were prepared against the old tables (psycopg prepares
    a statement the sixth time a connection runs it) goes on reading and writing once
    another process's opening has replaced every projection's tables with ones of other
    columns: PostgreSQL re-plans a prepared statement on the new table, but refuses to
    if its result would change type, so no statement takes its columns from ``*``."""
    running = open_ledger(namespace="acme")
    running.remember("I live in Lisbon", subject="me", attribute="city", value="Lisbon",
                     valid_from=MAR)  # fmt: skip
    running.remember("I live in Berlin", subject="me", attribute="city", value="Berlin",
                     valid_from=JUL)  # fmt: skip
    tea = running.remember("I drink tea", subject="me", attribute="drink", value="tea",
                           valid_from=MAR)  # fmt: skip
    coffee = running.revise(tea.id, "I drink coffee", value="coffee", at=JUL)
    known = coffee.recorded_at

    def answers() -> list[Any]:
        return [
            running.facts("me", "city"), running.facts("me", as_of=APR),
            running.facts("me", known_at=known), running.get(tea.id),
            running.get(tea.id, known_at=known), running.history(tea.id),
            running.chain(coffee.id), running.timeline("me"),
            running.search("Lisbon coffee", include_history=True),
            running.search("tea", known_at=known, subject="me"), running.search(""),
            running.proposals(), running.conflicts(), running.head(),
        ]  # fmt: skip

    before = [answers() for _ in range(20)][-1]  # prepared on the pooled connections
    for projection in (MemoriesProjection, VersionsProjection, SearchProjection,
                       ProposalsProjection):  # fmt: skip
        monkeypatch.setattr(projection, "create", lambda self, sql, create=projection.create:
                            create(self, WithANote(sql)))  # fmt: skip
        monkeypatch.setattr(projection, "version", projection.version + 1)
    upgraded = open_ledger(namespace="acme")
    with upgraded.log.backend.read() as sql:
        sql.execute("SELECT note, id FROM memories")
        assert len(sql.fetchall()) == 4
    assert [answers() for _ in range(5)] == [before] * 5
    [proposal] = before[-3]
    berlin = running.accept(proposal.id)
    milk = running.remember("I drink milk", subject="me", attribute="drink", value="milk",
                            supersedes=[coffee.id], valid_from="2026-08-01T00:00:00Z")  # fmt: skip
    assert running.facts("me") == upgraded.facts("me") == [milk, berlin]
    assert running.search("milk") == upgraded.search("milk")


def test_openings_at_once_after_a_schema_change_all_open(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of them rebuilds; the others wait for it, then find the new version."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 1_000)
    rows = dump(ledger)
    monkeypatch.setattr(MemoriesProjection, "version", MemoriesProjection.version + 1)
    opened: list[Ledger] = []
    threads = [threading.Thread(target=lambda: opened.append(open_ledger(namespace="acme")))
               for _ in range(3)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(opened) == 3
    assert all(dump(other) == rows for other in opened)
    assert opened[0].runner.versions() == {p.name: p.version for p in opened[0].runner.projections}


def test_one_rebuild_runs_at_a_time_and_a_dead_ones_claim_lapses(
    open_ledger: OpenLedger,
) -> None:
    ledger = open_ledger(namespace="acme")
    seed(ledger, 50)
    rows = dump(ledger)

    def claim(lapses_in_seconds: float) -> None:
        with ledger.log.backend.write() as sql:
            sql.execute("DELETE FROM erstwhile_projections WHERE name = '#rebuild'")
            sql.execute("INSERT INTO erstwhile_projections (name, version) VALUES (?, ?)",
                        ("#rebuild", int((time.time() + lapses_in_seconds) * 1_000_000)))  # fmt: skip

    claim(60)  # another process's build, alive
    with pytest.raises(
        StoreUnavailable, match=r"another rebuild \(of this process or another\) is under way"
    ):
        ledger.rebuild()
    claim(-1)  # a build that died a while ago
    ledger.rebuild()
    assert dump(ledger) == rows
    assert "#rebuild" not in ledger.runner.versions()

    def taken_over(name: str, position: int, head: int) -> None:
        """Another process takes the claim over while this build stalls."""
        with ledger.log.backend.write() as sql:
            sql.execute("UPDATE erstwhile_projections SET version = 7 "
                        "WHERE name = '#rebuild-owner'")  # fmt: skip

    with pytest.raises(StoreUnavailable, match="took the rebuild over"):
        ledger.rebuild(progress=taken_over)
    assert dump(ledger) == rows  # nothing swapped in
    assert ledger.runner.versions()["#rebuild-owner"] == 7  # the other's claim stays


@pytest.mark.parametrize(
    ("rebuilt", "policy"),
    [("proposals", "propose"), ("proposals", "timestamp_wins"), ("memories", "propose"),
     ("memory_versions", "propose"), ("search", "propose")],
)  # fmt: skip
def test_rebuilding_one_projection_reads_the_others_caught_up(
    open_ledger: OpenLedger, rebuilt: str, policy: str
) -> None:
    """Proposals are found through the versions and memories as known at each
    assertion: a rebuild of some projections, while the others lag the log (a writer
    that does not fold), must fold proposals against them caught up, or against the
    rebuilt ones at the build's own position, or it misses proposals for good."""
    writer = open_ledger(namespace="acme", sync_projections=False)
    reader = open_ledger(namespace="acme")
    older = writer.remember("The team uses Supabase", subject="team", attribute="database",
                            value="Supabase", valid_from=MAR)  # fmt: skip
    newer = writer.remember("The team moved to AWS", subject="team", attribute="database",
                            value="AWS", valid_from=JUL, policy=policy)  # fmt: skip
    reader.rebuild(rebuilt)
    reader.remember("unrelated", subject="other")
    rebuilt = [(p.older_id, p.newer_id) for p in reader.proposals()]
    assert rebuilt == ([(older.id, newer.id)] if policy == "propose" else [])
    reader.rebuild()
    assert [(p.older_id, p.newer_id) for p in reader.proposals()] == rebuilt


def test_a_schema_change_of_what_proposals_read_rebuilds_them_too(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new version of the versions projection, met at an opening while a writer that
    does not fold has left the projections behind: proposals are folded again with it,
    against its new tables, not against the old ones left behind."""
    writer = open_ledger(namespace="acme", sync_projections=False)
    older = writer.remember("The team uses Supabase", subject="team", attribute="database",
                            value="Supabase", valid_from=MAR)  # fmt: skip
    newer = writer.remember("The team moved to AWS", subject="team", attribute="database",
                            value="AWS", valid_from=JUL)  # fmt: skip
    monkeypatch.setattr(VersionsProjection, "version", VersionsProjection.version + 1)
    reopened = open_ledger(namespace="acme")
    assert [(p.older_id, p.newer_id) for p in reopened.proposals()] == [(older.id, newer.id)]
    rows = dump(reopened)
    reopened.rebuild()
    assert dump(reopened) == rows


def test_a_new_version_that_adds_a_table_opens_the_store(store_url: str) -> None:
    """A new version of a projection may add a table (the search projection's live
    index once did): the store opens, and the rebuild at opening creates it. Reads
    that lock every projection table (PostgreSQL) must not lock it before then."""
    with Ledger.open(store_url, namespace="acme", actor="tester") as ledger:
        memory = ledger.remember("The office is in Lisbon", subject="office")
        with ledger.log.backend.write() as sql:  # a store from before that table
            sql.execute("DROP TABLE memory_search_live")
            sql.execute("UPDATE erstwhile_projections SET version = version - 1 "
                        "WHERE name = 'search'")  # fmt: skip
    with Ledger.open(store_url, namespace="acme", actor="tester") as ledger:
        assert [hit.memory.id for hit in ledger.search("Lisbon")] == [memory.id]
        assert [m.id for m in ledger.facts("office")] == [memory.id]


@pytest.mark.parametrize("table", ["memories", "memory_versions", "memory_search_live"])
def test_a_projection_that_lost_a_table_is_rebuilt_at_open(
    store_url: str, open_ledger: OpenLedger, table: str
) -> None:
    """A table dropped by hand: created empty at the next opening, its projection would
    answer nothing while its position said it was up to date. It is rebuilt instead,
    with the projections that read it, and every answer comes back."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 30)
    office = ledger.remember("The office is in Lisbon", subject="office", attribute="city")
    asked = lambda led: (  # noqa: E731
        dump(led), led.facts("widget 3", as_of="2026-08-15T00:00:00Z"), led.get(office.id),
        [hit.memory.id for hit in led.search("Lisbon")], led.proposals(),
    )  # fmt: skip
    before = asked(ledger)
    ledger.close()
    with (
        Ledger.open(store_url, namespace="acme", actor="tester") as dropping,
        dropping.log.backend.write() as sql,
    ):
        sql.execute(f"DROP TABLE {table}")
    reopened = open_ledger(namespace="acme")
    assert asked(reopened) == before
    assert all(status.lag == 0 for status in reopened.projection_status())


@pytest.mark.postgres
@pytest.mark.parametrize("swap", ["schema change", "rebuild"])
def test_a_read_begun_before_a_swap_keeps_what_it_saw(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    """PostgreSQL swaps a rebuilt projection in by dropping the old table and renaming
    the new one (after a schema change, and since 2026-12-02 after any rebuild). A read
    whose snapshot was taken before that swap committed (its first query, the log's
    tip) and which reaches the table after must still see what it saw: a memory
    written after the build caught up, folded in only by the swap's own transaction,
    was missing from it (the read went backwards). Reads lock the projections' tables
    before their snapshot, so the swap waits for such a read."""
    writer = Ledger.open(postgres_url, namespace="acme", actor="writer")
    reader = Ledger.open(postgres_url, namespace="acme", actor="reader")
    writer.remember("The office is in Lisbon", subject="office")
    written, snapshot_taken, swapping = [], threading.Event(), threading.Event()
    finish, hold = ProjectionRunner.finish_catching_up, ProjectionRunner._hold_claim

    def then_a_write(self: ProjectionRunner, *args: Any) -> None:
        finish(self, *args)
        written.append(writer.remember("The office moved to Berlin", subject="office"))
        snapshot_taken.wait(timeout=10)

    def swap_begins(self: ProjectionRunner, *args: Any) -> None:
        swapping.set()
        hold(self, *args)

    monkeypatch.setattr(ProjectionRunner, "finish_catching_up", then_a_write)
    monkeypatch.setattr(ProjectionRunner, "_hold_claim", swap_begins)
    if swap == "schema change":
        monkeypatch.setattr(MemoriesProjection, "version", MemoriesProjection.version + 1)
        upgrade = threading.Thread(target=lambda: Ledger.open(postgres_url, actor="new").close())
    else:
        upgrade = threading.Thread(target=lambda: writer.rebuild("memories"))
    upgrade.start()
    try:
        deadline = time.monotonic() + 10
        while not written and time.monotonic() < deadline:
            time.sleep(0.01)
        with reader.log.backend.read() as sql:
            sql.execute("SELECT max(position) AS head FROM erstwhile_events")
            assert sql.fetchone()["head"] == written[0].position  # the snapshot
            snapshot_taken.set()
            assert swapping.wait(timeout=10)
            time.sleep(0.5)  # the swap commits now, unless it waits for this read
            sql.execute("SELECT content FROM memories ORDER BY position")
            seen = [row["content"] for row in sql.fetchall()]
    finally:
        snapshot_taken.set()
        upgrade.join(timeout=30)
    assert seen == ["The office is in Lisbon", "The office moved to Berlin"]
    assert sorted(m.content for m in reader.facts("office")) == seen
    writer.close()
    reader.close()


POINT_READS: dict[str, Callable[[Ledger, Any], object]] = {
    "get": lambda reader, berlin: reader.get(berlin.id).content,
    "facts now": lambda reader, berlin: [m.content for m in reader.facts("office")],
    "facts as of": lambda reader, berlin: [
        m.content for m in reader.facts("office", as_of="2026-08-01T00:00:00Z")
    ],
    "facts known at": lambda reader, berlin: [
        m.content for m in reader.facts("office", known_at=berlin.recorded_at)
    ],
    "timeline": lambda reader, berlin: [r.content for r in reader.timeline("office")],
    "history": lambda reader, berlin: reader.history(berlin.id).memory.content,
    "chain": lambda reader, berlin: [m.content for m in reader.chain(berlin.id)],
    "knows": lambda reader, berlin: reader.knows(berlin.id, berlin.id),
    "proposals": lambda reader, berlin: reader.proposals(),
    "a command's state": lambda reader, berlin: reader._state(berlin.id).memory.content,
}


@pytest.mark.postgres
def test_point_reads_that_meet_a_swap_wait_and_see_it_whole(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A point read (``get``, ``facts``, ``timeline``, ``history``, ``chain``, ``knows``,
    ``proposals``, the state a command decides on) is one statement in no transaction
    of its own making: it takes its snapshot once it holds its tables. Each that meets
    a swap holding them waits, then sees the swap whole, a memory only the swap's own
    transaction folded in too. So even on a server whose default isolation is
    REPEATABLE READ, which would take the snapshot before the wait: the ledger's
    connections default to READ COMMITTED."""
    monkeypatch.setenv("PGOPTIONS", "-c default_transaction_isolation=repeatable\\ read")
    writer = Ledger.open(postgres_url, namespace="acme", actor="writer")
    readers = {
        name: Ledger.open(postgres_url, namespace="acme", actor=name) for name in POINT_READS
    }
    writer.remember("The office is in Lisbon", subject="office", valid_from=MAR)
    written, swapped, release = [], threading.Event(), threading.Event()
    finish, swap = ProjectionRunner.finish_catching_up, ProjectionRunner._swap

    def then_a_write(self: ProjectionRunner, *args: Any) -> None:
        finish(self, *args)  # the build has caught up: only the swap folds what follows
        written.append(writer.remember("The office moved to Berlin", subject="office",
                                       valid_from=JUL))  # fmt: skip

    def swap_then_wait(self: ProjectionRunner, *args: Any, **kwargs: Any) -> None:
        swap(self, *args, **kwargs)
        swapped.set()
        release.wait(timeout=10)  # the swap's transaction holds the tables meanwhile

    monkeypatch.setattr(ProjectionRunner, "finish_catching_up", then_a_write)
    monkeypatch.setattr(ProjectionRunner, "_swap", swap_then_wait)
    rebuild = threading.Thread(target=lambda: writer.rebuild("memories"))
    rebuild.start()
    seen: dict[str, Any] = {}
    reads = [
        threading.Thread(target=lambda n=name, f=read: seen.update({n: f(readers[n], written[0])}))
        for name, read in POINT_READS.items()
    ]
    try:
        assert swapped.wait(timeout=10)
        for thread in reads:
            thread.start()
        schema = postgres_url.split("schema=")[1]
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as watcher:
            deadline, waiting = time.monotonic() + 10, 0
            while time.monotonic() < deadline and waiting < len(reads):
                waiting = watcher.execute(
                    "SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_class c "
                    "ON c.oid = l.relation WHERE NOT l.granted "
                    "AND c.relnamespace = %s::regnamespace", (schema,),
                ).fetchone()[0]  # fmt: skip
                time.sleep(0.01)  # until every read waits for the swap
            assert waiting == len(reads)
    finally:
        release.set()
        rebuild.join(timeout=30)
    for thread in reads:
        thread.join(timeout=30)
    both = ["The office moved to Berlin", "The office is in Lisbon"]
    assert seen == {
        "get": "The office moved to Berlin", "facts now": both, "facts as of": both,
        "facts known at": both, "timeline": both[::-1],
        "history": "The office moved to Berlin", "chain": ["The office moved to Berlin"],
        "knows": True, "proposals": [], "a command's state": "The office moved to Berlin",
    }  # fmt: skip
    for ledger in (writer, *readers.values()):
        ledger.close()


@pytest.mark.postgres
def test_a_point_read_refused_leaves_its_connections_statements_prepared(
    postgres_url: str,
) -> None:
    """A point read that finds nothing is refused (``NotFound``) after its statement
    ran: the connection keeps its prepared statements, and every kind of read goes on
    (dropping them there, psycopg's cache and the server's once disagreed, and the next
    read of a prepared statement failed)."""
    with Ledger.open(postgres_url, namespace="acme", actor="tester") as ledger:
        memory = ledger.remember("The office is in Lisbon", subject="office")
        for _ in range(30):  # prepared on every pooled connection serving them
            assert ledger.head() == memory.position and ledger.get(memory.id)
        for _ in range(10):
            with pytest.raises(NotFound):
                ledger.get(uuid.uuid4())
            assert ledger.head() == memory.position  # a read transaction's statement
            assert ledger.get(memory.id).content == "The office is in Lisbon"


@pytest.mark.postgres
def test_a_point_read_prepared_before_a_columns_type_changed_fails_once(
    postgres_url: str,
) -> None:
    """A statement prepared on a pooled connection names its columns; a swap that
    replaces a table with one whose column has another type makes PostgreSQL refuse it
    ("cached plan must not change result type"). The failed read drops the connection's
    prepared statements, as a read transaction's ROLLBACK does, so the next read on that
    connection is planned afresh instead of failing again."""
    with Ledger.open(postgres_url, namespace="acme", actor="tester") as ledger:
        memory = ledger.remember("The office is in Lisbon", subject="office")
        for _ in range(60):  # prepared by now on every pooled connection serving them
            ledger.get(memory.id)
        schema = postgres_url.split("schema=")[1]
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as other:
            other.execute(f"ALTER TABLE {schema}.memories ALTER COLUMN actor TYPE VARCHAR(200)")
        outcomes = []
        for _ in range(20):
            try:
                outcomes.append(ledger.get(memory.id).content)
            except StoreUnavailable:
                outcomes.append("failed")
        connections = ledger.log.backend.datastore.pool.get_stats()["pool_size"]
    assert 1 <= outcomes.count("failed") <= connections  # once per connection at most
    assert outcomes[-10:] == ["The office is in Lisbon"] * 10


@pytest.mark.postgres
def test_a_long_read_during_a_swap_holds_up_no_other_read(postgres_url: str) -> None:
    """A rebuild's swap must wait for the reads in flight (they lock the tables), and
    reads begun meanwhile queue behind it: one long read would hold them all up. The
    swap gives up waiting soon and tries again later, so other reads go on while the
    long one runs, and the rebuild completes once it has ended."""
    ledger = Ledger.open(postgres_url, namespace="acme", actor="tester")
    other = Ledger.open(postgres_url, namespace="acme", actor="other")
    memory = ledger.remember("The office is in Lisbon", subject="office")
    long_read_open, end_long_read = threading.Event(), threading.Event()

    def long_read() -> None:
        with other.log.backend.read() as sql:
            sql.execute("SELECT count(*) AS n FROM memories")
            sql.fetchone()
            long_read_open.set()
            end_long_read.wait(timeout=30)

    reader = threading.Thread(target=long_read)
    reader.start()
    assert long_read_open.wait(timeout=10)
    rebuilt: list[str] = []
    rebuild = threading.Thread(target=lambda: rebuilt.append(str(ledger.rebuild())))
    rebuild.start()
    try:
        schema = postgres_url.split("schema=")[1]
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as watcher:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not watcher.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "WHERE NOT l.granted AND l.mode = 'AccessExclusiveLock' "
                "AND c.relnamespace = %s::regnamespace", (schema,),
            ).fetchone()[0]:  # fmt: skip
                time.sleep(0.01)  # until the swap waits for the long read
        seen: list[str] = []
        reads = threading.Thread(
            target=lambda: seen.extend(other.get(memory.id).content for _ in range(20))
        )
        reads.start()
        reads.join(timeout=8)  # while the long read still runs
        assert not reads.is_alive() and seen == ["The office is in Lisbon"] * 20
        assert rebuild.is_alive()  # the swap is still waiting its turn
    finally:
        end_long_read.set()
        reader.join(timeout=30)
        rebuild.join(timeout=60)
    assert rebuilt == [str(["memories", "memory_versions", "search", "proposals"])]
    assert [m.content for m in other.facts("office")] == ["The office is in Lisbon"]
    ledger.close()
    other.close()


def test_a_retried_swap_catches_the_others_up_again(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A swap that fails (a lock timeout, say) is retried after folding what was written
    meanwhile: the projections a partial build reads are caught up first then too."""
    from erstwhile.projections import base

    writer = open_ledger(namespace="acme", sync_projections=False)
    reader = open_ledger(namespace="acme")
    seed(reader, 20)
    swap, written = ProjectionRunner._swap, []

    def busy_once(self: ProjectionRunner, *args: Any, **kwargs: Any) -> None:
        if not written:
            raise StoreUnavailable("the store is busy")
        swap(self, *args, **kwargs)

    class Backoff:
        """The rebuild's clock, but its wait before a retry is spent writing."""

        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(seconds: float) -> None:
            if not written:
                written.append(writer.remember("The team uses Supabase", subject="team",
                               attribute="database", value="Supabase", valid_from=MAR))  # fmt: skip
                written.append(writer.remember("The team moved to AWS", subject="team",
                               attribute="database", value="AWS", valid_from=JUL))  # fmt: skip

    monkeypatch.setattr(ProjectionRunner, "_swap", busy_once)
    monkeypatch.setattr(base, "time", Backoff)
    reader.rebuild("proposals")
    older, newer = written
    assert [(p.older_id, p.newer_id) for p in reader.proposals()] == [(older.id, newer.id)]


def gapped(tmp_path: Path, reader: Ledger, count: int) -> None:
    """Seed ``reader``'s empty store by importing one namespace's export of a store
    that wrote two in turns: its positions keep gaps (1, 3, 5, ...)."""
    with Ledger.open(tmp_path / "source.db", namespace="acme") as acme, \
            Ledger.open(tmp_path / "source.db", namespace="other") as other:  # fmt: skip
        for n in range(count):
            acme.remember(f"fact {n}", subject=f"widget {n}", attribute="colour", value=n)
            other.remember(f"other {n}", subject=f"widget {n}", attribute="colour", value=n)
        exported = io.BytesIO()
        acme.export(exported)
    reader.import_events(exported.getvalue().splitlines())
    assert [e.position for e in reader.events()][:3] == [1, 3, 5]


def test_the_lag_counts_events_in_a_log_with_gaps(open_ledger: OpenLedger, tmp_path: Path) -> None:
    """A log imported from one namespace's export keeps its positions' gaps: the lag is
    the events a projection has yet to apply, not the distance between positions."""
    reader = open_ledger(namespace="acme")
    gapped(tmp_path, reader, 5)
    writer = open_ledger(namespace="acme", sync_projections=False)
    writer.remember("one more, not folded", subject="widget 9")
    status = writer.projection_status()
    assert {s.lag for s in status} == {1} and {s.head - s.position for s in status} == {1}
    head = status[0].head
    backend = writer.log.backend
    with backend.write() as sql:  # every projection back to the log's start
        sql.execute(f"UPDATE {backend.tracking_table} SET notification_id = 0 WHERE "
                    "application_name IN ('memories', 'memory_versions', 'proposals', "
                    "'search')")  # fmt: skip
    assert {s.lag for s in writer.projection_status()} == {6} and head == 10


@pytest.mark.parametrize("gaps", [False, True], ids=["consecutive", "gapped"])
@pytest.mark.parametrize("rebuilt", ["proposals", "memories", "memory_versions"])
def test_a_build_folds_no_further_than_the_projections_it_reads(
    open_ledger: OpenLedger,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    rebuilt: str,
    gaps: bool,
) -> None:
    """A writer that does not fold appends just after the others were caught up: the
    build's batch stops where they stopped, and the swap folds the rest (them first),
    so the new pair's proposal is found as a full rebuild finds it. In a log whose
    positions have gaps too (imported from one namespace's export): the build once
    took the distance between two positions for a count of events, folded past the
    others, and lost the proposal."""
    writer = open_ledger(namespace="acme", sync_projections=False)
    reader = open_ledger(namespace="acme")
    if gaps:
        gapped(tmp_path, reader, 20)
    else:
        seed(reader, 20)
    catch_up, written = ProjectionRunner.catch_up, []

    def then_a_write(self: ProjectionRunner, until: int | None = None, **kwargs: Any) -> int:
        reached = catch_up(self, until, **kwargs)
        if self.shadow is None and not written:  # the others, caught up before the build
            written.append(writer.remember("The team uses Supabase", subject="team",
                           attribute="database", value="Supabase", valid_from=MAR))  # fmt: skip
            written.append(writer.remember("The team moved to AWS", subject="team",
                           attribute="database", value="AWS", valid_from=JUL))  # fmt: skip
        return reached

    monkeypatch.setattr(ProjectionRunner, "catch_up", then_a_write)
    reader.rebuild(rebuilt)
    monkeypatch.undo()
    older, newer = written
    assert [(p.older_id, p.newer_id) for p in reader.proposals()] == [(older.id, newer.id)]
    rows = dump(reader)
    reader.rebuild()
    assert dump(reader) == rows


STALLED_REBUILD = """
import sys, time
from erstwhile import Ledger
with Ledger.open(sys.argv[1], namespace="acme", actor="rebuilder") as ledger:
    ledger.rebuild(progress=lambda *_: time.sleep(3600))
"""


def shadow_tables(ledger: Ledger) -> set[str]:
    """The rebuild's tables in the store, and the tracking rows of a build."""
    backend = ledger.log.backend
    names = [table + "__shadow" for p in ledger.runner.projections for table in p.tables]
    with backend.read() as sql:
        found = backend.existing_tables(sql, names)
        sql.execute(f"SELECT application_name FROM {backend.tracking_table}")
        return found | {row["application_name"] for row in sql.fetchall()
                        if row["application_name"].endswith("__shadow")}  # fmt: skip


@contextmanager
def stalled_rebuild(store_url: str, ledger: Ledger) -> Iterator[subprocess.Popen[bytes]]:
    """A rebuild in another process, stalled once it has claimed the rebuild and built
    its first tables; killed at the end of the block if still alive."""
    process = subprocess.Popen([sys.executable, "-c", STALLED_REBUILD, store_url])
    try:
        deadline = time.monotonic() + 60
        while "#rebuild-owner" not in ledger.runner.versions() or not shadow_tables(ledger):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)


def kill_outright(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL, and wait until the process is gone (a zombie its parent, this test, has
    not reaped yet)."""
    os.kill(process.pid, signal.SIGKILL)
    while not Path(f"/proc/{process.pid}/stat").read_text().split(") ")[-1].startswith("Z"):
        time.sleep(0.01)


def test_a_rebuild_killed_outright_leaves_no_claim_that_blocks_the_next(
    store_url: str, open_ledger: OpenLedger
) -> None:
    """A rebuild's claim holds for two minutes unrenewed, but one whose process is
    known to be gone (same host, same boot, no such process) is taken over at once."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 300)
    rows = dump(ledger)
    with stalled_rebuild(store_url, ledger) as process:
        claimed = ledger.runner.versions()["#rebuild-process"]
        assert claimed & ((1 << 22) - 1) == process.pid
        with pytest.raises(
            StoreUnavailable, match=r"another rebuild \(of this process or another\) is under way"
        ):
            ledger.rebuild()  # alive: refused
        kill_outright(process)
        started = time.monotonic()
        ledger.rebuild()  # gone: taken over at once, not after the claim's two minutes
        assert time.monotonic() - started < 60
    assert dump(ledger) == rows
    assert not {"#rebuild", "#rebuild-owner", "#rebuild-process"} & set(ledger.runner.versions())


def test_a_rebuild_that_fails_drops_what_it_built(open_ledger: OpenLedger) -> None:
    """Its shadow tables are a second copy of the projections, content included: a
    rebuild interrupted (Ctrl-C) or failing left them until the next rebuild."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 300)
    rows = dump(ledger)

    def interrupted(*_: object) -> None:
        assert shadow_tables(ledger)  # built so far
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ledger.rebuild(progress=interrupted)
    assert shadow_tables(ledger) == set()
    assert not {"#rebuild", "#rebuild-owner", "#rebuild-process"} & set(ledger.runner.versions())
    assert dump(ledger) == rows


def test_an_open_drops_the_tables_of_a_rebuild_killed_outright(
    store_url: str, open_ledger: OpenLedger
) -> None:
    """A rebuild killed outright cleans nothing up: the next open drops what it built,
    unless a rebuild is running (its claim alive), whose tables it leaves alone."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 300)
    rows = dump(ledger)
    with stalled_rebuild(store_url, ledger) as process:
        open_ledger(namespace="acme")
        assert shadow_tables(ledger)  # its build goes on
        kill_outright(process)
        open_ledger(namespace="acme")
        assert shadow_tables(ledger) == set()
    assert dump(ledger) == rows


WRITING = """
import sys, time
from erstwhile import Ledger
with Ledger.open(sys.argv[1], namespace="writer", actor="writer") as ledger:
    while True:
        ledger.remember("one more note", kind="note")
"""


def test_a_writer_takes_turns_with_a_rebuilds_transactions(
    store_url: str, open_ledger: OpenLedger
) -> None:
    """A rebuild builds in a run of short transactions, and a writer waiting meanwhile
    gets the lock between two of them. On SQLite it hardly ever did: SQLite's busy
    handler asks again every 100 ms after a while, and the build took the lock back at
    once, so a writer waited for most of a build (seconds, at 60,000 memories)."""
    ledger = open_ledger(namespace="acme")
    for start in range(0, 1_200, 20):  # many small appends: many short build batches
        ledger.remember_many([{"content": f"note {n}", "kind": "note"}
                              for n in range(start, start + 20)])  # fmt: skip
    ledger.runner.batch = 20
    heads: dict[int, int] = {}  # the log's head as each build batch ended, by its end
    writer = subprocess.Popen([sys.executable, "-c", WRITING, store_url])
    try:
        started = ledger.head()
        deadline = time.monotonic() + 60
        while ledger.head() < started + 5:  # writing already
            assert writer.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        ledger.rebuild(progress=lambda name, position, _: heads.setdefault(position, ledger.head()))
    finally:
        writer.kill()
        writer.wait(timeout=10)
    batches = len(heads)
    written_meanwhile = max(heads.values()) - min(heads.values())
    assert batches >= 40
    assert written_meanwhile >= batches // 4, (batches, written_meanwhile)


def test_a_rebuild_splits_a_large_append_into_batches(open_ledger: OpenLedger) -> None:
    """A build's batches stop at ``batch`` events even inside one append (nobody reads
    the build before its swap), so a writer waits for one batch, not for the fold of
    the largest append: here one append of 120 memories, built in batches of 10."""
    ledger = open_ledger(namespace="acme")
    ledger.remember_many({"content": f"note {n}", "kind": "note"} for n in range(120))
    ledger.runner.batch = 10
    reached: list[int] = []
    ledger.rebuild(progress=lambda name, position, head: reached.append(position))
    steps = sorted(set(reached))
    assert len(steps) >= 12, steps
    assert all(b - a <= 10 for a, b in zip([0, *steps], steps, strict=False)), steps


def test_a_rebuild_split_anywhere_inside_appends_folds_what_the_writes_folded(
    open_ledger: OpenLedger, clock: ManualClock
) -> None:
    """Folding an append in pieces gives what folding it whole gave: appends whose
    events supersede, propose and close each other, rebuilt in batches that cut them
    at every position."""
    ledger = open_ledger(namespace="acme")
    first = ledger.remember_many(
        [{"content": f"owl {n} roosts in barn {n % 3}", "subject": f"owl {n % 4}",
          "attribute": "roost", "value": f"barn {n % 3}", "entities": [f"barn {n % 3}"],
          "valid_from": f"2026-0{1 + n % 6}-01T00:00:00Z"} for n in range(12)]
        + [{"content": f"barn {n} needs a new roof", "entities": [f"barn {n}"],
            "valid_from": MAR} for n in range(3)]
        + [{"content": f"barn {n} roof is fine", "entities": [f"barn {n}"],
            "valid_from": "2026-04-01T00:00:00Z"} for n in range(3)]
    )  # fmt: skip
    clock.advance(minutes=1)
    ledger.remember_many(
        {"content": f"owl {n} moved to the silo", "subject": f"owl {n}", "attribute": "roost",
         "value": "silo", "valid_from": "2026-08-01T00:00:00Z", "policy": "timestamp_wins"}
        for n in range(4)
    )  # fmt: skip
    clock.advance(minutes=1)
    ledger.revise(first[12].id, "barn 0 roof was fixed", valid_from="2026-05-01T00:00:00Z")
    proposals = ledger.proposals()
    assert len(proposals) >= 2
    ledger.accept(proposals[0].id)
    ledger.reject(proposals[-1].id, reason="both hold")
    ledger.archive(first[13].id)
    ledger.forget(first[14].id)
    ledger.forget(first[15].id, hard=True)
    folded = dump(ledger)
    for batch in (1, 2, 3, 7):
        ledger.runner.batch = batch
        ledger.rebuild()
        assert dump(ledger) == folded, batch


def test_a_claim_from_another_host_or_boot_waits_for_its_lapse(open_ledger: OpenLedger) -> None:
    """A process id says nothing about a process of another host: such a claim holds."""
    ledger = open_ledger(namespace="acme")
    seed(ledger, 20)
    elsewhere = (12345 << 22) | 4_000_000  # another boot's process, surely no pid here
    with ledger.log.backend.write() as sql:
        sql.executemany("INSERT INTO erstwhile_projections (name, version) VALUES (?, ?)", [
            ("#rebuild", int((time.time() + 60) * 1_000_000)), ("#rebuild-owner", 1),
            ("#rebuild-process", elsewhere),
        ])  # fmt: skip
    with pytest.raises(
        StoreUnavailable, match=r"another rebuild \(of this process or another\) is under way"
    ):
        ledger.rebuild()


def test_a_follower_keeps_projections_current(open_ledger: OpenLedger) -> None:
    writer = open_ledger(namespace="acme", sync_projections=False, clock=None)
    reader = open_ledger(namespace="acme", clock=None)
    follower = open_ledger(namespace="acme", clock=None)
    stop = threading.Event()
    thread = threading.Thread(target=follower.follow, kwargs={"stop": stop, "poll": 0.05})
    thread.start()
    try:
        memory = writer.remember("appended without projecting", subject="async")
        assert memory.position == writer.head()
        reader.wait_for(memory.position, timeout=10)
        assert reader.get(memory.id).content == "appended without projecting"
        status = {s.name: s for s in reader.projection_status()}
        assert all(s.lag == 0 and s.position == memory.position for s in status.values())
    finally:
        stop.set()
        thread.join(timeout=10)


@pytest.mark.postgres
def test_each_write_notifies_the_logs_listeners_as_it_commits(
    postgres_database: str, postgres_url: str
) -> None:
    """PostgreSQL: a follower wakes on the NOTIFY each write sends with its COMMIT (as
    the statement its last writes go with), whether the write folds or not."""
    folding = Ledger.open(postgres_url, actor="tester")
    appending = Ledger.open(postgres_url, actor="tester", sync_projections=False)
    with psycopg.connect(postgres_database, autocommit=True) as listener:
        listener.execute('LISTEN "erstwhile_events"')
        try:
            folding.remember("folded in its own write", subject="notify")
            appending.remember("left to a follower", subject="notify-later")
            heard = list(listener.notifies(timeout=10, stop_after=2))
        finally:
            folding.close()
            appending.close()
    assert [n.channel for n in heard] == ["erstwhile_events", "erstwhile_events"]


def test_without_a_follower_reads_lag_and_say_so(open_ledger: OpenLedger) -> None:
    writer = open_ledger(namespace="acme", sync_projections=False)
    writer.remember("nobody projects me")
    assert {s.lag for s in writer.projection_status()} == {1}
    with pytest.raises(Exception, match="projections run"):
        writer.wait_for(timeout=0.2)


def test_waiting_for_a_position_past_the_log_says_so(open_ledger: OpenLedger) -> None:
    """A position nobody has written yet was answered as if no follower ran."""
    ledger = open_ledger(namespace="acme")
    ledger.remember("folded as it is written")
    with pytest.raises(StoreUnavailable, match="the log ends at 1: nothing was written there"):
        ledger.wait_for(5, timeout=0.05)


def test_a_command_reads_the_lag_with_the_memory_it_decides_on(open_ledger: OpenLedger) -> None:
    """The state a command decides on (``archive``, ``forget``, ``revise``, what a
    ``remember`` supersedes) comes in one statement with the projections' lag, which
    must be what ``lag()`` reads: a projection whose position was forgotten (no
    tracking row) counts as at 0. A command that finds them lagging catches them up
    before it reads: the memory it names may be one they have not applied yet."""
    ledger = open_ledger(namespace="acme")
    writer = open_ledger(namespace="acme", sync_projections=False)
    memory = ledger.remember("The office is in Lisbon", subject="office", attribute="city")
    backend = ledger.log.backend

    def lag_with(memory_id: Any) -> tuple[int, int]:
        with backend.read_one() as sql:
            _, lowest, head = ledger.reader.state_and_lag(sql, memory_id, ledger.runner.lag_query())
        return lowest, head

    assert lag_with(memory.id) == ledger.runner.lag() == (memory.position, memory.position)
    with backend.write() as sql:
        backend.reset_tracking(sql, "proposals")
    assert lag_with(memory.id) == ledger.runner.lag() == (0, memory.position)
    ledger.runner.catch_up()
    hidden = writer.remember("The office moved to Porto", subject="office", attribute="city")
    assert lag_with(hidden.id) == ledger.runner.lag() == (memory.position, hidden.position)
    archived = ledger.archive(hidden.id)  # NotFound, had it read before catching up
    assert archived.state is State.ARCHIVED
    assert lag_with(hidden.id) == ledger.runner.lag() == (ledger.head(), ledger.head())
    hidden = writer.remember("The office moved to Faro", subject="office", attribute="city",
                             valid_from=MAR)  # fmt: skip
    newer = ledger.remember("The office moved to Beja", subject="office", attribute="city",
                            valid_from=JUL, supersedes=[hidden.id])  # fmt: skip
    assert ledger.get(hidden.id).superseded_by == newer.id


@pytest.mark.parametrize("hard", [False, True])
def test_a_forget_takes_effect_at_once_without_a_follower(
    open_ledger: OpenLedger, hard: bool
) -> None:
    """A ledger that leaves folding to a follower still folds its forgets itself: the
    memory disappears from every read at once, and a hard forget wipes the projections'
    copies of the content now."""
    writer = open_ledger(namespace="acme", sync_projections=False)
    memory = writer.remember("the vault code is 4711", subject="vault", attribute="code",
                             value="4711")  # fmt: skip
    writer.forget(memory.id, hard=hard)
    with pytest.raises(NotFound):
        writer.get(memory.id)
    assert writer.search("vault code 4711") == [] and writer.facts("vault") == []
    assert {s.lag for s in writer.projection_status()} == {0}


def test_an_archive_or_accept_without_a_follower_returns_the_memory_it_changed(
    open_ledger: OpenLedger,
) -> None:
    """A ledger that leaves folding to a follower returns what its archive and accept
    did, as ``remember`` and ``revise`` do: the memory archived, the newer memory
    superseding the older (they returned the memory as it stood before the write)."""
    writer = open_ledger(namespace="acme", sync_projections=False)
    older = writer.remember("The team uses Supabase", subject="team", attribute="database",
                            value="Supabase", valid_from=MAR)  # fmt: skip
    newer = writer.remember("The team moved to AWS", subject="team", attribute="database",
                            value="AWS", valid_from=JUL)  # fmt: skip
    other = writer.remember("The office is in Lisbon", subject="office")
    archived = writer.archive(other.id)
    assert archived.state is State.ARCHIVED
    (proposal,) = writer.proposals()  # a command that reads folds the log first
    accepted = writer.accept(proposal.id)
    assert (accepted.id, accepted.supersedes, accepted.state) == (
        newer.id,
        [older.id],
        State.CURRENT,
    )
    reader = open_ledger(namespace="acme")  # folds everything: the same memories
    assert reader.get(other.id) == archived
    assert reader.get(newer.id) == accepted


FOLLOWER = """
import sys
from erstwhile import Ledger
with Ledger.open(sys.argv[1], namespace="acme", actor="follower") as ledger:
    ledger.runner.batch = int(sys.argv[2])
    ledger.runner.catch_up()
"""


def test_sigkill_during_catch_up_leaves_projections_a_rebuild_would_give(
    store_url: str, open_ledger: OpenLedger, clock: ManualClock
) -> None:
    writer = open_ledger(namespace="acme", sync_projections=False)
    for _ in range(6):
        seed(writer, 250)
        clock.advance(hours=1)
    head, kills = writer.head(), 0
    rng = random.Random(7)
    while kills < 4:
        # Small batches, and the kill lands at a random instant once the follower has
        # committed something: mid catch-up however fast the machine is.
        reached = min(s.position for s in writer.projection_status())
        process = subprocess.Popen([sys.executable, "-c", FOLLOWER, store_url, "10"])
        while (
            process.poll() is None
            and min(s.position for s in writer.projection_status()) == reached
        ):
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
        if process.poll() is not None:
            break
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        kills += 1
    subprocess.run([sys.executable, "-c", FOLLOWER, store_url, "100"], check=True, timeout=300)
    assert {s.position for s in writer.projection_status()} == {head}
    followed = dump(writer)
    writer.rebuild()
    assert dump(writer) == followed
    assert kills >= 1


def test_a_rebuild_gives_the_live_index_the_fold_gave_and_keeps_writes_made_meanwhile(
    open_ledger: OpenLedger, clock: ManualClock
) -> None:
    """On SQLite a shadow build puts the live index off until it has caught up with the
    log, then fills it at once: it must hold exactly what folding event by event gave,
    across batches (revisions, an archive, soft and hard forgets, a window that ended
    before it was recorded), and a write and a hard forget made while the build catches
    up must be in it, and out of it, afterwards."""
    ledger, other = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    made = ledger.remember_many(
        {"content": f"falcon {n} nests on tower {n}", "subject": f"falcon {n}",
         "attribute": "nest", "value": f"tower {n}", "valid_from": MAR}
        for n in range(12)
    )  # fmt: skip
    for older in made[:6]:
        clock.advance(minutes=1)
        ledger.revise(older.id, older.content + " again", value=f"{older.value} again")
    ledger.archive(made[6].id)
    ledger.forget(made[7].id)
    ledger.forget(made[8].id, hard=True)
    ledger.remember("falcon ended", valid_from=MAR, valid_until="2026-04-01T00:00:00Z")
    questions = ("falcon nests", "tower again", "falcon ended")
    answers = lambda: [ids(ledger.search(q, limit=50)) for q in questions]  # noqa: E731
    rows, before = dump(ledger), answers()
    ledger.runner.batch = 4
    ledger.rebuild()
    assert dump(ledger) == rows
    assert answers() == before

    written: list[Any] = []

    def meanwhile(name: str, at: int, head: int) -> None:
        # While the build catches up (in batches of four): a write after its first
        # batch, and the hard forget of a memory it has already folded with its content.
        if not written:
            written.append(other.remember("falcon hatched on tower 99", valid_from=MAR))
        if at >= made[9].position and len(written) == 1 and at < head:
            other.forget(made[9].id, hard=True)
            written.append(made[9])

    ledger.rebuild(progress=meanwhile)
    assert len(written) == 2
    found = ids(ledger.search("falcon tower", limit=50))
    assert written[0].id in found and made[9].id not in found
    rebuilt = dump(ledger)
    ledger.runner.batch = 1_000  # one batch: nothing put off across batches
    ledger.rebuild()
    assert dump(ledger) == rebuilt


def ids(hits: Any) -> list[Any]:
    return [hit.memory.id for hit in hits]


def test_a_rebuild_proposes_what_the_live_fold_kept_around_hard_forgets(
    open_ledger: OpenLedger, clock: ManualClock
) -> None:
    """No proposal pairs with an erased memory, whichever fold: the live one drops a
    hard-forgotten memory's pairs, a rebuild (which meets its assertion erased) makes
    none, so both end with the same rows."""
    ledger = open_ledger(namespace="acme")
    key = {"subject": "team", "attribute": "db", "kind": "preference"}
    older = ledger.remember("team uses Oracle", value="Oracle", valid_from=MAR, **key)
    corroborating = ledger.remember("team uses Oracle", value="Oracle", valid_from=APR, **key)
    clock.advance(minutes=1)
    newer = ledger.remember("team uses AWS", value="AWS", valid_from=JUL, **key)
    assert len(ledger.proposals()) == 2
    ledger.forget(corroborating.id, hard=True)
    ledger.forget(newer.id, hard=True)
    rows = dump(ledger)
    assert rows["proposals"] == []
    ledger.rebuild()
    assert dump(ledger) == rows
    assert ledger.proposals() == [] and ledger.get(older.id).state.value == "current"


def test_a_catch_up_batch_never_ends_inside_an_append(
    open_ledger: OpenLedger, clock: ManualClock
) -> None:
    """A follower folds in batches; each ends where an append ended, so a reader never
    sees part of a batch its writer wrote at once (400 memories, or a supersession
    without its successor)."""
    writer = open_ledger(namespace="acme", sync_projections=False)
    follower = open_ledger(namespace="acme", sync_projections=False)
    follower.runner.batch = 200

    def one_batch() -> int:
        with follower.log.backend.write(durable=False) as sql:
            return follower.runner.apply_batch(sql)

    first = writer.remember_many([{"content": f"first {n}"} for n in range(300)])
    clock.advance(seconds=1)
    second = writer.remember_many([{"content": f"second {n}"} for n in range(400)])
    assert [one_batch(), one_batch()] == [first[-1].position, second[-1].position]
    older = writer.remember("HQ in Oslo", subject="hq", attribute="city", value="Oslo",
                            valid_from=MAR)  # fmt: skip
    clock.advance(seconds=1)
    # Superseding makes the writer fold what it has not (to check the older memory),
    # then its append of 400 events (the Superseded among them) is left to the follower.
    writer.remember_many([*({"content": f"filler {n}"} for n in range(398)),
                          {"content": "HQ in Bergen", "subject": "hq", "attribute": "city",
                           "value": "Bergen", "valid_from": APR, "supersedes": [older.id]}])  # fmt: skip
    assert one_batch() == writer.head() == older.position + 400  # with its Superseded
    assert [m.value for m in follower.facts("hq", "city")] == ["Bergen"]


def test_appends_stay_apart_when_the_clock_stands_still(open_ledger: OpenLedger) -> None:
    """With a clock that does not move, each append still starts a microsecond past
    touching the one before, so a catch-up's batches stay near their size instead of
    taking the whole backlog as one append."""
    frozen = ManualClock()
    writer = open_ledger(namespace="acme", sync_projections=False, clock=frozen)
    for round_ in range(30):
        writer.remember_many([{"content": f"note {round_}.{n}"} for n in range(100)])
    follower = open_ledger(namespace="acme", sync_projections=False, clock=frozen)
    reached = []
    while not reached or reached[-1] < writer.head():
        with follower.log.backend.write(durable=False) as sql:
            reached.append(follower.runner.apply_batch(sql))
    assert reached == [500, 1000, 1500, 2000, 2500, 3000]
