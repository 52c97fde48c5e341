"""Queries, answered from the projections: lineage, facts, the audit stream, search."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from erstwhile.domain.errors import (
    NotFound,
    ValidationError,
)
from erstwhile.domain.events import Asserted, LedgerEvent
from erstwhile.domain.memory import Kind, Memory, check_position
from erstwhile.domain.time import Instant, optional_utc, to_micros
from erstwhile.domain.views import History, Hit, LoggedEvent, Rectangle
from erstwhile.eventstore import (
    EventFilter,
    translated_errors,
)
from erstwhile.ledger.arguments import as_id, flag, label_argument, names
from erstwhile.ledger.core import LedgerCore
from erstwhile.projections import (
    recall,
)
from erstwhile.projections.reader import LATEST

MAX_FILTER_ENTITIES = 1000
"""How many entities a search may filter by: each is a parameter of its statements, and
PostgreSQL takes at most 65,535 (a memory's own entities fit in 16 KiB of JSON)."""


class Queries(LedgerCore):
    """history, chain, facts, timeline, events, search."""

    def history(self, memory_id: UUID | str) -> History:
        """Return a memory with what superseded it and what it superseded (one level),
        read in one statement (forgotten neighbours are left out)."""
        key = as_id(memory_id, "memory_id")
        with translated_errors(), self.log.backend.read_one() as sql:
            memory, neighbours = self.reader.history(sql, key)
        linked = {m.id: m for m in neighbours}
        return History(
            memory=memory,
            superseded_by=linked.get(memory.superseded_by) if memory.superseded_by else None,
            supersedes=[linked[i] for i in memory.supersedes if i in linked],
        )

    def chain(self, memory_id: UUID | str) -> list[Memory]:
        """Return the whole lineage through supersession, both ways, in log order.

        Forgotten memories are walked through (the links stay) but not returned.
        """
        key = as_id(memory_id, "memory_id")
        with translated_errors(), self.log.backend.read_one() as sql:
            return self.reader.chain(sql, key)

    def facts(
        self,
        subject: str,
        attribute: str | None = None,
        *,
        as_of: Instant | None = None,
        known_at: Instant | None = None,
    ) -> list[Memory]:
        """Return what is true about ``subject`` now, at valid time ``as_of``, as known at
        ``known_at``. Without ``as_of``, "now" is ``known_at`` if given, else the clock,
        or the log's last recorded instant where that is later (a clock set back)."""
        label_argument(subject, "subject", required=True)
        label_argument(attribute, "attribute")
        known = optional_utc(known_at, "known_at")
        valid = optional_utc(as_of, "as_of")
        with translated_errors(), self.log.backend.read_one() as sql:
            return self.reader.facts(
                sql,
                subject,
                attribute,
                valid_at=valid or known,
                known_at=known,
                include_archived=valid is not None,
                now=None if valid or known else self.now(),
            )

    def timeline(self, subject: str, attribute: str | None = None) -> list[Rectangle]:
        """Return every version of the memories about ``subject`` (and ``attribute``) in
        recorded order: the rectangles of a bi-temporal picture, valid time across and
        recorded time down. A forgotten memory's versions end at its forget; a
        hard-forgotten memory has none."""
        label_argument(subject, "subject", required=True)
        label_argument(attribute, "attribute")
        with translated_errors(), self.log.backend.read_one() as sql:
            return self.reader.timeline(sql, subject, attribute)

    def events(
        self,
        *,
        after: int | None = None,
        until: int | None = None,
        since: Instant | None = None,
        before: Instant | None = None,
        memory_id: UUID | str | None = None,
        actor: str | None = None,
    ) -> Iterator[LoggedEvent]:
        """Stream this namespace's stored events in log order: positions ``(after, until]``,
        instants ``[since, before)``, optionally one memory's or one actor's. A memory
        with no event in this namespace is ``NotFound`` (once the stream reaches its end
        without one); bad arguments are refused at the call, before the stream starts."""
        for name, position in (("after", after), ("until", until)):
            if position is not None:
                check_position(position, name)
        label_argument(actor, "actor")
        selection = EventFilter(
            after=after,
            until=until,
            since=optional_utc(since, "since"),
            before=optional_utc(before, "before"),
            memory_id=as_id(memory_id, "memory_id") if memory_id is not None else None,
            actor=actor.strip() if actor is not None else None,  # as the ledger stores it
            namespace=self.namespace,
        )
        return self._logged(selection)

    def _logged(self, selection: EventFilter) -> Iterator[LoggedEvent]:
        found = False
        for record, event in self.log.events(selection):
            found = True
            erased = isinstance(event, Asserted) and event.erased
            yield LoggedEvent(
                position=record.position,
                recorded_at=record.recorded_at,
                type=record.type,
                memory_id=record.memory_id,
                actor=record.actor,
                namespace=record.namespace,
                data=None if erased else event_data(event),
            )
        if selection.memory_id is not None and not found and not self._stored(selection):
            raise NotFound(f"no memory {selection.memory_id} in namespace {self.namespace!r}")

    def _stored(self, selection: EventFilter) -> bool:
        """Whether the selected memory has any event in this namespace (a selection
        bounded by position, instant or actor may leave out all of them)."""
        whole = EventFilter(memory_id=selection.memory_id, namespace=self.namespace)
        with translated_errors(), self.log.backend.read() as sql:
            return bool(self.log.read(sql, whole, limit=1))

    def search(
        self,
        query: str = "",
        *,
        as_of: Instant | None = None,
        known_at: Instant | None = None,
        include_history: bool = False,
        kinds: Sequence[str] | None = None,
        subject: str | None = None,
        attribute: str | None = None,
        entities: Sequence[str] | None = None,
        limit: int = 10,
    ) -> list[Hit]:
        """Find memories by meaning-bearing words: what is true now (or at ``as_of``, as
        known at ``known_at``); ``include_history`` adds the rest a full tier below.

        Within a tier, memories sharing more of the query's terms come first, then the
        higher text score, then the more recent (docs/decisions.md, "Search"). ``kinds``
        keeps memories of any of those kinds, ``entities`` those naming any of them: None
        filters nothing, an empty list leaves nothing.
        """
        if not isinstance(query, str):
            raise ValidationError(f"query must be text, not {type(query).__name__}")
        if "\x00" in query:
            raise ValidationError("query must not contain NUL bytes")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ValidationError("limit must be an integer from 1 to 1000")
        flag(include_history, "include_history")
        label_argument(subject, "subject")
        label_argument(attribute, "attribute")
        entities, kinds = names(entities, "entities"), names(kinds, "kinds")
        for entity in entities or ():
            label_argument(entity, "entities", required=True)
        if entities is not None and len(set(entities)) > MAX_FILTER_ENTITIES:
            raise ValidationError(
                f"entities: a search takes at most {MAX_FILTER_ENTITIES:,} names to filter by"
            )
        known = optional_utc(known_at, "known_at")
        valid = optional_utc(as_of, "as_of")
        chosen = list(dict.fromkeys(_kind(k) for k in kinds)) if kinds is not None else None
        if chosen == [] or entities == []:
            return []  # any of no kinds, naming any of no entities: nothing matches
        # "Now" and the answer come from one snapshot: "now" is then never before the
        # last event the projections hold, which the live search index relies on.
        with translated_errors(), self.log.backend.read() as sql:
            request = recall.SearchRequest(
                query=query,
                valid_at=valid or known or self._present(sql),
                as_of_given=valid is not None,
                known_at=known,
                include_history=include_history,
                kinds=chosen,
                subject=subject,
                attribute=attribute,
                entities=list(entities) if entities is not None else None,
                limit=limit,
                known_position=None if known is None else self.log.position_at(sql, known),
            )
            raw = recall.search(sql, self.namespace, self.search_index, request)
            recorded = LATEST if known is None else to_micros(known)
            memories = self.reader.with_links(sql, [h.row for h in raw], recorded)
            return [
                Hit(memory=memory, score=h.score, tier=h.tier)
                for h, memory in zip(raw, memories, strict=True)
            ]


def _kind(kind: str) -> Kind:
    try:
        return Kind(kind)
    except ValueError:
        raise ValidationError(f"kinds: unknown kind {kind!r}") from None


def event_data(event: LedgerEvent) -> dict[str, Any]:
    """Return an event's payload as plain JSON, without its stream coordinates."""
    data: dict[str, Any] = event.model_dump(
        mode="json", exclude={"originator_id", "originator_version", "erased"}
    )
    return data
