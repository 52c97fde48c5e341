"""Reads about one memory or one subject find their rows through an index, whatever the
size of the namespace.

SQLite keeps no planner statistics here, so where a query could use two indexes it
picks by its own rules, and one of them may read every memory of the namespace: the
answer stays right while the read grows with the store (``chain`` once took 32 ms at
20k memories against 1.9 ms at 2k). Timings are not tests; the plans are. Each
statement these reads run is explained on the same connection (``EXPLAIN QUERY
PLAN``) and no step of its plan may walk a projection table whole or by namespace alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import islice
from typing import Any

import pytest

from erstwhile import Ledger
from erstwhile.eventstore import sqlite as sqlite_store
from erstwhile.projections.base import ProjectionRunner
from tests.conftest import ManualClock

WALKS = re.compile(
    r"^SCAN (memories|m|memory_versions|v|memory_entities|e)\b"
    r"|USING (COVERING )?INDEX \w+ \(namespace=\?\)$"
)
"""A plan step that reads a projection table whole, or every row of a namespace."""


def a_read(statement: str) -> bool:
    return statement.lstrip().upper().startswith("SELECT")


@contextmanager
def explained(
    monkeypatch: pytest.MonkeyPatch, wanted: Callable[[str], bool] = a_read
) -> Iterator[list[tuple[str, list[str]]]]:
    """Record the plan of every statement the ledger runs on SQLite meanwhile that
    ``wanted`` takes (its reads, unless told), one at a time or many (the first row's)."""
    plans: list[tuple[str, list[str]]] = []
    execute, executemany = sqlite_store.SQLiteSql.execute, sqlite_store.SQLiteSql.executemany

    def explain(sql: Any, statement: str, params: Any) -> None:
        if wanted(statement):
            rows = sql.raw.connection.execute(f"EXPLAIN QUERY PLAN {statement}", params)
            plans.append((" ".join(statement.split()), [row[3] for row in rows.fetchall()]))

    def explaining(self: Any, statement: str, params: Any = ()) -> None:
        explain(self, statement, params)
        execute(self, statement, params)

    def explaining_many(self: Any, statement: str, rows: Any) -> None:
        if rows:
            explain(self, statement, rows[0])
        executemany(self, statement, rows)

    monkeypatch.setattr(sqlite_store.SQLiteSql, "execute", explaining)
    monkeypatch.setattr(sqlite_store.SQLiteSql, "executemany", explaining_many)
    yield plans


def walking(plans: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """The (statement, plan step) pairs whose step walks a table or a namespace."""
    return [(statement, step) for statement, steps in plans for step in steps
            if WALKS.search(step)]  # fmt: skip


@pytest.fixture
def revised(sqlite_url: str, clock: ManualClock) -> Iterator[tuple[Ledger, list[Any]]]:
    """A SQLite ledger where one subject has three versions, among other memories: three
    name the same two entities, and two contradict each other (an open proposal)."""
    ledger = Ledger.open(sqlite_url, namespace="acme", actor="tester", clock=clock)
    ledger.remember_many(
        {"content": f"service {n} runs on MySQL", "subject": f"service-{n}",
         "attribute": "database", "value": "MySQL", "valid_from": "2024-01-01T00:00Z"}
        for n in range(200)
    )  # fmt: skip
    versions = [ledger.remember("orion runs on MySQL", subject="orion", attribute="database",
                                value="MySQL", valid_from="2024-01-01T00:00Z")]  # fmt: skip
    for value, month in (("PostgreSQL", 3), ("CockroachDB", 6)):
        clock.advance(days=30)
        revision = ledger.remember(
            f"orion runs on {value}",
            subject="orion",
            attribute="database",
            value=value,
            valid_from=datetime(2024, month, 1, tzinfo=UTC),
            supersedes=[versions[-1].id],
        )
        versions.append(revision)
    for n in range(3):
        ledger.remember(f"Kim and the falcon team, note {n}", entities=["kim", "falcon"])
    for owner in ("Ana", "Bo"):
        ledger.remember(f"lumen is owned by {owner}", subject="lumen", attribute="owner",
                        value=owner)  # fmt: skip
    yield ledger, versions
    ledger.close()


READS: dict[str, Callable[[Ledger, list[Any]], object]] = {
    "get": lambda ledger, versions: ledger.get(versions[1].id),
    "get as known at": lambda ledger, versions: ledger.get(
        versions[1].id, known_at=versions[2].recorded_at
    ),
    "history": lambda ledger, versions: ledger.history(versions[1].id),
    "chain": lambda ledger, versions: ledger.chain(versions[0].id),
    "facts now": lambda ledger, versions: ledger.facts("orion", "database"),
    "facts as_of": lambda ledger, versions: ledger.facts(
        "orion", "database", as_of=datetime(2024, 4, 1, tzinfo=UTC)
    ),
    "facts known_at": lambda ledger, versions: ledger.facts(
        "orion", "database", known_at=versions[1].recorded_at
    ),
    "timeline": lambda ledger, versions: ledger.timeline("orion", "database"),
    "events of one memory": lambda ledger, versions: list(ledger.events(memory_id=versions[1].id)),
    "events since an instant": lambda ledger, versions: list(
        ledger.events(since=versions[2].recorded_at)
    ),
    "events before an instant": lambda ledger, versions: list(
        ledger.events(before=versions[1].recorded_at, after=2)
    ),
    "conflicts about one subject": lambda ledger, versions: ledger.conflicts("lumen"),
    "open proposals": lambda ledger, versions: ledger.proposals(),
    "knows": lambda ledger, versions: ledger.knows(versions[2].id, versions[0].id),
    "search filtered by subject": lambda ledger, versions: ledger.search(
        "orion database", subject="orion"
    ),
    "search filtered by entities": lambda ledger, versions: ledger.search(
        "falcon note", entities=["kim"]
    ),
    "search without terms filtered by entities": lambda ledger, versions: ledger.search(
        "", entities=["falcon"]
    ),
    "search filtered by attribute": lambda ledger, versions: ledger.search(
        "lumen owned", attribute="owner"
    ),
    "search without terms filtered by attribute": lambda ledger, versions: ledger.search(
        "", attribute="owner"
    ),
    "search as known at an instant filtered by attribute": lambda ledger, versions: ledger.search(
        "orion", attribute="database", known_at=versions[1].recorded_at
    ),
    "search filtered by one kind": lambda ledger, versions: ledger.search(
        "lumen owned", kinds=["fact"]
    ),
    "search without terms filtered by one kind": lambda ledger, versions: ledger.search(
        "", kinds=["fact"]
    ),
}


@pytest.mark.parametrize("read", list(READS))
def test_a_point_read_never_walks_the_namespace(
    read: str, revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, versions = revised
    with explained(monkeypatch) as plans:
        answer = READS[read](ledger, versions)
    assert answer  # the read found what it was asked about
    assert plans, "the read ran no SELECT through the ledger's SQLite connection"
    assert walking(plans) == []


@pytest.mark.parametrize("valid_at", [None, datetime(2024, 7, 1, tzinfo=UTC)])
def test_facts_as_known_now_seek_the_open_versions_by_the_end_of_their_window(
    valid_at: datetime | None, revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key revised many times keeps every superseded version open in recorded time:
    found by their recorded end alone, a ``facts`` of the present read each of them
    (5 ms at 10,000 versions of one key against 0.09 ms at 100)."""
    ledger, _ = revised
    with explained(monkeypatch, wanted=lambda s: "JOIN memory_versions v" in s) as plans:
        assert ledger.facts("orion", "database", as_of=valid_at)
    steps = [step for _, found in plans for step in found if "memory_versions_subject" in step]
    assert steps and all("recorded_until=? AND valid_until>?" in step for step in steps), plans


def test_the_chain_reads_the_whole_lineage_as_get_reads_each(
    revised: tuple[Ledger, list[Any]],
) -> None:
    ledger, versions = revised
    assert ledger.chain(versions[1].id) == [ledger.get(v.id) for v in versions]


WRITES: dict[str, Callable[[Ledger, list[Any]], object]] = {
    "remember of a new subject": lambda ledger, versions: ledger.remember(
        "lumen runs on SQLite", subject="lumen", attribute="database", value="SQLite"
    ),
    "remember of a revision": lambda ledger, versions: ledger.remember(
        "orion runs on Spanner", subject="orion", attribute="database", value="Spanner"
    ),
    "remember naming shared entities": lambda ledger, versions: ledger.remember(
        "Kim reviewed the falcon budget", entities=["kim", "falcon"]
    ),
    "remember_many naming shared entities": lambda ledger, versions: ledger.remember_many(
        [
            {"content": f"Kim met the falcon team, round {n}", "entities": ["kim", "falcon"]}
            for n in range(3)
        ]
    ),
    "revise": lambda ledger, versions: ledger.revise(
        versions[-1].id, "orion runs on Spanner", value="Spanner"
    ),
    "archive": lambda ledger, versions: ledger.archive(versions[-1].id),
    "forget, hard": lambda ledger, versions: ledger.forget(versions[0].id, hard=True),
    "accept a proposal": lambda ledger, versions: ledger.accept(ledger.proposals()[0].id),
    "reject a proposal": lambda ledger, versions: ledger.reject(ledger.proposals()[0].id),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_never_walks_the_namespace(
    write: str, revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, versions = revised
    with explained(monkeypatch) as plans:
        WRITES[write](ledger, versions)
    assert plans, "the write ran no SELECT through the ledger's SQLite connection"
    assert walking(plans) == []


@pytest.mark.parametrize("write", ["remember", "revise"])
def test_a_write_finds_its_candidates_by_key_among_the_current_versions_alone(
    write: str, revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key revised many times keeps every superseded version open in recorded time:
    read through an index without the state, each write on the key read all of them to
    find the one current (a "current task" revised 3,000 times: 1.45 ms a revise at
    first, 2.49 ms by the end)."""
    ledger, versions = revised

    def by_key(statement: str) -> bool:
        return "v.state = 'current'" in statement and "v.subject_key" in statement

    with explained(monkeypatch, wanted=by_key) as plans:
        if write == "revise":
            ledger.revise(versions[-1].id, "orion runs on Spanner", value="Spanner")
        else:
            ledger.remember("orion runs on Oracle", subject="orion", attribute="database",
                            value="Oracle")  # fmt: skip
    assert plans
    for statement, steps in plans:
        assert any("INDEX memory_versions_current" in step for step in steps), (statement, steps)


@pytest.mark.parametrize("retire", ["archive", "forget", "forget hard", "revise"])
def test_a_memory_leaving_current_finds_its_proposals_through_an_index(
    revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch, retire: str
) -> None:
    """The fold of a hard forget deletes the proposals pairing the memory, and any
    other event taking it out of ``current`` withdraws them: the delete read every
    proposal of the store to find them (95 ms a forget with 224,000 proposals, and a
    purge of 51 took 3.1 s)."""
    ledger, versions = revised
    pairing = lambda statement: statement.startswith(("DELETE FROM proposals",  # noqa: E731
                                                      "UPDATE proposals"))  # fmt: skip
    memory = versions[-1].id
    with explained(monkeypatch, wanted=pairing) as plans:
        if retire == "revise":
            ledger.revise(memory, "orion runs on Spanner", value="Spanner")
        elif retire == "archive":
            ledger.archive(memory)
        else:
            ledger.forget(memory, hard=retire == "forget hard")
    assert plans
    assert [step for _, steps in plans for step in steps if step.startswith("SCAN")] == []


@contextmanager
def explained_folds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, list[str]]]]:
    """Record the plan of every statement the projections' folds run on SQLite
    meanwhile, writes included (an ``UPDATE`` finds its rows as a ``SELECT`` does)."""
    folding = [False]
    fold = ProjectionRunner._fold

    def marked(self: Any, *args: Any) -> int:
        folding[0] = True
        try:
            return fold(self, *args)
        finally:
            folding[0] = False

    monkeypatch.setattr(ProjectionRunner, "_fold", marked)
    with explained(monkeypatch, wanted=lambda _: folding[0]) as plans:
        yield plans


FOLDED_WRITES = {
    **WRITES,
    "forget, soft": lambda ledger, versions: ledger.forget(versions[0].id),
}


@pytest.mark.parametrize("write", list(FOLDED_WRITES))
def test_no_fold_reads_an_index_a_rebuild_creates_last(
    write: str, revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild's build creates the indexes that only reads use once it has caught up
    with the log (``Projection.reader_indexes``): a fold that used one would scan its
    table at every event of a build."""
    ledger, versions = revised
    postponed = {name for p in ledger.runner.projections for name in p.reader_indexes}
    with explained_folds(monkeypatch) as plans:
        FOLDED_WRITES[write](ledger, versions)
    used = {(statement, index) for statement, steps in plans for step in steps
            for index in re.findall(r"USING (?:COVERING )?INDEX (\w+)", step)}  # fmt: skip
    assert used, "the fold found no row through an index"
    assert [(statement, index) for statement, index in used if index in postponed] == []


def test_a_search_as_known_at_an_instant_ranks_no_row_asserted_after_it(
    revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every memory known at an instant was asserted at or before the last position
    recorded by then, so each full-index ranking statement of a ``known_at`` search
    bounds the rowids (positions) it reads, and an earlier instant ranks less."""
    ledger, versions = revised
    with explained(monkeypatch) as plans:
        hits = ledger.search("orion database", known_at=versions[1].recorded_at)
    assert [h.memory.id for h in hits][:1] == [versions[1].id]
    assert versions[2].id not in {h.memory.id for h in hits}
    ranking = [s for s, _ in plans if "bm25(memory_search)" in s]
    assert ranking, "the search ranked nothing in the full index"
    assert all("rowid <= ?" in statement for statement in ranking)


@pytest.mark.parametrize("query", ["lumen owned", ""])
def test_a_search_filtered_by_attribute_and_one_kind_walks_the_attribute(
    query: str, revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attribute is rarer than a kind (``fact``, the default, is most of a
    namespace): filtered by both, the listing walks the attribute's memories."""
    ledger, _ = revised
    with explained(monkeypatch) as plans:
        hits = ledger.search(query, attribute="owner", kinds=["fact"])
    assert {h.memory.content for h in hits} == {"lumen is owned by Ana", "lumen is owned by Bo"}
    steps = [step for _, steps in plans for step in steps]
    assert any("memories_attribute" in step for step in steps)
    # The kind's index may look memories up by position, never walk them.
    assert not any(step.endswith("(namespace=? AND kind=?)") for step in steps)


def test_a_write_asks_for_a_wrapped_key_through_their_index(
    revised: tuple[Ledger, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write that stores a key first asks whether the store holds a wrapped one:
    through the partial index of wrapped keys, not by reading the plain keys (all of
    them, in a store without a master key)."""
    ledger, _ = revised
    with explained(monkeypatch) as plans:
        ledger.remember("Bob is on call", subject="bob")
    probes = [steps for statement, steps in plans if "WHERE wrapped = 1" in statement]
    # The question travels with the read of the log's tip: the steps reading the keys.
    keys = [[step for step in steps if "erstwhile_keys" in step] for steps in probes]
    assert keys and all(
        steps and all("INDEX erstwhile_keys_wrapped" in step for step in steps) for steps in keys
    )


@contextmanager
def explained_on_postgres(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record the plan steps of every one-statement read the ledger runs on PostgreSQL
    meanwhile (see :meth:`PostgresBackend.one_statement`)."""
    from erstwhile.eventstore import postgres_statements as statements

    plans: list[str] = []
    execute = statements.SoloSql.execute

    def explaining(self: Any, statement: str, params: Any = ()) -> None:
        query = statements.PostgresSql._convert(statement)
        rows = self.raw.connection.execute(f"EXPLAIN {query}", params).fetchall()
        plans.extend(row["QUERY PLAN"] for row in rows)
        execute(self, statement, params)

    with monkeypatch.context() as patched:
        patched.setattr(statements.SoloSql, "execute", explaining)
        yield plans


@pytest.mark.postgres
def test_postgresql_probes_a_chains_memories_by_key(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL cannot tell how few memories the recursive walk of a lineage finds:
    asked for the memories ``IN`` the walk, it joined the walk to every row of
    ``memories`` (a sequential scan, 2 ms at 10k). ``chain`` hands it the walk as an
    array, whose ids it looks up by key."""
    with Ledger.open(postgres_url, namespace="acme", actor="tester") as ledger:
        latest: list[Any] = [None] * 1_000  # a lineage of five versions per subject
        for version in range(5):
            latest = ledger.remember_many(
                {"content": f"subject {n} version {version}", "subject": f"s{n}",
                 "attribute": "a", "value": version, "supersedes": [m.id] if m else []}
                for n, m in enumerate(latest)
            )  # fmt: skip
        first = ledger.remember("Orion runs on Postgres", subject="orion")
        second = ledger.revise(first.id, "Orion runs on MySQL")
        ledger.revise(second.id, "Orion runs on Spanner")
        with explained_on_postgres(monkeypatch) as plans:
            assert [m.content for m in ledger.chain(second.id)][-1] == "Orion runs on Spanner"
    assert plans and not [step for step in plans if "Seq Scan on memories" in step]


@pytest.mark.postgres
def test_postgresql_reads_a_page_of_events_with_their_keys_by_key(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of events reads each memory's key with it. Joined plainly, PostgreSQL
    hashed every row of ``erstwhile_keys`` for a page of 50 events (a scan that grows
    with the store); each event probes the keys' index instead."""
    with Ledger.open(postgres_url, namespace="acme", actor="tester") as ledger:
        made = ledger.remember_many({"content": f"note {n}"} for n in range(2_000))
        with ledger.log.backend.write() as sql:  # statistics that tell the keys are many
            sql.execute("ANALYZE erstwhile_keys")
            sql.execute("ANALYZE erstwhile_events")
        with explained_on_postgres(monkeypatch) as plans:
            shown = [e.data and e.data["content"] for e in ledger.events(memory_id=made[7].id)]
            assert shown == ["note 7"]
            assert len(list(islice(ledger.events(after=100), 60))) == 60  # two pages
    assert plans and not [step for step in plans if "Seq Scan on erstwhile_keys" in step]
