"""What a projection is, and the runner that folds the log into projections.

A projection is a fold: an event in, rows out. It never writes to the log. Its rows and
its tracked position are written in one transaction, so a crash at any moment leaves
each projection exactly at some position it fully applied: exactly-once.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import cache, partial
from typing import Any, NamedTuple

from erstwhile.domain.errors import StoreUnavailable, ValidationError
from erstwhile.domain.events import Asserted, LedgerEvent
from erstwhile.eventstore import (
    EventFilter,
    EventLog,
    RecordedEvent,
    Sql,
    marks,
    translated_errors,
)
from erstwhile.eventstore.backend import TAGGED, Backend, integrity_errors
from erstwhile.projections.batch import BufferedSql
from erstwhile.projections.shadow import SUFFIX, Shadow, WithoutIndexes

REGISTRY_TABLE = "erstwhile_projections"
"""Each projection's schema version, and the claim of a rebuild running now."""

SWAP_ATTEMPTS = 20
"""How often a rebuild tries to swap its tables in before giving up; all but the last
give up waiting for the reads in flight soon (about 13 s of tries in all, the waits
between them included: see ``Backend.lock_for_replace``)."""

CLAIM = "#rebuild"
"""The registry row of the rebuild running now, if any: its ``version`` is the instant
(µs, by the database's clock) its claim lapses unless renewed."""
CLAIM_OWNER = "#rebuild-owner"
"""The registry row whose ``version`` is the running rebuild's token."""
CLAIM_PROCESS = "#rebuild-process"
"""The registry row whose ``version`` says which process runs the rebuild: its host's
boot (see :func:`this_process`) and its process id."""
CLAIM_SECONDS = 120.0
"""How long a rebuild's claim holds unrenewed (a build renews it every second)."""
CLAIM_POLL_SECONDS = 0.2
"""How often an opening that waits for another's rebuild looks again."""

ANALYZE_FLOOR = 1_000
"""The log size from which the planner's statistics are refreshed as it doubles."""

Progress = Callable[[str, int, int], None]
"""Called as ``progress(projection_name, position_reached, head)`` during long work."""

Folded = Sequence[tuple[RecordedEvent, LedgerEvent]]
"""A batch of events in log order, each with its decoded domain event."""


class Prepared(NamedTuple):
    """A batch read and decoded before the write transaction that folds it."""

    tracked: dict[str, int]
    """The projections' positions the batch follows."""
    tip: int
    """The log's tip, read in the same snapshot as the batch's keys."""
    records: list[RecordedEvent]
    decoded: list[LedgerEvent]


class Projection(ABC):
    """A read model folded from the log, in a database of the given dialect."""

    name: str
    version: int = 1
    tables: tuple[str, ...] = ()
    """Every table the projection owns: what a shadow rebuild builds beside and swaps."""
    reads: tuple[str, ...] = ()
    """The other projections whose tables this one reads as it folds: a rebuild of any
    of them rebuilds this one too, so it reads them as far as it has folded, never a
    table being rebuilt (or of an older schema) behind it."""
    reader_indexes: tuple[str, ...] = ()
    """The indexes (by name) that only the ledger's reads use, never a fold: a rebuild's
    build creates them once it has caught up with the log, sorting each table once,
    instead of keeping them up row by row as it folds (see
    :meth:`ProjectionRunner.finish_catching_up`). A fold that reads one is still right,
    but slow in a build; ``test_no_fold_reads_an_index_a_rebuild_creates_last`` says so."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    def names(self) -> tuple[str, ...]:
        """Every table name the projection's tables take up in a store."""
        return self.tables

    @property
    def keyed_table(self) -> str:
        """What ends a ``CREATE TABLE`` whose rows are found only by primary key: on
        SQLite, ``WITHOUT ROWID`` stores the rows in the key's own B-tree, one B-tree
        (and one page written per insert) fewer than a rowid table with a key index."""
        return " WITHOUT ROWID" if self.dialect == "sqlite" else ""

    @abstractmethod
    def create(self, sql: Sql) -> None:
        """Create the projection's tables and indexes if missing."""

    @abstractmethod
    def drop(self, sql: Sql) -> None:
        """Drop the projection's tables."""

    @abstractmethod
    def apply(self, sql: Sql, record: RecordedEvent, event: LedgerEvent) -> None:
        """Fold one event into the projection's rows."""

    def erase(self, sql: Sql, memory_id: str, instant: int) -> None:  # noqa: B027 - optional hook
        """Wipe a hard-forgotten memory's content (forgotten at ``instant``, in µs) from
        this projection's rows, as the fold of its ``Forgotten`` event does, and nothing
        else (none by default: a projection that keeps no content). Used on a rebuild's
        shadow tables, which meet the event only when their build reaches it, or never
        if the build was left half-done; so it must leave rows that the event's fold
        turns into exactly what a fold of the whole log gives."""

    def erase_many(self, sql: Sql, erased: Sequence[tuple[str, int]]) -> None:
        """:meth:`erase` for many memories, each with its instant: a projection whose
        erasure has a cost of its own beyond each memory's (rewriting an index) pays it
        once here."""
        for memory_id, instant in erased:
            self.erase(sql, memory_id, instant)

    def after_commit(self, backend: Backend) -> None:  # noqa: B027 - optional hook
        """Upkeep that must run outside a transaction once a fold has committed (none by
        default)."""

    def caught_up(self, sql: Sql) -> None:  # noqa: B027 - optional hook
        """Make the writes this projection put off while a shadow build caught up with
        the log (none by default; one that puts writes off names itself in
        ``Shadow.deferred``); ``sql`` writes to the build's shadow tables. It runs once per
        build that put something off, before the last events are folded and the tables
        swapped in, in a transaction of its own so that writers are not held up by it."""

    def apply_many(self, sql: Sql, batch: Folded) -> None:
        """Fold a batch of events, in order, with each statement's writes grouped.

        Override to replace per-event reads with one read for the whole batch.
        """
        buffered = BufferedSql(sql)
        for record, event in batch:
            self.apply(buffered, record, event)
        buffered.flush()


@contextmanager
def refused_folds(after: int) -> Iterator[None]:
    """Translate a catch-up batch's driver errors, saying what a broken constraint means.

    The projections hold one row per memory and version, and the events of a log the
    ledger wrote fold into them without a clash, so a clash says the log was changed
    behind the ledger's back (an event moved to another position, say), which the
    opening would otherwise report as the database's own complaint."""
    try:
        with translated_errors():
            yield
    except StoreUnavailable as error:
        if not isinstance(error.__cause__, integrity_errors()):
            raise
        raise StoreUnavailable(
            f"{error}, folding the log after position {after} into the projections: the "
            "log or the projections may have been changed behind the ledger's back "
            "(`erstwhile audit verify` checks the log, `erstwhile projections rebuild` "
            "builds the projections again from it; Ledger.open(..., "
            "sync_projections=False) opens the store without folding)"
        ) from error.__cause__


class LogCut(NamedTuple):
    """Where a log ends, and how much further projections applied it: projections apply
    the log only, so it lost events from its end behind the ledger's back."""

    head: int
    folded: int

    @classmethod
    def of(cls, tracked: dict[str, int], head: int) -> LogCut | None:
        """Return the cut the projections' ``tracked`` positions show, or None."""
        folded = max(tracked.values(), default=0)
        return cls(head, folded) if folded > head else None

    def __str__(self) -> str:
        return (
            f"the log ends at position {self.head}, but the projections applied it up to "
            f"{self.folded}: events were removed from its end"
        )


def refuse_a_cut_log(cut: LogCut | None, outcome: str) -> None:
    """Raise :class:`CutLog` for a ``cut`` log; ``outcome`` says what became of the
    command."""
    if cut is not None:
        raise CutLog(f"{cut} (verify says so); {outcome}")


class ProjectionRunner:
    """Brings projections up to the head of the log, one transaction per batch.

    With a :class:`Shadow`, the runner folds into shadow tables tracked under shadow
    names instead, which is how a rebuild runs beside the live projections.
    """

    def __init__(
        self,
        log: EventLog,
        projections: Sequence[Projection],
        batch: int = 500,
        shadow: Shadow | None = None,
    ) -> None:
        self.log = log
        self.backend = log.backend
        self.projections = list(projections)
        self.batch = batch
        self.shadow = shadow
        self.analyzed_head = 0
        """The log's head when this runner last refreshed the planner's statistics."""

    def setup(self) -> None:
        """Create every projection's tables; rebuild any whose schema version changed,
        or which lost a table.

        The registry table records each projection's version. A projection whose
        declared version differs is rebuilt from position 0 as :meth:`rebuild` does:
        beside its old tables, which other processes (still running the older code) go
        on reading and folding meanwhile, swapped in at the end in one transaction. A
        schema change needs no hand-run migration and never shows readers empty tables;
        processes opening at once wait for the one that rebuilds (see :meth:`_claim`).
        So is a projection one of whose tables is gone (dropped by hand): created empty,
        it would answer nothing while its position said it was up to date.
        """
        with translated_errors(), self.backend.write() as sql:
            sql.execute(
                f"CREATE TABLE IF NOT EXISTS {REGISTRY_TABLE} "
                "(name TEXT PRIMARY KEY, version BIGINT NOT NULL)"
            )
            recorded = self._recorded_versions(sql)
            self._drop_abandoned_build(sql, recorded)
            built = self._rebuilt_indexes(sql)
            due = self._due(sql, recorded)
            changed = [projection for projection in self.projections if projection.name in due]
            for projection in self.projections:
                if projection.name in due:
                    continue
                projection.create(WithoutIndexes(sql, built))
                if projection.name not in recorded:
                    self._record_version(sql, projection)
        if changed and not self._cut():
            # A cut log is left to verify to report: rebuilding would hide the cut, and
            # refusing the opening would refuse verify and export with it.
            self._rebuild(changed, None, at_setup=True)
        # Only now does every table exist: a new version may have added one.
        self.backend.guard_reads(self._tables(self.projections))

    @staticmethod
    def _tables(projections: Sequence[Projection]) -> list[str]:
        """Every table of these projections."""
        return [table for projection in projections for table in projection.tables]

    def _rebuilt_indexes(self, sql: Sql) -> set[str]:
        """The indexes a rebuild swapped in, by their own names.

        A shadow build creates its indexes under tagged names (``memories_subject_1a2b3c4d``)
        beside the live ones, since an index's name is the schema's, not its table's. On
        SQLite the swap renames the tables and the indexes go with them under those names
        (SQLite cannot rename an index), so ``create`` would build each one again under
        its own name at the next opening: every write would then keep both. An index in
        tagged form is kept as the index of that name; where one was built again already,
        the tagged twin is dropped. (PostgreSQL's swap renames the indexes back to their
        own names: see its ``replace_table``.)"""
        indexes = self.backend.indexes(sql)
        names = {name for name, _ in indexes}
        built: set[str] = set()
        for name, table in indexes:
            tagged = TAGGED.fullmatch(name)
            if tagged is None or table.endswith(SUFFIX):
                continue
            if tagged.group(1) in names:
                sql.execute(f"DROP INDEX {name}")
            else:
                built.add(tagged.group(1))
        return built

    def versions(self) -> dict[str, int]:
        """Return each projection's recorded schema version."""
        with translated_errors(), self.backend.read() as sql:
            return self._recorded_versions(sql)

    def status(self) -> list[tuple[Projection, int, int, int]]:
        """Each projection with its tracked position, the log's head and how many events
        it has yet to apply, from one snapshot. The events are counted, not inferred
        from positions: a log imported from one namespace's export keeps its positions'
        gaps."""
        with translated_errors(), self.backend.read() as sql:
            head = self.log.tip(sql).position
            tracked = self.tracked_positions(sql)
            behind = {
                position: self.log.count(sql, EventFilter(after=position, until=head))
                for position in set(tracked.values())
            }
        return [(p, tracked[p.name], head, behind[tracked[p.name]]) for p in self.projections]

    def caught_up(self, sql: Sql) -> bool:
        """Whether every projection has applied the whole log, in ``sql``'s snapshot."""
        lowest, head = self._lag_in(sql)
        return lowest >= head

    def lag(self) -> tuple[int, int]:
        """Return the lowest tracked position and the head of the log, from one snapshot."""
        with translated_errors(), self.backend.read() as sql:
            return self._lag_in(sql)

    def lag_query(self) -> tuple[str, list[Any]]:
        """A query of one row, ``lowest`` and ``head``: what :meth:`lag` reads, for a
        statement that reads it with what it reads (one snapshot, one statement)."""
        names = [self._tracking_name(p) for p in self.projections]
        return (
            "SELECT (SELECT CASE WHEN count(*) = ? THEN min(coalesce(notification_id, 0)) "
            f"ELSE 0 END FROM {self.backend.tracking_table} "
            f"WHERE application_name IN ({marks(names)})) AS lowest, "
            f"(SELECT coalesce(max(position), 0) FROM {self.log.table}) AS head",
            [len(names), *names],
        )

    def _lag_in(self, sql: Sql) -> tuple[int, int]:
        self.prefetch(sql)  # the two reads travel together (one round trip on PostgreSQL)
        self.log.prefetch_tip(sql)
        return min(self.tracked_positions(sql).values(), default=0), self.log.tip(sql).position

    def catch_up(
        self,
        until: int | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Apply every event not yet applied, up to ``until`` when given (a position where
        an append ends); return the position reached. Once ``stop`` is set, stop after
        the batch being folded (each batch commits on its own): a follower told to stop
        (SIGTERM) folded its whole backlog first, tens of seconds for a large one.

        Where two of this runner's write transactions must leave a writer waiting for
        the lock its turn between them (SQLite, see ``Backend.writer_turn_seconds``),
        each batch is read and decoded in a snapshot first (:meth:`_prepare`), and the
        write transaction checks it and folds it: the turn is spent reading instead of
        sleeping (see docs/performance.md). Where the lock is granted in order
        (PostgreSQL) there is no turn to fill, and the batch is read in the transaction,
        as a read ahead gained nothing there."""
        lowest, head = self.lag()
        target = head if until is None else min(until, head)
        released: float | None = None  # when this runner's last writes (a batch's) ended
        while lowest < target and not (stop is not None and stop.is_set()):
            prepared = self._prepare(target) if self.backend.writer_turn_seconds else None
            if released is not None:  # a writer waiting for the lock gets its turn
                pause = self.backend.writer_turn_seconds - (time.monotonic() - released)
                if pause > 0:
                    time.sleep(pause)
            # Not durable: a crash can only set the projections back to a position they
            # fully applied, and the log (which is durable) folds again from there. A
            # shadow build is followed by the rebuild's durable swap.
            bulk = self.shadow is not None
            with refused_folds(lowest), self.backend.write(durable=False, bulk=bulk) as sql:
                lowest = self.apply_batch(sql, until=target, prepared=prepared)
            self.after_commit(lowest)
            if progress is not None:  # may write too: a rebuild renews its claim
                for projection in self.projections:
                    progress(projection.name, lowest, target)
            released = time.monotonic()
        return lowest

    def after_commit(self, head: int) -> None:
        """After a catch-up batch or a write that folded itself has committed, up to log
        position ``head``: refresh the planner's statistics each time the projections have
        grown to twice the position they were last analyzed at (from
        :data:`ANALYZE_FLOOR` events), since without statistics PostgreSQL plans a grown
        table as if it were empty (a search then walks every memory); then let each
        projection do its own upkeep. SQLite runs without statistics (its ``analyze``
        does nothing): its queries are written so that its fixed rules pick the index
        that fits (docs/decisions.md, "Queries leave SQLite one good index"). A shadow
        build does none of this: it leaves the live tables as they are, and the rebuild
        analyzes what it swaps in (ANALYZE of the live tables at each
        doubling of a build from 0 took an eighth of a PostgreSQL rebuild)."""
        if self.shadow is not None:
            return
        if head >= max(ANALYZE_FLOOR, 2 * self.analyzed_head):
            self.backend.analyze()
            self.analyzed_head = head
        for projection in self.projections:
            projection.after_commit(self.backend)

    def prefetch(self, sql: Sql) -> None:
        """Send ahead the read :meth:`fold_appended` starts with (see :meth:`Sql.prefetch`)."""
        names = [self._tracking_name(p) for p in self.projections]
        self.backend.prefetch_tracked_positions(sql, names)

    def fold_appended(self, sql: Sql, previous_head: int, appended: Folded) -> bool:
        """Inside an append's transaction, fold the events it just wrote (as the writer
        built them: nothing is read back or decrypted), but only when every projection
        had already applied the log up to ``previous_head``: a lagging projection is left
        to the catch-up after the commit, keeping appends short."""
        tracked = self.tracked_positions(sql)
        refuse_a_cut_log(LogCut.of(tracked, previous_head), "nothing was stored")
        if min(tracked.values(), default=0) < previous_head:
            return False
        self._fold(sql, appended, tracked)
        return True

    def fold_to_tip(self, sql: Sql) -> None:
        """Inside ``sql``'s write transaction (the log cannot grow meanwhile), fold every
        event the projections have not applied."""
        tip = self.log.tip(sql).position
        while self.apply_batch(sql) < tip:
            pass

    def apply_batch(
        self, sql: Sql, until: int | None = None, prepared: Prepared | None = None
    ) -> int:
        """Apply the next batch inside ``sql``'s transaction, no further than ``until``
        (a position where an append ends) when given; return the lowest position.

        A batch ends where an append ended (past ``batch`` events if an append runs on):
        readers never see part of one append, as its writer promised them. A rebuild's
        build is read by nobody until its swap, which folds to the log's tip (where an
        append ends) under the write lock, so its batches stop at ``batch`` events even
        inside an append: a writer waits for one batch, however large the appends were
        (the fold is the same split anywhere, each event folded as known at its own
        position). A rebuild passes ``until``: its build must not fold past the live
        projections it reads, or the proposals it folds there find no candidates.
        (``until`` bounds the positions read, not their count: a log imported from one
        namespace's export keeps its positions, gaps and all.)

        ``prepared`` is the batch as :meth:`_prepare` read it before this transaction;
        it is folded if the projections are still where it found them (another process
        may have folded meanwhile), else the batch is read again here."""
        tracked = self.tracked_positions(sql)
        if prepared is not None and prepared.tracked == tracked:
            records, decoded = prepared.records, self._still_sealed(sql, prepared)
        else:
            records = self._next_records(sql, tracked, until)
            if not records:
                return min(tracked.values(), default=0)
            decoded = self.log.decode_many(sql, records)
        return self._fold(sql, list(zip(records, decoded, strict=True)), tracked)

    def _prepare(self, until: int) -> Prepared | None:
        """Read and decode the batch that comes next, in a snapshot (no write lock held),
        for :meth:`apply_batch` to fold; None when there is none.

        The log's tip is read in the same snapshot as the keys: a hard forget that
        commits after the snapshot moves the tip, and one that committed before it has
        destroyed its keys in it (see :meth:`_still_sealed`)."""
        with translated_errors(), self.backend.read() as sql:
            tip = self.log.tip(sql).position
            tracked = self.tracked_positions(sql)
            records = self._next_records(sql, tracked, until)
            if not records:
                return None
            return Prepared(tracked, tip, records, self.log.decode_many(sql, records))

    def _next_records(
        self, sql: Sql, tracked: dict[str, int], until: int | None
    ) -> list[RecordedEvent]:
        """The events of the next batch (see :meth:`apply_batch`) after ``tracked``."""
        start = min(tracked.values(), default=0)
        if until is not None and until <= start:
            return []
        records = self.log.read(sql, EventFilter(after=start, until=until), limit=self.batch)
        runs_on = len(records) == self.batch and (until is None or records[-1].position < until)
        if runs_on and self.shadow is None:  # a build need not end where an append did
            records += self.log.rest_of_append(sql, records[-1])
        return records

    def _still_sealed(self, sql: Sql, prepared: Prepared) -> list[LedgerEvent]:
        """The prepared batch's events, with every assertion whose key a hard forget has
        destroyed since they were decoded decoded again (erased, as the fold must meet
        it: its content must not reach the tables after the forget wiped them). A key
        goes only in the transaction that appends its forget, so while the log's tip has
        not moved there is nothing to look up."""
        if self.log.tip(sql).position == prepared.tip:
            return prepared.decoded
        opened = [
            (index, record)
            for index, (record, event) in enumerate(
                zip(prepared.records, prepared.decoded, strict=True)
            )
            if isinstance(event, Asserted) and not event.erased
        ]
        present = self.log.keyring.present(sql, [record.memory_key for _, record in opened])
        gone = [(index, record) for index, record in opened if record.memory_key not in present]
        if not gone:
            return prepared.decoded
        decoded = list(prepared.decoded)
        again = self.log.decode_many(sql, [record for _, record in gone])
        for (index, _), event in zip(gone, again, strict=True):
            decoded[index] = event
        return decoded

    def _fold(self, sql: Sql, batch: Folded, tracked: dict[str, int]) -> int:
        """Fold a batch projection by projection (each one's writes grouped), skipping
        what a projection already applied, and record how far each got; return the
        batch's last position.

        Projection by projection is the same as event by event because the only
        projection that reads another's tables (``proposals``) reads them as known at
        each event's own recorded instant, through the bitemporal versions.
        """
        target = self.shadow.wrap(sql) if self.shadow else sql
        last = batch[-1][0].position
        advanced = []
        for projection in self.projections:
            reached = tracked[projection.name]
            if last <= reached:
                continue
            projection.apply_many(target, [pair for pair in batch if pair[0].position > reached])
            advanced.append(self._tracking_name(projection))
        if advanced:
            self.backend.advance_tracking(sql, advanced, last)
        return last

    def erase(self, sql: Sql, erased: Sequence[tuple[str, int]]) -> None:
        """Inside the transaction of hard forgets that do not fold them (a writer that
        leaves folding to a follower, or projections lagging behind the log), wipe the
        memories' content from the live tables: the key and every plain-text copy go in
        the same commit, whenever the ``Forgotten`` events are folded. ``erased``: each
        memory with its forget's instant."""
        for projection in self.projections:
            projection.erase_many(sql, erased)

    def erase_from_builds(self, sql: Sql, erased: Sequence[tuple[str, int]]) -> None:
        """Inside a hard forget's transaction, wipe the memories' content from the shadow
        tables of a rebuild, running in another process or left half-done: what the
        build folded before the key was destroyed holds the content in plain text. (From
        this transaction on a build folds the memories' assertions erased: it decodes
        them again under the write lock if it read them before, see
        :meth:`_still_sealed`.)"""
        shadow = Shadow.of(self.projections)
        present = self.backend.existing_tables(sql, list(shadow.renames.values()))
        for projection in self.projections:
            if projection.tables and all(shadow.renames[t] in present for t in projection.tables):
                projection.erase_many(shadow.wrap(sql), erased)

    def rebuild(self, name: str | None = None, progress: Progress | None = None) -> list[str]:
        """Rebuild projections (all, or the one named, with those that read it) from
        position 0 without downtime; return the names of those rebuilt.

        Fresh tables are folded beside the live ones, batch by batch, while writers go
        on appending and readers go on reading the live tables; then, holding the write
        lock, the last events are applied and the new tables swapped in, in one
        transaction. A rebuild that dies half-way leaves the live tables untouched. One
        rebuild runs at a time: while another runs (in this process or another), this
        one is refused.
        """
        chosen = self._with_readers(self._chosen(name))
        self._rebuild(chosen, progress)
        return [projection.name for projection in chosen]

    def _rebuild(
        self, chosen: list[Projection], progress: Progress | None, at_setup: bool = False
    ) -> None:
        """Build ``chosen`` beside the live tables and swap them in (see :meth:`rebuild`):
        the new tables replace the old ones whole, whatever their columns (see
        :meth:`Backend.replace_table`)."""
        chosen = self._with_readers(chosen)
        claim = self._claim(chosen if at_setup else None)
        if claim is None:
            return
        shadow = Shadow.of(chosen)
        builder = ProjectionRunner(self.log, chosen, self.batch, shadow)
        try:
            with translated_errors(), self.backend.write() as sql:
                self._refuse_to_hide_a_cut(sql)
                for projection in chosen:
                    projection.drop(shadow.wrap(sql))
                    shadow.create(sql, projection)
                    self.backend.reset_tracking(sql, builder._tracking_name(projection))
            # A projection reads the others' tables as known at each event (proposals
            # read the versions): those not rebuilt here must be caught up at least as far
            # as the build folds, before it, at each retry and under the swap's lock. Those
            # rebuilt here are read in the shadow, at the build's own position.
            others = [p for p in self.projections if p not in chosen]
            live = ProjectionRunner(self.log, others, self.batch) if others else None
            renew = self._renewal(claim)  # a long build keeps the claim
            renewing = self._renewing(renew, progress)
            reached = live.catch_up(progress=renewing) if live else None
            builder.catch_up(until=reached, progress=renewing)
            builder.finish_catching_up(renew)
            self.backend.analyze_build(list(shadow.renames.values()))
            for attempt in range(SWAP_ATTEMPTS):
                try:
                    with translated_errors(), self.backend.write() as sql:
                        self._hold_claim(sql, claim)
                        self._refuse_to_hide_a_cut(sql)
                        if live:
                            live.fold_to_tip(sql)
                        builder.fold_to_tip(sql)
                        self._swap(sql, builder, chosen, patient=attempt == SWAP_ATTEMPTS - 1)
                        self._drop_claim(sql)
                    # The swapped-in rows are new to the planner's statistics.
                    self.backend.analyze()
                    return
                except (LostClaim, CutLog):
                    raise
                except StoreUnavailable:
                    if attempt == SWAP_ATTEMPTS - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
                    builder.catch_up(until=live.catch_up(progress=renewing) if live else None)
        except LostClaim:
            raise
        except BaseException:
            # A build that failed (or was interrupted) leaves nothing behind: its shadow
            # tables are a second copy of the projections, content included.
            with suppress(StoreUnavailable), translated_errors(), self.backend.write() as sql:
                if self._owner(sql) == claim:
                    self._drop_build(sql, builder)
                    self._drop_claim(sql)
            raise

    def log_cut(self, sql: Sql) -> LogCut | None:
        """Return where the log lost events from its end, as the projections' positions
        show it in ``sql``'s snapshot, or None."""
        return LogCut.of(self.tracked_positions(sql), self.log.tip(sql).position)

    def _cut(self) -> bool:
        """Tell whether the log lost events from its end (see :meth:`log_cut`)."""
        with translated_errors(), self.backend.read() as sql:
            return self.log_cut(sql) is not None

    def _refuse_to_hide_a_cut(self, sql: Sql) -> None:
        """Refuse a rebuild of a log that lost events from its end: the projections'
        positions are the only trace of them (``verify`` reports it from them), and the
        rebuilt projections would know only the shorter log."""
        refuse_a_cut_log(
            self.log_cut(sql),
            "a rebuild would erase that trace, so nothing was rebuilt (restore the log "
            "from an export into an empty store)",
        )

    def _claim(self, changed: list[Projection] | None) -> int | None:
        """Take the claim to rebuild; return its token (None: nothing left to do).

        Two builds in the shadow tables at once would undo each other's work (each
        starts them afresh) and mix their deferred writes, so one build runs at a time.
        The claim is three rows of the registry: when it lapses (µs, by the database's
        clock), whose it is (a random token) and which process runs it. A rebuild
        finding another's claim alive is refused; the setup's (``changed``: a schema
        change, a table lost) waits for it, then finds its projections at their new
        versions with all their tables if that build was its own (None), or takes the
        claim once it is released, has lapsed (a build that died) or names a process of
        this host that is gone (see :func:`died`). The build renews it as it goes and
        checks it is still its own before every renewal and in its swap."""
        while True:
            with translated_errors(), self.backend.write() as sql:
                recorded = self._recorded_versions(sql)
                if changed is not None and self._settled(sql, recorded, changed):
                    return None
                if not self._claimed(sql, recorded):
                    if changed is not None:
                        why = partial(self._why_rebuilt, sql, recorded)
                        self.log.keyring.admit_rebuild(sql, why)
                    token = secrets.randbits(62)
                    self._write_claim(sql, token)
                    return token
            if changed is None:
                raise StoreUnavailable(
                    "another rebuild (of this process or another) is under way; "
                    "try again once it is done"
                )
            time.sleep(CLAIM_POLL_SECONDS)

    def _due(self, sql: Sql, recorded: dict[str, int]) -> dict[str, str]:
        """The projections a rebuild is due for, by name, each with why: its schema
        version as recorded is not this code's, or it lost a table (one never recorded
        is new, and is only created)."""
        present = self.backend.existing_tables(sql, self._tables(self.projections))
        due = {}
        for p in self.projections:
            known = recorded.get(p.name)
            if known is not None and known != p.version:
                due[p.name] = (
                    f"{p.name} is at version {known} of its schema, this erstwhile reads "
                    f"version {p.version}"
                )
            elif known is not None and not set(p.tables) <= present:
                due[p.name] = f"{p.name} lost a table"
        return due

    def _why_rebuilt(self, sql: Sql, recorded: dict[str, int]) -> str:
        """Say why the opening rebuilds (see :meth:`_due`; the projections rebuilt only
        because they read those go unnamed)."""
        return "; ".join(self._due(sql, recorded).values())

    def _settled(self, sql: Sql, recorded: dict[str, int], projections: list[Projection]) -> bool:
        """Tell whether every one of ``projections`` is at its version with all its tables."""
        tables = self._tables(projections)
        return all(recorded.get(p.name) == p.version for p in projections) and len(
            self.backend.existing_tables(sql, tables)
        ) == len(set(tables))

    def _claimed(self, sql: Sql, recorded: dict[str, int]) -> bool:
        """Whether a rebuild holds the claim: taken, not lapsed, its process not gone."""
        lapses = recorded.get(CLAIM)
        return not (
            lapses is None
            or lapses <= self.backend.clock_micros(sql)
            or died(recorded.get(CLAIM_PROCESS))
        )

    def _drop_build(self, sql: Sql, builder: ProjectionRunner) -> None:
        """Drop a build's shadow tables and forget how far it got."""
        for projection in builder.projections:
            projection.drop(builder.shadow.wrap(sql) if builder.shadow else sql)
            self.backend.reset_tracking(sql, builder._tracking_name(projection))

    def _drop_abandoned_build(self, sql: Sql, recorded: dict[str, int]) -> None:
        """Drop the shadow tables a rebuild left when it died without cleaning up (killed
        outright), unless a rebuild is running: they are a second copy of the
        projections, content included, that nothing reads."""
        shadow = Shadow.of(self.projections)
        present = self.backend.existing_tables(sql, list(shadow.renames.values()))
        if present and not self._claimed(sql, recorded):
            self._drop_build(sql, ProjectionRunner(self.log, self.projections, self.batch, shadow))

    def _hold_claim(self, sql: Sql, token: int) -> None:
        """Renew this build's claim, or raise :class:`LostClaim` if it is not its own
        any more (it lapsed while the build stalled, and another took over)."""
        if self._owner(sql) != token:
            raise LostClaim(
                "this rebuild stalled past its claim and another process took the rebuild "
                "over; nothing was swapped in"
            )
        self._write_claim(sql, token)

    def _write_claim(self, sql: Sql, token: int) -> None:
        self._drop_claim(sql)
        lapses = self.backend.clock_micros(sql) + int(CLAIM_SECONDS * 1_000_000)
        sql.executemany(
            f"INSERT INTO {REGISTRY_TABLE} (name, version) VALUES (?, ?)",
            [(CLAIM, lapses), (CLAIM_OWNER, token), (CLAIM_PROCESS, this_process())],
        )

    def _owner(self, sql: Sql) -> int | None:
        return self._recorded_versions(sql).get(CLAIM_OWNER)

    @staticmethod
    def _drop_claim(sql: Sql) -> None:
        sql.execute(
            f"DELETE FROM {REGISTRY_TABLE} WHERE name IN (?, ?, ?)",
            (CLAIM, CLAIM_OWNER, CLAIM_PROCESS),
        )

    def _renewal(self, token: int) -> Callable[[], None]:
        """A call that renews this build's claim as the build goes: at most once a
        second, in a transaction of its own, which checkpoints the WAL no sooner than
        the build's own (``bulk``): at SQLite's 1,000 pages it checkpointed the build's
        WAL at every renewal (62 syncs against 35 in a rebuild of 90,000 events)."""
        renewed = [time.monotonic()]

        def renew() -> None:
            if time.monotonic() - renewed[0] >= 1.0:
                with translated_errors(), self.backend.write(durable=False, bulk=True) as sql:
                    self._hold_claim(sql, token)
                renewed[0] = time.monotonic()

        return renew

    @staticmethod
    def _renewing(renew: Callable[[], None], progress: Progress | None) -> Progress:
        """``progress``, renewing the rebuild's claim (``renew``) at each report."""

        def report(name: str, position: int, head: int) -> None:
            renew()
            if progress is not None:
                progress(name, position, head)

        return report

    def finish_catching_up(self, renew: Callable[[], None] | None = None) -> None:
        """In a shadow build that has caught up with the log: let each projection make
        the writes it put off (see :meth:`Projection.caught_up`), then create the
        indexes that only reads use (see :attr:`Projection.reader_indexes`); from here
        on the build folds as the live projections do. ``renew`` keeps the rebuild's
        claim as the indexes are built.

        An index created over a full table sorts it once, where one kept up as the build
        folds takes a probe at every insert (docs/performance.md has the figures). Each
        is built in a transaction of its own, and where a writer waiting for the lock
        must be left its turn between two (SQLite, see ``Backend.writer_turn_seconds``)
        the build pauses for it, as between two of its batches."""
        if self.shadow is None or self.shadow.caught_up:
            return
        deferring = [p for p in self.projections if p.name in self.shadow.deferred]
        if deferring:
            with translated_errors(), self.backend.write(durable=False, bulk=True) as sql:
                for projection in deferring:
                    projection.caught_up(self.shadow.wrap(sql))
        for built, statement in enumerate(self.shadow.postponed_indexes()):
            if built:
                time.sleep(self.backend.writer_turn_seconds)
            with translated_errors():
                self.backend.build_index(statement)
            if renew is not None:
                renew()
        self.shadow.caught_up = True

    def _swap(
        self, sql: Sql, builder: ProjectionRunner, chosen: list[Projection], patient: bool
    ) -> None:
        """Replace ``chosen``'s tables by the build's. Only the last attempt waits for
        every read in flight to end (see :meth:`Backend.lock_for_replace`)."""
        self.backend.lock_for_replace(sql, [t for p in chosen for t in p.tables], patient)
        for projection in chosen:
            reached = builder._tracked(sql, projection)
            for table in projection.tables:
                self.backend.replace_table(sql, table, builder.shadow_name(table))
            self.backend.reset_tracking(sql, builder._tracking_name(projection))
            self.backend.reset_tracking(sql, projection.name)
            if reached:
                self.backend.insert_tracking(sql, projection.name, reached)
            self._record_version(sql, projection)

    def shadow_name(self, table: str) -> str:
        """The name ``table`` has while this runner builds it."""
        return self.shadow.renames[table] if self.shadow else table

    def _with_readers(self, chosen: list[Projection]) -> list[Projection]:
        """``chosen`` and every projection that reads one of them (see
        :attr:`Projection.reads`), in the runner's order (what is read comes first)."""
        names = {p.name for p in chosen}
        return [p for p in self.projections if p.name in names or names & set(p.reads)]

    def _chosen(self, name: str | None) -> list[Projection]:
        chosen = [p for p in self.projections if name is None or p.name == name]
        if not chosen:
            known = ", ".join(p.name for p in self.projections)
            raise ValidationError(f"unknown projection {name!r}; known: {known}")
        return chosen

    def _tracking_name(self, projection: Projection) -> str:
        return projection.name + (self.shadow.suffix if self.shadow else "")

    def tracked_positions(self, sql: Sql) -> dict[str, int]:
        """Each projection's position (keyed by projection name), in one query."""
        names = {self._tracking_name(p): p.name for p in self.projections}
        found = self.backend.tracked_positions(sql, list(names))
        return {names[tracking]: position for tracking, position in found.items()}

    def _tracked(self, sql: Sql, projection: Projection) -> int:
        return self.backend.tracked_position(sql, self._tracking_name(projection))

    def _recorded_versions(self, sql: Sql) -> dict[str, int]:
        sql.execute(f"SELECT name, version FROM {REGISTRY_TABLE}")
        return {row["name"]: row["version"] for row in sql.fetchall()}

    def _record_version(self, sql: Sql, projection: Projection) -> None:
        sql.execute(f"DELETE FROM {REGISTRY_TABLE} WHERE name = ?", (projection.name,))
        sql.execute(
            f"INSERT INTO {REGISTRY_TABLE} (name, version) VALUES (?, ?)",
            (projection.name, projection.version),
        )


PID_BITS = 22
"""Process ids fit in 22 bits on Linux (``pid_max`` is at most 2**22)."""


@cache
def this_boot() -> int:
    """40 bits of this host's boot id and this process's PID namespace (0 where the
    system gives neither): a process id means something only to processes of the same
    host, since the same boot, in the same namespace (two containers on one host share
    the boot, not the process ids)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as file:
            boot = file.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0
    digest = hashlib.sha256(boot + b"/" + str(namespace).encode()).digest()
    return int.from_bytes(digest[:5], "big") or 1


def this_process() -> int:
    """The rebuild claim's process row: this host's boot and this process's id."""
    return (this_boot() << PID_BITS) | (os.getpid() & ((1 << PID_BITS) - 1))


def died(process: int | None) -> bool:
    """Whether the process a claim names is known to be gone: it ran on this host since
    this boot and no process has its id any more (a rebuild killed outright, whose claim
    would otherwise hold until it lapses). Anything uncertain counts as alive: another
    host, an unknown boot, an id taken again by another process."""
    if not process or not this_boot() or process >> PID_BITS != this_boot():
        return False
    pid = process & ((1 << PID_BITS) - 1)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: it exists
        return False
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether the process has exited and waits only for its parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False
    # "pid (command) state ...": the command may hold spaces and parentheses.
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z"


class LostClaim(StoreUnavailable):
    """A rebuild that stalled past its claim found another build had taken over."""


class CutLog(StoreUnavailable):
    """The log lost events from its end: the projections applied it further than it
    reaches (see :func:`refuse_a_cut_log`). Trying again changes nothing."""
