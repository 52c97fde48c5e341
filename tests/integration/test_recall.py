"""Search, proposals, contradictions and causality, on both backends (SPEC sections 5-6)."""

from __future__ import annotations

import random
import sqlite3
import unicodedata
from datetime import timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from erstwhile import (
    ConcurrencyConflict,
    Ledger,
    NotFound,
    State,
    SupersessionRefused,
    ValidationError,
)
from erstwhile.eventstore import json_rows
from erstwhile.projections import recall, search
from tests.conftest import ManualClock, OpenLedger, event_count

JAN = "2026-01-01T00:00:00Z"
MAR = "2026-03-01T00:00:00Z"
APR = "2026-04-01T00:00:00Z"
JUN = "2026-06-01T00:00:00Z"
JUL = "2026-07-01T00:00:00Z"


def contents(hits: list[Any]) -> list[str]:
    return [h.memory.content for h in hits]


# --------------------------------------------------------------------- search


def test_story_2_atlas_moves_from_mysql_to_postgres(ledger: Ledger, clock: ManualClock) -> None:
    mysql = ledger.remember("Project Atlas uses MySQL for its primary datastore",
                            kind="decision", subject="Atlas", attribute="datastore",
                            value="MySQL", valid_from=MAR)  # fmt: skip
    clock.advance(days=1)
    postgres = ledger.revise(mysql.id, "Atlas moved to Postgres for the primary datastore",
                             value="Postgres", at=JUL)  # fmt: skip
    ledger.remember("Atlas standup notes mention lunch", kind="note")
    now = ledger.search("What datastore does Atlas use?")
    assert contents(now)[0] == postgres.content
    assert mysql.id not in [h.memory.id for h in now]
    everything = ledger.search("What datastore does Atlas use?", include_history=True)
    assert [h.memory.id for h in everything][:1] == [postgres.id]
    tiers = {h.memory.id: h.tier for h in everything}
    assert tiers[postgres.id] == "current" and tiers[mysql.id] == "historical"
    ordered = [h.tier for h in everything]
    assert ordered == sorted(ordered, key=lambda t: t != "current")
    before = ledger.search("datastore Atlas", as_of="2026-04-01T00:00:00Z")
    assert contents(before) == [mysql.content]


def test_historical_memories_rank_a_full_tier_below_whatever_their_text_score(
    ledger: Ledger,
) -> None:
    old = ledger.remember("kafka kafka kafka streaming kafka cluster", subject="bus",
                          attribute="broker", value="kafka", valid_from=MAR)  # fmt: skip
    ledger.revise(old.id, "we use nats", value="nats", at=JUL)
    ledger.remember("one kafka mention", kind="note")
    hits = ledger.search("kafka streaming cluster", include_history=True)
    assert [h.tier for h in hits] == ["current", "historical"]
    assert hits[1].memory.id == old.id and hits[1].score > hits[0].score


def test_plain_questions_find_memories_sharing_any_meaningful_term(ledger: Ledger) -> None:
    aws = ledger.remember(
        "The team moved to AWS", subject="team", attribute="database", value="AWS"
    )
    tea = ledger.remember("Ada drinks tea every morning", kind="preference", entities=["Ada"])
    assert contents(ledger.search("what database does the team use")) == [aws.content]
    assert contents(ledger.search("Which drink does Ada like?")) == [tea.content]
    assert ledger.search("what is it that was") == []
    assert ledger.search("zebra") == []


def test_more_shared_terms_rank_higher(ledger: Ledger) -> None:
    one = ledger.remember("the launch is planned", kind="note")
    two = ledger.remember("the launch deadline moved", kind="note")
    three = ledger.remember("launch deadline for the rocket moved", kind="note")
    ranked = [h.memory.id for h in ledger.search("rocket launch deadline")]
    assert ranked == [three.id, two.id, one.id]


def test_as_of_the_hand_over_instant_returns_only_the_newer(ledger: Ledger) -> None:
    old = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                          value="Supabase", valid_from=MAR)  # fmt: skip
    new = ledger.revise(old.id, "The team moved to AWS", value="AWS", at=JUL)
    assert [h.memory.id for h in ledger.search("team", as_of=JUL)] == [new.id]
    assert [h.memory.id for h in ledger.search("team", as_of=APR)] == [old.id]
    assert [h.memory.id for h in ledger.search("team", known_at=old.recorded_at)] == [old.id]


def test_forgotten_memories_never_appear(ledger: Ledger) -> None:
    secret = ledger.remember("the vault code is 1234", subject="vault", valid_from=MAR)
    ledger.forget(secret.id)
    for kwargs in (
        {},
        {"include_history": True},
        {"as_of": APR},
        {"as_of": APR, "include_history": True},
    ):
        assert ledger.search("vault code", **kwargs) == []
        assert ledger.search("", **kwargs) == []


def test_other_namespaces_never_appear(open_ledger: OpenLedger) -> None:
    mine = open_ledger(namespace="acme")
    rival = open_ledger(namespace="rival")
    rival.remember("the rival roadmap for launch", kind="note", entities=["Ann"])
    assert mine.search("roadmap launch", include_history=True) == []
    assert mine.search("") == []
    # Filtered by an entity only the other namespace names, with and without terms.
    assert mine.search("roadmap", entities=["ann"], include_history=True) == []
    assert mine.search("", entities=["ann"]) == []
    mine.remember("our own roadmap", kind="note", entities=["Ann"])
    assert [h.memory.content for h in mine.search("", entities=["ann"])] == ["our own roadmap"]
    assert [h.memory.content for h in rival.search("roadmap", entities=["ann"])] == [
        "the rival roadmap for launch"
    ]


def test_empty_query_lists_by_recency_and_filters_apply(ledger: Ledger, clock: ManualClock) -> None:
    a = ledger.remember("alpha", kind="note", subject="x", attribute="p", value=1, entities=["Ann"])
    clock.advance(hours=1)
    b = ledger.remember("beta", kind="fact", subject="x", attribute="q", value=2, entities=["Bob"])
    clock.advance(hours=1)
    c = ledger.remember("gamma", kind="fact", subject="y", value=3, entities=["ann"])
    assert [h.memory.id for h in ledger.search()] == [c.id, b.id, a.id]
    assert [h.memory.id for h in ledger.search(limit=2)] == [c.id, b.id]
    assert [h.memory.id for h in ledger.search(kinds=["note"])] == [a.id]
    assert [h.memory.id for h in ledger.search(subject="X")] == [b.id, a.id]
    assert [h.memory.id for h in ledger.search(subject="x", attribute="q")] == [b.id]
    assert [h.memory.id for h in ledger.search(attribute="Q")] == [b.id]
    assert [h.memory.id for h in ledger.search(kinds=["fact", "fact"])] == [c.id, b.id]
    assert [h.memory.id for h in ledger.search(entities=["ANN"])] == [c.id, a.id]
    assert all(h.tier == "current" for h in ledger.search())


def test_an_empty_list_of_kinds_or_entities_matches_nothing(ledger: Ledger) -> None:
    """None means any; an empty list means none of them, as ``IN ()`` would."""
    ledger.remember("alpha beta", kind="note", entities=["Ann"])
    assert len(ledger.search("alpha", kinds=None, entities=None)) == 1
    assert ledger.search("alpha", kinds=[]) == []
    assert ledger.search("alpha", entities=[]) == []
    assert ledger.search("", kinds=(), include_history=True) == []
    with pytest.raises(ValidationError):  # still checked before answering
        ledger.search("alpha", kinds=[], limit=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": "3"},
        {"kinds": ["rumour"]},
        {"as_of": "soon"},
        {"entities": [f"e{n}" for n in range(1_001)]},
    ],
)
def test_search_refuses_bad_arguments(ledger: Ledger, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ledger.search("x", **kwargs)


def test_archived_memories_are_historical_now_but_live_as_of(ledger: Ledger) -> None:
    note = ledger.remember("retro notes about the launch", kind="note", valid_from=MAR)
    ledger.archive(note.id)
    assert ledger.search("launch") == []
    assert [h.tier for h in ledger.search("launch", include_history=True)] == ["historical"]
    assert [h.tier for h in ledger.search("launch", as_of=APR)] == ["current"]


def ids(hits: list[Any]) -> list[Any]:
    return [h.memory.id for h in hits]


def filler(ledger: Ledger, count: int = 12) -> None:
    """Notes sharing no term with the tests' questions, so term rarity means something."""
    ledger.remember_many({"content": f"unrelated remark {n}", "kind": "note"} for n in range(count))


def test_sharing_more_terms_beats_a_higher_text_score(ledger: Ledger) -> None:
    filler(ledger)
    loud = ledger.remember("kafka kafka kafka kafka kafka", kind="note")
    quiet = ledger.remember("Our kafka cluster sits in the basement beside the old printers, "
                            "the spare chairs and the coffee machine", kind="note")  # fmt: skip
    hits = ledger.search("kafka cluster")
    assert ids(hits) == [quiet.id, loud.id]
    assert [int(h.score) for h in hits] == [2, 1]  # the shared terms, then the text score
    assert 0 < hits[1].score - 1 < 1 and hits[0].score > hits[1].score


def test_terms_no_memory_holds_do_not_count(ledger: Ledger) -> None:
    filler(ledger)
    launch = ledger.remember("the launch is on Friday", kind="note")
    for question in ("zebra launch", "don't launch", "launch"):
        hits = ledger.search(question)
        assert ids(hits) == [launch.id] and int(hits[0].score) == 1, question
    assert ledger.search("zebra okapi") == []


def test_each_level_of_shared_terms_fills_the_limit_in_turn(ledger: Ledger) -> None:
    filler(ledger)
    both = ledger.remember("rocket launch today", kind="note")
    ones = [ledger.remember(f"launch note {n}", kind="note") for n in range(4)]
    hits = ledger.search("rocket launch", limit=3)
    assert ids(hits)[0] == both.id and len(hits) == 3
    assert set(ids(hits)[1:]) <= {m.id for m in ones}
    assert [int(h.score) for h in hits] == [2, 1, 1]


WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor"]


def test_long_questions_rank_the_same_however_the_term_sets_are_found(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    ledger.remember_many(
        {"content": " ".join(rng.sample(WORDS, rng.randint(1, 7))) + f" sample {n}",
         "kind": "note"}
        for n in range(60)
    )  # fmt: skip
    question = "which " + " and ".join(WORDS)
    found, default = {}, recall.ENUMERATED_SETS
    for budget in (0, default, 1_000):  # sets read from the index, mixed, all named
        monkeypatch.setattr(recall, "ENUMERATED_SETS", budget)
        found[budget] = [(h.memory.id, h.score) for h in ledger.search(question, limit=60)]
    assert found[0] == found[default] == found[1_000]
    hits = ledger.search(question, limit=60)
    assert len(hits) == 60
    shared = [int(h.score) for h in hits]
    assert shared == sorted(shared, reverse=True)
    for hit in hits:
        assert int(hit.score) == len(set(WORDS) & set(hit.memory.content.split()))


def test_a_question_whose_level_holds_many_term_sets_is_ranked_in_parts(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty common words, four to a memory: a level holds hundreds of the sets that
    occur, one FTS5 query each, and SQLite refused the statement joining more than 500
    (``too many terms in compound SELECT``). A level is ranked in parts, merged as one
    statement would rank it (as the same search ranked with parts of 3 sets shows)."""
    words = [f"{name}word" for name in "abcdefghijklmnopqrst"]
    rng = random.Random(11)
    ledger.remember_many({"content": " ".join(rng.sample(words, 4)) + f" item{n}", "kind": "note"}
                         for n in range(1_000))  # fmt: skip
    question = " ".join(words)
    hits = ledger.search(question, limit=30)
    assert len(hits) == 30 and all(int(hit.score) == 4 for hit in hits)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    monkeypatch.setattr(recall, "MASKS_PER_STATEMENT", 3)
    assert [(h.memory.id, h.score) for h in ledger.search(question, limit=30)] == [
        (h.memory.id, h.score) for h in hits
    ]


def test_the_best_matches_dropped_by_filters_do_not_hide_the_rest(
    open_ledger: OpenLedger,
) -> None:
    rival = open_ledger(namespace="rival")
    rival.remember_many({"content": f"launch launch plan {n}", "kind": "note"} for n in range(60))
    mine = open_ledger(namespace="acme")
    plain = mine.remember("the plan for the launch", kind="note")
    assert ids(mine.search("launch plan")) == [plain.id]
    mine.remember_many(
        {"content": f"launch launch plan {n}", "subject": "draft"} for n in range(60)
    )
    final = mine.remember("the launch plan", subject="final")
    assert ids(mine.search("launch plan", subject="final")) == [final.id]
    assert ids(mine.search("launch plan", subject="final", as_of=JUL)) == []


WORDS_ANSWERS = {
    "alice@example.com": ["Contact alice@example.com for access", "Alice's car is red"],
    "example": ["Contact alice@example.com for access"],
    "where is the local bin": ["Binary in /usr/local/bin"],
    "2.1": ["Upgrade to version 2.1 next week"],
    "naive cafe": ["A naïve café on the corner"],
    "naïve": ["A naïve café on the corner"],
    "what's new": [],
    "don't know": [],
    "йогурт": ["Купил йогурт"],
    "phở": ["A bowl of phở"],
    "m²": ["The flat has 40 m²"],
    "καφές": ["Ένας καφές"],
    "İstanbul": ["Flights to İstanbul"],
    "rendez-vous à": [],
    "\ufdfa": ["A blessing \ufdfa written"],
    # Words beside a newer emoji, a bidi isolate or a currency sign, which SQLite's own
    # tokenizer (Unicode 6.1's tables) took as part of the word.
    "shipped": ["Shipped🙂"],
    "zoltan": ["\u2068Zoltan\u2069 joined"],
    "price": ["price₽500"],
    # Letters with two accents, and Devanagari words whose vowel signs belong to them.
    "viet noi": ["Hà Nội, Việt Nam"],
    "पानी": ["पानी और किताब"],
    "ताब": [],
    "Straße": ["Flat on Strasse 4"],
}
"""Questions and the memories each finds, the same on both backends: every meaningful
word counts, whatever punctuation or accents surround it, and contraction stubs (the
``s`` of "what's", the ``t`` and ``don`` of "don't") are not words."""


def test_a_long_question_finds_a_memory_by_any_of_its_first_62_words(ledger: Ledger) -> None:
    """Every word of a long question counts, up to its first 62 terms (each is a bit of
    a 64-bit integer in the statements): a memory sharing only the 62nd is found, on
    every path that ranks (now, with history, as of an instant)."""
    words = [f"word{chr(97 + n // 26)}{chr(97 + n % 26)}" for n in range(62)]
    ledger.remember_many([{"content": f"note about {word}"} for word in words])
    question = " ".join(words)
    for options in ({}, {"include_history": True}, {"as_of": "2030-01-01T00:00:00Z"}):
        found = {hit.memory.content.split()[-1] for hit in ledger.search(question, limit=100,
                                                                           **options)}  # fmt: skip
        assert found == set(words), options


def test_a_pasted_page_of_thousands_of_words_is_answered(ledger: Ledger) -> None:
    """Each query term was a column of one statement, which takes at most 2,000 (SQLite)
    or 1,664 (PostgreSQL): 2,100 words failed with ``StoreUnavailable``."""
    bravo = ledger.remember("alpha bravo charlie")
    filler = [f"filler{chr(97 + n // 676)}{chr(97 + n // 26 % 26)}{chr(97 + n % 26)}"
              for n in range(2_100)]  # fmt: skip
    assert [h.memory.id for h in ledger.search(" ".join(["bravo", *filler]))] == [bravo.id]
    # Past a question's first 62 terms, words are cut (docs/decisions.md, "Search").
    late = ledger.search(" ".join([*filler, "bravo"]), include_history=True)
    assert [h.memory.id for h in late] == []


def test_which_terms_are_cut_does_not_depend_on_other_namespaces(
    open_ledger: OpenLedger,
) -> None:
    """The first 62 terms are asked whatever the index holds: a SQLite search skipped
    the terms no memory held before cutting, so a question of a guessed word, 61 of
    the asker's words and a 63rd found that last one only when no memory of any
    namespace held the guessed word (and, asked as of an instant, no forgotten one)."""
    mine, theirs = open_ledger(namespace="mine"), open_ledger(namespace="theirs")
    words = [f"word{chr(97 + n // 26)}{chr(97 + n % 26)}" for n in range(61)]
    mine.remember_many([{"content": f"note about {word}"} for word in [*words, "canary"]])
    theirs.remember("The secret project is zorblax")
    for guessed in ("zorblax", "qwertyzz"):
        question = " ".join([guessed, *words, "canary"])
        for options in ({}, {"include_history": True}, {"as_of": "2030-01-01T00:00:00Z"}):
            found = {hit.memory.content.split()[-1]
                     for hit in mine.search(question, limit=100, **options)}  # fmt: skip
            assert found == set(words), (guessed, options)


def test_repeated_filter_names_count_once(ledger: Ledger) -> None:
    """Each name was a parameter of the statements: 70,000 repeats of a kind, or of an
    entity, passed PostgreSQL's 65,535 and failed with ``StoreUnavailable`` there."""
    memory = ledger.remember("The team moved to AWS", entities=["team"], kind="decision")
    hits = ledger.search("aws", kinds=["decision"] * 70_000, entities=["Team", "team "] * 35_000)
    assert [h.memory.id for h in hits] == [memory.id]
    many = [*(f"e{n}" for n in range(999)), "TEAM"]
    assert [h.memory.id for h in ledger.search("", entities=many)] == [memory.id]


def test_search_filters_take_any_iterable_of_names(ledger: Ledger) -> None:
    from collections import deque

    memory = ledger.remember("The team moved to AWS", entities=["team"], kind="decision")
    for entities, kinds in [(deque(["team"]), iter(["decision"])), (("team",), {"decision"})]:
        assert [h.memory.id for h in ledger.search("aws", entities=entities, kinds=kinds)] == [
            memory.id
        ]


@pytest.mark.parametrize(("question", "found"), WORDS_ANSWERS.items())
def test_both_backends_find_the_same_words(ledger: Ledger, question: str, found: list[str]) -> None:
    for content in ["Contact alice@example.com for access", "Binary in /usr/local/bin",
                    "Upgrade to version 2.1 next week", "A naïve café on the corner",
                    "Alice's car is red", "Bob doesn't like tea", "Купил йогурт",
                    "A bowl of phở", "The flat has 40 m²", "Ένας καφές",
                    "Flights to İstanbul", "A blessing \ufdfa written", "Shipped🙂",
                    "\u2068Zoltan\u2069 joined", "price₽500", "Hà Nội, Việt Nam",
                    "पानी और किताब", "नीति आयोग", "Flat on Strasse 4"]:  # fmt: skip
        ledger.remember(content)
    assert [hit.memory.content for hit in ledger.search(question)] == found


ACCENTED = ["naïve", "Müller", "йогурт", "καφές", "phở", "한국어", "がっこう", "ẹ̀kọ́"]
"""Words spelled differently composed (NFC) and decomposed (NFD): Latin letters with one
accent and with two, Cyrillic, Greek, Hangul syllables, kana with a voicing mark, and
Yoruba letters whose marks have no composed form at all."""


def accented_memories() -> list[tuple[str, dict[str, Any]]]:
    """Each accented word, composed and decomposed, alone in each field a search reads:
    the word, and the fields of the memory holding it (each names the entity ``probe``)."""
    made: list[tuple[str, dict[str, Any]]] = []
    for word in ACCENTED:
        for form in ("NFC", "NFD"):
            spelled = unicodedata.normalize(form, word)
            for field in ("content", "subject", "attribute", "value"):
                made.append((word, {"content": f"note {len(made)}", "entities": ["probe"],
                                    field: spelled}))  # fmt: skip
            made.append((word, {"content": f"note {len(made)}", "entities": [spelled, "probe"]}))
    return made


def test_a_word_is_found_however_its_accents_were_typed(ledger: Ledger, clock: ManualClock) -> None:
    """A word matches whether it was written composed or decomposed, in each field a
    search reads, asked for in either form, on every way a search ranks; and what was
    written comes back as it was, byte for byte (only the index holds composed words)."""
    items = accented_memories()
    made = ledger.remember_many([fields for _, fields in items])
    written = {memory.id: fields for memory, (_, fields) in zip(made, items, strict=True)}
    clock.advance(days=1)
    ways: dict[str, dict[str, Any]] = {
        "now": {}, "with history": {"include_history": True}, "as of": {"as_of": clock()},
        "known at": {"known_at": clock()}, "filtered": {"entities": ["probe"]},
    }  # fmt: skip
    missed = []
    for word in ACCENTED:
        wanted = {memory.id for memory, (held, _) in zip(made, items, strict=True) if held == word}
        for form in ("NFC", "NFD"):
            for way, options in ways.items():
                hits = ledger.search(unicodedata.normalize(form, word), limit=100, **options)
                if not wanted <= {hit.memory.id for hit in hits}:
                    missed.append(f"{word} asked {form}, {way}")
                for hit in hits:
                    fields = written[hit.memory.id]
                    for field in ("content", "subject", "attribute", "value"):
                        assert getattr(hit.memory, field) == fields.get(field), field
    assert missed == []


def test_a_search_known_at_an_instant_finds_the_same_with_or_without_its_position_bound(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search as known at an instant reads the full index only up to the last position
    recorded by then; with that bound lifted it must find the same hits in the same
    order, at instants before, between and after the writes, filtered or not."""
    rng = random.Random(5)
    instants = [clock()]
    made = []
    for round_ in range(4):
        clock.advance(hours=1)
        made += ledger.remember_many(
            {"content": " ".join(rng.sample(WORDS, rng.randint(2, 6))) + f" round {round_}",
             "subject": rng.choice(["atlas", "lumen"]), "attribute": rng.choice(["db", None]),
             "valid_from": MAR}
            for _ in range(25)
        )  # fmt: skip
        for memory in rng.sample(made[:-25], min(5, len(made) - 25)):
            if ledger.get(memory.id).state is State.CURRENT:
                ledger.revise(memory.id, memory.content + " revised", at=JUL)
        instants.append(clock())
    clock.advance(hours=1)
    instants.append(clock())
    questions = ["which " + " and ".join(rng.sample(WORDS, 3)) for _ in range(4)]
    filters: list[dict[str, Any]] = [
        {},
        {"include_history": True},
        {"subject": "atlas"},
        {"attribute": "db"},
        {"as_of": APR},
    ]

    def answers() -> list[list[tuple[Any, float, str]]]:
        return [
            [(h.memory.id, h.score, h.tier)
             for h in ledger.search(q, limit=20, known_at=at, **f)]
            for q in questions for f in filters for at in instants
        ]  # fmt: skip

    bounded = answers()
    monkeypatch.setattr(type(ledger.log), "position_at", lambda self, sql, instant: 2**62)
    assert answers() == bounded
    assert sum(len(hits) for hits in bounded) > 100


def test_filtered_searches_rank_the_same_whether_few_or_many_memories_are_left(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search filtered down to a few memories ranks them by key; the same search with
    that shortcut turned off walks the index level by level: same hits, same order."""
    rng = random.Random(11)
    subjects, attributes = ["atlas", "lumen", "iris"], ["datastore", "status", None]
    made = ledger.remember_many(
        {"content": " ".join(rng.sample(WORDS, rng.randint(1, 6))) + f" sample {n}",
         "subject": rng.choice(subjects), "attribute": rng.choice(attributes),
         "entities": rng.sample(subjects, rng.randint(0, 2)), "valid_from": MAR}
        for n in range(90)
    )  # fmt: skip
    clock.advance(days=1)
    instant = clock()
    for memory in made[:30:3]:
        ledger.revise(memory.id, memory.content + " revised", at=JUL)
    for memory in made[30:45:5]:
        ledger.archive(memory.id)
    questions = ["which " + " and ".join(rng.sample(WORDS, 4)) for _ in range(4)]
    filters: list[dict[str, Any]] = [
        {"subject": "atlas"}, {"subject": "lumen", "attribute": "status"},
        {"attribute": "datastore"}, {"entities": ["iris"]},
        {"subject": "atlas", "include_history": True}, {"subject": "iris", "as_of": APR},
        {"subject": "lumen", "known_at": instant}, {"subject": "nobody"},
        {"attribute": "Status", "include_history": True}, {"attribute": "datastore", "as_of": APR},
        {"attribute": "status", "known_at": instant}, {"attribute": "nothing"},
        {"kinds": ["fact"]}, {"kinds": ["fact"], "include_history": True}, {"kinds": ["note"]},
        {"kinds": ["fact"], "attribute": "status"},
    ]  # fmt: skip
    found, default = {}, recall.NARROW
    for narrow in (default, 0):
        monkeypatch.setattr(recall, "NARROW", narrow)
        found[narrow] = [
            [(h.memory.id, h.score, h.tier) for h in ledger.search(q, limit=15, **f)]
            for q in questions
            for f in filters
        ]
    assert found[default] == found[0]
    assert sum(len(hits) for hits in found[0]) > 100


@pytest.mark.parametrize("narrow", [recall.NARROW, 0])
def test_a_search_filtered_by_attribute_is_the_unfiltered_ranking_of_that_attribute(
    narrow: int, ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filtering by attribute keeps the ranking: the hits are the unfiltered search's
    hits of that attribute (however it was spelt), in the same order, with the same
    scores, now, with history and as of an instant; by key (few memories) and level by
    level (many), where the filter is said of the memory as well as of its version."""
    monkeypatch.setattr(recall, "NARROW", narrow)
    rng = random.Random(7)
    attributes = ["status", "Status", "owner", "datastore", None]
    made = ledger.remember_many(
        {"content": " ".join(rng.sample(WORDS, rng.randint(1, 5))) + f" item {n}",
         "subject": f"s{n % 9}", "attribute": rng.choice(attributes), "valid_from": MAR}
        for n in range(120)
    )  # fmt: skip
    clock.advance(days=1)
    for memory in made[:40:4]:
        ledger.revise(memory.id, memory.content + " again", at=JUL)
    questions = ["which " + " ".join(rng.sample(WORDS, 3)) for _ in range(6)]
    for options in ({}, {"include_history": True}, {"as_of": APR}):
        for question in questions:
            every = ledger.search(question, limit=500, **options)
            assert len(every) > 20
            for attribute in ("status", "OWNER", "datastore", "nothing"):
                expected = [
                    (h.memory.id, h.score, h.tier)
                    for h in every
                    if (h.memory.attribute or "").lower() == attribute.lower()
                ][:7]
                found = ledger.search(question, limit=7, attribute=attribute, **options)
                assert [(h.memory.id, h.score, h.tier) for h in found] == expected, (
                    question, attribute, options)  # fmt: skip


class LiveRevisions:
    """Forty memories about falcons, revised a few at a time: each revision takes the
    older memory out of the live index and puts the newer one in."""

    def __init__(self, ledger: Ledger, clock: ManualClock) -> None:
        self.ledger, self.clock = ledger, clock
        made = ledger.remember_many(
            {"content": f"falcon note {n}", "valid_from": MAR} for n in range(40)
        )
        self.current = {m.id: m for m in made}

    def revise(self, count: int) -> None:
        for older in list(self.current.values())[:count]:
            self.clock.advance(minutes=1)
            newer = self.ledger.revise(older.id, older.content + " revised", at=self.clock())
            del self.current[older.id]
            self.current[newer.id] = newer

    def found_exactly_the_current(self) -> bool:
        return set(ids(self.ledger.search("falcon", limit=100))) == set(self.current)


def index_rows(ledger: Ledger, table: str = search.LIVE) -> list[str]:
    """The ids of the memories an index holds, a row each, sorted (read straight from
    its table: the live index's by default)."""
    backend = ledger.log.backend
    statement = (
        f"SELECT k.memory_id FROM {table} AS l JOIN {search.KEYS} AS k ON k.position = l.rowid"
        if backend.dialect == "sqlite" else f"SELECT memory_id FROM {table}"
    )  # fmt: skip
    with backend.read() as sql:
        sql.execute(statement)
        return sorted(str(row["memory_id"]) for row in sql.fetchall())


def live_index_ids(ledger: Ledger) -> set[str]:
    """The ids of the memories the live index holds."""
    return set(index_rows(ledger))


def kestrels(ledger: Ledger) -> set[str]:
    """Five memories in one batch, one superseded by another of the batch, one whose
    window has ended, one archived after; return the ids that can be true now."""
    color = {"subject": "kestrel", "attribute": "colour", "policy": "timestamp_wins"}
    made = ledger.remember_many([
        {"content": "kestrel colour red", "value": "red", "valid_from": MAR, **color},
        {"content": "kestrel colour rust", "value": "rust", "valid_from": APR, **color},
        {"content": "kestrel nested in 2020", "valid_from": "2020-03-01T00:00:00Z",
         "valid_until": "2020-09-01T00:00:00Z"},
        {"content": "kestrel hunts voles"},
        {"content": "kestrel hovers"},
    ])  # fmt: skip
    red, rust, _ended, hunts, hovers = made
    ledger.archive(hovers.id)
    assert ledger.get(red.id).superseded_by == rust.id
    return {str(rust.id), str(hunts.id)}


def test_the_live_index_holds_exactly_the_memories_that_can_be_true_now(
    ledger: Ledger,
) -> None:
    """A batch's memories enter the live index unless one of the same batch supersedes
    them, or their window has ended; an archive takes one out. The index is what
    searches of now read, so a memory left in it is only slower to search, never found
    wrongly: its rows are checked here."""
    current = kestrels(ledger)
    assert live_index_ids(ledger) == current


@pytest.mark.postgres
def test_rows_indexed_in_several_statements_enter_the_live_index_as_in_one(
    postgres_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: a fold's search rows past one JSON array's size go in several
    statements, each copying its live rows; the live index ends as if they went in one."""
    monkeypatch.setattr(json_rows, "JSON_ARRAY_BYTES", 120)  # about a row a statement
    with Ledger.open(postgres_url, namespace="acme", actor="tester", clock=clock) as ledger:
        current = kestrels(ledger)
        assert live_index_ids(ledger) == current
        assert len(ledger.search("kestrel", limit=10)) == 2


def test_a_batch_folding_a_hard_forget_between_its_assertions_keeps_the_indexes_exact(
    ledger: Ledger,
) -> None:
    """A batch meeting a hard forget writes the index rows gathered so far before it
    erases, then goes on: the indexes hold the rows of both parts once each, less what
    was forgotten or superseded. (A rebuild folds the whole log as one batch.)"""
    color = {"subject": "merlin", "attribute": "colour", "policy": "timestamp_wins"}
    grey = ledger.remember("merlin colour grey", value="grey", valid_from=MAR, **color)
    gone = ledger.remember("merlin nests by the sea")
    kept = ledger.remember("merlin hunts larks")
    ledger.forget(gone.id, hard=True)
    brown = ledger.remember("merlin colour brown", value="brown", valid_from=APR, **color)
    later = ledger.remember("merlin winters inland")
    ledger.rebuild()
    assert ledger.get(grey.id).superseded_by == brown.id
    assert live_index_ids(ledger) == {str(kept.id), str(brown.id), str(later.id)}
    assert index_rows(ledger, search.FULL) == sorted(str(m.id) for m in (grey, kept, brown, later))


def test_the_live_index_is_compacted_once_its_removals_reach_a_budget(
    sqlite_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: once the removals from the live index reach the budget (here 10), the
    index is optimized into one segment and the next budget is a quarter of its size.
    Searches find the current memories throughout."""
    monkeypatch.setattr(search, "UPKEEP_FLOOR", 10)
    ledger = Ledger.open(sqlite_url, namespace="acme", actor="tester", clock=clock)
    raw = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    try:
        falcons = LiveRevisions(ledger, clock)

        def upkeep() -> tuple[int, int, int]:
            removed, budget = raw.execute(f"SELECT removed, budget FROM {search.UPKEEP}").fetchone()
            (segments,) = raw.execute(
                f"SELECT count(DISTINCT segid) FROM {search.LIVE}_idx").fetchone()  # fmt: skip
            return removed, budget, segments

        falcons.revise(9)
        assert upkeep()[:2] == (9, 10)
        assert upkeep()[2] > 1
        assert falcons.found_exactly_the_current()
        falcons.revise(1)
        assert upkeep() == (0, 10, 1)
        assert falcons.found_exactly_the_current()
    finally:
        raw.close()
        ledger.close()


@pytest.mark.postgres
def test_postgres_vacuums_the_live_table_once_its_removals_reach_a_budget(
    postgres_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: once the rows a process took out of the live table reach the budget
    (here 10), the table is vacuumed after the commit, so its dead rows do not wait for
    an autovacuum that may be off. Searches find the current memories throughout."""
    monkeypatch.setattr(search, "UPKEEP_FLOOR", 10)
    ledger = Ledger.open(postgres_url, namespace="acme", actor="tester", clock=clock)
    base, schema = postgres_url.split("?schema=")
    try:
        falcons = LiveRevisions(ledger, clock)

        def dead_and_vacuumed() -> tuple[int, bool]:
            with psycopg.connect(base, autocommit=True) as db:
                row = db.execute(
                    "SELECT n_dead_tup, last_vacuum IS NOT NULL FROM pg_stat_user_tables "
                    "WHERE schemaname = %s AND relname = %s",
                    (schema, search.LIVE),
                ).fetchone()
            assert row is not None
            return int(row[0]), bool(row[1])

        falcons.revise(9)
        assert not dead_and_vacuumed()[1]
        assert falcons.found_exactly_the_current()
        falcons.revise(1)
        assert dead_and_vacuumed() == (0, True)
        assert ledger.search_index.removals == 0
        assert falcons.found_exactly_the_current()
    finally:
        ledger.close()


def test_a_memory_superseded_at_a_later_instant_is_found_until_then(
    ledger: Ledger, clock: ManualClock
) -> None:
    oct_1 = "2026-10-01T00:00:00Z"
    lisbon = ledger.remember("The office is in Lisbon", subject="office", attribute="city",
                             value="Lisbon", valid_from=MAR)  # fmt: skip
    berlin = ledger.revise(lisbon.id, "The office moves to Berlin", value="Berlin", at=oct_1)
    assert ids(ledger.search("office")) == [lisbon.id]
    assert ids(ledger.search("office", as_of=oct_1)) == [berlin.id]
    clock.set(oct_1)
    assert ids(ledger.search("office")) == [berlin.id]
    assert ids(ledger.search("office", include_history=True)) == [berlin.id, lisbon.id]


def test_a_window_that_ended_before_it_was_recorded_is_never_live(ledger: Ledger) -> None:
    offsite = ledger.remember("The spring offsite in Porto", kind="note", valid_from=MAR,
                              valid_until=APR)  # fmt: skip
    assert ledger.search("offsite Porto") == []
    assert ids(ledger.search("offsite Porto", as_of="2026-03-15T00:00:00Z")) == [offsite.id]
    assert [h.tier for h in ledger.search("offsite", include_history=True)] == ["historical"]


# ------------------------------------------------------------------ proposals


def keyed(ledger: Ledger, content: str, value: object, start: str, **extra: Any) -> Any:
    fields: dict[str, Any] = {"subject": "me", "attribute": "city", "kind": "preference"}
    fields.update(extra)
    return ledger.remember(content, value=value, valid_from=start, **fields)


def test_story_3_berlin_supersedes_lisbon_and_a_deadline_contradiction(
    open_ledger: OpenLedger,
) -> None:
    ledger = open_ledger(namespace="acme", actor="user")
    lisbon = keyed(ledger, "I live in Lisbon", "Lisbon", MAR)
    berlin = keyed(ledger, "Actually I moved to Berlin", "Berlin", JUL)
    (proposal,) = ledger.proposals()
    assert (proposal.older_id, proposal.newer_id) == (lisbon.id, berlin.id)
    accepted = ledger.accept(proposal.id)
    assert accepted.supersedes == [lisbon.id]
    assert ledger.get(lisbon.id).superseded_by == berlin.id
    assert ledger.proposals() == []
    assert ledger.conflicts("me") == []

    planner = open_ledger(namespace="acme", actor="planner-bot")
    executor = open_ledger(namespace="acme", actor="executor-bot")
    friday = planner.remember("deadline is Friday", subject="launch", attribute="deadline",
                              value="Friday", valid_from=MAR, confidence=0.6)  # fmt: skip
    monday = executor.remember("deadline is Monday", subject="launch", attribute="deadline",
                               value="Monday", valid_from=MAR, confidence=0.9)  # fmt: skip
    (conflict,) = ledger.conflicts()
    assert (conflict.subject, conflict.attribute) == ("launch", "deadline")
    assert [m.id for m in conflict.members] == [friday.id, monday.id]
    assert conflict.highest_confidence.id == monday.id
    assert conflict.resolution == "by_confidence"
    assert ledger.get(friday.id).state is State.CURRENT


def test_a_proposal_changes_nothing_by_itself(ledger: Ledger) -> None:
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    keyed(ledger, "Berlin", "Berlin", JUL)
    assert len(ledger.proposals()) == 1
    assert ledger.get(lisbon.id).state is State.CURRENT
    assert len(ledger.facts("me", "city")) == 2


def test_proposal_confidence_is_the_newer_memorys(ledger: Ledger) -> None:
    keyed(ledger, "Lisbon", "Lisbon", MAR, confidence=0.95)
    keyed(ledger, "Berlin", "Berlin", JUL, confidence=0.4)
    assert [p.confidence for p in ledger.proposals()] == [0.4]


BAR_CLAUSES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("different kind", {}, {"kind": "fact"}),
    ("not revisable", {"kind": "event", "attribute": "visit"}, {"kind": "event", "attribute": "visit"}),
    ("different subject", {}, {"subject": "you"}),
    ("different attribute", {}, {"attribute": "country"}),
    ("same claim", {}, {"value": "Lisbon", "content": "Lisbon"}),
    ("newer opens first", {"start": JUL}, {"start": MAR}),
    ("same opening", {}, {"start": MAR}),
    ("touching windows", {"valid_until": JUL}, {}),
    ("disjoint windows", {"valid_until": APR}, {}),
]  # fmt: skip


@pytest.mark.parametrize(("older", "newer"), [pytest.param(o, n, id=i) for i, o, n in BAR_CLAUSES])
def test_each_clause_of_the_bar_alone_prevents_a_proposal(
    ledger: Ledger, older: dict[str, Any], newer: dict[str, Any]
) -> None:
    def write(overrides: dict[str, Any], content: str, value: str, start: str) -> Any:
        fields = {"content": content, "value": value, "start": start, **overrides}
        return keyed(
            ledger, fields.pop("content"), fields.pop("value"), fields.pop("start"), **fields
        )

    write(older, "Lisbon", "Lisbon", MAR)
    write(newer, "Berlin", "Berlin", JUL)
    assert ledger.proposals() == []


def test_the_bar_is_met_by_each_variant_of_its_clauses(ledger: Ledger) -> None:
    keyed(ledger, "Lisbon", "Lisbon", MAR)
    keyed(ledger, "Berlin", "Berlin", JUL)
    keyed(ledger, "lives in Porto", None, MAR, subject=None, attribute=None, entities=["Ana"])
    keyed(
        ledger, "lives in Faro", None, JUL, subject=None, attribute=None, entities=["ana", "Faro"]
    )
    keyed(ledger, "Paris", None, MAR, subject="Zoe", attribute="city", entities=["Zoe"])
    keyed(ledger, "Paris", None, JUL, subject="Zoe", attribute="city", entities=["Zoe"])
    assert len(ledger.proposals()) == 2


def test_entities_only_match_when_keys_are_missing(ledger: Ledger) -> None:
    keyed(
        ledger,
        "Ana lives in Porto",
        "Porto",
        MAR,
        subject="Ana",
        attribute="home",
        entities=["Ana"],
    )
    keyed(
        ledger,
        "Ana works in Faro",
        "Faro",
        JUL,
        subject="Ana",
        attribute="office",
        entities=["Ana"],
    )
    assert ledger.proposals() == []


def test_a_structured_claim_reads_only_the_unstructured_members_of_its_entities(
    ledger: Ledger,
) -> None:
    """Through a shared entity a structured claim meets only claims without a key, so
    those are all it reads of an entity many structured memories name (it read every
    one: a write, or a rebuild's batch, slowed down as the entity grew popular)."""
    from erstwhile.eventstore import EventFilter
    from erstwhile.projections.candidates import _entity_members, claim_from_event

    ledger.remember_many([{"content": f"widget {n} is blue", "subject": f"widget {n}",
                           "attribute": "colour", "value": "blue", "entities": ["Acme"]}
                          for n in range(200)])  # fmt: skip
    note = ledger.remember("Acme ships on Fridays", kind="note", entities=["Acme"])
    structured = ledger.remember("widget 7 is red", subject="widget 7", attribute="colour",
                                 value="red", entities=["acme"])  # fmt: skip
    loose = ledger.remember("Acme is moving offices", kind="note", entities=["ACME"])

    def claim(memory: Any) -> Any:
        ((record, event),) = ledger.log.events(EventFilter(memory_id=memory.id))
        return claim_from_event(record, event)

    with ledger.log.backend.read() as sql:
        for_structured = _entity_members(sql, "acme", [claim(structured)])
        for_loose = _entity_members(sql, "acme", [claim(loose)])
    assert sorted(for_structured["acme"]) == sorted([(str(note.id), False),
                                                    (str(loose.id), False)])  # fmt: skip
    assert len(for_loose["acme"]) == 203
    assert (note.id, loose.id) in [(p.older_id, p.newer_id) for p in ledger.proposals()]


def test_candidates_read_ahead_of_an_append_are_those_its_fold_reads(
    open_ledger: OpenLedger,
) -> None:
    """On PostgreSQL a write that supersedes nothing sends its candidates' read ahead of
    its batch (one wait fewer). Under the write lock, for a batch of assertions whose
    keys differ, what comes back must be what the fold's own read finds: the versions
    open now that share a key, not closed ones, not another namespace's. With two claims
    sharing a key nothing is sent ahead (each must meet the other)."""
    from erstwhile.domain.memory import parse_draft
    from erstwhile.domain.time import to_micros
    from erstwhile.eventstore import EventFilter
    from erstwhile.projections.candidates import (
        _known_now,
        candidates_many,
        prefetch_candidates,
        probe_of_event,
        probe_of_request,
    )

    ledger = open_ledger(namespace="acme")
    porto = keyed(ledger, "Ana lives in Porto", "Porto", MAR, subject="Ana")
    faro = keyed(ledger, "Bo lives in Faro", "Faro", MAR, subject="Bo")
    ledger.archive(faro.id)
    lagos = keyed(ledger, "Cy lives in Lagos", "Lagos", MAR, subject="Cy")
    braga = ledger.revise(lagos.id, "Cy lives in Braga", value="Braga", at=APR)
    open_ledger(namespace="other").remember(
        "Ana lives in Beja", subject="Ana", attribute="city", kind="preference", value="Beja"
    )
    named = ledger.remember("Ame\u0301lie lives in Tavira", subject="  Ame\u0301lie ",
                           attribute="City", kind="preference", value="Tavira")  # fmt: skip
    ((record, event),) = ledger.log.events(EventFilter(memory_id=named.id))
    draft = parse_draft({"content": "x", "subject": "  Ame\u0301lie ", "attribute": "City",
                         "kind": "preference"})  # fmt: skip
    assert probe_of_request(draft, named.id) == probe_of_event(record, event)

    def probes(*subjects: str) -> list[Any]:
        return [
            probe_of_request(parse_draft({"content": f"{s} moved", "subject": s,
                                          "attribute": "city", "kind": "preference"}), uuid4())
            for s in subjects
        ]  # fmt: skip

    dialect = ledger.log.backend.dialect
    later = to_micros(ledger.now()) + 1_000_000
    asked = probes("Ana", "Bo", "Cy", "Dee")
    with ledger.log.backend.write() as sql:
        prefetch_candidates(sql, "acme", asked)
        assert sql.sent_ahead(*_known_now("acme", asked)) is (dialect == "postgresql")
        wanted = [(probe, later) for probe in asked]
        ahead = candidates_many(sql, "acme", wanted, dialect, only_assertions=True)
        assert not sql.sent_ahead(*_known_now("acme", asked))
        read_now = candidates_many(sql, "acme", wanted, dialect)
        sharing = probes("Ana", "ana")
        prefetch_candidates(sql, "acme", sharing)
        assert not sql.sent_ahead(*_known_now("acme", sharing))
    assert [[c.id for c in found] for found in ahead] == [[porto.id], [], [braga.id], []]
    assert ahead == read_now


def test_both_sides_must_be_current(ledger: Ledger) -> None:
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    ledger.archive(lisbon.id)
    keyed(ledger, "Berlin", "Berlin", JUL)
    assert ledger.proposals() == []
    porto = keyed(ledger, "Porto", "Porto", MAR, subject="ana")
    keyed(ledger, "Faro", "Faro", JUL, subject="ana")
    (open_one,) = ledger.proposals()
    ledger.archive(porto.id)
    assert ledger.proposals() == []
    with pytest.raises(SupersessionRefused, match="not_current"):
        ledger.accept(open_one.id)


def proposal_statuses(ledger: Ledger) -> dict[str, str]:
    """Every proposal's stored status, by id, read raw."""
    with ledger.log.backend.read() as sql:
        sql.execute("SELECT id, status FROM proposals")
        return {row["id"]: row["status"] for row in sql.fetchall()}


def test_a_proposal_whose_side_leaves_current_is_marked_withdrawn(ledger: Ledger) -> None:
    """Archived, forgotten or superseded, a side never returns to current: its open
    pairs were left open, and every listing read them again to drop them. They are
    marked withdrawn, an accepted pair stays accepted, and a rebuild marks the same."""
    porto = keyed(ledger, "Porto", "Porto", MAR)
    faro = keyed(ledger, "Faro", "Faro", JUL)
    lagos = keyed(ledger, "Lagos", "Lagos", "2026-09-01T00:00:00Z")
    pairs = {(p.older_id, p.newer_id): str(p.id) for p in ledger.proposals()}
    assert set(pairs) == {(porto.id, faro.id), (porto.id, lagos.id), (faro.id, lagos.id)}
    ledger.accept(pairs[porto.id, faro.id])  # Faro supersedes Porto
    ledger.archive(lagos.id)
    statuses = proposal_statuses(ledger)
    assert statuses == {pairs[porto.id, faro.id]: "accepted",
                        pairs[porto.id, lagos.id]: "withdrawn",
                        pairs[faro.id, lagos.id]: "withdrawn"}  # fmt: skip
    assert ledger.proposals() == []
    with pytest.raises(SupersessionRefused, match="not_current"):
        ledger.accept(pairs[faro.id, lagos.id])
    ledger.rebuild("proposals")
    assert proposal_statuses(ledger) == statuses


RETIRED = {"archive": "archived", "forget": "forgotten"}
"""The state each command leaves a memory in."""


@pytest.mark.parametrize("side", ["older", "newer"])
@pytest.mark.parametrize("how", list(RETIRED))
def test_a_withdrawn_proposal_cannot_be_rejected_either(
    ledger: Ledger, side: str, how: str
) -> None:
    """A side archived or forgotten never comes back: the pair leaves proposals() for
    good and accept is refused. A reject of it appended a ProposalRejected all the same,
    a decision on a pair no one can be offered again."""
    pair = {
        "older": keyed(ledger, "Porto", "Porto", MAR),
        "newer": keyed(ledger, "Faro", "Faro", JUL),
    }
    (proposal,) = ledger.proposals()
    getattr(ledger, how)(pair[side].id)
    before = list(ledger.events())
    with pytest.raises(
        ValidationError, match=rf"withdrawn: its {side} memory .* is {RETIRED[how]}"
    ):
        ledger.reject(proposal.id)
    assert list(ledger.events()) == before and ledger.proposals() == []


def test_touching_windows_are_neither_a_proposal_nor_a_conflict(ledger: Ledger) -> None:
    keyed(ledger, "Lisbon", "Lisbon", MAR, valid_until=JUL)
    keyed(ledger, "Berlin", "Berlin", JUL)
    assert ledger.proposals() == [] and ledger.conflicts() == []


def test_rejection_is_recorded_and_survives_a_rebuild(ledger: Ledger) -> None:
    keyed(ledger, "Lisbon", "Lisbon", MAR)
    keyed(ledger, "Berlin", "Berlin", JUL)
    (proposal,) = ledger.proposals()
    ledger.reject(proposal.id, reason="I have two homes")
    assert ledger.proposals() == []
    rejected = [e for e in ledger.events() if e.type == "ProposalRejected"]
    assert rejected[0].data is not None and rejected[0].data["reason"] == "I have two homes"
    before = event_count(ledger)
    ledger.reject(proposal.id)
    assert event_count(ledger) == before
    ledger.rebuild()
    assert ledger.proposals() == []
    ledger.rebuild("proposals")
    assert ledger.proposals() == []
    with pytest.raises(ValidationError, match="rejected"):
        ledger.accept(proposal.id)
    with pytest.raises(NotFound):
        ledger.accept("00000000-0000-0000-0000-000000000000")


@pytest.mark.postgres
def test_a_remember_on_postgresql_takes_its_candidates_from_the_read_sent_ahead(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remember whose claims share no key sends its candidates' read ahead, and its
    fold takes that answer (no wait of its own); a batch whose claims share a key sends
    nothing ahead, and its fold reads after the batch. Either way the proposal is made."""
    from erstwhile.eventstore.postgres_statements import PostgresSql
    from erstwhile.projections.candidates import KNOWN_NOW_BY_PAIRS

    answers: list[bool] = []
    sent_ahead = PostgresSql.sent_ahead

    def watched(self: PostgresSql, statement: str, params: Any = ()) -> bool:
        found = sent_ahead(self, statement, params)
        if statement == KNOWN_NOW_BY_PAIRS:
            answers.append(found)
        return found

    monkeypatch.setattr(PostgresSql, "sent_ahead", watched)
    with Ledger.open(postgres_url, namespace="acme", actor="tester") as ledger:
        porto = keyed(ledger, "Ana lives in Porto", "Porto", MAR, subject="Ana")
        faro = keyed(ledger, "Ana lives in Faro", "Faro", JUL, subject="  ana ")
        assert [(p.older_id, p.newer_id) for p in ledger.proposals()] == [(porto.id, faro.id)]
        beja, braga = ledger.remember_many([
            {"content": f"Bo lives in {city}", "subject": "Bo", "attribute": "city",
             "kind": "preference", "value": city, "valid_from": start}
            for city, start in (("Beja", MAR), ("Braga", JUL))
        ])  # fmt: skip
        assert (beja.id, braga.id) in [(p.older_id, p.newer_id) for p in ledger.proposals()]
    assert answers == [True, True, False]


def test_a_fold_of_the_proposals_that_repeats_leaves_each_pair_as_it_was(
    ledger: Ledger,
) -> None:
    """Folding the same assertions again (the proposals' position forgotten) records no
    pair twice and reopens none: a rejected pair stays rejected until its rejection is
    folded again."""
    keyed(ledger, "Lisbon", "Lisbon", MAR)
    keyed(ledger, "Berlin", "Berlin", JUL)
    keyed(ledger, "Porto", "Porto", MAR, subject="ana")
    faro = keyed(ledger, "Faro", "Faro", JUL, subject="ana")
    rejected = next(p for p in ledger.proposals() if p.newer_id == faro.id)
    ledger.reject(rejected.id)
    backend = ledger.log.backend

    def pairs() -> list[tuple[str, str]]:
        with backend.read() as sql:
            sql.execute("SELECT id, status FROM proposals ORDER BY id")
            return [(row["id"], row["status"]) for row in sql.fetchall()]

    before = pairs()
    assert sorted(status for _, status in before) == ["open", "rejected"]
    with backend.write() as sql:
        backend.reset_tracking(sql, "proposals")
    assert ledger.runner.catch_up(until=faro.position) == faro.position  # not the reject
    assert pairs() == before
    assert ledger.runner.catch_up() == ledger.head()
    assert pairs() == before


def test_accepting_twice_is_harmless_and_survives_a_rebuild(ledger: Ledger) -> None:
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    berlin = keyed(ledger, "Berlin", "Berlin", JUL)
    (proposal,) = ledger.proposals()
    first = ledger.accept(proposal.id)
    before = event_count(ledger)
    assert ledger.accept(proposal.id) == first
    assert event_count(ledger) == before
    ledger.rebuild()
    assert ledger.proposals() == [] and ledger.get(lisbon.id).superseded_by == berlin.id


@pytest.mark.parametrize("retire", ["archive", "forget", "supersede"])
def test_a_proposal_whose_newer_memory_stopped_being_current_is_refused(
    ledger: Ledger, retire: str
) -> None:
    """The bar asks both memories to be current when a proposal is accepted, not only
    when it was made: the newer one may have been archived, forgotten or replaced since."""
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    berlin = keyed(ledger, "Berlin", "Berlin", JUL)
    (proposal,) = ledger.proposals()
    if retire == "archive":
        ledger.archive(berlin.id)
    elif retire == "forget":
        ledger.forget(berlin.id)
    else:
        ledger.revise(berlin.id, "I live in Paris", value="Paris", at="2026-08-01T00:00:00Z")
    before = event_count(ledger)
    with pytest.raises(SupersessionRefused) as refused:
        ledger.accept(proposal.id)
    assert refused.value.reason == "not_current"
    assert event_count(ledger) == before
    assert ledger.get(lisbon.id).state is State.CURRENT


def racing(ledger: Ledger, write: Any) -> None:
    """Make ``write`` (another writer's command) commit between this ledger's reads and
    its next append: the moment a race would put it."""
    append = ledger.log.append

    def first_after_the_other(*args: Any, **kwargs: Any) -> Any:
        ledger.log.append = append  # type: ignore[method-assign]
        write()
        return append(*args, **kwargs)

    ledger.log.append = first_after_the_other  # type: ignore[method-assign]


@pytest.mark.parametrize("side", ["older", "newer"])
def test_a_reject_racing_an_archive_of_either_side_stores_nothing(
    open_ledger: OpenLedger, side: str
) -> None:
    """A side archived between the reject's reads and its append withdraws the pair:
    the reject is a conflict, not a ProposalRejected for a withdrawn pair (an archive
    of the newer side went unseen, only the older's version was expected)."""
    ledger, rival = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    pair = {
        "older": keyed(ledger, "Lisbon", "Lisbon", MAR),
        "newer": keyed(ledger, "Berlin", "Berlin", JUL),
    }
    (proposal,) = ledger.proposals()
    racing(ledger, lambda: rival.archive(pair[side].id))
    before = event_count(ledger)
    with pytest.raises(ConcurrencyConflict):
        ledger.reject(proposal.id)
    assert event_count(ledger) == before + 1  # the archive alone
    with pytest.raises(ValidationError, match="withdrawn"):
        ledger.reject(proposal.id)


@pytest.mark.parametrize("other", ["archive the newer", "reject", "accept"])
def test_an_accept_or_reject_racing_another_writer_stores_nothing(
    open_ledger: OpenLedger, other: str
) -> None:
    """The losing command of a race is refused as a conflict and stores nothing, as if
    it had come second: a proposal is never both accepted and rejected, nor accepted
    onto a memory archived meanwhile."""
    ledger, rival = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    berlin = keyed(ledger, "Berlin", "Berlin", JUL)
    (proposal,) = ledger.proposals()
    writes = {"archive the newer": lambda: rival.archive(berlin.id),
              "reject": lambda: rival.reject(proposal.id),
              "accept": lambda: rival.accept(proposal.id)}  # fmt: skip
    racing(ledger, writes[other])
    command = (lambda: ledger.reject(proposal.id)) if other == "accept" else (
        lambda: ledger.accept(proposal.id))  # fmt: skip
    before = event_count(ledger)
    with pytest.raises(ConcurrencyConflict):
        command()
    assert event_count(ledger) == before + 1  # the rival's event alone
    assert ledger.get(lisbon.id).state is (State.SUPERSEDED if other == "accept" else State.CURRENT)


def test_a_reject_racing_another_reject_of_the_same_proposal_succeeds(
    open_ledger: OpenLedger,
) -> None:
    """Both read the proposal open; the second to append met the first's rejection and
    raised ConcurrencyConflict. Rejecting a rejected proposal changes nothing, as
    documented: the loser succeeds and stores nothing."""
    ledger, rival = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    keyed(ledger, "Lisbon", "Lisbon", MAR)
    keyed(ledger, "Berlin", "Berlin", JUL)
    (proposal,) = ledger.proposals()
    racing(ledger, lambda: rival.reject(proposal.id, "theirs"))
    before = event_count(ledger)
    ledger.reject(proposal.id, "mine")
    assert event_count(ledger) == before + 1  # the rival's rejection alone
    assert ledger.proposals() == []


def test_a_reject_racing_an_accept_between_its_reads_stores_nothing(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An accept committed just after the rejecting ledger read the proposal (open),
    before it read the older memory: the rejection is refused, not stored after the
    acceptance (the proposal would be both, and the log's export refused by import)."""
    ledger, rival = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    keyed(ledger, "Berlin", "Berlin", JUL)
    (proposal,) = ledger.proposals()
    read_row = recall.proposal_row
    accepted: list[Any] = []

    def row_then_rival_accepts(sql: Any, namespace: str, key: Any) -> Any:
        row = read_row(sql, namespace, key)
        if not accepted:
            accepted.append(key)
            rival.accept(key)
        return row

    monkeypatch.setattr(recall, "proposal_row", row_then_rival_accepts)
    before = event_count(ledger)
    with pytest.raises(ConcurrencyConflict):
        ledger.reject(proposal.id)
    monkeypatch.undo()
    assert accepted and event_count(ledger) == before + 1  # the rival's Superseded alone
    assert [e.type for e in ledger.events() if e.type == "ProposalRejected"] == []
    assert ledger.get(lisbon.id).state is State.SUPERSEDED
    with pytest.raises(ValidationError, match="already accepted"):
        ledger.reject(proposal.id)


@pytest.mark.parametrize("rival_folds", [True, False])
def test_timestamp_wins_supersedes_a_candidate_another_writer_asserted_meanwhile(
    open_ledger: OpenLedger, rival_folds: bool
) -> None:
    """The winners are found again under the write lock: a memory another writer
    asserted meanwhile that clears the bar is superseded by the same write (until
    2026-12-05 the write was a conflict to retry); also when that writer left its
    memory for a follower to fold."""
    ledger = open_ledger(namespace="acme")
    rival = open_ledger(namespace="acme", sync_projections=rival_folds)
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    racing(ledger, lambda: keyed(rival, "Porto", "Porto", APR))
    before = event_count(ledger)
    berlin = keyed(ledger, "Berlin", "Berlin", JUL, policy="timestamp_wins")
    assert [ledger.get(i).value for i in berlin.supersedes] == ["Lisbon", "Porto"]
    assert event_count(ledger) == before + 4  # Porto; Berlin and both supersessions
    assert ledger.get(lisbon.id).superseded_by == berlin.id
    assert [m.value for m in ledger.facts("me", "city")] == ["Berlin"]
    assert ledger.proposals() == []


@pytest.mark.parametrize("offset", [0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4])
@pytest.mark.parametrize("edge", ["older ends", "older opens"])
def test_timestamp_wins_finds_its_winners_at_the_instant_it_is_stamped_with(
    open_ledger: OpenLedger, clock: ManualClock, offset: float, edge: str
) -> None:
    """An undated claim under ``timestamp_wins``, with a clock that moves a second at
    each reading, beside an older claim whose window ends or opens a few readings
    ahead. The winners were found at one reading and the window stored at the next:
    an older claim ending in between was refused as ``no_overlap`` for a write that
    named nothing, or made it a ``ConcurrencyConflict`` naming another writer; one
    opening in between was left current and then proposed as the pair it was. Now the
    write is judged at the window it stores."""
    start = clock()

    def ticking() -> Any:
        return clock.advance(seconds=1)

    ledger = open_ledger(namespace="acme", clock=ticking)
    edge_at = clock() + timedelta(seconds=offset)
    window = {"valid_until": edge_at} if edge == "older ends" else {"valid_from": edge_at}
    older = ledger.remember("Uses MySQL", subject="team", attribute="db", value="MySQL",
                            **({"valid_from": start - timedelta(days=1)} | window))  # fmt: skip
    newer = ledger.remember("Uses Postgres", subject="team", attribute="db", value="Postgres",
                            policy="timestamp_wins")  # fmt: skip
    overlaps = older.valid_until is None or older.valid_until > newer.valid_from
    clears = overlaps and older.valid_from < newer.valid_from  # the bar, at the stored window
    assert newer.supersedes == ([older.id] if clears else [])
    assert ledger.get(older.id).state == ("superseded" if clears else "current")
    assert ledger.proposals() == []  # a pair that clears the bar is superseded, not proposed


def test_a_retry_racing_its_first_attempt_returns_the_first_result(
    open_ledger: OpenLedger,
) -> None:
    ledger, rival = open_ledger(namespace="acme"), open_ledger(namespace="acme")
    keyed(ledger, "Lisbon", "Lisbon", MAR)
    request = {"policy": "timestamp_wins", "idempotency_key": "move-1"}
    first: list[Any] = []
    racing(ledger, lambda: first.append(keyed(rival, "Berlin", "Berlin", JUL, **request)))
    assert keyed(ledger, "Berlin", "Berlin", JUL, **request) == first[0]


def test_timestamp_wins_consolidates_in_one_atomic_append(ledger: Ledger) -> None:
    lisbon = keyed(ledger, "Lisbon", "Lisbon", MAR)
    porto = keyed(ledger, "Porto", "Porto", APR)
    before = event_count(ledger)
    berlin = keyed(ledger, "Berlin", "Berlin", JUL, policy="timestamp_wins")
    assert berlin.supersedes == [lisbon.id, porto.id]
    assert event_count(ledger) == before + 3
    assert [m.id for m in ledger.facts("me", "city")] == [berlin.id]
    assert [m.id for m in ledger.chain(lisbon.id)] == [lisbon.id, porto.id, berlin.id]
    assert ledger.proposals() == []


def test_timestamp_wins_in_one_batch_does_what_the_same_calls_do_one_by_one(
    open_ledger: OpenLedger,
) -> None:
    """Within ``remember_many`` an earlier item is a candidate like a stored memory, and
    a memory an earlier item superseded is no longer current: Bergen replaces Oslo and
    Tromso replaces Bergen, in one batch as in three calls."""

    def items(subject: str) -> list[dict[str, Any]]:
        moves = [("Oslo", JAN, "propose"), ("Bergen", MAR, "timestamp_wins"),
                 ("Tromso", "2026-05-01T00:00:00Z", "timestamp_wins")]  # fmt: skip
        return [{"content": f"HQ is in {city}", "subject": subject, "attribute": "city",
                 "value": city, "valid_from": start, "policy": policy}
                for city, start, policy in moves]  # fmt: skip

    ledger = open_ledger(namespace="acme")
    one_by_one = [ledger.remember(**item) for item in items("one")]
    before = event_count(ledger)
    batch = ledger.remember_many(items("batch"))
    assert event_count(ledger) == before + 5  # three assertions, two supersessions

    def shape(memories: list[Any]) -> list[tuple[Any, ...]]:
        place = {m.id: n for n, m in enumerate(memories)}
        return [(m.value, m.state, m.valid_until, [place[i] for i in m.supersedes],
                 place.get(m.superseded_by)) for m in memories]  # fmt: skip

    now_one = [ledger.get(m.id) for m in one_by_one]
    assert shape(batch) == shape(now_one) == shape([ledger.get(m.id) for m in batch])
    assert [m.value for m in ledger.facts("batch", "city")] == ["Tromso"]
    assert ledger.conflicts("batch") == [] and ledger.proposals() == []
    ledger.rebuild()
    assert shape([ledger.get(m.id) for m in batch]) == shape(now_one)


def test_timestamp_wins_in_one_batch_of_entity_claims_does_what_calls_one_by_one_do(
    open_ledger: OpenLedger,
) -> None:
    """The same for claims without a key, meeting by a shared entity: a claim an
    earlier item superseded meets no later item (the batch drops it from what later
    items meet, so a long batch does not walk every earlier claim)."""

    def items(who: str) -> list[dict[str, Any]]:
        return [{"content": f"{who} works from {city}", "entities": [who], "valid_from": start,
                 "policy": "timestamp_wins"}
                for city, start in (("Oslo", JAN), ("Bergen", MAR), ("Tromso", JUL))]  # fmt: skip

    ledger = open_ledger(namespace="acme")
    one_by_one = [ledger.remember(**item) for item in items("ann")]
    batch = ledger.remember_many(items("bob"))

    def shape(memories: list[Any]) -> list[tuple[Any, ...]]:
        place = {m.id: n for n, m in enumerate(memories)}
        return [(m.state, m.valid_until, [place[i] for i in m.supersedes],
                 place.get(m.superseded_by)) for m in memories]  # fmt: skip

    assert shape([ledger.get(m.id) for m in batch]) == shape([ledger.get(m.id) for m in one_by_one])
    assert [m.state for m in (ledger.get(m.id) for m in batch)] == [
        "superseded", "superseded", "current"]  # fmt: skip


def test_timestamp_wins_judges_undated_claims_where_the_log_records_them(
    open_ledger: OpenLedger, clock: ManualClock
) -> None:
    """An undated memory opens when it is recorded: at the clock's instant, or just
    after the log's last event when the clock stands still or lags (two writes in one
    tick, a host whose clock runs behind another's). The policy judges the bar there,
    as the proposals do, instead of at the clock's reading."""
    ahead = open_ledger(namespace="acme", clock=lambda: clock() + timedelta(seconds=5))
    ledger = open_ledger(namespace="acme")
    claim = {"subject": "team", "attribute": "database"}
    supabase = ahead.remember("The team uses Supabase", value="Supabase", **claim)
    aws = ledger.remember("The team uses AWS", value="AWS", policy="timestamp_wins", **claim)
    assert aws.supersedes == [supabase.id] and aws.valid_from > supabase.valid_from
    gcp = ledger.remember("The team uses GCP", value="GCP", policy="timestamp_wins", **claim)
    assert gcp.supersedes == [aws.id]  # the clock stood still between the two
    assert [m.value for m in ledger.facts("team", "database")] == ["GCP"]
    assert ledger.proposals() == [] and ledger.conflicts("team") == []


def test_timestamp_wins_leaves_memories_below_the_bar_alone(ledger: Ledger) -> None:
    other = keyed(ledger, "Lisbon", "Lisbon", MAR, subject="you")
    berlin = keyed(ledger, "Berlin", "Berlin", JUL, policy="timestamp_wins")
    assert berlin.supersedes == [] and ledger.get(other.id).state is State.CURRENT


# -------------------------------------------------------------- contradictions


def deadline(ledger: Ledger, value: str, start: str, confidence: float = 1.0, **extra: Any) -> Any:
    fields: dict[str, Any] = {"subject": "launch", "attribute": "deadline", **extra}
    return ledger.remember(f"deadline is {value}", value=value, valid_from=start,
                           confidence=confidence, **fields)  # fmt: skip


def test_resolution_by_recency_then_unresolved(ledger: Ledger) -> None:
    deadline(ledger, "Friday", MAR, 0.8)
    monday = deadline(ledger, "Monday", APR, 0.8)
    (conflict,) = ledger.conflicts()
    assert conflict.resolution == "by_recency"
    assert monday.id in [m.id for m in conflict.members]
    # Tied for the highest confidence, the member recency picks is the one named.
    assert conflict.highest_confidence.id == monday.id
    sunday = deadline(ledger, "Sunday", APR, 0.8)
    (conflict,) = ledger.conflicts("LAUNCH")
    assert conflict.resolution == "unresolved" and len(conflict.members) == 3
    assert conflict.highest_confidence.id == sunday.id  # opens last, recorded last


def test_what_is_not_a_contradiction(ledger: Ledger) -> None:
    deadline(ledger, "Friday", MAR)
    deadline(ledger, "Friday", APR)
    ledger.remember("standup", kind="event", subject="team", attribute="meeting", value="room 1",
                    occurred_at=MAR)  # fmt: skip
    ledger.remember("standup", kind="event", subject="team", attribute="meeting", value="room 2",
                    occurred_at=MAR)  # fmt: skip
    old = deadline(ledger, "Monday", MAR, subject="release")
    ledger.revise(old.id, "deadline is Tuesday", value="Tuesday", at=JUL)
    assert ledger.conflicts() == []
    assert ledger.conflicts("nobody") == []


def test_conflicts_are_separate_per_subject_and_attribute(ledger: Ledger) -> None:
    deadline(ledger, "Friday", MAR)
    deadline(ledger, "Monday", MAR)
    ledger.remember("budget 10", subject="launch", attribute="budget", value=10, valid_from=MAR)
    ledger.remember("budget 12", subject="launch", attribute="budget", value=12, valid_from=MAR)
    assert sorted(c.attribute for c in ledger.conflicts("launch")) == ["budget", "deadline"]


def test_the_namespace_s_conflicts_are_those_of_every_subject_read_whole(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace's conflicts are read only for the subjects where two claims of a key
    hold different stored values over overlapping windows; reading every subject finds
    the same sets, also where values differ only in spelling ({"a": 1, "b": 2} and
    {"b": 2, "a": 1}), windows only touch, or claims were revised or archived."""
    rng = random.Random(17)
    values: list[Any] = ["red", "blue", 3, {"a": 1, "b": 2}, {"b": 2, "a": 1}]
    months = [MAR, APR, JUL, "2026-10-01T00:00:00Z"]
    drawn = [(rng.choice(["fact", "fact", "event"]), rng.randrange(3)) for _ in range(80)]
    ledger.remember_many(
        {"content": f"claim {n}", "subject": f"s{rng.randrange(12)}",
         "attribute": rng.choice(["colour", "size"]), "value": rng.choice(values),
         "kind": kind, "valid_from": months[start],
         "valid_until": None if kind == "event" else rng.choice([None, *months[start + 1 :]])}
        for n, (kind, start) in enumerate(drawn)
    )  # fmt: skip
    clock.advance(days=1)
    claims = [hit.memory for hit in ledger.search("claim", limit=200)]
    for n, older in enumerate([m for m in claims if m.kind != "event"][::6]):
        end = older.valid_until or older.valid_from + timedelta(days=60)
        middle = older.valid_from + (end - older.valid_from) / 2
        ledger.revise(older.id, f"{older.content} revised", value=f"revised {n % 2}", at=middle)
    for memory in claims[1::9]:
        if ledger.get(memory.id).state is State.CURRENT:
            ledger.archive(memory.id)
    # A subject whose one contradiction has a superseded side (MySQL, revised from July,
    # against Oracle from April to June): its current claims alone never overlap.
    key = {"subject": "s12", "attribute": "colour"}
    mysql = ledger.remember("MySQL", value="MySQL", valid_from=MAR, **key)
    ledger.revise(mysql.id, "Postgres", value="Postgres", at=JUL)
    ledger.remember("Oracle", value="Oracle", valid_from=APR, valid_until=JUN, **key)

    def summary() -> list[tuple[str, str, list[Any], Any, str]]:
        return [(c.subject, c.attribute, [m.id for m in c.members], c.highest_confidence.id,
                 c.resolution) for c in ledger.conflicts()]  # fmt: skip

    found = summary()
    every = lambda sql, namespace: [f"s{n}" for n in range(13)]  # noqa: E731
    monkeypatch.setattr(recall, "_disagreeing_subjects", every)
    assert summary() == found
    assert len(found) >= 5 and "s12" in {subject for subject, *_ in found}


def test_one_and_one_point_zero_are_the_same_value(ledger: Ledger) -> None:
    """JSON does not tell 1 from 1.0: two claims differing only so neither contradict
    nor replace each other (a revision so is refused as the same claim)."""
    first = ledger.remember("score 1", subject="game", attribute="score", value={"n": 1},
                            valid_from=MAR)  # fmt: skip
    ledger.remember("score 1", subject="game", attribute="score", value={"n": 1.0},
                    valid_from=APR)  # fmt: skip
    assert ledger.conflicts() == [] and ledger.proposals() == []
    with pytest.raises(SupersessionRefused) as refused:
        ledger.revise(first.id, "score 1", value={"n": 1.0}, at=JUL)
    assert refused.value.reason == "identical_claim"
    assert ledger.remember("score 2", subject="game", attribute="score", value={"n": 2},
                           valid_from=APR).value == {"n": 2}  # fmt: skip
    assert len(ledger.conflicts()) == 1


def test_a_superseded_claim_still_contradicts_what_it_disagreed_with_before(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Friday is replaced by Monday from December, and an unlinked Monday holds from
    April: from April to December the ledger holds both, a contradiction, before
    December comes and after (a supersession ends Friday's window; it does not withdraw
    what Friday said before)."""
    clock.set("2026-08-01T00:00:00+00:00")
    friday = ledger.remember("deadline Friday", subject="launch", attribute="deadline",
                             value="Friday", valid_from=MAR)  # fmt: skip
    ledger.revise(friday.id, "deadline Monday from December", value="Monday",
                  at="2026-12-01T00:00:00Z")  # fmt: skip
    monday = ledger.remember("deadline Monday", subject="launch", attribute="deadline",
                             value="Monday", valid_from=APR)  # fmt: skip
    assert {m.value for m in ledger.facts("launch", "deadline")} == {"Friday", "Monday"}
    for conflicts in (ledger.conflicts(), ledger.conflicts("launch")):
        (conflict,) = conflicts
        assert [m.id for m in conflict.members] == [friday.id, monday.id]
        assert conflict.members[0].state is State.SUPERSEDED
    clock.set("2026-12-02T00:00:00+00:00")
    assert {m.value for m in ledger.facts("launch", "deadline", as_of=JUL)} == {"Friday", "Monday"}
    for conflicts in (ledger.conflicts(), ledger.conflicts("launch")):
        (conflict,) = conflicts
        assert [m.id for m in conflict.members] == [friday.id, monday.id]


def test_a_conflict_does_not_depend_on_how_a_window_closed(ledger: Ledger) -> None:
    """MySQL from March, replaced by Postgres from July, and an unlinked Oracle from April
    to June: in May the ledger holds MySQL and Oracle, whether MySQL's window was closed
    by its revision or given its end when it was written."""
    claim = {"subject": "atlas", "attribute": "db"}
    mysql = ledger.remember("db is MySQL", value="MySQL", valid_from=MAR, **claim)
    ledger.revise(mysql.id, "db is Postgres", value="Postgres", at=JUL)
    oracle = ledger.remember("db is Oracle", value="Oracle", valid_from=APR,
                             valid_until="2026-06-01T00:00:00Z", **claim)  # fmt: skip
    ended = ledger.remember("db is MySQL", value="MySQL", valid_from=MAR, valid_until=JUL,
                            subject="lumen", attribute="db")  # fmt: skip
    ledger.remember("db is Oracle", value="Oracle", valid_from=APR,
                    valid_until="2026-06-01T00:00:00Z", subject="lumen", attribute="db")  # fmt: skip
    assert {m.value for m in ledger.facts("atlas", "db", as_of="2026-05-01T00:00:00Z")} == {
        "MySQL", "Oracle"}  # fmt: skip
    members = {c.subject: [m.id for m in c.members] for c in ledger.conflicts()}
    assert members["atlas"] == [mysql.id, oracle.id] and members["lumen"][0] == ended.id
    assert [m.id for m in ledger.conflicts("atlas")[0].members] == [mysql.id, oracle.id]


# ------------------------------------------------------------------ causality


def test_vector_clocks_say_who_knew_what(open_ledger: OpenLedger) -> None:
    planner = open_ledger(namespace="acme", actor="planner-bot")
    executor = open_ledger(namespace="acme", actor="executor-bot")
    friday = planner.remember("deadline is Friday")
    assert friday.vector_clock == {"planner-bot": 1}
    seen = executor.head()
    blind = executor.remember("deadline is Monday")
    aware = executor.remember("deadline is Tuesday", observed_position=seen)
    assert blind.vector_clock == {"executor-bot": 1}
    assert aware.vector_clock == {"executor-bot": 2, "planner-bot": 1}
    assert planner.knows(aware.id, friday.id) and not planner.knows(blind.id, friday.id)
    assert not planner.knows(friday.id, aware.id)
    assert planner.history(aware.id).memory.vector_clock == aware.vector_clock
    before = planner.get(aware.id)
    planner.rebuild()
    assert planner.get(aware.id) == before


def test_knows_refuses_what_get_refuses(open_ledger: OpenLedger) -> None:
    """A memory ``get`` would not show (unknown, in another namespace, forgotten softly or
    hard) is not compared either: ``knows`` refuses it as ``get`` does, either side."""
    ledger = open_ledger(namespace="acme")
    other = open_ledger(namespace="elsewhere").remember("the office is in Oslo")
    first, second = ledger.remember("deadline is Friday"), ledger.remember("deadline is Monday")
    soft, hard = ledger.remember("budget is 10k"), ledger.remember("budget is 20k")
    ledger.forget(soft.id)
    ledger.forget(hard.id, hard=True)
    assert ledger.knows(second.id, first.id) and not ledger.knows(first.id, second.id)
    for hidden in (uuid4(), other.id, soft.id, hard.id):
        with pytest.raises(NotFound) as refused:
            ledger.get(hidden)
        for pair in ((hidden, first.id), (first.id, hidden)):
            with pytest.raises(NotFound) as also:
                ledger.knows(*pair)
            assert str(also.value) == str(refused.value)
