"""How a search question is split into the terms each backend is asked for."""

from __future__ import annotations

import pytest

from erstwhile.projections.search import query_terms


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
    ],
)
def test_each_backend_is_asked_for_the_words_its_index_holds(
    question: str, sqlite: list[str], postgresql: list[str]
) -> None:
    assert query_terms(question, fold=False) == sqlite
    assert query_terms(question, fold=True) == postgresql
