"""Finding the memories a new claim might replace, through indexes only.

Candidates share the new claim's kind and are current as the ledger knew them at the
given recorded instant, and either share its subject and attribute (the structured key)
or name one of its entities. The bar itself is decided in ``erstwhile.domain.bar``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, Protocol
from uuid import UUID

import orjson

from erstwhile.domain.bar import ClaimView, compared_key
from erstwhile.domain.events import Asserted
from erstwhile.domain.memory import Kind, MemoryDraft, State, canonical_json
from erstwhile.domain.time import OPEN_END, Window, end_from_micros, from_micros
from erstwhile.eventstore import RecordedEvent, Sql, in_lists, marks

CLAIM_SELECT = (
    "SELECT m.id, m.kind, v.state, m.subject_key, m.attribute_key, m.entities, m.valid_from, "
    "v.valid_until, m.value, m.content, m.confidence, m.position FROM memory_versions v "
    "JOIN memories m ON m.id = v.memory_id "
)
KNOWN_COLUMNS = (
    "v.memory_id, v.subject_key, v.attribute_key, v.kind, v.recorded_from, v.recorded_until"
)
"""What sifting candidates needs of a version: whose, which key and kind, known when."""
KNOWN_SELECT = f"SELECT {KNOWN_COLUMNS} FROM memory_versions v "


def claim_from_row(row: Any) -> ClaimView:
    """Build a claim view from a ``CLAIM_SELECT`` row."""
    value = row["value"]
    return ClaimView(
        id=UUID(row["id"]),
        kind=Kind(row["kind"]),
        state=State(row["state"]),
        subject_key=row["subject_key"],
        attribute_key=row["attribute_key"],
        entities=frozenset(orjson.loads(row["entities"] or "[]")),
        window=Window(from_micros(row["valid_from"]), end_from_micros(row["valid_until"])),
        value_json=None if value is None else canonical_json(orjson.loads(value)),
        content=row["content"] or "",
        confidence=row["confidence"],
        position=row["position"],
    )


def claim_from_event(record: RecordedEvent, event: Asserted) -> ClaimView:
    """Build the claim view of a memory being asserted."""
    window = Window(event.valid_from, event.valid_until)
    return ClaimView.of_new(event, event.originator_id, window, record.position)


class Sought(Protocol):
    """What finding a claim's candidates looks at: a :class:`ClaimView` or a
    :class:`Probe`."""

    @property
    def id(self) -> UUID | str: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def subject_key(self) -> str | None: ...
    @property
    def attribute_key(self) -> str | None: ...
    @property
    def entities(self) -> Collection[str]: ...
    @property
    def keyed(self) -> bool: ...


class Probe(NamedTuple):
    """A new claim as far as finding its candidates goes. A fold of many assertions
    builds one per claim and the whole :class:`ClaimView` only for the few claims that
    meet a candidate (a view took 4.4 µs, a probe 0.6)."""

    id: str
    kind: Kind
    subject_key: str | None
    attribute_key: str | None
    entities: Collection[str]

    @property
    def keyed(self) -> bool:
        """Whether the claim is structured: both a subject and an attribute."""
        return self.subject_key is not None and self.attribute_key is not None


def probe_of_event(record: RecordedEvent, event: Asserted) -> Probe:
    """The probe of a memory being asserted (its keys made as :meth:`ClaimView.of_new`
    makes them, by :func:`~erstwhile.domain.bar.compared_key`)."""
    return Probe(
        record.memory_key,
        event.kind,
        compared_key(event.subject),
        compared_key(event.attribute),
        event.entities,
    )


def probe_of_request(draft: MemoryDraft, memory_id: UUID) -> Probe:
    """The probe of a memory a write is about to assert, as :func:`probe_of_event` will
    make it from the ``Asserted`` event built from ``draft``."""
    return Probe(
        str(memory_id),
        draft.kind,
        compared_key(draft.subject),
        compared_key(draft.attribute),
        draft.entities,
    )


Wanted = tuple[Sought, int]
"""A new claim and the recorded instant its candidates are to be found as known at."""

KNOWN_BETWEEN = "v.state = 'current' AND v.recorded_from <= ? AND v.recorded_until > ? "
"""Current versions known at some instant between the two given (latest, earliest)."""

AS_KNOWN_BETWEEN = "WHERE v.namespace = ? AND " + KNOWN_BETWEEN


KNOWN_BY_PAIRS = (
    "SELECT v.* FROM jsonb_array_elements(?::jsonb) AS k(pair) "
    "CROSS JOIN LATERAL ("
    + KNOWN_SELECT
    + AS_KNOWN_BETWEEN
    + "AND v.subject_key = k.pair->>0 AND v.attribute_key = k.pair->>1 "
    "AND v.recorded_from < (k.pair->>2)::bigint OFFSET 0) AS v"
)
"""PostgreSQL: the versions of a batch's (subject, attribute) pairs recorded before each
pair's bound (see :func:`_before`), the pairs as one JSON array of three-element arrays,
so the statement is the same for every batch and stays prepared. (Two ``text[]``
parameters cost the client 2 µs a pair: psycopg spells an array out in Python, matching
a regular expression against each element; orjson writes the JSON in C.) ``OFFSET 0``
keeps the planner from flattening the subquery into a hash join, which it prefers with a
few hundred pairs and which scans every version (4 ms at 10k memories, growing with the
store, against 0.6 ms for 500 index probes)."""

KNOWN_NOW_BY_PAIRS = (
    "SELECT v.* FROM jsonb_array_elements(?::jsonb) AS k(pair) CROSS JOIN LATERAL ("
    f"SELECT {KNOWN_COLUMNS}, m.id, v.state, m.entities, m.valid_from, v.valid_until, "
    "m.value, m.content, m.confidence, m.position, m.erased_at IS NULL AS claimed "
    "FROM memory_versions v JOIN memories m ON m.id = v.memory_id "
    "WHERE v.namespace = ? AND v.state = 'current' "
    f"AND v.recorded_until = {OPEN_END} "
    "AND v.subject_key = k.pair->>0 AND v.attribute_key = k.pair->>1 "
    "AND v.memory_id <> k.pair->>2 OFFSET 0) AS v"
)
"""PostgreSQL: the versions open now that share a (subject, attribute) with a claim, but
the claim's own, the claims as one JSON array of (subject, attribute, memory id): what
:data:`KNOWN_BY_PAIRS` reads for a batch that asserts and closes nothing, in a statement
whose parameters an append knows before it reads the log's tip, so it can be sent ahead
(see :func:`prefetch_candidates`). Each row carries its memory's claim too (what
``CLAIM_SELECT`` reads; ``claimed`` where the memory is not erased), which such a batch
leaves as it is: a candidate found by key then costs the fold no read of its own."""


def candidates(
    sql: Sql, namespace: str, newer: ClaimView, known: int, dialect: str
) -> list[ClaimView]:
    """Return current memories of the same kind that share the claim's key or an entity,
    as known at ``known``; never the claim itself."""
    return candidates_many(sql, namespace, [(newer, known)], dialect)[0]


def candidates_many(
    sql: Sql, namespace: str, wanted: Sequence[Wanted], dialect: str, only_assertions: bool = False
) -> list[list[ClaimView]]:
    """:func:`candidates` for many claims at once (a batch being folded), with a few
    queries for the whole batch instead of a few per claim.

    The versions are fetched for the span of the instants asked about and then sifted
    per claim in Python, so each claim sees exactly what was known at its own instant.
    ``only_assertions``: the batch being folded holds ``Asserted`` events only, which
    lets an append's fold take the versions sharing a key from the read it sent ahead
    (see :func:`prefetch_candidates`).
    """
    revisable = [(claim, known) for claim, known in wanted if claim.kind.revisable]
    if not revisable:
        return [[] for _ in wanted]
    span = [namespace, max(k for _, k in revisable), min(k for _, k in revisable)]
    members = _entity_members(sql, namespace, [c for c, _ in revisable if c.entities])
    named = sorted({memory_id for names in members.values() for memory_id, _ in names})
    keyed = [c for c, _ in revisable if c.keyed]
    claims: dict[str, ClaimView] = {}
    now = _known_now(namespace, keyed) if dialect == "postgresql" and only_assertions else None
    if dialect != "postgresql":
        by_key = _by_key(sql, span, keyed)
    elif now is not None and sql.sent_ahead(*now):
        sql.execute(*now)  # answered by the read sent ahead
        by_key = sql.fetchall()
        claims = {row["id"]: claim_from_row(row) for row in by_key if row["claimed"]}
    else:
        by_key = _by_key_pairs(sql, span, keyed)
    versions = VersionIndex(by_key + _by_id(sql, span, named))
    matched = [versions.matches(claim, known, members) for claim, known in wanted]
    claims.update(_current_claims(sql, sorted({m for ids in matched for m in ids} - set(claims))))
    # An erased memory (a fold that met its assertion after the hard forget) has no
    # claim left to compare: it is no candidate.
    return [
        sorted((claims[m] for m in ids if m in claims), key=lambda c: c.position) for ids in matched
    ]


class VersionIndex:
    """The current version rows fetched for a batch (ids, keys, kinds and recorded
    intervals only), indexed by key and by memory, so each claim's candidates are
    sifted from the few rows that can concern it."""

    def __init__(self, rows: list[Any]) -> None:
        self.by_key: dict[tuple[str, str], list[Any]] = {}
        self.by_id: dict[str, list[Any]] = {}
        for row in rows:
            self.by_id.setdefault(row["memory_id"], []).append(row)
            if row["subject_key"] is not None and row["attribute_key"] is not None:
                self.by_key.setdefault((row["subject_key"], row["attribute_key"]), []).append(row)

    def matches(
        self, newer: Sought, known: int, members: dict[str, list[tuple[str, bool]]]
    ) -> set[str]:
        """The ids of one claim's candidates, as known at ``known``."""
        if not newer.kind.revisable:
            return set()
        rows: list[Any] = []
        if newer.keyed:
            rows += self.by_key.get((str(newer.subject_key), str(newer.attribute_key)), [])
        # A structured claim meets another structured one by key alone, so through
        # shared entities it only meets the claims that lack a key.
        for entity in newer.entities:
            for memory_id, keyed in members.get(entity, ()):
                if not (newer.keyed and keyed):
                    rows += self.by_id.get(memory_id, [])
        kind = newer.kind.value
        found = {
            row["memory_id"]
            for row in rows
            if row["recorded_from"] <= known < row["recorded_until"] and row["kind"] == kind
        }
        found.discard(str(newer.id))
        return found


def _current_claims(sql: Sql, ids: list[str]) -> dict[str, ClaimView]:
    """The claims of these memories as they were asserted: a memory has one version in
    state ``current`` (any later event closes it for good), which is the one a
    candidate was found current in."""
    found: dict[str, ClaimView] = {}
    for chunk in in_lists(ids):
        sql.execute(
            CLAIM_SELECT + "WHERE v.state = 'current' AND m.erased_at IS NULL "
            f"AND v.memory_id IN ({marks(chunk)})",
            chunk,
        )
        found.update((row["id"], claim_from_row(row)) for row in sql.fetchall())
    return found


def _before(span: list[Any], keyed: list[Sought]) -> dict[tuple[str, str], int]:
    """For each (subject, attribute) of the claims: the instant its versions must have
    been recorded before to be fetched.

    A version in state ``current`` is a memory's first (every later event makes one in
    another state), recorded at its assertion's instant, and the log's instants grow
    with its positions (appends and imports see to it). So the current versions recorded
    within the instants of a batch being folded are its own assertions' (or an erased
    one's, which is no candidate). A key that one claim of the batch alone has can meet
    no other of them: its versions are fetched from before the batch only (the earliest
    instant asked about), which leaves out the claim's own, and a bulk write of new
    subjects fetches nothing. A key that several claims share is fetched whole (up to
    the latest instant asked about), for they may meet each other."""
    _, latest, earliest = span
    counts = Counter((str(c.subject_key), str(c.attribute_key)) for c in keyed)
    return {key: earliest if count == 1 else latest + 1 for key, count in counts.items()}


def _by_key(sql: Sql, span: list[Any], keyed: list[Sought]) -> list[Any]:
    """Versions sharing a subject and an attribute with any of the claims, recorded
    before each key's bound (see :func:`_before`): one query per attribute and bound (and
    500 subjects), so the index is probed once per claim's key, not once per subject and
    attribute of the whole batch."""
    bounds = _before(span, [c for c in keyed if c.subject_key and c.attribute_key])
    subjects: dict[tuple[str, int], list[str]] = {}
    for (subject, attribute), bound in sorted(bounds.items()):
        subjects.setdefault((attribute, bound), []).append(subject)
    rows: list[Any] = []
    for (attribute, bound), named in sorted(subjects.items()):
        for chunk in in_lists(named):
            sql.execute(
                KNOWN_SELECT + AS_KNOWN_BETWEEN + f"AND v.subject_key IN ({marks(chunk)}) "
                "AND v.attribute_key = ? AND v.recorded_from < ?",
                [*span, *chunk, attribute, bound],
            )
            rows += sql.fetchall()
    return rows


def _by_key_pairs(sql: Sql, span: list[Any], keyed: list[Sought]) -> list[Any]:
    """:func:`_by_key` on PostgreSQL: every (subject, attribute) of the batch, with its
    bound, in one prepared statement, each pair probing the versions' index (see
    ``KNOWN_BY_PAIRS``)."""
    bounds = _before(span, keyed)
    if not bounds:
        return []
    pairs = [[subject, attribute, bound] for (subject, attribute), bound in sorted(bounds.items())]
    sql.execute(KNOWN_BY_PAIRS, [orjson.dumps(pairs).decode(), *span])
    return sql.fetchall()


def prefetch_candidates(sql: Sql, namespace: str, probes: Sequence[Sought]) -> None:
    """Inside an append (on PostgreSQL), before the log's tip is read: send ahead the read
    of the stored versions sharing a key with the claims that the append's fold of
    ``probes`` (its new memories, nothing else in the batch) will make, so the fold waits
    for no round trip of its own. It is left unsent where two claims share a key: each
    would then need the other's version, which the batch writes after this read.

    What is read then is what the fold's own read (:func:`_by_key_pairs`) would find:
    the append holds the write lock, and folds only when the projections have applied
    the whole log (so nothing in them is newer than the tip), and a batch of assertions
    closes no version. So a version current at some instant of the batch is one open
    now, and one recorded before the batch is one stored now (the claims' own excepted,
    which sifting drops anyway)."""
    keyed = [p for p in probes if p.kind.revisable and p.keyed]
    keys = {(p.subject_key, p.attribute_key) for p in keyed}
    if keyed and len(keys) == len(keyed):
        sql.prefetch(*_known_now(namespace, keyed))


def _known_now(namespace: str, keyed: Sequence[Sought]) -> tuple[str, list[Any]]:
    """:data:`KNOWN_NOW_BY_PAIRS` and its parameters for these claims, alike whether the
    claims come from requests (:func:`prefetch_candidates`) or from their events."""
    claims = sorted([str(c.subject_key), str(c.attribute_key), str(c.id)] for c in keyed)
    return KNOWN_NOW_BY_PAIRS, [orjson.dumps(claims).decode(), namespace]


def _by_id(sql: Sql, span: list[Any], ids: list[str]) -> list[Any]:
    """Versions of the memories named (found through their entities, in the namespace
    already). The namespace is left out of the query: with it, SQLite (which keeps no
    statistics) read the namespace's versions through ``memory_versions_subject``
    whenever more than one id was asked for, instead of each id's own rows, and a
    ``remember`` naming shared entities took 33 ms at 20k memories against 3.5 ms at 2k."""
    rows: list[Any] = []
    _, latest, earliest = span
    for chunk in in_lists(ids):
        sql.execute(
            KNOWN_SELECT + "WHERE " + KNOWN_BETWEEN + f"AND v.memory_id IN ({marks(chunk)})",
            [latest, earliest, *chunk],
        )
        rows += sql.fetchall()
    return rows


def _entity_members(
    sql: Sql, namespace: str, claims: list[Sought]
) -> dict[str, list[tuple[str, bool]]]:
    """For each entity the claims name, the memories naming it that can be a candidate
    and whether each is structured (looked up first, on its own, so the versions are
    then fetched by id whatever the planner thinks of the tables).

    A structured claim meets only unstructured ones through an entity, so for an entity
    that only structured claims name, only its unstructured members are read (the index
    holds ``keyed``): reading every member made a write naming an entity that thousands
    of structured memories name read all of them, and a rebuild slow down as the
    namespace grew (batches of 2,000 from 0.26 to 1 s over 30,000 memories naming 50
    entities)."""
    if not claims:
        return {}
    read_all = {entity for claim in claims if not claim.keyed for entity in claim.entities}
    read_unkeyed = {entity for claim in claims for entity in claim.entities} - read_all
    found: dict[str, list[tuple[str, bool]]] = {}
    for names, only_unkeyed in ((sorted(read_all), False), (sorted(read_unkeyed), True)):
        for chunk in in_lists(names):
            sql.execute(
                "SELECT memory_id, entity, keyed FROM memory_entities "
                f"WHERE namespace = ? AND entity IN ({marks(chunk)})"
                + (" AND keyed = 0" if only_unkeyed else ""),
                [namespace, *chunk],
            )
            for row in sql.fetchall():
                found.setdefault(row["entity"], []).append(
                    (str(row["memory_id"]), bool(row["keyed"]))
                )
    return found
