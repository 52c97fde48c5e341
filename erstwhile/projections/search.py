"""The search projection: full-text over a memory's content, subject, attribute, value
and entities, on SQLite FTS5 (BM25) or PostgreSQL ``tsvector`` (GIN, ``ts_rank``).

A query matches a memory when they share any meaningful term: stop words are dropped,
the remaining terms are OR-ed, and the ranking rewards memories that share more of them.
So a question in plain words ("what database does the team use") finds "The team moved
to AWS".
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from erstwhile.domain.events import Asserted, Forgotten, LedgerEvent
from erstwhile.eventstore import RecordedEvent, Sql
from erstwhile.projections.base import Projection

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads best as text
)
WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """Return the meaningful terms of a query: words, case-folded, without stop words."""
    seen: dict[str, None] = {}
    for word in WORD.findall(query.casefold()):
        if word not in STOP_WORDS and word != "_":
            seen.setdefault(word, None)
    return list(seen)


def document(event: Asserted) -> str:
    """Return the text a memory is found by."""
    parts = [event.content, event.subject or "", event.attribute or "", *event.entities]
    if event.value is not None:
        value = event.value if isinstance(event.value, str) else orjson.dumps(event.value).decode()
        parts.append(value)
    return " ".join(part for part in parts if part)


class SearchProjection(Projection):
    """One full-text row per memory; the SQL differs per backend."""

    name = "search"
    version = 1
    tables = ("memory_search",)

    def create(self, sql: Sql) -> None:
        if self.dialect == "sqlite":
            sql.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS memory_search USING fts5("
                "memory_id UNINDEXED, body, tokenize = 'porter unicode61')"
            )
            return
        sql.execute(
            "CREATE TABLE IF NOT EXISTS memory_search (memory_id TEXT PRIMARY KEY, "
            "body TSVECTOR NOT NULL)"
        )
        sql.execute(
            "CREATE INDEX IF NOT EXISTS memory_search_body ON memory_search USING GIN (body)"
        )

    def drop(self, sql: Sql) -> None:
        sql.execute("DROP TABLE IF EXISTS memory_search")

    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        if isinstance(event, Forgotten) and event.hard:
            self._erase(sql, str(record.memory_id))
            return
        if not isinstance(event, Asserted) or event.erased:
            return
        if self.dialect == "sqlite":
            statement = "INSERT INTO memory_search (memory_id, body) VALUES (?, ?)"
        else:
            statement = (
                "INSERT INTO memory_search (memory_id, body) VALUES (?, to_tsvector('english', ?))"
            )
        sql.execute(statement, (str(record.memory_id), document(event)))

    def _erase(self, sql: Sql, memory_id: str) -> None:
        """Remove a memory's entry; on SQLite also merge the index so no token survives."""
        sql.execute("DELETE FROM memory_search WHERE memory_id = ?", (memory_id,))
        if self.dialect == "sqlite":
            sql.execute("INSERT INTO memory_search (memory_search) VALUES ('optimize')")

    def match(self, terms: list[str]) -> tuple[str, str, list[Any]]:
        """Return the join condition, the score expression and their parameters."""
        if self.dialect == "sqlite":
            expression = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
            return "memory_search MATCH ?", "-bm25(memory_search)", [expression]
        expression = " | ".join(terms)
        return (
            "s.body @@ to_tsquery('english', ?)",
            "ts_rank(s.body, to_tsquery('english', ?))",
            [expression, expression],
        )
