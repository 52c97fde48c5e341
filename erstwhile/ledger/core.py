"""The ledger's core: opening a store, the clock, reading one memory, appending.

The command and query mixins beside this module build on it; ``Ledger`` in
``erstwhile.ledger`` puts them together.
"""

from __future__ import annotations

import getpass
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Literal, Self
from urllib.parse import unquote_plus, urlsplit, urlunsplit
from uuid import UUID

from erstwhile.domain.errors import (
    StoreUnavailable,
)
from erstwhile.domain.events import (
    Forgotten,
    LedgerEvent,
)
from erstwhile.domain.memory import DEFAULT_NAMESPACE, Memory, check_position
from erstwhile.domain.time import Instant, from_micros, optional_utc, to_utc
from erstwhile.domain.views import ProjectionStatus
from erstwhile.eventstore import (
    EventLog,
    Sql,
    open_backend,
    outcome_unknown,
    translated_errors,
)
from erstwhile.ledger.arguments import (
    as_id,
    callback,
    check_name,
    flag,
    seconds,
    stop_event,
    store_url,
)
from erstwhile.projections import (
    MemoriesProjection,
    MemoryReader,
    ProjectionRunner,
    SearchProjection,
    core_projections,
    projection_tables,
)
from erstwhile.projections.base import Folded, Progress
from erstwhile.projections.reader import MemoryState

Clock = Callable[[], datetime]
Policy = Literal["propose", "timestamp_wins"]


def system_clock() -> datetime:
    """The default clock: the current instant in UTC."""
    return datetime.now(UTC)


SECRET_PARAMETERS = ("password", "sslpassword", "oauth_client_secret")
"""Parameters of a store URL that hold a secret (libpq's, passed on as they are)."""


def mask_password(url: str) -> str:
    """Return ``url`` with its password, and any secret among its parameters, replaced
    by ``***``."""
    parts = urlsplit(url)
    masked = parts
    if parts.password:
        host = parts.netloc.rpartition("@")[2]
        masked = masked._replace(netloc=f"{parts.username or ''}:***@{host}")
    if parts.query:
        masked = masked._replace(query="&".join(map(_masked_parameter, parts.query.split("&"))))
    return url if masked == parts else urlunsplit(masked)


def _masked_parameter(parameter: str) -> str:
    """Return ``name=value`` with its value as ``***`` when the name, decoded as the
    store decodes it (``pass%77ord`` is ``password``), is a secret's."""
    name, equals, _ = parameter.partition("=")
    return f"{name}=***" if equals and unquote_plus(name) in SECRET_PARAMETERS else parameter


def _default_actor() -> str:
    """Who writes when no actor is named: the operating-system user."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "anonymous"


class LedgerCore:
    """A bi-temporal memory ledger over one store, scoped to one namespace and actor."""

    def __init__(
        self,
        log: EventLog,
        *,
        namespace: str,
        actor: str,
        clock: Clock,
        sync_projections: bool = True,
    ) -> None:
        self.log = log
        self.namespace = namespace
        self.actor = actor
        self._clock = clock
        self.sync_projections = sync_projections
        self._folded = False
        self._closed = False
        projections = core_projections(log.backend.dialect)
        self.runner = ProjectionRunner(log, projections)
        self.memories_projection = next(p for p in projections if isinstance(p, MemoriesProjection))
        self.reader = MemoryReader(namespace, log.backend.dialect)
        self.search_index = SearchProjection(log.backend.dialect)

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str] | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        actor: str | None = None,
        clock: Clock | None = None,
        sync_projections: bool = True,
    ) -> Self:
        """Open the ledger a URL names (default ``$ERSTWHILE_URL``, else ``./erstwhile.db``).

        With ``sync_projections=False`` the ledger appends without folding: a separate
        follower (``erstwhile projections run``) keeps the projections current, reads see
        what it has applied, and :meth:`wait_for` gives read-your-writes across
        processes. Commands that check existing memories (revise, archive, supersedes,
        timestamp_wins) fold the log first, and a forget folds up to itself.
        """
        store_url(url)
        namespace = check_name(namespace, "namespace")
        actor = check_name(actor if actor is not None else _default_actor(), "actor")
        callback(clock, "clock")
        flag(sync_projections, "sync_projections")
        backend = open_backend(url, claimed=projection_tables())
        ledger = cls(
            EventLog(backend),
            namespace=namespace,
            actor=actor,
            clock=clock or system_clock,
            sync_projections=sync_projections,
        )
        try:
            ledger.runner.setup()
            if sync_projections:
                ledger.runner.analyzed_head = ledger.runner.catch_up()
        except BaseException:
            backend.close()
            raise
        return ledger

    def close(self) -> None:
        """Release the store's connections."""
        self._closed = True
        self.log.backend.close()

    def __enter__(self) -> Self:
        """Refuse a closed ledger at the ``with``, not at its first call inside."""
        if self._closed:
            raise StoreUnavailable("the ledger was closed; open it again")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The URL of the store this ledger writes to, any password masked."""
        return mask_password(self.log.backend.url)

    def now(self) -> datetime:
        """Read the injected clock, refusing a clock that returns a naive instant."""
        return to_utc(self._clock(), "clock()")

    def head(self) -> int:
        """Return the latest log position (0 for an empty ledger)."""
        return self.log.head()

    def rebuild(self, name: str | None = None, progress: Progress | None = None) -> list[str]:
        """Rebuild projections (all, or the one named) from position 0 of the log, beside
        the live tables, which readers go on reading until the swap; return the names of
        those rebuilt. ``proposals`` reads ``memories`` and ``memory_versions``: naming
        either rebuilds it too. One rebuild
        runs at a time: while another runs (in this process or another),
        ``StoreUnavailable``; so too for a log that lost events from its end, which the
        rebuilt projections would hide.
        ``progress``, when given, is called as ``progress(projection_name,
        position_reached, head)`` as each build goes."""
        callback(progress, "progress")
        return self.runner.rebuild(name, progress)

    def get(self, memory_id: UUID | str, *, known_at: Instant | None = None) -> Memory:
        """Return a memory (as known at ``known_at``); ``NotFound`` if unknown or forgotten."""
        key = as_id(memory_id, "memory_id")
        when = optional_utc(known_at, "known_at")
        with translated_errors(), self.log.backend.read_one() as sql:
            return self.reader.get(sql, key, when)

    def _present(self, sql: Sql) -> datetime:
        """The instant "now" means for reads: the clock, but never behind the log.

        A write is recorded at ``max(clock, last + 2 µs)``; reading "now" the same way
        means a memory that opened when it was recorded is true the moment it returns.
        """
        now = self.now()
        last = self.log.tip(sql).recorded_at
        return now if last is None else max(now, from_micros(last))

    def _state(self, memory_id: UUID | str, what: str = "memory_id") -> MemoryState:
        """A memory's state for a command to decide on, as the whole log leaves it: read
        in one statement with the projections' lag (when they lag, after catching up)."""
        key = as_id(memory_id, what)
        with translated_errors(), self.log.backend.read_one() as sql:
            state, lowest, head = self.reader.state_and_lag(sql, key, self.runner.lag_query())
        if lowest >= head:
            return state()
        self.runner.catch_up()
        with translated_errors(), self.log.backend.read_one() as sql:
            return self.reader.state(sql, key)

    @contextmanager
    def _read_caught_up(self, ahead: Callable[[Sql], None] | None = None) -> Iterator[Sql]:
        """A read transaction in which the projections have applied the whole log, for a
        command that decides on what it reads. When they had (each write folds itself),
        that is the one transaction that found so; otherwise the log is folded first.
        ``ahead`` may send the command's first reads ahead (see :meth:`Sql.prefetch`),
        to travel with the check's own."""
        with translated_errors(), self.log.backend.read() as sql:
            if ahead is not None:
                ahead(sql)
            if self.runner.caught_up(sql):
                yield sql
                return
        self.runner.catch_up()
        with translated_errors(), self.log.backend.read() as sql:
            yield sql

    def _append_one(
        self,
        event: LedgerEvent,
        erase: Sequence[UUID] = (),
        expect: Mapping[UUID, int] | None = None,
    ) -> int:
        """Append one event, fold it as the ledger folds its writes; return its position.
        ``expect``: the streams the decision rests on, with the versions read (see
        :meth:`EventLog.append`)."""
        position = self._append_committed([event], erase, expect)
        self._after_append(position)
        return position

    def _append_committed(
        self,
        events: Sequence[LedgerEvent],
        erase: Sequence[UUID] = (),
        expect: Mapping[UUID, int] | None = None,
    ) -> int:
        """Append events at once, folded as the ledger folds its writes; return the last
        one's position. Committed when it returns, before what follows a commit
        (:meth:`_after_append`), which may fail on its own: a command that must know
        what committed (a hard forget's scrub) runs that step itself. An append that
        erases (``erase``: the memories whose keys it destroys) and loses the store
        before it hears whether it committed says so on its error
        (:func:`uncertain_erasure`)."""
        try:
            result = self.log.append(
                lambda _start: list(events),
                actor=self.actor,
                namespace=self.namespace,
                clock=self.now,
                erase=erase,
                expect=expect,
                then=self._fold_in_append,
                ahead=self._ahead_of_append,
            )
        except StoreUnavailable as lost:
            if erase and outcome_unknown(lost):
                lost.add_note(uncertain_erasure(erase))
            raise
        return result.position

    def _ahead_of_append(self, sql: Sql) -> None:
        """Send the reads a write's own fold starts with together with the read of the
        log's tip (one round trip on PostgreSQL instead of three)."""
        if self.sync_projections:
            self.runner.prefetch(sql)
            self.memories_projection.prefetch(sql, self.namespace, self.actor)

    def _fold_in_append(self, sql: Sql, previous_head: int, appended: Folded) -> None:
        """Fold a write into the projections inside its own transaction when in sync. A
        hard forget wipes its memory's content from every table that holds it, in this
        transaction, in sync or not: from the live tables when they do not fold it here,
        and from a rebuild's."""
        self._folded = self.sync_projections and self.runner.fold_appended(
            sql, previous_head, appended
        )
        erased = [
            (record.memory_key, record.recorded_micros)
            for record, event in appended
            if isinstance(event, Forgotten) and event.hard
        ]
        if erased:
            if not self._folded:
                self.runner.erase(sql, erased)
            self.runner.erase_from_builds(sql, erased)

    def _fold_own_write(self, position: int) -> None:
        """For a command that returns (or hides) what it changed, fold the log up to its
        write even when folding is left to a follower (``sync_projections=False``): such
        a command folded the log before deciding anyway. In sync the write folded itself."""
        if not self.sync_projections:
            self.runner.catch_up(until=position)

    def _after_append(self, position: int) -> None:
        """Read your own writes: fold the log up to this write before returning (unless
        the append already folded it in its own transaction)."""
        if self.sync_projections and not self._folded:
            self.runner.catch_up(until=position)
        if self.sync_projections:
            self.runner.after_commit(position)

    def wait_for(self, position: int | None = None, timeout: float = 10.0) -> int:
        """Wait until every projection has applied the log up to ``position`` (default:
        the head now); return the position reached. For readers whose projections a
        follower process maintains. ``StoreUnavailable`` once ``timeout`` seconds have
        passed, saying where the projections stand."""
        if position is not None:
            check_position(position, "position")
        deadline = time.monotonic() + seconds(timeout, "timeout")
        target = self.head() if position is None else position
        while True:
            lowest, _ = self.runner.lag()
            if lowest >= target:
                return lowest
            if time.monotonic() >= deadline:
                head = self.head()
                why = (
                    f"the log ends at {head}: nothing was written there yet"
                    if target > head
                    else "is a follower (erstwhile projections run) running?"
                )
                raise StoreUnavailable(
                    f"projections reached position {lowest}, not {target}, within {timeout} s; "
                    + why
                )
            time.sleep(0.02)

    def follow(self, stop: threading.Event | None = None, poll: float = 0.5) -> None:
        """Keep the projections current until ``stop`` is set: apply new events as they
        are committed (LISTEN/NOTIFY on PostgreSQL, polling on SQLite). Once ``stop`` is
        set, it returns after the batch it is folding (each commits on its own)."""
        stop_event(stop)
        seconds(poll, "poll", positive=True)
        stop = stop or threading.Event()
        with translated_errors(), self.log.backend.listener(stop) as wait:
            while not stop.is_set():
                self.runner.catch_up(stop=stop)
                wait(poll)

    def projection_status(self) -> list[ProjectionStatus]:
        """Each projection's schema version, tracked position and lag behind the head
        (the events it has yet to apply)."""
        versions = self.runner.versions()
        return [
            ProjectionStatus(name=p.name, version=versions.get(p.name, p.version),
                             position=position, head=head, lag=lag)
            for p, position, head, lag in self.runner.status()
        ]  # fmt: skip

    def _has_key(self, memory_id: UUID) -> bool:
        with translated_errors(), self.log.backend.read_one() as sql:
            return self.log.keyring.exists(sql, memory_id)


def uncertain_erasure(memory_ids: Sequence[UUID]) -> str:
    """Say what to do after a hard forget's append lost the store before it heard
    whether it committed (the connection dropped during the commit, say): the erasure
    may have happened, unscrubbed, or not at all; forgetting again settles both."""
    if len(memory_ids) == 1:
        which, again = f"memory {memory_ids[0]}", "it again (hard), which erases it if it is"
    else:
        which = f"memories {', '.join(map(str, memory_ids))}"
        again = "them again (hard), which erases any that is"
    return (
        f"the hard forget of {which} may have committed before the store stopped "
        f"answering: once it answers, forget {again} not erased yet and scrubs the "
        "database files"
    )
