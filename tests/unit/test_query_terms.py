"""How a search question is split into terms, and a document into the words the
indexes hold: alike on both backends (each backend's own tokenizer meets words it need
not split again)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erstwhile.projections.search import WORD_CHARS, folded, indexed_text, query_terms, words


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        ("The team's DATABASE", ["team", "database"]),
        ("what's new, don't know", ["new", "know"]),
        ("rendez-vous à Oslo", ["rendez", "vous", "oslo"]),
        ("İstanbul", ["istanbul"]),
        ("Straße strasse", ["strasse"]),
        ("m² m2", ["m2"]),
        ("café Café CAFÉ", ["cafe"]),
        # Letters with two accents lose both.
        ("Hà Nội, Việt Nam", ["ha", "noi", "viet", "nam"]),
        # One character that folds into four words (U+FDFA): four terms, none with a space.
        ("\ufdfa", ["صلى", "الله", "عليه", "وسلم"]),
        ("the of and", []),
        # An underscore separates words, as in the documents: stop words stay out.
        ("to_do the_", []),
        ("cat_mat x_cat", ["cat", "mat", "x"]),
        # An accent typed as a combining mark stays in its word.
        ("nai\u0308ve", ["naive"]),
        # Marks with no composed form too, however they were typed.
        ("\u1eb9\u0300k\u1ecd\u0301", ["eko"]),
        ("e\u0323\u0300ko\u0323\u0301", ["eko"]),
        # A vowel sign belongs to its word: "water" is one term, not its consonants.
        ("पानी", ["पानी"]),
        # A newer emoji, a bidi isolate and a currency sign separate words.
        ("Shipped🙂 \u2068Alice\u2069 price₽500", ["shipped", "alice", "price", "500"]),
    ],
)
def test_a_question_is_asked_for_its_folded_words(question: str, terms: list[str]) -> None:
    assert query_terms(question) == terms


@pytest.mark.parametrize(
    ("text", "indexed"),
    [
        # Composed, split and folded, as a question is.
        ("Herr Mu\u0308ller", "herr muller"),
        ("\u0438\u0306\u043e\u0433\u0443\u0440\u0442", "иогурт"),
        ("e\u0323\u0300ko\u0323\u0301!", "eko"),
        # Split, then folded: a sign that folds into letters is no part of the word.
        ("Erstwhile\u2122 notes", "erstwhile notes"),
        ("alice@example.com, to_do", "alice example com to do"),
        ("Thinking🤔about rust 👍🏽approved", "thinking about rust approved"),
        ("नीति आयोग", "नीति आयोग"),
    ],
)
def test_a_document_is_indexed_as_its_folded_words(text: str, indexed: str) -> None:
    assert indexed_text(text) == indexed


def test_a_word_longer_than_the_indexes_keep_is_cut_alike_in_both() -> None:
    """PostgreSQL indexes no lexeme over 2,047 bytes: a longer word was found on SQLite
    alone. Documents and questions cut it at the same length."""
    long = "x" * (WORD_CHARS + 100)
    wide = "\U00020000" * (WORD_CHARS + 1)  # a CJK ideograph, 4 bytes of UTF-8
    assert indexed_text(f"a {long} b") == f"a {'x' * WORD_CHARS} b"
    assert query_terms(long) == ["x" * WORD_CHARS]
    assert [len(term.encode()) for term in query_terms(wide)] == [4 * WORD_CHARS]
    assert 4 * WORD_CHARS <= 2047
    assert indexed_text(wide).split() == query_terms(wide)


@given(st.text())
def test_a_document_holds_its_own_question_s_terms_however_it_was_composed(text: str) -> None:
    """A document is read as a question is, composed or decomposed alike: each term of a
    question asking for the whole text is a word of its document, whichever form each
    was typed in."""
    document = indexed_text(text)
    held = set(document.split())
    assert all(word and " " not in word for word in held)
    for form in ("NFC", "NFD"):
        assert indexed_text(unicodedata.normalize(form, text)) == document
        assert set(query_terms(unicodedata.normalize(form, text))) <= held


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_is_indexed_as_the_words_of_any_other_text_are(text: str) -> None:
    """Documents in ASCII take a shorter way than the words and folding that any other
    text goes through; it gives the same."""
    assert indexed_text(text) == " ".join(folded(" ".join(words(text))))
