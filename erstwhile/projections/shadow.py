"""Shadow tables: where a rebuild folds the log beside the live projections.

Projections write plain SQL against their live table names. During a rebuild their
statements pass through :class:`ShadowSql`, which renames the rebuilt projections'
tables (``memories`` becomes ``memories__shadow``) and gives every index it creates a
name of its own, so nothing collides with the live tables and their indexes.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from erstwhile.eventstore import Sql
from erstwhile.eventstore.backend import PassingSql

if TYPE_CHECKING:
    from erstwhile.projections.base import Projection

SUFFIX = "__shadow"
INDEX = re.compile(r"(CREATE INDEX IF NOT EXISTS )(\w+)")


@dataclass
class Shadow:
    """Which tables are rebuilt, under which names, with which index tag; and how far
    the build has come."""

    renames: dict[str, str]
    tag: str
    suffix: str = SUFFIX
    caught_up: bool = False
    """Set once the build has caught up with the log for the first time: from then on
    every projection writes as it does outside a build (see
    :meth:`~erstwhile.projections.base.Projection.caught_up`)."""
    deferred: set[str] = field(default_factory=set)
    """The projections that put writes off until the build has caught up."""
    postponed: list[str] = field(default_factory=list)
    """The ``CREATE INDEX`` statements of the indexes no fold reads, as the projections
    spell them: the build creates them once it has caught up with the log (see
    :attr:`~erstwhile.projections.base.Projection.reader_indexes`)."""
    rewritten: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    """Statements as rewritten so far (a build wraps each batch's transaction anew,
    and its statements are the same every batch)."""

    def rewrite(self, statement: str) -> str:
        """``statement`` with the rebuilt tables renamed and its index named apart."""
        rewritten = self.rewritten.get(statement)
        if rewritten is None:
            rewritten = INDEX.sub(rf"\g<1>\g<2>_{self.tag}", statement)
            rewritten = self._tables().sub(lambda m: self.renames[m.group(1)], rewritten)
            self.rewritten[statement] = rewritten
        return rewritten

    def _tables(self) -> re.Pattern[str]:
        names = "|".join(sorted(self.renames, key=len, reverse=True))
        return re.compile(rf"\b({names})\b")

    @classmethod
    def of(cls, projections: Sequence[Projection]) -> Shadow:
        """The shadow of these projections' tables, with a fresh index tag."""
        tables = [table for projection in projections for table in projection.tables]
        return cls({table: table + SUFFIX for table in tables}, secrets.token_hex(4))

    def wrap(self, sql: Sql) -> ShadowSql:
        """Return ``sql`` with this shadow's renames applied to every statement."""
        return ShadowSql(sql, self)

    def create(self, sql: Sql, projection: Projection) -> None:
        """Create ``projection``'s tables for this build, without the indexes no fold
        reads: their statements wait in :attr:`postponed`."""
        creating = WithoutIndexes(self.wrap(sql), set(projection.reader_indexes))
        projection.create(creating)
        self.postponed += creating.left_out

    def postponed_indexes(self) -> list[str]:
        """The postponed ``CREATE INDEX`` statements, with this build's names."""
        return [self.rewrite(statement) for statement in self.postponed]


class ShadowSql(PassingSql):
    """:class:`Sql` that rewrites table and index names on the way through."""

    def __init__(self, sql: Sql, shadow: Shadow) -> None:
        super().__init__(sql)
        self.shadow = shadow
        """The build these statements belong to."""
        self._rewrite = shadow.rewrite

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        self._sql.execute(self._rewrite(statement), params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self._sql.executemany(self._rewrite(statement), rows)

    def prefetch(self, statement: str, params: Sequence[Any] = ()) -> None:
        self._sql.prefetch(self._rewrite(statement), params)

    def sent_ahead(self, statement: str, params: Sequence[Any] = ()) -> bool:
        return self._sql.sent_ahead(self._rewrite(statement), params)


class WithoutIndexes(PassingSql):
    """:class:`Sql` for a projection's ``create`` that leaves out some indexes by name:
    those a rebuild swapped in under its tagged names (see
    :meth:`~erstwhile.projections.base.ProjectionRunner.setup`), or those a build
    creates last (see :meth:`Shadow.create`). The statements left out are kept in
    :attr:`left_out`."""

    def __init__(self, sql: Sql, names: set[str]) -> None:
        super().__init__(sql)
        self._names = names
        self.left_out: list[str] = []

    def execute(self, statement: str, params: Sequence[Any] = ()) -> None:
        created = INDEX.match(statement)
        if created is None or created.group(2) not in self._names:
            self._sql.execute(statement, params)
        else:
            self.left_out.append(statement)
