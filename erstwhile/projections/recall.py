"""Reads beyond single memories: search, open proposals and contradictions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from math import comb
from typing import Any
from uuid import UUID

from erstwhile.domain.bar import ClaimView
from erstwhile.domain.memory import Kind, normalise_label
from erstwhile.domain.time import to_micros
from erstwhile.eventstore import Sql
from erstwhile.projections.candidates import CLAIM_SELECT, claim_from_row
from erstwhile.projections.memories import JOINED_MEMORY_COLUMNS
from erstwhile.projections.reader import LATEST
from erstwhile.projections.search import MEMORY_ROWS, SearchProjection, Source, query_terms

MAX_TERMS = 62
"""The most terms a search ranks by: the first ones of the query that occur in the index
(each is a bit of a 64-bit integer in the statements that tell which terms a memory
shares). A memory sharing only terms past them is not found."""
ENUMERATED_SETS = 20
"""The most sets of shared terms one statement names before the search first asks the
index which sets occur at all (a question of up to six terms never needs to)."""
MASKS_PER_STATEMENT = 400
"""The most sets of shared terms one statement ranks: SQLite takes at most 500 queries
joined by ``UNION ALL`` in one statement ("too many terms in compound SELECT"), and a
level of a question of many common words can hold a thousand sets that occur."""
SLACK = 16
"""How many more of a level's best matches than it needs a search reads first, for rows
the tier's filters drop; if they drop more, the level is ranked with the filters applied
(as it is at once for a search filtered by attribute: see :meth:`TierSearch.level`)."""
FULL_INDEX_SLACK = 128
""":data:`SLACK` for a tier ranked in the full index (``as_of``, ``known_at``, the
historical tier), whose window filter drops most matches: with five versions a subject,
about four in five, and a subject's versions share their words, so they rank side by
side. On SQLite, ranking a level again with the filters applied costs more than reading
more rows first: at 100k memories, ``as_of`` searches took p90 19 to 25 ms with 16, 13
to 14 ms with 64 (p50 alike); on a faster machine, with 64 / 128 / 256, ``as_of`` p50
4.0 / 2.8 / 3.0 ms and p90 7.7 / 5.2 / 4.7 ms, ``known_at`` p50 4.0 / 2.5 / 2.9 ms (192),
the same answers, and searches with history alike. On PostgreSQL too, where the
evening machine had preferred 16 (``as_of`` p50 13 to 14 ms, 15 to 17 with 64): on the
faster machine, at 50k memories,
with 16 / 64 / 128 / 256, ``as_of`` p50 14.2 / 4.7 / 4.4 / 4.6 ms (p90 18 to 19 ms and
p99 21 to 24 ms with 64 and more, 34 ms with 16); ``known_at`` p50 15.6 / - / 4.3 ms."""
NARROW = 500
"""A search filtered by subject or entities that leaves at most this many memories in a
tier ranks just those, looked up by key in the index, instead of walking the index's
matches level by level and dropping what the filters refuse; so does one filtered by
attribute or one kind alone when at most this many memories of the namespace, in any
state, have it (see :meth:`TierSearch.walked_few`)."""
ROW = (
    f"SELECT {JOINED_MEMORY_COLUMNS}, v.state AS v_state, v.valid_until AS v_valid_until, "
    "v.superseded_by AS v_superseded_by, "
)


@dataclass(frozen=True)
class SearchRequest:
    """One search, with every instant already resolved."""

    query: str
    valid_at: datetime
    as_of_given: bool
    known_at: datetime | None
    include_history: bool
    kinds: Sequence[Kind] | None
    subject: str | None
    attribute: str | None
    entities: Sequence[str] | None
    limit: int
    known_position: int | None = None
    """With ``known_at``: the position of the last event recorded by then. Every memory
    the ledger knew then was asserted at or before it, so the index reads no row past
    it (an earlier instant ranks a smaller part of the full index)."""


@dataclass(frozen=True)
class RawHit:
    """A row of the memories projection with its score and tier."""

    row: Any
    score: float
    tier: str


@dataclass(frozen=True)
class Tier:
    """Which memories one tier holds: a condition on ``memories m`` and
    ``memory_versions v``, and whether the live index holds every one of them."""

    name: str
    condition: str
    params: list[Any]
    live: bool


def search(
    sql: Sql, namespace: str, index: SearchProjection, request: SearchRequest
) -> list[RawHit]:
    """Rank live memories first (tier ``current``), then, on request, every other memory
    that is not forgotten (tier ``historical``). Within a tier, memories sharing more
    query terms come first, then the higher text score, then the more recent."""
    terms = query_terms(request.query)
    if request.query.strip() and not terms:
        return []
    hits: list[RawHit] = []
    for tier in tiers(request):
        need = request.limit - len(hits)
        if need <= 0:
            break
        ranking = TierSearch(sql, namespace, index, request, tier)
        hits.extend(ranking.ranked(terms, need) if terms else ranking.recent(need))
    return hits


def tiers(request: SearchRequest) -> list[Tier]:
    """Return the tiers a search ranks, best first."""
    valid = to_micros(request.valid_at)
    live = "v.valid_from <= ? AND v.valid_until > ?"
    if not request.as_of_given:
        live += " AND v.state <> 'archived'"
    # The live index holds every memory that can be true now, as the ledger knows it now.
    default = not request.as_of_given and request.known_at is None
    found = [Tier("current", live, [valid, valid], default)]
    if request.include_history:
        found.append(Tier("historical", f"NOT ({live})", [valid, valid], False))
    return found


@dataclass(frozen=True)
class TierSearch:
    """One tier of one search: the transaction it reads in, the namespace, the index,
    what was asked, and which memories the tier holds."""

    sql: Sql
    namespace: str
    index: SearchProjection
    request: SearchRequest
    tier: Tier

    def ranked(self, terms: list[str], need: int) -> list[RawHit]:
        """Rank the tier a level at a time: first the memories sharing every known term,
        then those sharing one fewer, down to one, until ``need`` hits are found. Each
        level ranks only its own memories, so common terms never make the search score
        every memory that shares one of them."""
        known = self.index.known(self.sql, terms, self.tier.live, MAX_TERMS)
        if not known:
            return []
        narrowed = self.narrowed(known, need)
        if narrowed is not None:
            return narrowed
        found: list[RawHit] = []
        occurring: set[int] | None = None
        for shared in range(len(known), 0, -1):
            if occurring is None and comb(len(known), shared) > ENUMERATED_SETS:
                occurring = self.index.signatures(self.sql, known, self.tier.live, self.until)
            if occurring is None:
                masks = [
                    sum(1 << i for i in chosen)
                    for chosen in combinations(range(len(known)), shared)
                ]
            else:
                masks = sorted(mask for mask in occurring if mask.bit_count() == shared)
            if not masks:
                continue
            rows = self.level(known, masks, need - len(found))
            found.extend(RawHit(row, shared + _unit(score), self.tier.name) for row, score in rows)
            if len(found) >= need:
                break
        return found

    @property
    def until(self) -> int | None:
        """The last position whose memory the tier can hold, when the full index is
        ranked as known at an instant (the live index holds only what is known now)."""
        return None if self.tier.live else self.request.known_position

    def narrowed(self, terms: list[str], need: int) -> list[RawHit] | None:
        """Rank the few memories a filtered search leaves in the tier, in the order the
        levels would give (more shared terms, then the higher text score, then the more
        recent); None when the search is not filtered so, or leaves more than
        ``NARROW``. Filtered by subject or entities, the memories left are listed;
        by attribute or one kind alone, only when few memories have it at all
        (:meth:`walked_few`)."""
        request = self.request
        if request.subject is None and not request.entities and not self.walked_few():
            return None
        positions = self.positions(NARROW + 1)
        if len(positions) > NARROW:
            return None
        keys = {position if self.index.keyed_by_position else memory_id: position
                for position, memory_id in positions}  # fmt: skip
        scored = self.index.scored(self.sql, terms, list(keys), self.tier.live)
        best = sorted(
            scored.items(), key=lambda item: (item[1][0].bit_count(), item[1][1], keys[item[0]])
        )[::-1][:need]
        if not best:
            return []
        chosen = self.index.winners([keys[key] for key, _ in best])
        rows = {row["position"]: row for row in self.select(chosen, need)}
        return [
            RawHit(rows[keys[key]], mask.bit_count() + _unit(score), self.tier.name)
            for key, (mask, score) in best
            if keys[key] in rows
        ]

    def level(self, terms: list[str], masks: list[int], need: int) -> list[tuple[Any, float]]:
        """Return the best ``need`` memories of the tier that share exactly one of the
        sets ``masks`` of ``terms``, with their text scores, best first.

        Filtered by attribute, the level is ranked with the filters applied at once: a
        level's best matches mostly share the question's own words, the attribute's name
        among them, so another attribute's filter dropped nearly all of them, and the
        ranking in the index and the read of its best rows came before this one anyway
        (a search filtered by an attribute chosen at random: p50 5.7 against 15.6 ms at
        50k memories on PostgreSQL, 2.9 against 10.6 at 100k on SQLite; filtered by the
        attribute the question names, 2.6 against 3.1 to 3.6 and 1.4 against 1.3)."""
        if len(masks) > MASKS_PER_STATEMENT:
            # Each part's best are the level's best among its sets: merged, best first
            # (the more recent first among equal scores), as one statement ranks them.
            best = [
                found
                for start in range(0, len(masks), MASKS_PER_STATEMENT)
                for found in self.level(terms, masks[start : start + MASKS_PER_STATEMENT], need)
            ]
            best.sort(key=lambda found: (found[1], found[0]["position"]), reverse=True)
            return best[:need]
        if self.request.attribute is not None:
            rows = self.select(self.index.ranked(terms, masks, self.tier.live, self.until), need)
            return [(row, float(row["score"])) for row in rows]
        # Rank inside the index, then read only the best rows.
        slack = SLACK if self.tier.live else FULL_INDEX_SLACK
        scores = dict(
            self.index.top(self.sql, terms, masks, self.tier.live, need + slack, self.until)
        )
        if not scores:
            return []
        chosen = self.index.winners(list(scores))
        rows = self.select(chosen, len(scores), "m.position DESC")
        if len(rows) >= need or len(scores) < need + slack:
            rows.sort(key=lambda row: scores[row["position"]], reverse=True)  # stable
            return [(row, scores[row["position"]]) for row in rows[:need]]
        # The tier's filters dropped too many of the best: rank with them applied.
        rows = self.select(self.index.ranked(terms, masks, self.tier.live, self.until), need)
        return [(row, float(row["score"])) for row in rows]

    def recent(self, need: int) -> list[RawHit]:
        """List the tier by recency, for a search without terms."""
        listing = Source("0.0", *self.filtered_rows())
        rows = self.select(listing, need, "m.position DESC", listing=True)
        return [RawHit(row, 0.0, self.tier.name) for row in rows]

    def select(
        self,
        source: Source,
        limit: int,
        order: str = "score DESC, m.position DESC",
        listing: bool = False,
    ) -> list[Any]:
        """Run one search statement: ``source`` narrowed to what every row of the tier
        meets (:meth:`conditions`; ``listing``: the source is :meth:`filtered_rows`)."""
        where, params = self.conditions(listing)
        self.sql.execute(
            f"{ROW}{source.score} AS score FROM {source.source} "
            f"WHERE {' AND '.join([source.condition, *where])} ORDER BY {order} LIMIT ?",
            [*source.params, *params, limit],
        )
        return self.sql.fetchall()

    def positions(self, limit: int) -> list[tuple[int, str]]:
        """Return (position, id) of up to ``limit`` memories of the tier that pass the
        request's filters.

        Filtered by attribute or kind alone (see :attr:`walked`), the read walks that
        attribute's or kind's memories newest first, through their index (from the
        position known at ``known_at``, if given), until ``limit`` are found: the
        memories true now are mostly the recent ones, and oldest first a search at 100k
        memories read the 80k superseded ones before them (78 ms, against 2 ms). Told
        that order, PostgreSQL's generic plan walks the index too (0.3 ms at 30k
        memories for an attribute forty have, against 11 ms reading every version, as
        it planned for an attribute of average frequency)."""
        source, joined, named = self.filtered_rows()
        where, params = self.conditions(listing=True)
        order = ""
        if self.walked is not None:
            order = " ORDER BY m.position DESC"
            if self.request.known_position is not None:
                where.append("m.position <= ?")
                params.append(self.request.known_position)
        self.sql.execute(
            f"SELECT m.position, m.id FROM {source} WHERE {' AND '.join([joined, *where])}"
            f"{order} LIMIT ?",
            [*named, *params, limit],
        )
        return [(int(row["position"]), str(row["id"])) for row in self.sql.fetchall()]

    def filtered_rows(self) -> tuple[str, str, list[Any]]:
        """Where the tier's rows are read from when no text ranking leads: the source,
        the condition that joins it, and their parameters (which go first). A search
        filtered by entities starts from the memories naming them, through
        ``memory_entities_entity``, and joins in that order (``CROSS JOIN`` fixes it on
        SQLite; PostgreSQL plans it from statistics). Left to choose, SQLite walked every
        memory of the namespace and tested each against the entities' list: 19 ms at 20k
        memories against 3.5 ms at 2k."""
        if self.walked is not None:
            column, value = self.walked
            return MEMORY_ROWS, f"m.{column} = ?", [value]
        names = entity_keys(self.request)
        if not names:
            return MEMORY_ROWS, "1 = 1", []
        named = (
            "(SELECT DISTINCT e.memory_id FROM memory_entities e WHERE e.namespace = ? "
            f"AND e.entity IN ({', '.join('?' * len(names))})) n "
            "CROSS JOIN memories m CROSS JOIN memory_versions v"
        )
        return named, "m.id = n.memory_id AND v.memory_id = m.id", [self.namespace, *names]

    @property
    def walked(self) -> tuple[str, str] | None:
        """The column of ``memories`` and its value that a search filtered by attribute
        alone (no subject, no entities), or else by one kind alone, lists its memories
        by, newest first through the column's index (``memories_attribute``,
        ``memories_kind``); None for other searches. The attribute is said of the
        memory, not its version (a version's key is its memory's), for the index."""
        request = self.request
        if request.subject is not None or request.entities:
            return None
        if request.attribute is not None:
            return "attribute_key", normalise_label(request.attribute)
        if request.kinds is not None and len(set(request.kinds)) == 1:
            return "kind", Kind(request.kinds[0]).value
        return None

    def walked_few(self) -> bool:
        """Whether at most ``NARROW`` memories of the namespace, in any state, have the
        :attr:`walked` attribute or kind (counted in its index alone). More, and the
        levels run with the filter applied: a common kind keeps most of a level's best
        matches, and listing 501 memories first, each joined to its version, added 0.6
        ms to such a search at 100k (0.83 ms without). Counted in the order the listing
        walks, so that PostgreSQL's generic plan walks the index too, where it could
        read every memory for a rare kind."""
        if self.walked is None:
            return False
        column, value = self.walked
        self.sql.execute(
            f"SELECT COUNT(*) AS n FROM (SELECT 1 FROM memories WHERE namespace = ? "
            f"AND {column} = ? ORDER BY position DESC LIMIT ?) AS w",
            [self.namespace, value, NARROW + 1],
        )
        return int(self.sql.fetchone()["n"]) <= NARROW

    def conditions(self, listing: bool = False) -> tuple[list[str], list[Any]]:
        """The conditions (and their parameters) every row of the tier meets: the
        namespace, what the ledger knew at ``known_at`` (or knows now), not forgotten,
        the tier's own and the request's filters. ``listing``: the rows come from
        :meth:`filtered_rows`, which says the :attr:`walked` filter already (said twice,
        PostgreSQL's generic plan misjudged it: said of the version, it read every
        version for an attribute)."""
        request = self.request
        recorded = LATEST if request.known_at is None else to_micros(request.known_at)
        where = [
            "m.namespace = ?", "v.recorded_from <= ?", "v.recorded_until > ?",
            "v.state <> 'forgotten'", "m.erased_at IS NULL", self.tier.condition,
        ]  # fmt: skip
        params = [self.namespace, recorded, recorded, *self.tier.params]
        if request.subject is not None:
            # The same namespace, said of the version row too: then the planner reaches
            # the subject through memory_versions' (namespace, subject_key) index instead
            # of reading every memory of the namespace (a search filtered by subject took
            # 32 ms at 20k memories, not 0.3).
            where.append("v.namespace = ?")
            params.append(self.namespace)
        walked = self.walked[0] if listing and self.walked else None
        _filters(request, self.namespace, where, params, walked)
        if request.attribute is not None and not listing:
            # Said of the memory too, a ranking's join drops another attribute's match
            # before it looks its version up (the mean search filtered by an attribute
            # chosen at random, at 100k memories on SQLite: 7.1 ms against 9.4; at 50k on
            # PostgreSQL: 13.9 against 18, before :meth:`level` ranked such a level at once).
            where.append("m.attribute_key = ?")
            params.append(normalise_label(request.attribute))
        return where, params


def _unit(score: Any) -> float:
    """Map a text score (BM25 or ``ts_rank``, zero or more) into [0, 1), keeping its order."""
    text = max(float(score), 0.0)
    return text / (1.0 + text)


def _filters(
    request: SearchRequest,
    namespace: str,
    where: list[str],
    params: list[Any],
    walked: str | None = None,
) -> None:
    """Add the request's filters, but the one on the column ``walked`` (said already).
    Walking an attribute, the kinds are tested on each row the walk reads, never looked
    up: with one kind, SQLite took ``memories_kind`` for the walk as readily as
    ``memories_attribute`` and read every memory of that kind (``fact``, the default,
    is most of a namespace); ``|| ''`` leaves the column no index on either backend."""
    if request.kinds and walked != "kind":
        kind = "m.kind || ''" if walked == "attribute_key" else "m.kind"
        where.append(f"{kind} IN ({', '.join('?' * len(request.kinds))})")
        params.extend(Kind(kind).value for kind in request.kinds)
    if request.subject is not None:
        where.append("v.subject_key = ?")
        params.append(normalise_label(request.subject))
    if request.attribute is not None and walked != "attribute_key":
        where.append("v.attribute_key = ?")
        params.append(normalise_label(request.attribute))
    if names := entity_keys(request):
        where.append(
            "v.memory_id IN (SELECT e.memory_id FROM memory_entities e WHERE e.namespace = ? "
            f"AND e.entity IN ({', '.join('?' * len(names))}))"
        )
        params.extend([namespace, *names])


def entity_keys(request: SearchRequest) -> list[str]:
    """The entities a search is filtered by, in their indexed form."""
    return list(dict.fromkeys(normalise_label(name) for name in request.entities or ()))


OPEN_PROPOSALS = (
    "SELECT p.id, p.older_id, p.newer_id, p.confidence FROM memories o "
    "JOIN proposals p ON p.older_id = o.id JOIN memories n ON n.id = p.newer_id "
    "WHERE p.namespace = ? AND p.status = 'open' AND o.state = 'current' "
    "AND n.state = 'current' AND o.erased_at IS NULL AND n.erased_at IS NULL "
    "ORDER BY p.position, p.older_id"
)
"""The open proposals of a namespace whose two memories are both still current.
``memories`` is named first, as a rebuild's swap locks the tables (see
:func:`~erstwhile.eventstore.backend.lock_order_kept`), so that it runs as one statement
alone; the planners still start from the open proposals' index."""


def open_proposals(sql: Sql, namespace: str) -> list[Any]:
    """Return open proposals whose two memories are both still current, oldest first."""
    sql.execute(OPEN_PROPOSALS, (namespace,))
    return sql.fetchall()


def proposal_row(sql: Sql, namespace: str, proposal: UUID) -> Any:
    """Return one proposal's row (any status), or None."""
    sql.execute(*_proposal_query(namespace, proposal))
    return sql.fetchone()


def prefetch_proposal_row(sql: Sql, namespace: str, proposal: UUID) -> None:
    """Send :func:`proposal_row`'s read ahead (see :meth:`Sql.prefetch`)."""
    sql.prefetch(*_proposal_query(namespace, proposal))


def _proposal_query(namespace: str, proposal: UUID) -> tuple[str, tuple[str, str]]:
    return (
        "SELECT id, older_id, newer_id, confidence, status FROM proposals "
        "WHERE id = ? AND namespace = ?",
        (str(proposal), namespace),
    )


def _live(table: str) -> str:
    """The condition that a claim of ``table`` (an alias) is live: one the ledger still
    holds, over the window it has, current or superseded (a supersession ends a window,
    it does not withdraw what the claim said before); not archived nor forgotten."""
    return f"{table}.state IN ('current', 'superseded')"


def live_keyed_claims(sql: Sql, namespace: str, subject: str | None) -> list[ClaimView]:
    """Return live (see :func:`_live`), structured, valued claims (events aside), for
    contradiction checks, in log order: those of ``subject``, or, for the whole
    namespace, those of the subjects where two such claims of a key have windows that
    overlap (no other claim can contradict one)."""
    if subject is not None:
        return _subject_claims(sql, namespace, normalise_label(subject))
    claims = [
        claim
        for subject_key in _disagreeing_subjects(sql, namespace)
        for claim in _subject_claims(sql, namespace, subject_key)
    ]
    return sorted(claims, key=lambda claim: claim.position)


def _subject_claims(sql: Sql, namespace: str, subject_key: str) -> list[ClaimView]:
    """The live keyed claims about one (normalised) subject, in log order."""
    sql.execute(
        CLAIM_SELECT + "WHERE v.namespace = ? AND v.subject_key = ? AND v.recorded_until = ? "
        f"AND {_live('v')} "
        "AND v.kind <> 'event' AND v.attribute_key IS NOT NULL "
        "AND m.value IS NOT NULL ORDER BY m.position",
        [namespace, subject_key, LATEST + 1],
    )
    return [claim_from_row(row) for row in sql.fetchall()]


def _disagreeing_subjects(sql: Sql, namespace: str) -> list[str]:
    """The subjects with a key two of whose live claims have overlapping windows (only
    those can contradict; the exact test then compares their values). Read from
    ``memories``, one row per memory in its latest state: in each key's claims in order
    of opening, one that opens before the latest end among those opened before it
    overlaps one of them. A subject's versions, each ending where the next begins, never
    overlap, so revising a claim makes no candidate. Reading every live claim and
    building each took 474 ms at 100k memories for a namespace with no contradiction;
    this read, 252 ms (a raw self-join of the same picture, 166)."""
    sql.execute(
        "SELECT DISTINCT subject_key FROM (SELECT subject_key, valid_from, "
        "MAX(valid_until) OVER (PARTITION BY subject_key, attribute_key ORDER BY valid_from, "
        "position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM memories "
        f"WHERE namespace = ? AND {_live('memories')} AND kind <> 'event' "
        "AND subject_key IS NOT NULL AND attribute_key IS NOT NULL AND value IS NOT NULL) w "
        "WHERE valid_from < reach",
        [namespace],
    )
    return sorted(str(row["subject_key"]) for row in sql.fetchall())
