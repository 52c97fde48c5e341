"""Full-text search: ``search(question)`` over a data set of short sentences, against a
raw FTS5 ``MATCH`` (SQLite) or ``tsvector`` query (PostgreSQL) on a plain table holding
the same documents; and the same questions filtered by a subject, by an attribute or by
a kind few memories have, asked ``as_of`` an instant inside an older version's window,
or ``known_at`` the end of an earlier round of the load, against themselves asked
plainly."""

from __future__ import annotations

import random
from datetime import timedelta

from benchmarks.baselines import RawStore, documents
from benchmarks.datasets import (
    VERSIONS,
    claim,
    questions,
    subject_count,
    subject_name,
    valid_from,
)
from benchmarks.harness import Result, interleaved, latency_pair
from benchmarks.suite import Context, label
from erstwhile import Ledger
from erstwhile.projections.search import query_terms

RARE_KIND, RARE_COUNT = "decision", 40
"""The kind of the few memories each search data set is given after its load (the load
asserts facts only), and how many: a filter that keeps almost nothing."""

RAW_SEARCH = {
    "sqlite": "raw FTS5 MATCH of the same OR-ed terms, top 10 by bm25, over the same texts",
    "postgres": "raw tsvector @@ to_tsquery of the same OR-ed terms (GIN), top 10 by ts_rank, "
    "over the same texts",
}


def search_latency(context: Context) -> list[Result]:
    """Time ``search`` of plain-words questions at each search size of the preset."""
    asked = questions(context.preset.search_samples, context.preset.seed)
    return [
        row
        for size in context.sizes(context.preset.search_sizes)
        for row in _search_at(context, size, asked)
    ]


def _search_at(context: Context, memories: int, asked: list[str]) -> list[Result]:
    """Time both ways of searching one data set, after checking both find something."""
    dataset = context.dataset(memories)
    ledger = dataset.ledger

    def build() -> RawStore:
        raw = context.scratch.raw(f"raw_docs_{label(memories).lower()}")
        raw.load_documents(documents(memories, context.preset.seed))
        return raw

    raw = context.cached("raw full-text", memories, build)

    def terms(question: str) -> list[str]:
        return query_terms(question)  # the words as the ledger asks its index

    if not ledger.search(asked[0]) or not raw.match(terms(asked[0])):
        raise RuntimeError(f"search for {asked[0]!r} found nothing")
    ours, theirs = interleaved(
        [lambda q: ledger.search(q), lambda q: raw.match(terms(q))], asked, asked[:3]
    )
    rng = random.Random(f"{context.preset.seed}:filtered:{memories}")
    about = [(q, subject_name(rng.randrange(subject_count(memories)))) for q in asked]
    filtered, plain = interleaved(
        [lambda p: ledger.search(p[0], subject=p[1]), lambda p: ledger.search(p[0])],
        about, about[:3],
    )  # fmt: skip
    # An attribute alone keeps a seventh of the memories: the levels run with it applied.
    kinds_of = [(q, claim(rng.randrange(subject_count(memories)), 0).attribute) for q in asked]
    by_attribute, unfiltered = interleaved(
        [lambda p: ledger.search(p[0], attribute=p[1]), lambda p: ledger.search(p[0])],
        kinds_of, kinds_of[:3],
    )  # fmt: skip
    _add_rare_kind(ledger, memories)
    if not any(ledger.search(q, kinds=[RARE_KIND]) for q in asked):
        raise RuntimeError(f"no search found a memory of kind {RARE_KIND!r}")
    rare, everything = interleaved(
        [lambda q: ledger.search(q, kinds=[RARE_KIND]), lambda q: ledger.search(q)],
        asked, asked[:3],
    )  # fmt: skip
    # A month into the window of each version but the last: the full index, not the live.
    back = [(q, valid_from(rng.randrange(VERSIONS - 1)) + timedelta(days=30)) for q in asked]
    past, present = interleaved(
        [lambda p: ledger.search(p[0], as_of=p[1]), lambda p: ledger.search(p[0])],
        back, back[:3],
    )  # fmt: skip
    # As the ledger knew it at the end of an earlier round (of the first four).
    then = [(q, dataset.marks[rng.randrange(VERSIONS - 1)]) for q in asked]
    believed, believed_now = interleaved(
        [lambda p: ledger.search(p[0], known_at=p[1]), lambda p: ledger.search(p[0])],
        then, then[:3],
    )  # fmt: skip
    return [
        *latency_pair(f"search @{label(memories)}", context.backend, ours, theirs,
                      RAW_SEARCH[context.backend], "search"),
        *latency_pair(f"search @{label(memories)} filtered by subject", context.backend,
                      filtered, plain, "the same questions, unfiltered", "search"),
        *latency_pair(f"search @{label(memories)} filtered by attribute", context.backend,
                      by_attribute, unfiltered, "the same questions, unfiltered", "search"),
        *latency_pair(f"search @{label(memories)} filtered by a rare kind", context.backend,
                      rare, everything, "the same questions, unfiltered", "search"),
        *latency_pair(f"search @{label(memories)} as_of an older version", context.backend,
                      past, present, "the same questions, now", "search"),
        *latency_pair(f"search @{label(memories)} known_at an earlier round", context.backend,
                      believed, believed_now, "the same questions, now", "search"),
    ]  # fmt: skip


def _add_rare_kind(ledger: Ledger, memories: int) -> None:
    """Give the data set its few memories of :data:`RARE_KIND` (once: the data set is
    shared by the workloads of its size), worded as its claims are but without a subject
    or attribute, so no other workload's reads or proposals meet them."""
    if ledger.search("", kinds=[RARE_KIND], limit=1):
        return
    rng = random.Random(f"rare kind:{memories}")
    ledger.remember_many(
        {"content": claim(rng.randrange(subject_count(memories)), 0).content, "kind": RARE_KIND}
        for _ in range(RARE_COUNT)
    )
