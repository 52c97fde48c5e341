"""What a projection is, and the runner that folds the log into projections.

A projection is a fold: an event in, rows out. It never writes to the log. Its rows and
its tracked position are written in one transaction, so a crash at any moment leaves
each projection exactly at some position it fully applied: exactly-once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from erstwhile.domain.events import LedgerEvent
from erstwhile.eventstore import EventFilter, EventLog, RecordedEvent, Sql, translated_errors

Progress = Callable[[str, int, int], None]
"""Called as ``progress(projection_name, position_reached, head)`` during long work."""


class Projection(ABC):
    """A read model folded from the log."""

    name: str
    version: int = 1

    @abstractmethod
    def create(self, sql: Sql) -> None:
        """Create the projection's tables and indexes if missing."""

    @abstractmethod
    def drop(self, sql: Sql) -> None:
        """Drop the projection's tables."""

    @abstractmethod
    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        """Fold one event into the projection's rows."""


class ProjectionRunner:
    """Brings projections up to the head of the log, one transaction per batch."""

    def __init__(self, log: EventLog, projections: Sequence[Projection], batch: int = 500):
        self.log = log
        self.backend = log.backend
        self.projections = list(projections)
        self.batch = batch

    def setup(self) -> None:
        """Create every projection's tables; start over any whose schema version changed.

        The registry table records each projection's version; a projection whose declared
        version differs is dropped, recreated and refolded from position 0 by the next
        catch-up, so a schema change never needs a hand-run migration.
        """
        with translated_errors(), self.backend.write() as sql:
            sql.execute(
                "CREATE TABLE IF NOT EXISTS erstwhile_projections "
                "(name TEXT PRIMARY KEY, version BIGINT NOT NULL)"
            )
            for projection in self.projections:
                sql.execute("SELECT version FROM erstwhile_projections WHERE name = ?",
                            (projection.name,))  # fmt: skip
                row = sql.fetchone()
                if row is not None and row["version"] != projection.version:
                    projection.drop(sql)
                    self.backend.reset_tracking(sql, projection.name)
                    sql.execute("DELETE FROM erstwhile_projections WHERE name = ?",
                                (projection.name,))  # fmt: skip
                projection.create(sql)
                if row is None or row["version"] != projection.version:
                    sql.execute("INSERT INTO erstwhile_projections (name, version) VALUES (?, ?)",
                                (projection.name, projection.version))  # fmt: skip

    def versions(self) -> dict[str, int]:
        """Return each projection's recorded schema version."""
        with translated_errors(), self.backend.read() as sql:
            sql.execute("SELECT name, version FROM erstwhile_projections")
            return {row["name"]: row["version"] for row in sql.fetchall()}

    def positions(self) -> dict[str, int]:
        """Return each projection's tracked position."""
        with translated_errors(), self.backend.read() as sql:
            return {p.name: self.backend.tracked_position(sql, p.name) for p in self.projections}

    def lag(self) -> tuple[int, int]:
        """Return the lowest tracked position and the head of the log, from one snapshot."""
        with translated_errors(), self.backend.read() as sql:
            lowest = min(
                (self.backend.tracked_position(sql, p.name) for p in self.projections), default=0
            )
            return lowest, self.log.tip(sql).position

    def catch_up(self, until: int | None = None, progress: Progress | None = None) -> int:
        """Apply every event not yet applied (at least up to ``until``); return the position."""
        lowest, head = self.lag()
        target = head if until is None else min(until, head)
        while lowest < target:
            lowest = self._step()
            if progress is not None:
                for projection in self.projections:
                    progress(projection.name, lowest, target)
        return lowest

    def _step(self) -> int:
        """Apply one batch in one transaction; return the lowest position reached."""
        with translated_errors(), self.backend.write() as sql:
            tracked = {p.name: self.backend.tracked_position(sql, p.name) for p in self.projections}
            start = min(tracked.values(), default=0)
            records = self.log.read(sql, EventFilter(after=start), limit=self.batch)
            for record, event in zip(records, self.log.decode_many(sql, records), strict=True):
                for projection in self.projections:
                    if record.position > tracked[projection.name]:
                        projection.apply(sql, record, event)
            if not records:
                return start
            last = records[-1].position
            for projection in self.projections:
                if last > tracked[projection.name]:
                    self.backend.insert_tracking(sql, projection.name, last)
            return last

    def rebuild(self, name: str | None = None, progress: Progress | None = None) -> None:
        """Drop and refold projections (all, or the one named) from position 0."""
        chosen = [p for p in self.projections if name is None or p.name == name]
        if not chosen:
            known = ", ".join(p.name for p in self.projections)
            from erstwhile.domain.errors import ValidationError

            raise ValidationError(f"unknown projection {name!r}; known: {known}")
        with translated_errors(), self.backend.write() as sql:
            for projection in chosen:
                projection.drop(sql)
                projection.create(sql)
                self.backend.reset_tracking(sql, projection.name)
        head = self.log.head()
        self.catch_up(until=head, progress=progress)
