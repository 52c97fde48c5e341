"""How a search question is split into the terms each backend is asked for."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erstwhile.projections.search import folded, indexed_text, query_terms, words


@pytest.mark.parametrize(
    ("question", "sqlite", "postgresql"),
    [
        ("The team's DATABASE", ["team", "DATABASE"], ["team", "database"]),
        ("what's new, don't know", ["new", "know"], ["new", "know"]),
        ("rendez-vous à Oslo", ["rendez", "vous", "Oslo"], ["rendez", "vous", "oslo"]),
        ("İstanbul", ["İstanbul"], ["istanbul"]),
        # SQLite's tokenizer tells these apart, so each is asked for; folded, they are one.
        ("Straße strasse", ["Straße", "strasse"], ["strasse"]),
        ("m² m2", ["m²", "m2"], ["m2"]),
        ("café Café CAFÉ", ["café"], ["cafe"]),
        # One character that folds into four words (U+FDFA): four terms, none with a space.
        ("\ufdfa", ["\ufdfa"], ["صلى", "الله", "عليه", "وسلم"]),
        ("the of and", [], []),
        # An underscore separates words, as in the documents: stop words stay out.
        ("to_do the_", [], []),
        ("cat_mat x_cat", ["cat", "mat", "x"], ["cat", "mat", "x"]),
        # An accent typed as a combining mark stays in its word.
        ("nai\u0308ve", ["naïve"], ["naive"]),
        # Marks with no composed form too, however they were typed.
        ("\u1eb9\u0300k\u1ecd\u0301", ["\u1eb9\u0300k\u1ecd\u0301"], ["eko"]),
        ("e\u0323\u0300ko\u0323\u0301", ["\u1eb9\u0300k\u1ecd\u0301"], ["eko"]),
    ],
)
def test_each_backend_is_asked_for_the_words_its_index_holds(
    question: str, sqlite: list[str], postgresql: list[str]
) -> None:
    assert query_terms(question, fold=False) == sqlite
    assert query_terms(question, fold=True) == postgresql


@pytest.mark.parametrize(
    ("text", "sqlite", "postgresql"),
    [
        # Composed, as a question is: the index never meets a decomposed word. SQLite's
        # tokenizer splits the text, PostgreSQL is given it split.
        ("Herr Mu\u0308ller", "Herr Müller", "herr muller"),
        ("\u0438\u0306\u043e\u0433\u0443\u0440\u0442", "йогурт", "иогурт"),
        ("e\u0323\u0300ko\u0323\u0301!", "\u1eb9\u0300k\u1ecd\u0301!", "eko"),
        # Split, then folded: a sign that folds into letters is no part of the word.
        ("Erstwhile\u2122 notes", "Erstwhile\u2122 notes", "erstwhile notes"),
        ("alice@example.com, to_do", "alice@example.com, to_do", "alice example com to do"),
    ],
)
def test_each_backend_indexes_a_document_read_as_a_question_is(
    text: str, sqlite: str, postgresql: str
) -> None:
    assert indexed_text(text, fold=False) == sqlite
    assert indexed_text(text, fold=True) == postgresql


@given(st.text())
def test_a_document_holds_its_own_question_s_terms_however_it_was_composed(text: str) -> None:
    """A document is read as a question is, composed or decomposed alike: each term of a
    question asking for the whole text is a word of its document (on SQLite, as it is
    split), whichever form each was typed in."""
    for fold in (False, True):
        document = indexed_text(text, fold)
        held = set(document.split() if fold else words(document))
        for form in ("NFC", "NFD"):
            assert indexed_text(unicodedata.normalize(form, text), fold) == document
            assert set(query_terms(unicodedata.normalize(form, text), fold)) <= held


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_is_indexed_as_the_words_of_any_other_text_are(text: str) -> None:
    """PostgreSQL's documents in ASCII take a shorter way than the words and folding
    that any other text goes through; it gives the same."""
    assert indexed_text(text, fold=True) == " ".join(folded(" ".join(words(text))))
