"""A ledger written by an older event schema (``tests/fixtures/ledger-v1.db``, whose
``Asserted`` events carry plaintext content, schema version 1) still reads correctly."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from erstwhile import Ledger, NotFound, State, ValidationError
from erstwhile.eventstore.sqlite import PAGE_SIZE

FIXTURE = Path(__file__).parent.parent / "fixtures" / "ledger-v1.db"


@pytest.fixture
def old_ledger(tmp_path: Path) -> Ledger:
    copy = tmp_path / "ledger-v1.db"
    shutil.copy(FIXTURE, copy)
    return Ledger.open(f"sqlite:///{copy}", namespace="acme", actor="reader")


def answers(ledger: Ledger) -> dict[str, object]:
    supabase = ledger.facts("team", "database", as_of="2026-03-15T00:00:00Z")[0]
    return {
        "now": [m.value for m in ledger.facts("team", "database")],
        "march": supabase.value,
        "provenance": (supabase.entities, supabase.evidence, supabase.metadata, supabase.actor),
        "chain": [m.value for m in ledger.chain(supabase.id)],
        "archived": [
            m.state
            for m in ledger.facts("team", as_of="2026-04-10T00:00:00Z")
            if m.kind.value == "note"
        ],
        "proposals": ledger.proposals(),
        "search": [h.memory.value for h in ledger.search("what database does the team use")],
        "events": [e.type for e in ledger.events()],
    }


def test_the_old_log_reads_with_current_code(old_ledger: Ledger) -> None:
    with old_ledger as ledger:
        got = answers(ledger)
        assert got["now"] == ["AWS"] and got["march"] == "Supabase"
        assert got["provenance"] == (["team", "supabase"], ["chat:1"], {"source": "standup"},
                                     "fixture")  # fmt: skip
        assert got["chain"] == ["Supabase", "AWS"]
        assert got["archived"] == [State.ARCHIVED]
        assert got["proposals"] == []
        assert got["search"][0] == "AWS"
        assert got["events"] == ["Asserted", "Superseded", "Asserted", "Asserted", "Archived",
                                 "Asserted", "Forgotten", "Asserted", "Asserted",
                                 "ProposalRejected"]  # fmt: skip
        typo = next(e for e in ledger.events() if e.type == "Forgotten").memory_id
        with pytest.raises(NotFound):
            ledger.get(typo)
        ledger.rebuild()
        assert answers(ledger) == got


def test_new_writes_extend_an_old_log(old_ledger: Ledger) -> None:
    with old_ledger as ledger:
        aws = ledger.facts("team", "database")[0]
        gcp = ledger.revise(aws.id, "The team moved to GCP", value="GCP", at="2026-10-01T00:00:00Z")
        assert [m.value for m in ledger.chain(gcp.id)] == ["Supabase", "AWS", "GCP"]


def test_a_store_keeps_the_page_size_it_was_made_with(old_ledger: Ledger, tmp_path: Path) -> None:
    """The fixture was made with SQLite's default pages (4,096 bytes); new stores get
    smaller ones (see ``PAGE_SIZE``). Opening and writing to the old one keeps its size."""

    def page_size(path: Path) -> int:
        with closing(sqlite3.connect(path)) as connection:
            return int(connection.execute("PRAGMA page_size").fetchone()[0])

    with old_ledger as ledger:
        ledger.remember("The team keeps its 4 KB pages", subject="team", attribute="pages")
    assert page_size(tmp_path / "ledger-v1.db") == 4096 != PAGE_SIZE
    with Ledger.open(tmp_path / "new.db") as ledger:
        ledger.remember("A new store", subject="team")
    assert page_size(tmp_path / "new.db") == PAGE_SIZE == 2048


def test_schema_1_memories_cannot_be_hard_forgotten_but_can_be_soft(old_ledger: Ledger) -> None:
    with old_ledger as ledger:
        aws = ledger.facts("team", "database")[0]
        before = len(list(ledger.events()))
        with pytest.raises(ValidationError, match="plain text"):
            ledger.forget(aws.id, hard=True)
        assert len(list(ledger.events())) == before
        ledger.forget(aws.id)
        assert ledger.facts("team", "database") == []
        assert ledger.verify().ok
