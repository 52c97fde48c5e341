"""Rows as JSON arrays, for PostgreSQL statements that insert many rows at once (read
back with ``jsonb_array_elements``): one parameter for a batch of rows, where psycopg
would bind each value of each row. Kept apart from the PostgreSQL modules so that the
projections, which build such rows, do not load the PostgreSQL driver for a SQLite
ledger."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson

JSON_ARRAY_BYTES = 32 * 1024 * 1024
"""The most bytes one statement's JSON array of rows takes: a ``jsonb`` value holds at
most 256 MB, and an import's batch of 1,000 events of the largest memories would pass
that (each payload about 374 KB as hex)."""
JSON_ROWS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
"""Values orjson would write in a form of its own choosing (instants, subclasses of
``str`` and ``int``) go to :func:`json_value`, which refuses them. A ``str`` enum goes
as its value, as psycopg sends it."""


def json_value(value: Any) -> str:
    """The JSON text of a parameter orjson has no form for: bytes, as ``bytea``'s hex
    input. Anything else is refused: the rows of a plain INSERT hold text, numbers,
    bytes, UUIDs and NULLs."""
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    raise TypeError(f"no JSON form for a {type(value).__name__} parameter")


def json_arrays(rows: Sequence[Sequence[Any]]) -> Iterator[str]:
    """The rows as JSON arrays of at most :data:`JSON_ARRAY_BYTES` each: all of them in
    one, or halved until each part fits."""
    encoded = orjson.dumps(rows, default=json_value, option=JSON_ROWS)
    if len(encoded) <= JSON_ARRAY_BYTES or len(rows) == 1:
        yield encoded.decode()
        return
    half = len(rows) // 2
    yield from json_arrays(rows[:half])
    yield from json_arrays(rows[half:])
