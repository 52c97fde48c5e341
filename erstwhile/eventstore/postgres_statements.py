"""How a PostgreSQL transaction's statements reach the server: pipelined, with one-row
INSERTs held back to go together and many rows sent as one JSON array.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any
from weakref import WeakKeyDictionary

from psycopg import Connection, Cursor
from psycopg.rows import DictRow

from erstwhile.eventstore.backend import CursorSql, Sql
from erstwhile.eventstore.json_rows import json_arrays

PLAIN_INSERT = re.compile(
    r"\s*INSERT\s+INTO\s+(\S+)\s*\(([^)]*)\)\s*VALUES\s*\(\s*%s(?:\s*,\s*%s)*\s*\)\s*",
    re.IGNORECASE,
)
"""An INSERT of one row of plain parameters: its table and its columns. One row is held
back to go with others (:meth:`PostgresSql.send_held`), many go as one statement of JSON
rows (:meth:`PostgresSql.run_many`)."""

BLIND_WRITE = re.compile(
    r"\s*(?:WITH\b.*\)\s*)?(?:INSERT|UPDATE|DELETE)\b(?!.*\bRETURNING\b)",
    re.IGNORECASE | re.DOTALL,
)
"""A statement whose result nobody fetches (an INSERT, UPDATE or DELETE without
``RETURNING``, after ``WITH`` queries or not); any other gets a cursor of its own."""

PARSED_ONCE_PARAMS = 50
PARSED_ONCE_CHARACTERS = 4096
"""psycopg parses a query's ``%s`` placeholders once and keeps the result only for a
query of at most 4,096 bytes and 50 parameters; past either, it parses it again at
every execution (a regular expression over the whole text). Writes held back that would
make a larger statement go in more than one (:meth:`PostgresSql.hold`): a remember's
five one-row INSERTs as one statement of 56 parameters cost the client 31% more
instructions than as two statements."""
NOTIFY = "SELECT pg_notify(%s, '')"
"""NOTIFY as a query, for the writes held back to go with
(:meth:`PostgresSql.send_held_and_notify`)."""
HELD_AT_MOST = 8
"""How many writes held back one statement takes (:meth:`PostgresSql.send_held`): a
``remember`` holds five at most in a row; a long run of them, one statement of hundreds
of ``WITH`` queries, would cost more to plan than it saves."""
COLUMN_TYPES = (
    "SELECT attname AS name, format_type(atttypid, NULL) AS type FROM pg_attribute "
    "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
)
"""A table's column types, without their modifiers (a cast to ``varchar(n)`` would cut a
longer value short, where the column itself refuses it)."""


class SoloSql(CursorSql):
    """:class:`Sql` over a psycopg cursor outside pipeline mode, for one statement that
    runs alone in its own implicit transaction (see :meth:`PostgresBackend.one_statement`)."""

    raw: Cursor[DictRow]

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self.raw.execute(PostgresSql._convert(statement), params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self.raw.executemany(PostgresSql._convert(statement), rows)


class PostgresSql:
    """:class:`Sql` over a psycopg cursor, turning ``?`` placeholders into ``%s``.

    The cursor's connection is in pipeline mode: a statement is sent without waiting for
    the one before, and only a fetch waits (for everything sent so far), so the writes
    between two reads cost no round trip of their own. Every statement but an INSERT,
    UPDATE or DELETE whose result nobody fetches (:data:`BLIND_WRITE`) gets a cursor of
    its own: psycopg hands each result to the cursor that sent the statement, as it
    arrives, so a write's late result would take the place of a read's on a shared one.
    A one-row plain INSERT (and a write that asks for it: :meth:`hold`) is held back to
    go with the next ones (:meth:`send_held`), and many rows of a plain INSERT go as one
    statement taking them all (:meth:`run_many`).
    """

    _statements: dict[str, str] = {}
    _fetched: dict[str, bool] = {}
    _plain: dict[str, tuple[str, str] | None] = {}
    _as_json: WeakKeyDictionary[Connection[Any], dict[str, str]] = WeakKeyDictionary()
    """Per connection (whose schema names the tables), each plain INSERT's statement that
    takes its rows as one JSON array. A statement keeps
    the column types its connection first read: a table replaced by one whose columns
    have other types (a new version's rebuild, run by a newer process) needs the process
    restarted, as its reads do (docs/decisions.md)."""

    def __init__(self, cursor: Cursor[DictRow]) -> None:
        self.raw = cursor
        """The cursor that sends writes (and the statements of the transaction itself)."""
        self.notify = False
        """Set by :meth:`PostgresBackend.notify`: send NOTIFY with the COMMIT."""
        self._pipeline = ExitStack()
        self._read = cursor
        self._early: dict[tuple[str, tuple[Any, ...]], Cursor[DictRow]] = {}
        """Reads sent ahead by :meth:`prefetch`, by statement and parameters."""
        self._held: list[tuple[str, Sequence[Any]]] = []
        """Writes not yet sent (see :meth:`hold`)."""
        self._held_tables: set[str] = set()
        self._held_params = 0
        self._held_characters = 0
        """How large the statement of the writes held is (see :meth:`_fits`)."""

    def reader(self) -> Cursor[DictRow]:
        """A new cursor for a statement whose rows will be fetched."""
        self._read = self.raw.connection.cursor()
        return self._read

    def start_pipeline(self) -> None:
        """Send statements without waiting for each one's result (pipeline mode)."""
        self._pipeline.enter_context(self.raw.connection.pipeline())

    def end_pipeline(self) -> None:
        """Leave pipeline mode: wait for every statement sent (one round trip), raising
        the first error among them."""
        self._pipeline.close()

    @classmethod
    def _convert(cls, statement: str) -> str:
        """The statement with psycopg's placeholders (``%s``) for the ledger's (``?``)."""
        converted = cls._statements.get(statement)
        if converted is None:
            converted = statement.replace("%", "%%").replace("?", "%s")
            cls._statements[statement] = converted
        return converted

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        if self._early and (early := self._take_early(statement, params)) is not None:
            self._read = early
            return
        converted = self._convert(statement)
        if (plain := self._plain_insert(converted)) is not None:
            self.hold(converted, plain[0], params)
            return
        fetched = self._fetched.get(statement)
        if fetched is None:
            fetched = self._fetched[statement] = not BLIND_WRITE.match(statement)
        self.send_held()
        (self.reader() if fetched else self.raw).execute(converted, params)

    def _plain_insert(self, query: str) -> tuple[str, str] | None:
        """The table and columns of a plain INSERT (:data:`PLAIN_INSERT`); None for any
        other statement."""
        if query not in self._plain:
            match = PLAIN_INSERT.fullmatch(query)
            self._plain[query] = (match[1], match[2]) if match else None
        return self._plain[query]

    def hold(self, query: str, table: str, params: Sequence[Any]) -> None:
        """Send a write with the next ones, as one statement (:meth:`send_held`): a
        psycopg query (``%s`` placeholders) that writes ``table`` alone and reads no row
        written before it in this transaction but ``table``'s own, and whose result
        nobody fetches. One-row plain INSERTs are held by :meth:`execute`."""
        if table in self._held_tables or not self._fits(query, params):
            self.send_held()
        self._held.append((query, params))
        self._held_tables.add(table)
        self._held_params += len(params)
        self._held_characters += len(query) + len(" w99 AS (),")  # its WITH wrapping
        if len(self._held) >= HELD_AT_MOST:
            self.send_held()

    def _fits(self, query: str, params: Sequence[Any]) -> bool:
        """Whether the writes held and this one go in a statement psycopg parses once
        (see :data:`PARSED_ONCE_PARAMS`)."""
        return (
            self._held_params + len(params) <= PARSED_ONCE_PARAMS
            and self._held_characters + len(query) <= PARSED_ONCE_CHARACTERS
        )

    def send_held(self) -> None:
        """Send the writes held back since the last statement sent (:meth:`hold`), as
        one statement: the first ones as data-modifying ``WITH`` queries of the last.
        psycopg handles each statement of a pipeline, and its result, on its own, the
        largest share of a ``remember``'s client work; a ``remember`` of a new subject
        without entities sends its event and key as one statement, its write count,
        memory and version as another, its tracking with the NOTIFY as a third (12
        statements instead of 17).

        The writes held read no row written before them but their own table's, so one
        snapshot for them all changes nothing, but PostgreSQL runs a statement's
        ``WITH`` queries after its main one: so a held INSERT into a table already held
        sends the others first, and each table's rows go in the order they were
        written. So does one that would make the statement larger than psycopg parses
        once (:data:`PARSED_ONCE_PARAMS`). Any other statement, a read sent ahead, a
        fetch and the COMMIT send them first; an error in a held row's values (a NUL
        byte, say) is raised by whichever call sends it."""
        if self._held:
            self._send(self._take_held())

    def send_held_and_notify(self, channel: str) -> None:
        """Send the writes held back, and a NOTIFY on ``channel`` (``pg_notify``, the
        statement the writes go with as ``WITH`` queries: a statement fewer for the
        pipeline)."""
        notify = (NOTIFY, (channel,))
        if not self._fits(*notify):
            self.send_held()
        self._send([*self._take_held(), notify])

    def _take_held(self) -> list[tuple[str, Sequence[Any]]]:
        """The writes held, no longer held."""
        held, self._held = self._held, []
        self._held_tables.clear()
        self._held_params = self._held_characters = 0
        return held

    def _send(self, held: list[tuple[str, Sequence[Any]]]) -> None:
        """Send ``held`` as one statement: every one but the last as a ``WITH`` query."""
        if len(held) == 1:
            self.raw.execute(*held[0])
            return
        *first, (last, _) = held
        queries = ", ".join(f"w{n} AS ({query})" for n, (query, _) in enumerate(first))
        self.raw.execute(f"WITH {queries} {last}", [p for _, params in held for p in params])

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Send a read now, on a cursor of its own, and answer the ``execute`` of the
        same statement and parameters with it: reads sent together wait for one round
        trip, not one each. A read already on its way is not sent again."""
        key = (statement, tuple(params))
        if key in self._early:
            return
        self.send_held()
        cursor = self.raw.connection.cursor()
        cursor.execute(self._convert(statement), params)
        self._early[key] = cursor

    def sent_ahead(self, statement: str, params: Sequence[Any] = ()) -> bool:
        try:
            return (statement, tuple(params)) in self._early
        except TypeError:  # unhashable parameters (arrays) are never sent ahead
            return False

    def _take_early(self, statement: str, params: Sequence[Any]) -> Cursor[DictRow] | None:
        try:
            return self._early.pop((statement, tuple(params)), None)
        except TypeError:  # unhashable parameters (arrays) are never sent ahead
            return None

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self.run_many(self._convert(statement), rows)

    def fetchone(self) -> Any:
        self.send_held()  # with the wait the fetch begins anyway
        return self._read.fetchone()

    def fetchall(self) -> list[Any]:
        self.send_held()
        return list(self._read.fetchall())

    def run_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute a psycopg query (``%s`` placeholders) once per row.

        The rows of a plain INSERT (every value a parameter) go as one statement, their
        values one JSON array (:func:`json_arrays`) the server casts to the table's
        column types, sent down the pipeline like any other write: the server inserts
        them while the client goes on folding (only a connection's first such INSERT
        into a table waits, for the column types). A COPY would leave the pipeline, and
        wait for the server, every time; and psycopg formats a COPY's rows (3.8 to 4.6
        µs a row of ``memories``) slower than orjson serializes them (1.5 to 1.8)."""
        if not rows:
            return
        plain = self._plain_insert(query)
        if plain is not None and len(rows) == 1:
            self.hold(query, plain[0], rows[0])
            return
        self.send_held()
        if plain is not None:
            insert = self._as_json_of(query, *plain)
            for array in json_arrays(rows):
                self.raw.execute(insert, (array,))
        elif len(rows) == 1:
            self.raw.execute(query, rows[0])
        else:
            self.raw.executemany(query, rows)

    def _as_json_of(self, text: str, table: str, columns: str) -> str:
        """The statement that inserts a plain INSERT's rows given as one JSON array of
        rows. The column types are read from the catalog once per connection and
        statement."""
        known = self._as_json.setdefault(self.raw.connection, {})
        if text not in known:
            known[text] = self._insert_from_json(table, columns)
        return known[text]

    def _insert_from_json(self, table: str, columns: str) -> str:
        reader = self.raw.connection.cursor()  # not :meth:`reader`: a read may be pending
        reader.execute(COLUMN_TYPES, (table,))
        types = {row["name"]: row["type"] for row in reader.fetchall()}
        names = [name.strip().strip('"') for name in columns.split(",")]
        values = ", ".join(f"(r->>{i})::{types[name]}" for i, name in enumerate(names))
        return (
            f"INSERT INTO {table} ({columns}) SELECT {values} "
            "FROM jsonb_array_elements(%s::jsonb) AS r"
        )


def own(sql: Sql) -> PostgresSql:
    """The :class:`PostgresSql` of a PostgreSQL transaction (what write() and read() yield)."""
    if not isinstance(sql, PostgresSql):
        raise TypeError(f"expected the PostgresSql of a PostgreSQL transaction, got {sql!r}")
    return sql
