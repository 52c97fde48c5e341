"""The search projection: full-text over a memory's content, subject, attribute, value
and entities, on SQLite FTS5 (BM25) or PostgreSQL ``tsvector`` (GIN, ``ts_rank``).

A query matches a memory when they share any meaningful term: stop words are dropped and
the remaining terms are OR-ed. Memories sharing more of the terms rank higher, always;
among those sharing as many, the text score (BM25 or ``ts_rank`` of the OR-ed terms)
decides. So a question in plain words ("what database does the team use") finds "The team
moved to AWS", and a search never has to score every memory sharing one common word.

The projection keeps two indexes: ``memory_search`` holds every memory not
hard-forgotten, ``memory_search_live`` only those that may still be true now (see
:meth:`SearchProjection.apply_many`), which is what a default search ranks. On SQLite
they are FTS5 tables whose rowid is the log position of the memory's ``Asserted`` event
(``memories.position``), and ``memory_search_keys`` maps a memory id to its rowid, for
the later events; on PostgreSQL they are tables keyed by memory id with a GIN index.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from erstwhile.domain.events import Archived, Asserted, Forgotten, LedgerEvent, Superseded
from erstwhile.domain.time import end_to_micros, to_micros
from erstwhile.eventstore import RecordedEvent, Sql
from erstwhile.eventstore.backend import Backend
from erstwhile.eventstore.json_rows import json_arrays
from erstwhile.projections.base import Folded, Projection
from erstwhile.projections.batch import BufferedSql
from erstwhile.projections.shadow import ShadowSql

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing don down during each few
    for from further had has have having he her here hers herself him himself his how i
    if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own s same she should so some such t
    than that the their theirs them themselves then there these they this those through
    to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads best as text
)
"""PostgreSQL's English stop words (its ``english.stop``), which its parser drops from
queries and documents alike, plus "could" and "would". SQLite's tokenizer keeps every
word, so the same list is dropped from queries on both backends: without ``s``, ``t``
and ``don``, a question with a contraction ("what's", "don't") matched every memory
with a possessive on SQLite and none on PostgreSQL."""
LETTERS_AND_DIGITS = re.compile(r"[^\W_]+", re.UNICODE)
SEPARATED = re.compile(r"([\W_]+)", re.UNICODE)
"""Splits text into words and, kept, the separators between them (a separator may start
with combining marks, which belong to the word before it)."""
ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
"""Every ASCII character but a letter or a digit, as a space: ASCII text's words, as
:data:`LETTERS_AND_DIGITS` finds them, are what splitting it on whitespace then leaves."""
MARKED = re.compile(r"[^\W_][^\w\x00-\x7f]", re.UNICODE)
"""A letter or digit followed by what may be a combining mark (a character neither ASCII
nor a letter, digit or ``_``): text without one is split by :data:`LETTERS_AND_DIGITS`
alone."""
WORD_CHARS = 500
"""The longest word the indexes hold (a longer one is cut there, in documents and
questions alike): PostgreSQL indexes no lexeme over 2,047 bytes, which 500 characters of
UTF-8 never reach, and SQLite is held to the same so that both find the same."""
TOKENIZER = "porter ascii"
"""SQLite: the FTS5 tokenizer of both indexes, which are given words already split and
folded (see :func:`indexed_text`): ``ascii`` splits them at the spaces alone (it takes
every other character but an ASCII one for part of a word), ``porter`` stems them."""
FULL, LIVE, KEYS = "memory_search", "memory_search_live", "memory_search_keys"
UPKEEP = "memory_search_upkeep"
FTS5_PARTS = ("data", "idx", "content", "docsize", "config")
"""The suffixes of the tables FTS5 makes beside each full-text table."""
PENDING = "memory_search_pending"
"""SQLite: the live index's rows a shadow build has put off (see
:class:`DeferredLiveWrites`); empty outside a build."""
MERGE_PENDING = (
    "SELECT gin_clean_pending_list(i.indexrelid) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
    f"WHERE i.indrelid IN ('{FULL}'::regclass, '{LIVE}'::regclass) AND a.amname = 'gin' "
    "AND pg_has_role(c.relowner, 'USAGE')"
)
"""PostgreSQL: merge the search tables' GIN pending lists (the indexes are found through
their tables, whose names a rebuild's shadow changes). Only an index's owner may, so
the statement skips indexes its role does not own rather than fail. (Today a role that
does not own the tables cannot open a ledger at all: opening creates missing indexes;
see decisions.md, "Stores".)"""
MERGE_PENDING_ROWS = 64
"""PostgreSQL: how many rows a process adds to the GIN pending lists before its write
merges them. Merging costs about 0.12 ms of server time however few rows wait (for one
``remember``, 45% of the server's work), and a search scans what waits (about 2 µs a
row): a batch of 64 or more merges at once, a single ``remember`` once in 64."""
INSERT_FULL_ROWS = (
    f"INSERT INTO {FULL} (memory_id, position, body) "
    "SELECT r->>0, (r->>1)::bigint, to_tsvector('english', r->>2) "
    "FROM jsonb_array_elements(?::jsonb) AS r"
)
"""PostgreSQL: a fold's rows of the full index, as one statement with the rows in one
JSON array (several past :data:`~erstwhile.eventstore.json_rows.JSON_ARRAY_BYTES`). A
statement per row (in one pipeline) cost the server 31.5 µs a memory in bulk writes,
against 22 for this, and the client 7% more instructions in all: psycopg's pipeline
handles each statement and its result on its own."""
INSERT_INDEXED_ROWS = (
    f"WITH indexed AS ({INSERT_FULL_ROWS} RETURNING memory_id, position, body) "
    f"INSERT INTO {LIVE} (memory_id, position, body) "
    "SELECT i.memory_id, i.position, i.body FROM indexed AS i "
    "JOIN jsonb_array_elements_text(?::jsonb) AS live(id) ON live.id = i.memory_id"
)
"""PostgreSQL: :data:`INSERT_FULL_ROWS`, and the rows of those memories among them that
are live (the ids, a JSON array) copied into the live table by the same statement: each
``tsvector`` is computed once, and psycopg handles one statement where it handled two
(the copy, sent after the rows, read them back from the full table). The ids are
joined (a hash join), not tested with ``= ANY``, which compares each row with every id:
for 500 rows, 8.4 ms of the server's time against 6.6 at the median."""
MEMORY_ROWS = "memories m JOIN memory_versions v ON v.memory_id = m.id"
INSERT_KEY = f"INSERT INTO {KEYS} (memory_id, position) VALUES (?, ?)"
INSERT_FULL = f"INSERT INTO {FULL} (rowid, body) VALUES (?, ?)"
LIVE_AUTOMERGE = 2
"""FTS5 merges the live index's segments in pairs rather than fours (its default). The
live index loses most rows it ever held to supersession; a deleted row's entries stay in
the older segments, and queries walk them, until merges drop them, so merging sooner
keeps the live index close to compact (at 100k memories: half the pages, a search p50
about 1.5x lower)."""
UPKEEP_SHARE = 4
UPKEEP_FLOOR = 1_000
"""The live index is optimized (merged into one segment, which drops every removed
memory's entries) once the removals since it last was reach a quarter of the memories it
then held, and at least ``UPKEEP_FLOOR``. Merging in pairs still leaves the removed
memories' entries in the oldest, largest segment, which only an optimize rewrites: at
100k memories (20k live, 80k removed) a search walked 2.4 times the pages and took 1.8
times as long (p50 4.2 against 2.3 ms) as on the optimized index. An optimize costs about
3.5 ms per thousand live memories, so about 15 µs per removal, paid by the write whose
removals cross the budget."""


def without_accents(text: str) -> str:
    """Return ``text`` decomposed (NFKD) without its diacritics (``café`` -> ``cafe``,
    ``Việt`` -> ``Viet``): every mark of a non-zero combining class goes (an Indic
    virama or nukta with the accents), those of class 0 (a Devanagari vowel sign) stay.
    Documents and questions lose the same marks."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def composed(text: str) -> str:
    """Return ``text`` composed (NFC), the one form a search reads, in a question and in a
    document alike: ``naïve`` typed with its ``ï`` as one character or as ``i`` then
    U+0308 is one word, and so are Hangul typed as syllables or as jamo."""
    return unicodedata.normalize("NFC", text)


def words(text: str) -> list[str]:
    """Return the words of ``text``, :func:`composed` first: its runs of letters and
    digits (anything else separates them, ``_`` included), each with the combining marks
    that follow it (an accent with no composed form, as in Yoruba ``ẹ̀kọ́``, splits no
    word in two)."""
    text = composed(text)
    if text.isascii() or not MARKED.search(text):
        return LETTERS_AND_DIGITS.findall(text)
    pieces = SEPARATED.split(text)  # a word, a separator, a word, ...: words may be empty
    found = [pieces[0]]
    for separator, word in zip(pieces[1::2], pieces[2::2], strict=True):
        marks = leading_marks(separator) if found[-1] else 0
        if marks == len(separator):  # marks alone: one word goes on
            found[-1] += separator + word
        else:
            found[-1] += separator[:marks]
            found.append(word)
    return [word for word in found if word]


def leading_marks(text: str) -> int:
    """Return how many combining marks (Unicode category M) ``text`` starts with."""
    count = 0
    for char in text:
        if not unicodedata.category(char).startswith("M"):
            break
        count += 1
    return count


def folded(word: str) -> list[str]:
    """Return a word as the indexes hold it: case-folded, without accents, at most
    :data:`WORD_CHARS` long; folding may make several words of it (U+FDFA is a phrase
    of four)."""
    return [piece[:WORD_CHARS] for piece in words(without_accents(word.casefold()))]


def indexed_text(text: str) -> str:
    """Return what an index is given for a document: its :func:`words`, :func:`folded`,
    as a question's terms are, one space between two. Only the index holds it: a
    memory's fields are kept as they were written.

    Both backends' own tokenizers are given words they need not split again: SQLite's
    (FTS5 ``ascii``) splits at the spaces alone, and PostgreSQL's parser, which keeps
    an e-mail address, a host, a path or ``2.1`` as one token that no query word
    equals, meets none. Until search version 7 SQLite's ``unicode61`` tokenizer split
    the text itself, with Unicode 6.1's tables: a word next to a newer emoji
    (``Shipped🙂``) or a bidi mark was one token with it, found by no question, and
    letters with two accents (``Việt``) kept them."""
    if text.isascii():
        # Composed, split and folded in three passes of C instead of a regular
        # expression's match at a time, twice over: 1.7 against 6.7 µs for 110
        # characters, a twentieth of the client's work per memory in a bulk write.
        found = text.lower().translate(ASCII_SEPARATORS).split()
        if len(text) > WORD_CHARS:
            found = [word[:WORD_CHARS] for word in found]
        return " ".join(found)
    # Folded at once: no word folds into a space, so each one's pieces stay apart.
    return " ".join(folded(" ".join(words(text))))


def query_terms(query: str) -> list[str]:
    """Return the meaningful terms of a query: its :func:`words`, each :func:`folded` as
    :func:`indexed_text` folds the documents' (a word may fold into several), each once,
    without stop words."""
    terms: dict[str, None] = {}
    for word in words(query):
        for piece in folded(word):
            if piece not in STOP_WORDS:
                terms.setdefault(piece)
    return list(terms)


def document(event: Asserted) -> str:
    """Return the text a memory is found by, as written (see :func:`indexed_text`)."""
    parts = [event.content, event.subject or "", event.attribute or "", *event.entities]
    if event.value is not None:
        value = event.value if isinstance(event.value, str) else orjson.dumps(event.value).decode()
        parts.append(value)
    return " ".join(part for part in parts if part)


def members(mask: int, terms: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``terms`` into those whose bit is set in ``mask`` and the others."""
    inside = [term for i, term in enumerate(terms) if mask >> i & 1]
    outside = [term for i, term in enumerate(terms) if not mask >> i & 1]
    return inside, outside


def shared_mask(body: str, count: int) -> str:
    """PostgreSQL: the set of ``count`` terms (one ``?`` each, bit ``i`` for the i-th)
    that the tsvector ``body`` holds, as an integer."""
    return " + ".join(
        f"(CASE WHEN {body} @@ to_tsquery('english', ?) THEN {1 << i} ELSE 0 END)"
        for i in range(count)
    )


@dataclass(frozen=True)
class Source:
    """Where a search statement's rows come from and how they score:
    ``SELECT m.id, ..., {score} AS score FROM {source} WHERE {condition} AND ...``.

    ``source`` reaches ``memories m`` and ``memory_versions v``; ``params`` are the
    score's, the source's and the condition's, in that order.
    """

    score: str
    source: str
    condition: str
    params: list[Any]


class LiveWrites:
    """A batch's writes to the live index: on SQLite first the removals, then the
    additions; on PostgreSQL the additions go with the full index's rows, in one
    statement (:meth:`take_added`), and the removals after.

    On SQLite they are made in ascending rowid order. FTS5 gathers a transaction's
    postings in memory in rowid order and writes them out as a new segment whenever a
    write comes with a smaller rowid than the one before. Made in log order, every
    supersession's removal of an older memory would follow the addition of a newer one
    and write a segment of its own (about 80 µs each, and the merges after). A memory
    added and removed in the same batch is never written at all. Everything removed was
    added in an earlier batch (at smaller positions), so the index ends the same either
    way.
    """

    def __init__(self, sqlite: bool) -> None:
        self.sqlite = sqlite
        self._gather_again()

    def _gather_again(self) -> None:
        """Forget the writes made, to gather the next ones."""
        self.added: dict[str, tuple[int, str]] = {}
        self.removed: set[str] = set()
        self.dropped: set[str] = set()

    def add(self, memory_id: str, position: int, text: str) -> None:
        self.added[memory_id] = (position, text)

    def remove(self, memory_id: str) -> None:
        if self.added.pop(memory_id, None) is not None:
            self.dropped.add(memory_id)
        elif memory_id not in self.dropped:
            self.removed.add(memory_id)

    def write(self, sql: Sql) -> int:
        """Make the writes gathered so far (on PostgreSQL the removals: the additions
        went with the full index's rows), and start gathering again; return how many
        memories were taken out of the index."""
        if not self.sqlite:
            return self._write_postgres(sql)
        positions = self._removed_positions(sql)
        sql.executemany(f"DELETE FROM {LIVE} WHERE rowid = ?", [(p,) for p in positions])
        if self.added:
            sql.executemany(
                f"INSERT INTO {LIVE} (rowid, body) VALUES (?, ?)", list(self.added.values())
            )
        upkeep(sql, len(positions))
        self._gather_again()
        return len(positions)

    def _removed_positions(self, sql: Sql) -> list[int]:
        """SQLite: the live index's rowids (positions) of the memories removed, ascending."""
        if not self.removed:
            return []
        sql.execute(
            f"SELECT position FROM {KEYS} WHERE memory_id IN (SELECT value FROM json_each(?))",
            (orjson.dumps(sorted(self.removed)).decode(),),
        )
        return sorted(row["position"] for row in sql.fetchall())

    def _write_postgres(self, sql: Sql) -> int:
        """PostgreSQL's live table is keyed by memory id; the order does not matter. Its
        additions went in with the full table's rows (:meth:`take_added`): every memory
        added has a row there, written in the same call to ``_write_live``. What is
        left are the removals."""
        assert not self.added, "live additions go with the full index's rows"
        removals = len(self.removed)
        if self.removed:
            sql.executemany(
                f"DELETE FROM {LIVE} WHERE memory_id = ?", [(i,) for i in sorted(self.removed)]
            )
        self._gather_again()
        return removals

    def take_added(self) -> str | None:
        """PostgreSQL: the ids of the memories added, as a JSON array for
        :data:`INSERT_INDEXED_ROWS` (not a ``text[]`` parameter, which psycopg spells out
        in Python, a regular expression matched against each id), or None when there
        are none; they are no longer this batch's to write."""
        if not self.added:
            return None
        ids = orjson.dumps(sorted(self.added)).decode()
        self.added.clear()
        return ids


class DeferredLiveWrites(LiveWrites):
    """SQLite, while a shadow build catches up with the log: the live index's writes
    kept as the positions it will hold (in :data:`PENDING`, a plain table, so the build's
    memory stays bounded and a rolled-back batch takes its rows with it), and made once,
    in rowid order, when the build has caught up (:meth:`SearchProjection.caught_up`).
    Writing them batch by batch cost 7% of a rebuild's instructions, in additions most
    of which the next versions' supersessions removed again; built at once, the index
    also starts compact, as after an optimize."""

    def write(self, sql: Sql) -> int:
        removed = self._removed_positions(sql)
        sql.executemany(f"DELETE FROM {PENDING} WHERE position = ?", [(p,) for p in removed])
        sql.executemany(
            f"INSERT INTO {PENDING} (position) VALUES (?)",
            [(position,) for position, _ in self.added.values()],
        )
        self._gather_again()
        return len(removed)


FILL_LIVE = (
    f"INSERT INTO {LIVE} (rowid, body) SELECT rowid, body FROM {FULL} "
    f"WHERE rowid IN (SELECT position FROM {PENDING})"
)
"""SQLite: copy the rows put off from the full index into the live one, in one
statement (4.4 µs a row; 32 as a statement per row: FTS5 sets up a cursor for each)."""


STRUCTURE_BOUND = 1_000
"""SQLite: the size (bytes) past which an FTS5 index's structure record is written anew
after a merge (see :func:`compact_structure`). The SQLite that Python links on Debian 12
(3.40.1) adds levels to an index at every delete followed by an optimize (two: one for
the delete's segment, one for the merged segment) and never drops the emptied ones;
each level costs about 2 bytes of the record, and past 2,000 levels (about 4 KB) FTS5
reads the record as corrupt: the table no longer opens, and nor does the ledger. A hard
forget deletes from both indexes and optimizes them, so about 1,000 of them broke a
store. Rebuilding an index writes its record anew; with the optimize after it, it
costs about 4.5 times an optimize (240 and 68 ms against 68 at 100k memories), once in
some 250 hard forgets."""
STRUCTURE_ROW = 10
"""The row of an FTS5 index's ``_data`` table that holds its structure record."""


def optimize(sql: Sql, table: str) -> None:
    """SQLite: merge an FTS5 index into one segment, which drops every removed row's
    entries, and keep its structure record small (:func:`compact_structure`)."""
    sql.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
    compact_structure(sql, table)


def compact_structure(sql: Sql, table: str) -> None:
    """SQLite: if an FTS5 index's structure record has grown past
    :data:`STRUCTURE_BOUND`, rebuild the index from its content (which writes the record
    anew, and keeps no row deleted before) and merge it again into one segment (a
    rebuilt large index is left in several)."""
    # The index's own tables are named after it as this transaction spells it (a
    # rebuild's build renames the index, and not what it writes), hence two statements.
    sql.execute(f"SELECT '{table}' AS name")
    data = f"{sql.fetchone()['name']}_data"
    sql.execute(f"SELECT length(block) AS size FROM {data} WHERE id = {STRUCTURE_ROW}")
    row = sql.fetchone()
    if row is not None and row["size"] > STRUCTURE_BOUND:
        sql.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")
        sql.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


def upkeep(sql: Sql, removed: int) -> None:
    """Count ``removed`` live-index removals, and optimize the live index once they reach
    its budget (see :data:`UPKEEP_SHARE`); then set the next budget from its size."""
    if not removed:
        return
    sql.execute(f"UPDATE {UPKEEP} SET removed = removed + ?", (removed,))
    sql.execute(f"SELECT removed, budget FROM {UPKEEP}")
    row = sql.fetchone()
    if row is None or row["removed"] < row["budget"]:
        return
    optimize(sql, LIVE)
    sql.execute(f"SELECT count(*) AS size FROM {LIVE}")
    budget = max(UPKEEP_FLOOR, sql.fetchone()["size"] // UPKEEP_SHARE)
    sql.execute(f"UPDATE {UPKEEP} SET removed = 0, budget = ?", (budget,))


KNOWN_PER_STATEMENT = 500
"""How many query terms one statement checks: a column each, and a ``SELECT`` takes at
most 2,000 columns on SQLite and 1,664 on PostgreSQL (a pasted page of 2,100 words
failed on both before the check went by chunks)."""


class SearchProjection(Projection):
    """Full-text rows per memory, and the queries over them; the SQL differs per backend."""

    name = "search"
    version = 7  # 7: documents split into words and folded in Python on both backends
    # (SQLite's tokenizer ascii, splitting at spaces alone), marks that belong to their
    # letter kept, words cut at WORD_CHARS. 6: documents composed (NFC) as questions
    # are, and on PostgreSQL split into words before they are folded. Before, each
    # backend counted its own: SQLite 2 brought the live index and position rowids, 3
    # the live index's upkeep; PostgreSQL 3 brought the live table and each row's
    # position, 5 documents in the words queries are split into.

    def __init__(self, dialect: str) -> None:
        super().__init__(dialect)
        self.sqlite = dialect == "sqlite"
        self.tables = (FULL, LIVE, KEYS, UPKEEP, PENDING) if self.sqlite else (FULL, LIVE)
        # PostgreSQL's GIN indexes (FTS5 tables have none of their own).
        self.reader_indexes = () if self.sqlite else (f"{FULL}_body", f"{LIVE}_body")
        self.removals = 0
        """PostgreSQL: rows this process took out of the live table since it last
        vacuumed it (SQLite counts its removals in the database, see :func:`upkeep`)."""
        self.vacuum_budget = UPKEEP_FLOOR
        self.pending = 0
        """PostgreSQL: rows this process added to the GIN pending lists since it last
        merged them (see :meth:`_merge_pending`)."""

    def names(self) -> tuple[str, ...]:
        """The tables, and on SQLite those FTS5 keeps for each full-text index."""
        if not self.sqlite:
            return self.tables
        return (*self.tables, *(f"{t}_{part}" for t in (FULL, LIVE) for part in FTS5_PARTS))

    def create(self, sql: Sql) -> None:
        if not self.sqlite:
            for table in (FULL, LIVE):
                sql.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (memory_id TEXT PRIMARY KEY, "
                    "position BIGINT NOT NULL, body TSVECTOR NOT NULL)"
                )
                sql.execute(f"CREATE INDEX IF NOT EXISTS {table}_body ON {table} USING GIN (body)")
            return
        for table in (FULL, LIVE):
            sql.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5("
                f"body, tokenize = '{TOKENIZER}')"
            )
        sql.execute(f"INSERT INTO {LIVE} ({LIVE}, rank) VALUES ('automerge', ?)", (LIVE_AUTOMERGE,))
        sql.execute(
            f"CREATE TABLE IF NOT EXISTS {KEYS} (memory_id TEXT PRIMARY KEY, "
            "position INTEGER NOT NULL) WITHOUT ROWID"
        )
        sql.execute(f"CREATE TABLE IF NOT EXISTS {PENDING} (position INTEGER PRIMARY KEY)")
        sql.execute(
            f"CREATE TABLE IF NOT EXISTS {UPKEEP} "
            "(removed INTEGER NOT NULL, budget INTEGER NOT NULL)"
        )
        sql.execute(
            f"INSERT INTO {UPKEEP} (removed, budget) SELECT 0, ? "
            f"WHERE NOT EXISTS (SELECT 1 FROM {UPKEEP})",
            (UPKEEP_FLOOR,),
        )

    def drop(self, sql: Sql) -> None:
        for table in self.tables:
            sql.execute(f"DROP TABLE IF EXISTS {table}")

    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        self.apply_many(sql, [(record, event)])

    def apply_many(self, sql: Sql, batch: Folded) -> None:
        """Index each asserted memory, also in the live index, and take it out of the
        live index once it can no longer be true now: archived, forgotten, or
        superseded at an instant no later than the supersession was recorded ("now" is
        never behind the log's last instant). A memory superseded at a later instant
        stays; the search's own window test decides, as it does for windows that end by
        the clock alone. The live index's writes are gathered as :class:`LiveWrites`."""
        buffered = BufferedSql(sql)
        live = self._live_writes(sql)
        full: list[tuple[str, int, str]] = []  # PostgreSQL: the full index's rows
        indexed, erased = 0, False
        for record, event in batch:
            memory_id = record.memory_key
            if isinstance(event, Asserted):
                if not event.erased:
                    indexed += 1
                    text = indexed_text(document(event))
                    if self.sqlite:
                        self._index(buffered, record.position, memory_id, text)
                    else:
                        full.append((memory_id, record.position, text))
                    if end_to_micros(event.valid_until) > record.recorded_micros:
                        live.add(memory_id, record.position, text)
            elif isinstance(event, Forgotten) and event.hard:
                self._write_live(live, buffered, full)
                erased = self._remove(buffered, memory_id) or erased
            elif isinstance(event, Archived | Forgotten) or (
                isinstance(event, Superseded) and to_micros(event.at) <= record.recorded_micros
            ):
                live.remove(memory_id)
        self._write_live(live, buffered, full)
        if erased:
            self._merge_erased(buffered)
        if indexed and not self.sqlite:
            self._merge_pending(buffered, indexed)
        buffered.flush()

    def _live_writes(self, sql: Sql) -> LiveWrites:
        """How this fold writes the live index: as it goes, or (SQLite, in a shadow
        build that has not yet caught up with the log) put off (see
        :class:`DeferredLiveWrites`)."""
        if self.sqlite and isinstance(sql, ShadowSql) and not sql.shadow.caught_up:
            sql.shadow.deferred.add(self.name)
            return DeferredLiveWrites(sqlite=True)
        return LiveWrites(self.sqlite)

    def caught_up(self, sql: Sql) -> None:
        """SQLite: fill the shadow build's live index with the rows it put off, from the
        full index (a memory erased since it was put off has no row there any more, and
        so none here), empty the table that kept them, and start the upkeep as after an
        optimize: no removals, a budget of a quarter of its size."""
        if not self.sqlite:
            return
        sql.execute(FILL_LIVE)
        sql.execute(f"DELETE FROM {PENDING}")
        sql.execute(f"SELECT count(*) AS size FROM {LIVE}")
        budget = max(UPKEEP_FLOOR, sql.fetchone()["size"] // UPKEEP_SHARE)
        sql.execute(f"UPDATE {UPKEEP} SET removed = 0, budget = ?", (budget,))

    def _merge_pending(self, sql: Sql, indexed: int) -> None:
        """PostgreSQL: merge the GIN pending lists, in the transaction of the write that
        brings the rows this process added to them since its last merge to
        :data:`MERGE_PENDING_ROWS`. A GIN index gathers new rows in a pending list, which
        every search of the index scans whole until it is merged (2,000 pending rows made
        the median search at 50k memories 11 ms instead of 7), and only VACUUM or
        autovacuum's own ANALYZE merge it otherwise (not a manual ANALYZE): with
        autovacuum off or behind, the full index's list grew to its 4 MB limit. Merged at
        once, a batch's rows enter an index for 28 to 32 µs a row, against 77 to 82
        without a pending list."""
        self.pending += indexed
        if self.pending >= MERGE_PENDING_ROWS:
            sql.execute(MERGE_PENDING)
            self.pending = 0

    def _write_live(
        self, live: LiveWrites, sql: BufferedSql, full: list[tuple[str, int, str]]
    ) -> None:
        """Make the live index's writes gathered so far (on PostgreSQL with the full
        table's, ``full``, whose live rows the same statement copies: written here, and
        emptied), counting PostgreSQL's removals."""
        if full:
            added = live.take_added()
            statement, tail = (
                (INSERT_FULL_ROWS, ()) if added is None else (INSERT_INDEXED_ROWS, (added,))
            )
            for array in json_arrays(full):
                sql.execute(statement, (array, *tail))
            full.clear()
        removed = live.write(sql)
        if not self.sqlite:
            self.removals += removed

    def after_commit(self, backend: Backend) -> None:
        """PostgreSQL: vacuum the live table once this process's removals from it reach
        a quarter of its rows (and at least ``UPKEEP_FLOOR``). A removed row stays in
        the table and in its GIN index until a vacuum; left to a server whose autovacuum
        is off or behind, the live table of a 50k-memory store held 40k dead rows and a
        search took 12 ms at the median instead of 6.6."""
        if self.sqlite or self.removals < self.vacuum_budget:
            return
        self.removals = 0
        self.vacuum_budget = max(UPKEEP_FLOOR, backend.vacuum(LIVE) // UPKEEP_SHARE)

    def _index(self, sql: Sql, position: int, memory_id: str, text: str) -> None:
        """SQLite: a memory's rows in the full index and the keys (PostgreSQL's go
        together, a fold's at once: :data:`INSERT_FULL_ROWS`)."""
        sql.execute(INSERT_KEY, (memory_id, position))
        sql.execute(INSERT_FULL, (position, text))

    def erase(self, sql: Sql, memory_id: str, instant: int) -> None:
        """Remove a memory's entries; on SQLite also merge the indexes so no token survives."""
        self.erase_many(sql, [(memory_id, instant)])

    def erase_many(self, sql: Sql, erased: Sequence[tuple[str, int]]) -> None:
        """Remove the memories' entries; on SQLite merge the indexes once, after them all
        (see :meth:`_merge_erased`)."""
        removed = [self._remove(sql, memory_id) for memory_id, _ in erased]
        if any(removed):
            self._merge_erased(sql)

    def _remove(self, sql: Sql, memory_id: str) -> bool:
        """Delete a memory's rows from both indexes (and, on SQLite, its key row); return
        whether SQLite's indexes must be merged for them (:meth:`_merge_erased`)."""
        if not self.sqlite:
            for table in (LIVE, FULL):
                sql.execute(f"DELETE FROM {table} WHERE memory_id = ?", (memory_id,))
            return False
        sql.execute(f"SELECT position FROM {KEYS} WHERE memory_id = ?", (memory_id,))
        row = sql.fetchone()
        if row is None:  # never indexed (erased before this fold), or already erased
            return False
        for table in (LIVE, FULL):
            sql.execute(f"DELETE FROM {table} WHERE rowid = ?", (row["position"],))
        sql.execute(f"DELETE FROM {KEYS} WHERE memory_id = ?", (memory_id,))
        return True

    @staticmethod
    def _merge_erased(sql: Sql) -> None:
        """SQLite: merge each FTS5 index into one segment, which drops the entries of the
        rows deleted (FTS5 keeps a deleted row's tokens in older segments until then), so
        no token of an erased memory survives. It rewrites the whole index, so a fold or
        a purge erasing many memories merges once, after the last: a purge of 200 at
        100k memories had merged 400 times (14.5 s)."""
        for table in (LIVE, FULL):
            optimize(sql, table)

    # ------------------------------------------------------------------ queries

    def _table(self, live: bool) -> str:
        return LIVE if live else FULL

    def known(self, sql: Sql, terms: Sequence[str], live: bool, most: int) -> list[str]:
        """Return those of the first ``most`` terms that can match: on SQLite those some
        memory in the index (``live``: the live index) holds; on PostgreSQL those its
        ``english`` configuration does not drop as stop words (asking the table would
        cost a scan for a term it lacks, unless the planner has statistics). Terms are
        checked :data:`KNOWN_PER_STATEMENT` at a time, each a column of one ``SELECT``.

        The cut comes first: the index holds every namespace's memories (and, the full
        one, forgotten ones), so which terms it holds must not decide which of a
        question's terms are asked (until 2026-12-04 a SQLite search skipped the terms
        no memory held before cutting, so whether a word was dropped, letting a later
        one in, told whether another namespace's memories held it)."""
        asked = terms[:most]
        found: list[str] = []
        for start in range(0, len(asked), KNOWN_PER_STATEMENT):
            found += self._known(sql, asked[start : start + KNOWN_PER_STATEMENT], live)
        return found

    def _known(self, sql: Sql, terms: Sequence[str], live: bool) -> list[str]:
        if self.sqlite:
            table = self._table(live)
            checks = [f"EXISTS (SELECT 1 FROM {table} WHERE {table} MATCH ?)"] * len(terms)
        else:
            checks = ["numnode(to_tsquery('english', ?)) > 0"] * len(terms)
        sql.execute(
            "SELECT " + ", ".join(f"{check} AS k{i}" for i, check in enumerate(checks)),
            [self._term(term) for term in terms],
        )
        row = sql.fetchone()
        return [term for i, term in enumerate(terms) if row[f"k{i}"]]

    def signatures(
        self, sql: Sql, terms: Sequence[str], live: bool, until: int | None = None
    ) -> set[int]:
        """Return the sets of terms (bit ``i`` for ``terms[i]``) some indexed memory
        (asserted at or before position ``until``, if given) shares exactly; at most 62
        terms."""
        table, bound, bound_params = (
            self._table(live),
            self._until(until),
            self._until_params(until),
        )
        if self.sqlite:
            masks, params = self._masks(table, terms, bound, bound_params)
            sql.execute(f"SELECT DISTINCT mask FROM ({masks})", params)
        else:
            sql.execute(
                f"SELECT DISTINCT {shared_mask('body', len(terms))} AS mask FROM {table} "
                f"WHERE body @@ to_tsquery('english', ?){bound}",
                [*terms, " | ".join(terms), *bound_params],
            )
        return {int(row["mask"]) for row in sql.fetchall()}

    def _until(self, until: int | None, alias: str = "") -> str:
        """The condition keeping an index's rows (``alias`` names the table on
        PostgreSQL) to memories asserted at or before a position (a rowid on SQLite), or
        nothing."""
        if until is None:
            return ""
        return " AND rowid <= ?" if self.sqlite else f" AND {alias}position <= ?"

    @staticmethod
    def _until_params(until: int | None) -> list[int]:
        """The parameter of :meth:`_until`'s condition, if any."""
        return [] if until is None else [until]

    def scored(
        self, sql: Sql, terms: Sequence[str], keys: Sequence[Any], live: bool
    ) -> dict[Any, tuple[int, float]]:
        """Return, for each of the memories ``keys`` (positions on SQLite, ids on
        PostgreSQL) that shares any of ``terms``, the set of terms it shares (bit ``i``
        for ``terms[i]``) and its text score against all of them: the ranking of a few
        memories, looked up by key instead of walking every match in the index."""
        if not keys or not terms:
            return {}
        if not self.sqlite:
            every = " | ".join(terms)
            sql.execute(
                f"SELECT s.memory_id AS key, {shared_mask('s.body', len(terms))} AS mask, "
                f"ts_rank(s.body, to_tsquery('english', ?)) AS score FROM {self._table(live)} s "
                f"WHERE s.memory_id IN ({', '.join('?' * len(keys))}) "
                "AND s.body @@ to_tsquery('english', ?)",
                [*terms, every, *keys, every],
            )
            return {row["key"]: (int(row["mask"]), float(row["score"])) for row in sql.fetchall()}
        # One FTS5 cursor per query, over the keys' span of rowids, keeping the keys: a
        # cursor that scores walks every term's whole posting list once (for BM25's
        # document frequencies), so looking each key up with a cursor of its own walked
        # them once per key (300 keys at 100k memories: 168 ms, against 3.4 ms so).
        table, chosen = self._table(live), orjson.dumps(sorted(keys)).decode()
        span = [min(keys), max(keys), chosen]
        kept = " AND rowid >= ? AND rowid <= ? AND +rowid IN (SELECT value FROM json_each(?))"
        every = " OR ".join(self._term(term) for term in terms)
        sql.execute(
            f"SELECT rowid AS key, -bm25({table}) AS score FROM {table} "
            f"WHERE {table} MATCH ?{kept}",
            [every, *span],
        )
        scores = {row["key"]: float(row["score"]) for row in sql.fetchall()}
        if not scores:
            return {}
        sql.execute(*self._masks(table, terms, kept, span))
        return {row["key"]: (int(row["mask"]), scores[row["key"]]) for row in sql.fetchall()}

    def _masks(
        self, table: str, terms: Sequence[str], condition: str, params: Sequence[Any]
    ) -> tuple[str, list[Any]]:
        """SQLite: the statement (and its parameters) listing each indexed memory that
        meets ``condition`` (with its ``params``) and shares any of ``terms``, as ``key``
        (its rowid) and ``mask`` (bit ``i`` for ``terms[i]``): one FTS5 query per term."""
        branches = " UNION ALL ".join(
            f"SELECT rowid AS key, {1 << i} AS bit FROM {table} WHERE {table} MATCH ?{condition}"
            for i in range(len(terms))
        )
        return (
            f"SELECT key, sum(bit) AS mask FROM ({branches}) GROUP BY key",
            [param for term in terms for param in (self._term(term), *params)],
        )

    @property
    def keyed_by_position(self) -> bool:
        """Whether :meth:`scored` looks memories up by position (SQLite, where a rowid
        is a position) rather than by id (PostgreSQL, whose tables are keyed by id)."""
        return self.sqlite

    def _branches(self, table: str, count: int, until: int | None = None) -> str:
        """``count`` FTS5 queries, each naming every term once, so that each one's BM25
        is the OR-ed query's; their union lists (position, score) of the matches (each
        takes its query, then the position bound if ``until`` is given)."""
        branch = (
            f"SELECT rowid AS position, -bm25({table}) AS score FROM {table} "
            f"WHERE {table} MATCH ?{self._until(until)}"
        )
        return " UNION ALL ".join([branch] * count)

    def top(
        self, sql: Sql, terms: Sequence[str], masks: Sequence[int], live: bool, limit: int,
        until: int | None = None,
    ) -> list[tuple[int, float]]:  # fmt: skip
        """Return the best ``limit`` (position, score) of the indexed memories (asserted at
        or before position ``until``, if given) sharing exactly one of the sets ``masks``
        of ``terms``, scored against all of ``terms``; best first, the more recent first
        among equal scores: ranked inside the index, before any memory row is read."""
        table, bound_params = self._table(live), self._until_params(until)
        if not self.sqlite:
            exactly = [self._exactly(mask, terms) for mask in masks]
            sql.execute(
                f"SELECT position, ts_rank(body, to_tsquery('english', ?)) AS score "
                f"FROM {table} WHERE body @@ to_tsquery('english', ?){self._until(until)} "
                "ORDER BY score DESC, position DESC LIMIT ?",
                [" | ".join(terms), " | ".join(exactly), *bound_params, limit],
            )
            return [(int(row["position"]), float(row["score"])) for row in sql.fetchall()]
        sql.execute(
            f"SELECT position, score FROM ({self._branches(table, len(masks), until)}) "
            "ORDER BY score DESC, position DESC LIMIT ?",
            [*(p for mask in masks for p in (self._exactly(mask, terms), *bound_params)), limit],
        )
        return [(int(row["position"]), float(row["score"])) for row in sql.fetchall()]

    def winners(self, positions: Sequence[int]) -> Source:
        """Return the statement part reading the memories at ``positions`` (from
        :meth:`top`)."""
        if not self.sqlite:
            return Source("0.0", MEMORY_ROWS, "m.position = ANY(?)", [list(positions)])
        condition = "m.position IN (SELECT value FROM json_each(?))"
        return Source("0.0", MEMORY_ROWS, condition, [orjson.dumps(list(positions)).decode()])

    def ranked(
        self, terms: Sequence[str], masks: Sequence[int], live: bool, until: int | None = None
    ) -> Source:
        """Return the statement part finding and scoring the memories (asserted at or
        before position ``until``, if given) that share exactly one of the sets ``masks``
        of ``terms``, scored against all of ``terms``, for one statement that also joins
        and filters them."""
        exactly = [self._exactly(mask, terms) for mask in masks]
        bound_params = self._until_params(until)
        if self.sqlite:
            union = self._branches(self._table(live), len(masks), until)
            return Source(
                "c.score",
                f"({union}) c CROSS JOIN memories m CROSS JOIN memory_versions v",
                "m.position = c.position AND v.memory_id = m.id",
                [p for query in exactly for p in (query, *bound_params)],
            )
        return Source(
            "ts_rank(s.body, to_tsquery('english', ?))",
            f"{self._table(live)} s JOIN memories m ON m.id = s.memory_id "
            "JOIN memory_versions v ON v.memory_id = m.id",
            f"s.body @@ to_tsquery('english', ?){self._until(until, 's.')}",
            [" | ".join(terms), " | ".join(exactly), *bound_params],
        )

    def _term(self, term: str) -> str:
        return '"' + term.replace('"', '""') + '"' if self.sqlite else term

    def _exactly(self, mask: int, terms: Sequence[str]) -> str:
        """The query matching memories that share the terms of ``mask`` and no other."""
        inside, outside = members(mask, [self._term(term) for term in terms])
        if self.sqlite:
            shared = " AND ".join(inside)
            return f"({shared}) NOT ({' OR '.join(outside)})" if outside else shared
        return "(" + " & ".join([*inside, *(f"!{term}" for term in outside)]) + ")"
