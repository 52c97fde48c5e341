"""The backend contract: every API method, run on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID, uuid4

import psycopg
import pytest

from erstwhile import (
    IdempotencyMismatch,
    Kind,
    Ledger,
    NotFound,
    State,
    SupersessionRefused,
    ValidationError,
)
from tests.conftest import START, ManualClock, OpenLedger, event_count

MAR = "2026-03-01T00:00:00Z"
JUL = "2026-07-01T00:00:00Z"
JUL_DT = datetime(2026, 7, 1, tzinfo=UTC)


def supabase(ledger: Ledger, **extra: object) -> object:
    return ledger.remember(
        "The team uses Supabase",
        subject="team",
        attribute="database",
        value="Supabase",
        valid_from=MAR,
        **extra,
    )


def test_remember_returns_the_memory_with_provenance(ledger: Ledger, clock: ManualClock) -> None:
    memory = ledger.remember(
        "Ada prefers tea",
        kind="preference",
        subject="Ada",
        attribute="drink",
        value={"name": "tea", "sugar": False},
        entities=["Ada", " TEA "],
        confidence=0.8,
        evidence=["https://chat.example/42"],
        extractor_id="extractor-v2",
        extracted_at="2026-08-31T12:00:00Z",
        metadata={"channel": "chat"},
    )
    assert memory.kind is Kind.PREFERENCE and memory.state is State.CURRENT
    assert memory.namespace == "acme" and memory.actor == "tester"
    assert memory.recorded_at == START and memory.valid_from == START
    assert memory.valid_until is None and memory.position == 1
    assert memory.entities == ["ada", "tea"]
    assert memory.value == {"name": "tea", "sugar": False}
    assert memory.evidence == ["https://chat.example/42"]
    assert memory.extractor_id == "extractor-v2"
    assert memory.extracted_at == datetime(2026, 8, 31, 12, tzinfo=UTC)
    assert memory.metadata == {"channel": "chat"}
    assert memory.id.version == 7
    assert ledger.get(memory.id) == memory
    assert ledger.get(str(memory.id)) == memory


def test_window_opens_at_occurred_at_when_no_valid_from(ledger: Ledger) -> None:
    memory = ledger.remember("Standup held", kind="event", occurred_at="2026-08-30T09:00:00Z")
    assert memory.valid_from == datetime(2026, 8, 30, 9, tzinfo=UTC)
    assert memory.occurred_at == memory.valid_from
    assert memory.recorded_at == START


def test_get_refuses_unknown_malformed_and_foreign_ids(open_ledger: OpenLedger) -> None:
    acme = open_ledger(namespace="acme")
    other = open_ledger(namespace="other")
    memory = acme.remember("secret plan")
    for missing in (uuid4(), "not-a-uuid"):
        with pytest.raises(NotFound):
            acme.get(missing)
    with pytest.raises(NotFound):
        other.get(memory.id)
    assert other.facts("team") == []
    assert list(other.events()) == []


def test_revise_supersedes_and_links_both_ways(ledger: Ledger) -> None:
    old = supabase(ledger)
    new = ledger.revise(old.id, "The team moved to AWS", value="AWS", at=JUL)  # type: ignore[attr-defined]
    older = ledger.get(old.id)  # type: ignore[attr-defined]
    assert new.supersedes == [older.id] and older.superseded_by == new.id
    assert older.state is State.SUPERSEDED and older.valid_until == JUL_DT
    assert new.valid_from == JUL_DT and new.valid_until is None
    assert (new.subject, new.attribute, new.kind) == ("team", "database", Kind.FACT)


def test_revise_copies_unset_structured_fields(ledger: Ledger) -> None:
    old = ledger.remember(
        "Lisbon", kind="preference", subject="me", attribute="city", value="Lisbon",
        entities=["me"], valid_from=MAR,
    )  # fmt: skip
    new = ledger.revise(old.id, "Actually I moved to Berlin", at=JUL)
    assert (new.kind, new.subject, new.attribute, new.value, new.entities) == (
        Kind.PREFERENCE, "me", "city", "Lisbon", ["me"],
    )  # fmt: skip


def test_results_go_in_sets_and_key_dicts(ledger: Ledger) -> None:
    """Memories hash by id, so a value that is a list or a dict does not stop them."""
    older = ledger.remember(
        "The team uses MySQL", subject="team", attribute="database", value={"name": "MySQL"},
        valid_from=MAR, confidence=0.9,
    )  # fmt: skip
    newer = ledger.remember(
        "The team uses Postgres", subject="team", attribute="database", value=["Postgres"],
        valid_from=MAR, confidence=0.8,
    )  # fmt: skip
    assert {older, ledger.get(older.id), newer} == {older, newer}
    assert {memory.id: memory for memory in ledger.facts("team", "database")} == {
        older.id: older, newer.id: newer,
    }  # fmt: skip
    results = [
        ledger.search("team database"), ledger.timeline("team"), list(ledger.events()),
        ledger.conflicts(), [ledger.history(older.id)],
    ]  # fmt: skip
    for listed in results:
        assert listed and len(set(listed)) == len(listed)
    archived = ledger.archive(older.id)
    assert len({older, archived}) == 2  # one memory read before and after: unequal


def test_revise_does_not_copy_the_window_end(ledger: Ledger) -> None:
    old = ledger.remember(
        "The contract's price is 100", subject="contract", attribute="price", value=100,
        valid_from=MAR, valid_until="2026-12-31T00:00:00Z",
    )  # fmt: skip
    open_ended = ledger.revise(old.id, "The price is 120", value=120, at=JUL)
    assert (open_ended.valid_from, open_ended.valid_until) == (JUL_DT, None)
    assert ledger.get(old.id).valid_until == JUL_DT
    kept = ledger.revise(
        open_ended.id, "The price is 130", value=130, at="2026-09-01T00:00:00Z",
        valid_until="2026-12-31T00:00:00Z",
    )  # fmt: skip
    assert kept.valid_until == datetime(2026, 12, 31, tzinfo=UTC)


def test_revise_without_at_supersedes_at_the_recording_instant(
    ledger: Ledger, clock: ManualClock
) -> None:
    old = supabase(ledger)
    later = clock.advance(days=1)
    new = ledger.revise(old.id, "The team moved to AWS", value="AWS")
    assert new.valid_from == later == ledger.get(old.id).valid_until


def test_revise_refuses_at_that_disagrees_with_valid_from(ledger: Ledger) -> None:
    old = supabase(ledger)
    before = event_count(ledger)
    with pytest.raises(ValidationError, match="disagree"):
        ledger.revise(old.id, "AWS", value="AWS", at=JUL, valid_from="2026-08-01T00:00:00Z")
    assert event_count(ledger) == before


def test_a_memory_may_consolidate_several(ledger: Ledger) -> None:
    first = ledger.remember("deadline Friday", subject="launch", attribute="deadline",
                            value="Fri", valid_from=MAR)  # fmt: skip
    second = ledger.remember("deadline Monday", subject="launch", attribute="deadline",
                             value="Mon", valid_from=MAR)  # fmt: skip
    merged = ledger.remember("deadline is Tuesday", subject="launch", attribute="deadline",
                             value="Tue", valid_from=JUL, supersedes=[second.id, first.id])  # fmt: skip
    # listed in log order, whatever order they were named in, as a later read lists them
    assert merged.supersedes == [first.id, second.id]
    assert merged == ledger.get(merged.id)
    assert ledger.get(first.id).superseded_by == merged.id == ledger.get(second.id).superseded_by
    assert [m.id for m in ledger.history(merged.id).supersedes] == [first.id, second.id]
    assert {m.id for m in ledger.chain(first.id)} == {first.id, second.id, merged.id}


def test_a_batch_proposes_among_its_own_items_and_against_earlier_memories(
    ledger: Ledger,
) -> None:
    """A batch's candidate search fetches, for a key one item alone has, only what was
    recorded before the batch, and for a key items share, what the batch itself wrote
    too: both kinds of pair are proposed, live and after rebuilds, one of the proposals
    alone in batches of two events (which reads the memories' tables as they are now,
    ahead of its batches)."""
    paris = ledger.remember("Ada lives in Paris", subject="ada", attribute="city",
                            value="Paris", valid_from="2026-01-01T00:00:00Z")  # fmt: skip
    london, rome, oslo, _ = ledger.remember_many([
        {"content": "Ada lives in London", "subject": "ada", "attribute": "city",
         "value": "London", "valid_from": MAR},
        {"content": "Bob lives in Rome", "subject": "bob", "attribute": "city",
         "value": "Rome", "valid_from": "2026-01-01T00:00:00Z"},
        {"content": "Bob lives in Oslo", "subject": "bob", "attribute": "city",
         "value": "Oslo", "valid_from": MAR},
        {"content": "Cy lives in Lima", "subject": "cy", "attribute": "city", "value": "Lima"},
    ])  # fmt: skip
    expected = {(paris.id, london.id), (rome.id, oslo.id)}
    assert {(p.older_id, p.newer_id) for p in ledger.proposals()} == expected
    ledger.rebuild()
    assert {(p.older_id, p.newer_id) for p in ledger.proposals()} == expected
    ledger.runner.batch = 2
    ledger.rebuild("proposals")
    assert {(p.older_id, p.newer_id) for p in ledger.proposals()} == expected


def test_remember_many_is_all_or_nothing(ledger: Ledger) -> None:
    old = supabase(ledger)
    before = event_count(ledger)
    with pytest.raises(SupersessionRefused):
        ledger.remember_many(
            [
                {"content": "fine"},
                {"content": "AWS", "value": "AWS", "valid_from": JUL, "supersedes": [old.id]},
                {"content": "GCP", "value": "GCP", "valid_from": JUL, "supersedes": [old.id]},
            ]
        )
    assert event_count(ledger) == before
    assert ledger.get(old.id).state is State.CURRENT
    made = ledger.remember_many([{"content": f"note {n}", "kind": "note"} for n in range(3)])
    assert [m.content for m in made] == ["note 0", "note 1", "note 2"]
    assert [m.position for m in made] == [before + 1, before + 2, before + 3]
    assert ledger.remember_many([]) == []


def test_what_a_write_returns_is_what_get_reads_back(open_ledger: OpenLedger) -> None:
    """The ledger builds a write's result from its events (it does not read it back):
    every field must still equal the stored memory's, vector clock and links included."""
    bob = open_ledger(actor="bob")
    bob.remember("Bob's note", kind="note")
    ada = open_ledger(actor="ada")
    first = ada.remember("Rust", subject="svc", attribute="language", value="Rust",
                         valid_from=MAR)  # fmt: skip
    second = ada.remember("Go", subject="svc", attribute="language", value="Go", valid_from=MAR)
    made = ada.remember_many(
        [
            {"content": "Zig now", "subject": "svc", "attribute": "language",
             "value": {"name": "Zig", "since": [2026, 7]}, "valid_from": JUL,
             "supersedes": [second.id, first.id], "entities": ["svc", "zig"],
             "evidence": ["chat:7"], "metadata": {"n": 1.5}, "confidence": 0.75,
             "observed_position": bob.head()},
            {"content": "an event", "kind": "event", "occurred_at": MAR,
             "extractor_id": "x", "extracted_at": JUL},
            {"content": "a closed note", "kind": "note", "valid_from": MAR, "valid_until": JUL},
        ]
    )  # fmt: skip
    assert made == [ada.get(memory.id) for memory in made]
    assert made[0].supersedes == [first.id, second.id]
    assert made[0].vector_clock == {"ada": 3, "bob": 1}


def test_a_write_returns_values_as_they_read_back(ledger: Ledger) -> None:
    """Tuples in a value or metadata are JSON lists in the log, so they are lists in the
    memory a write returns too; a confidence of -0.0 is 0.0 (SQLite keeps no sign)."""
    made = ledger.remember("pair", subject="p", attribute="a", value=(1, (2, 3)),
                           metadata={"k": (3, 4)}, confidence=-0.0)  # fmt: skip
    assert (made.value, made.metadata) == ([1, [2, 3]], {"k": [3, 4]})
    assert str(made.confidence) == "0.0"
    assert made == ledger.get(made.id)
    revised = ledger.revise(made.id, "pair again", value=("x",), metadata={"k": ()})
    assert (revised.value, revised.metadata) == (["x"], {"k": []})
    assert revised == ledger.get(revised.id)


def test_a_large_batch_stores_every_character_as_given(ledger: Ledger) -> None:
    """A batch large enough to be loaded in bulk (on PostgreSQL one statement whose rows
    are one JSON array, which escapes quotes, backslashes and control characters; COPY's
    text format, used before, escaped tabs, newlines, backslashes and its NULL marker)
    reads back unchanged."""
    awkward = ["tab\there", "line\nbreak\r\n", "back\\slash \\N", "\\.", "quote ' \"",
               "ünïcødé ✓ 日本", "", "  padded  ", "semi; colon, comma|pipe"]  # fmt: skip
    made = ledger.remember_many(
        [
            {"content": f"{text} #{n}", "subject": f"s{n}\t{text}", "attribute": "a\nb",
             "value": {"text": text, "n": n}, "entities": [text or "none", f"e{n}"],
             "evidence": [f"doc:{text}"], "metadata": {"raw": text}}
            for n, text in enumerate(awkward * 3)
        ]
    )  # fmt: skip
    assert len(made) == 27
    assert made == [ledger.get(memory.id) for memory in made]
    assert [m.content for m in made] == [f"{t} #{n}" for n, t in enumerate(awkward * 3)]
    assert [m.value for m in ledger.facts("s1\tline\nbreak\r\n", "a\nb")] == [
        {"text": "line\nbreak\r\n", "n": 1}
    ]


def test_idempotent_retry_returns_the_first_result_and_appends_nothing(ledger: Ledger) -> None:
    first = ledger.remember("Ada likes tea", idempotency_key="msg-1")
    before = event_count(ledger)
    again = ledger.remember("Ada likes tea", idempotency_key="msg-1")
    assert again == first and event_count(ledger) == before
    with pytest.raises(IdempotencyMismatch):
        ledger.remember("Ada likes coffee", idempotency_key="msg-1")
    assert event_count(ledger) == before


def test_a_retry_that_has_read_more_of_the_log_is_the_same_call(
    open_ledger: OpenLedger,
) -> None:
    """``observed_position`` is causal context, not payload: a writer retrying after it
    read further gets the first memory, with the clock that call was given."""
    bob, ada = open_ledger(actor="bob"), open_ledger(actor="ada")
    bob.remember("Bob likes jam")
    first = ada.remember("Ada likes tea", idempotency_key="k", observed_position=bob.head())
    bob.remember("Bob likes honey")
    before = event_count(ada)
    again = ada.remember("Ada likes tea", idempotency_key="k", observed_position=bob.head())
    assert again == first and first.vector_clock == {"ada": 1, "bob": 1}
    assert event_count(ada) == before


def test_a_retry_spelling_a_whole_number_the_other_way_is_the_same_payload(
    ledger: Ledger,
) -> None:
    """``12`` and ``12.0`` are one JSON number (a retry may have been through JSON), as
    they are one claim to the bar: the retry returns the first result."""
    first = ledger.remember("price", subject="w", attribute="p", value=12.0,
                            metadata={"n": 1.0}, idempotency_key="k")  # fmt: skip
    before = event_count(ledger)
    again = ledger.remember("price", subject="w", attribute="p", value=12,
                            metadata={"n": 1}, idempotency_key="k")  # fmt: skip
    assert again == first and event_count(ledger) == before
    assert ledger.remember_many([{"content": "price", "subject": "w", "attribute": "p",
                                  "value": 12, "metadata": {"n": 1.0},
                                  "idempotency_key": "k"}]) == [first]  # fmt: skip
    with pytest.raises(IdempotencyMismatch):
        ledger.remember("price", subject="w", attribute="p", value=12.5, metadata={"n": 1},
                        idempotency_key="k")  # fmt: skip
    assert event_count(ledger) == before


def test_a_key_given_twice_in_one_batch_is_a_retry_or_a_mismatch(ledger: Ledger) -> None:
    """Within one ``remember_many`` an item repeating a key is what it would be in two
    calls: with the same payload, the first item's retry; with another, refused."""
    before = event_count(ledger)
    with pytest.raises(IdempotencyMismatch, match="twice in this batch"):
        ledger.remember_many([{"content": "first", "idempotency_key": "k"},
                              {"content": "second", "idempotency_key": "k"}])  # fmt: skip
    assert event_count(ledger) == before
    same = {"content": "Ada likes tea", "idempotency_key": "k"}
    made = ledger.remember_many([same, {"content": "Bob likes coffee"}, same])
    assert made[0] == made[2] and made[0].id != made[1].id
    assert event_count(ledger) == before + 2
    assert ledger.remember_many([same, same]) == [made[0], made[0]]
    assert event_count(ledger) == before + 2


def test_a_batch_retried_with_items_without_keys_says_why_it_is_refused(ledger: Ledger) -> None:
    """An item without a key is new each time, so a batch holding one is no retry of
    itself; the refusal says so, instead of asking for the batch it was given."""
    batch = [{"content": "Ada likes tea", "idempotency_key": "k"}, {"content": "Bob likes jam"}]
    ledger.remember_many(batch)
    before = event_count(ledger)
    with pytest.raises(IdempotencyMismatch, match="only a batch whose every item carries a key"):
        ledger.remember_many(batch)
    assert event_count(ledger) == before
    with pytest.raises(IdempotencyMismatch, match="some were not"):
        ledger.remember_many([batch[0], {"content": "Bob likes jam", "idempotency_key": "j"}])
    assert event_count(ledger) == before


def test_idempotent_retry_of_a_supersession(ledger: Ledger) -> None:
    old = supabase(ledger)
    args = {"value": "AWS", "valid_from": JUL, "supersedes": [old.id], "idempotency_key": "k"}
    first = ledger.remember("AWS", **args)
    before = event_count(ledger)
    assert ledger.remember("AWS", **args) == first
    assert event_count(ledger) == before


def test_a_retried_revise_answers_as_the_first_after_its_older_memory_is_forgotten(
    ledger: Ledger,
) -> None:
    """The retry of a ``revise`` made before its older memory was soft-forgotten is still
    that revise's retry (its request is rebuilt from the claim the forget kept): the
    first result, nothing appended; another payload is still a mismatch, and a revise
    under a new key is still refused."""
    old = supabase(ledger)
    first = ledger.revise(old.id, "AWS", value="AWS", at=JUL, idempotency_key="rev-1")  # type: ignore[attr-defined]
    ledger.forget(old.id)  # type: ignore[attr-defined]
    before = event_count(ledger)
    again = ledger.revise(old.id, "AWS", value="AWS", at=JUL, idempotency_key="rev-1")  # type: ignore[attr-defined]
    assert again.id == first.id and again == ledger.get(first.id)  # type: ignore[attr-defined]
    with pytest.raises(IdempotencyMismatch):
        ledger.revise(old.id, "GCP", value="GCP", at=JUL, idempotency_key="rev-1")  # type: ignore[attr-defined]
    with pytest.raises(SupersessionRefused) as refused:
        ledger.revise(old.id, "AWS", value="AWS", at=JUL, idempotency_key="rev-2")  # type: ignore[attr-defined]
    assert refused.value.reason == "not_current"
    assert event_count(ledger) == before
    ledger.forget(old.id, hard=True)  # type: ignore[attr-defined]
    with pytest.raises(SupersessionRefused):  # its claim is erased: nothing to compare with
        ledger.revise(old.id, "AWS", value="AWS", at=JUL, idempotency_key="rev-1")  # type: ignore[attr-defined]


def test_archive_retires_from_now_but_keeps_the_window(ledger: Ledger) -> None:
    memory = supabase(ledger)
    archived = ledger.archive(memory.id, reason="stale")  # type: ignore[attr-defined]
    assert archived.state is State.ARCHIVED and archived.valid_until is None
    assert ledger.facts("team", "database") == []
    assert [m.id for m in ledger.facts("team", as_of="2026-04-01T00:00:00Z")] == [archived.id]
    before = event_count(ledger)
    assert ledger.archive(memory.id) == archived  # type: ignore[attr-defined]
    assert event_count(ledger) == before
    with pytest.raises(SupersessionRefused) as refused:
        ledger.revise(archived.id, "AWS", value="AWS", at=JUL)
    assert refused.value.reason == "not_current"


def test_an_archive_that_loses_a_race_to_another_archive_returns_the_archived_memory(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Archiving an archived memory changes nothing and returns it; so does an archive
    that read the memory current just before another process archived it (it raised
    ``ConcurrencyConflict``, while a forget that loses such a race returned)."""
    mine, other = open_ledger(), open_ledger()
    memory = supabase(mine)
    append = mine._append_one

    def after_the_other(*args: Any, **kwargs: Any) -> int:
        other.archive(memory.id, reason="the other process")  # type: ignore[attr-defined]
        return append(*args, **kwargs)

    monkeypatch.setattr(mine, "_append_one", after_the_other)
    archived = mine.archive(memory.id, reason="mine")  # type: ignore[attr-defined]
    assert archived.state is State.ARCHIVED and archived == other.get(memory.id)  # type: ignore[attr-defined]
    assert [e.type for e in mine.events(memory_id=memory.id)] == ["Asserted", "Archived"]  # type: ignore[attr-defined]


def test_a_superseded_memory_can_be_archived(ledger: Ledger) -> None:
    old = supabase(ledger)
    ledger.revise(old.id, "AWS", value="AWS", at=JUL)  # type: ignore[attr-defined]
    archived = ledger.archive(old.id)  # type: ignore[attr-defined]
    assert archived.state is State.ARCHIVED and archived.superseded_by is not None


def test_soft_forget_hides_at_once_but_not_from_the_past(
    ledger: Ledger, clock: ManualClock
) -> None:
    memory = supabase(ledger)
    known_before = clock.advance(hours=1)
    clock.advance(hours=1)
    ledger.forget(memory.id, reason="asked to")  # type: ignore[attr-defined]
    with pytest.raises(NotFound):
        ledger.get(memory.id)  # type: ignore[attr-defined]
    assert ledger.facts("team") == []
    assert ledger.facts("team", as_of="2026-04-01T00:00:00Z") == []
    assert ledger.facts("team", as_of="2026-04-01T00:00:00Z", known_at=clock()) == []
    assert ledger.get(memory.id, known_at=known_before).state is State.CURRENT  # type: ignore[attr-defined]
    assert [m.id for m in ledger.facts("team", known_at=known_before)] == [memory.id]  # type: ignore[attr-defined]
    before = event_count(ledger)
    ledger.forget(memory.id)  # type: ignore[attr-defined]
    assert event_count(ledger) == before
    forgotten = [e for e in ledger.events(memory_id=memory.id) if e.type == "Forgotten"]  # type: ignore[attr-defined]
    assert forgotten[0].data == {"hard": False, "reason": "asked to"}
    with pytest.raises(SupersessionRefused) as refused:
        ledger.revise(memory.id, "AWS", value="AWS", at=JUL)  # type: ignore[attr-defined]
    assert refused.value.reason == "not_current"
    with pytest.raises(NotFound):
        ledger.archive(memory.id)  # type: ignore[attr-defined]


def test_commands_on_unknown_ids_raise_not_found(ledger: Ledger) -> None:
    before = event_count(ledger)
    for command in (
        lambda: ledger.revise(uuid4(), "x"),
        lambda: ledger.archive(uuid4()),
        lambda: ledger.forget(uuid4()),
        lambda: ledger.remember("x", supersedes=[uuid4()]),
        lambda: ledger.history(uuid4()),
        lambda: ledger.chain(uuid4()),
        lambda: ledger.get(uuid4(), known_at=JUL),
    ):
        with pytest.raises(NotFound):
            command()
    assert event_count(ledger) == before


def test_history_is_one_level_each_way_and_chain_is_the_whole_lineage(ledger: Ledger) -> None:
    a = supabase(ledger)
    b = ledger.revise(a.id, "AWS", value="AWS", at=JUL)  # type: ignore[attr-defined]
    c = ledger.revise(b.id, "GCP", value="GCP", at="2026-08-01T00:00:00Z")
    middle = ledger.history(b.id)
    assert middle.memory.id == b.id
    assert middle.superseded_by is not None and middle.superseded_by.id == c.id
    assert [m.id for m in middle.supersedes] == [a.id]  # type: ignore[attr-defined]
    assert ledger.history(c.id).superseded_by is None
    for member in (a.id, b.id, c.id):  # type: ignore[attr-defined]
        assert [m.id for m in ledger.chain(member)] == [a.id, b.id, c.id]  # type: ignore[attr-defined]
    lone = ledger.remember("unrelated")
    assert [m.id for m in ledger.chain(lone.id)] == [lone.id]


def test_a_memory_lists_what_it_supersedes_once_each_in_log_order(ledger: Ledger) -> None:
    olders = [ledger.remember(f"note {n}") for n in range(3)]
    in_order = [m.id for m in olders]
    newer = ledger.remember("the three notes, merged", supersedes=in_order[::-1])
    assert ledger.get(newer.id).supersedes == in_order
    assert [m.id for m in ledger.history(newer.id).supersedes] == in_order
    assert [m.id for m in ledger.chain(newer.id)] == [*in_order, newer.id]
    # Asked for twice, in two of the reader's 500-id statements: read once.
    asked = [newer.id, *(uuid4() for _ in range(500)), newer.id]
    with ledger.log.backend.read() as sql:
        found = ledger.reader.visible(sql, asked)
    assert [m.id for m in found] == [newer.id] and found[0].supersedes == in_order


def test_facts_rules_for_now_as_of_and_known_at(ledger: Ledger, clock: ManualClock) -> None:
    old = supabase(ledger)
    recorded_old = clock()
    clock.advance(days=1)
    new = ledger.revise(old.id, "AWS", value="AWS", at=JUL)  # type: ignore[attr-defined]
    ids = lambda ms: [m.id for m in ms]  # noqa: E731
    assert ids(ledger.facts("team", "database")) == [new.id]
    assert ids(ledger.facts("TEAM ", " Database")) == [new.id]
    assert ids(ledger.facts("team", as_of="2026-03-15T00:00:00Z")) == [old.id]  # type: ignore[attr-defined]
    assert ids(ledger.facts("team", as_of=JUL)) == [new.id]
    assert ids(ledger.facts("team", as_of="2026-02-01T00:00:00Z")) == []
    assert ids(ledger.facts("team", known_at=recorded_old)) == [old.id]  # type: ignore[attr-defined]
    assert ids(ledger.facts("team", known_at=recorded_old - timedelta(microseconds=1))) == []
    as_then = ledger.get(old.id, known_at=recorded_old)  # type: ignore[attr-defined]
    assert as_then.state is State.CURRENT and as_then.valid_until is None
    assert as_then.superseded_by is None
    assert ledger.get(new.id, known_at=new.recorded_at).supersedes == [old.id]  # type: ignore[attr-defined]
    assert ledger.get(old.id, known_at=new.recorded_at).superseded_by == new.id  # type: ignore[attr-defined]
    with pytest.raises(NotFound):
        ledger.get(new.id, known_at=new.recorded_at - timedelta(microseconds=1))
    assert ledger.facts("nobody") == []


def test_facts_at_a_given_instant_leave_the_clock_alone(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``as_of`` or ``known_at`` says when: the clock is read for "now" only."""
    old = supabase(ledger)
    readings: list[datetime] = []
    monkeypatch.setattr(ledger, "_clock", lambda: readings.append(clock()) or readings[-1])
    assert [m.id for m in ledger.facts("team", as_of=JUL)] == [old.id]  # type: ignore[attr-defined]
    assert [m.id for m in ledger.facts("team", known_at=clock())] == [old.id]  # type: ignore[attr-defined]
    assert readings == []
    assert [m.id for m in ledger.facts("team")] == [old.id]  # type: ignore[attr-defined]
    assert len(readings) == 1


def test_a_future_supersession_leaves_the_older_true_until_then(
    ledger: Ledger, clock: ManualClock
) -> None:
    old = supabase(ledger)
    new = ledger.revise(old.id, "AWS", value="AWS", at="2026-12-01T00:00:00Z")  # type: ignore[attr-defined]
    assert [m.id for m in ledger.facts("team")] == [old.id]  # type: ignore[attr-defined]
    clock.set(datetime(2026, 12, 1, tzinfo=UTC))
    assert [m.id for m in ledger.facts("team")] == [new.id]


@contextmanager
def write_lock_held(store_url: str) -> Iterator[None]:
    """Hold the store's write lock from another connection, as another writer would."""
    if store_url.startswith("sqlite:///"):
        other = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
        return
    parts = urlsplit(store_url)
    schema = parse_qs(parts.query)["schema"][0]
    with psycopg.connect(parts._replace(query="").geturl()) as other:
        other.execute(f'LOCK TABLE "{schema}".erstwhile_events IN EXCLUSIVE MODE')
        yield


def test_a_write_that_waits_for_the_lock_is_stamped_when_it_gets_it(
    store_url: str, ledger: Ledger, clock: ManualClock
) -> None:
    """Stamped when it asked, it would enter the past of a reader who, meanwhile, was
    told nothing had been written by then."""
    ledger.remember("first")
    written: list[Any] = []
    with write_lock_held(store_url):
        waiting = threading.Thread(target=lambda: written.append(ledger.remember("waited")))
        waiting.start()
        time.sleep(0.3)  # the write now waits for the lock
        asked = clock()
        clock.advance(hours=1)
    waiting.join(timeout=30)
    assert written[0].recorded_at == asked + timedelta(hours=1)
    with pytest.raises(NotFound):  # not in the past of a reader a minute after it asked
        ledger.get(written[0].id, known_at=asked + timedelta(minutes=1))


def test_recorded_at_strictly_increases_even_when_the_clock_steps_back(
    ledger: Ledger, clock: ManualClock
) -> None:
    first = ledger.remember("one")
    clock.set(START - timedelta(days=3))
    second = ledger.remember("two")
    third = ledger.remember("three")
    assert first.recorded_at < second.recorded_at < third.recorded_at
    # The clock stands behind the log: an append starts 2 µs after the last one (1 µs
    # apart within an append, so an append's end can be told from the stamps).
    assert second.recorded_at == first.recorded_at + timedelta(microseconds=2)
    stamps = [e.recorded_at for e in ledger.events()]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


def test_ids_are_time_ordered_even_when_the_clock_steps_back(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Ids (UUIDv7) sort in the order the memories were made: across a batch made in one
    millisecond, and after the clock stepped back (they took the clock's reading, so a
    later memory could sort first)."""
    made = ledger.remember_many({"content": f"note {n}"} for n in range(30))
    clock.set(START - timedelta(hours=1))
    made += [ledger.remember("after the clock stepped back")]
    made += ledger.remember_many({"content": f"later {n}"} for n in range(5))
    in_log = [e.memory_id for e in ledger.events()]
    assert [m.id for m in made] == in_log == sorted(in_log)


def test_events_stream_every_event_once_across_growing_pages(ledger: Ledger) -> None:
    """The stream reads pages of 50, 200, 800 and then 1,000 events: every event comes
    once, in log order, whatever page an ``after`` or ``until`` bound falls in."""
    ledger.remember_many({"content": f"note {n}"} for n in range(1_300))
    assert [e.position for e in ledger.events()] == list(range(1, 1_301))
    assert [e.position for e in ledger.events(after=49, until=1_051)] == list(range(50, 1_052))
    taken = []
    for event in ledger.events(after=1_000):
        taken.append(event.position)
        if len(taken) == 3:
            break
    assert taken == [1_001, 1_002, 1_003]


def test_events_stream_with_filters(open_ledger: OpenLedger, clock: ManualClock) -> None:
    planner = open_ledger(namespace="acme", actor="planner")
    executor = open_ledger(namespace="acme", actor="executor")
    a = planner.remember("a")
    clock.advance(hours=1)
    b = executor.remember("b")
    clock.advance(hours=1)
    planner.archive(b.id)
    hidden = open_ledger(namespace="elsewhere").remember("hidden")
    logged = list(planner.events())
    assert [(e.type, e.memory_id, e.actor) for e in logged] == [
        ("Asserted", a.id, "planner"), ("Asserted", b.id, "executor"), ("Archived", b.id, "planner"),
    ]  # fmt: skip
    assert all(e.namespace == "acme" for e in logged)
    assert logged[0].data is not None and logged[0].data["content"] == "a"
    assert [e.position for e in planner.events(after=1, until=2)] == [2]
    assert [e.memory_id for e in planner.events(memory_id=b.id)] == [b.id, b.id]
    assert [e.type for e in planner.events(actor="executor")] == ["Asserted"]
    assert [e.type for e in planner.events(actor=" executor\n")] == ["Asserted"]  # as stored
    since = logged[1].recorded_at
    assert [e.position for e in planner.events(since=since)] == [2, 3]
    assert [e.position for e in planner.events(before=since)] == [1]
    assert planner.head() == 4
    # Bounds past either end of the log, and an instant between two events.
    first, last = logged[0].recorded_at, logged[-1].recorded_at
    assert [e.position for e in planner.events(since=last + timedelta(hours=1))] == []
    assert [e.position for e in planner.events(before=last + timedelta(hours=1))] == [1, 2, 3]
    assert [e.position for e in planner.events(since=first - timedelta(hours=1))] == [1, 2, 3]
    assert [e.position for e in planner.events(before=first - timedelta(hours=1))] == []
    between = since + timedelta(minutes=30)
    assert [e.position for e in planner.events(since=between)] == [3]
    assert [e.position for e in planner.events(since=since, before=between)] == [2]
    assert [e.position for e in planner.events(before=between, after=1)] == [2]
    # One memory's events: none past its last is an empty page; an id this namespace
    # never saw is an error, as for get().
    assert list(planner.events(memory_id=b.id, after=3)) == []
    for unknown in (hidden.id, uuid4()):
        with pytest.raises(NotFound, match="in namespace 'acme'"):
            list(planner.events(memory_id=unknown))


def test_rebuild_gives_identical_answers(ledger: Ledger, clock: ManualClock) -> None:
    old = supabase(ledger)
    clock.advance(hours=1)
    new = ledger.revise(old.id, "AWS", value="AWS", at=JUL)  # type: ignore[attr-defined]
    clock.advance(hours=1)
    gone = ledger.remember("to forget", subject="team")
    ledger.forget(gone.id)
    note = ledger.remember("archived note", kind="note", subject="team")
    ledger.archive(note.id)
    queries = lambda: (  # noqa: E731
        ledger.get(old.id), ledger.get(new.id), ledger.facts("team"),  # type: ignore[attr-defined]
        ledger.facts("team", as_of="2026-03-15T00:00:00Z"),
        ledger.facts("team", known_at=old.recorded_at), ledger.chain(new.id),  # type: ignore[attr-defined]
        ledger.get(gone.id, known_at=gone.recorded_at), ledger.get(note.id),
    )  # fmt: skip
    before = queries()
    seen: list[tuple[str, int, int]] = []
    ledger.rebuild(progress=lambda name, at, head: seen.append((name, at, head)))
    assert queries() == before
    assert seen and seen[-1][1] == seen[-1][2] == ledger.head()
    ledger.rebuild("memory_versions")
    assert queries() == before
    with pytest.raises(ValidationError, match="unknown projection"):
        ledger.rebuild("nonsense")


def test_reopening_finds_everything(open_ledger: OpenLedger) -> None:
    first = open_ledger(namespace="acme")
    memory = first.remember("durable")
    first.close()
    assert open_ledger(namespace="acme").get(memory.id) == memory


def test_a_naive_clock_is_refused(open_ledger: OpenLedger) -> None:
    ledger = open_ledger(namespace="acme", clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(ValidationError, match="naive"):
        ledger.remember("x")
    assert ledger.head() == 0


def test_ledger_is_a_context_manager(store_url: str) -> None:
    with Ledger.open(store_url, actor="ctx") as ledger:
        assert isinstance(ledger.remember("x").id, UUID)


def test_the_default_clock_follows_freezegun(store_url: str) -> None:
    from freezegun import freeze_time

    with freeze_time("2026-05-01T12:00:00Z"), Ledger.open(store_url, actor="frozen") as ledger:
        memory = ledger.remember("frozen in time")
        assert memory.recorded_at == datetime(2026, 5, 1, 12, tzinfo=UTC) == memory.valid_from


def test_a_long_chain_is_read_in_parts_and_stays_in_log_order(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erstwhile.eventstore import backend

    monkeypatch.setattr(backend, "IN_LIST", 2)  # five versions span three parts of each query
    versions = [ledger.remember("v0", subject="orion", attribute="status", value=0)]
    for n in range(1, 5):
        clock.advance(hours=1)
        versions.append(ledger.revise(versions[-1].id, f"v{n}", value=n))
    ledger.forget(versions[2].id)
    chain = ledger.chain(versions[4].id)
    assert [m.content for m in chain] == ["v0", "v1", "v3", "v4"]
    assert chain == [ledger.get(v.id) for v in versions if v.id != versions[2].id]
    assert chain[2].supersedes == [versions[2].id]  # the forgotten one stays linked


def test_a_label_is_one_however_its_accents_were_typed(ledger: Ledger) -> None:
    """Subjects, attributes and entities compare composed (NFC): ``Müller`` typed with
    its ``ü`` as one character and as ``u`` plus a combining diaeresis is one subject."""
    composed, decomposed = "Frau Müller", "Frau Mu\u0308ller"
    berlin = ledger.remember("Frau Müller lives in Berlin", subject=composed,
                             attribute="Straße", value="Berlin", entities=["Zoë"])  # fmt: skip
    munich = ledger.remember("Frau Müller lives in Munich", subject=decomposed,
                             attribute="Straße", value="Munich", entities=["Zoe\u0308"])  # fmt: skip
    both = {berlin.id, munich.id}
    for subject in (composed, decomposed):
        assert {m.id for m in ledger.facts(subject)} == both
        assert {m.id for m in ledger.facts(subject, "STRASSE")} == both
        assert {h.memory.id for h in ledger.search("lives", subject=subject)} == both
    assert {h.memory.id for h in ledger.search("lives", entities=["zoe\u0308"])} == both
    assert munich.entities == berlin.entities == ["zoë"]
    # One key, two values: a contradiction and a proposal, as for any other spelling.
    assert [{m.id for m in c.members} for c in ledger.conflicts()] == [both]
    assert [(p.older_id, p.newer_id) for p in ledger.proposals()] == [(berlin.id, munich.id)]
    # What was written is kept as written.
    assert ledger.get(munich.id).subject == decomposed
    # A mark that folds into a letter (U+0345, the iota subscript) in either order.
    typed, composed_greek = "\u03b1\u0345\u0301", "\u1fb4"
    first = ledger.remember("one", subject=typed, attribute="x", value=1)
    second = ledger.remember("two", subject=composed_greek, attribute="x", value=2)
    assert {m.id for m in ledger.facts(typed)} == {first.id, second.id}
    assert (first.id, second.id) in [(p.older_id, p.newer_id) for p in ledger.proposals()]


def test_labels_are_kept_as_written_but_trimmed(ledger: Ledger) -> None:
    """Spaces at either end of a subject, attribute or extractor id are dropped; case,
    inner spaces and the rest are kept, and the trimmed label is one with the bare one."""
    padded = ledger.remember("The Blue Team runs on Postgres", subject="  The Blue  Team ",
                             attribute="\tDB Engine ", value="pg",
                             extractor_id=" model-7 ")  # fmt: skip
    assert (padded.subject, padded.attribute, padded.extractor_id) == (
        "The Blue  Team", "DB Engine", "model-7")  # fmt: skip
    assert ledger.get(padded.id) == padded
    assert [m.id for m in ledger.facts("the blue team", "db engine")] == [padded.id]


def test_entities_read_from_the_log_compare_as_written_now() -> None:
    """An event holds its entities as the version that wrote it normalised them; read
    now, they are in today's comparison form, blanks and repeats dropped."""
    from erstwhile.domain.events import Asserted

    read = Asserted(originator_id=uuid4(), originator_version=1, kind="fact", content="x",
                    valid_from=START, entities=("zoe\u0308", "zoë", " ", "\xa0"))  # fmt: skip
    assert read.entities == ("zoë",)


def test_an_id_of_a_uuid_subclass_is_an_id(ledger: Ledger) -> None:
    class Tagged(UUID):
        pass

    memory = ledger.remember("The team uses Postgres", subject="team")
    tagged = Tagged(str(memory.id))
    assert [e.memory_id for e in ledger.events(memory_id=tagged)] == [memory.id]
    assert ledger.get(tagged).id == memory.id
    assert [m.id for m in ledger.chain(tagged)] == [memory.id]
