"""A memory's lineage: ``chain(id)`` (every version of a subject, through supersession)
and ``events(memory_id=...)`` (one memory's stored events), at every data set size,
against replaying the subject's plain eventsourcing aggregate, and against themselves at
the smallest size. Both once read every memory or every event of the namespace on
SQLite, so their growth with the store is a figure of its own."""

from __future__ import annotations

from uuid import UUID

from benchmarks.datasets import VERSIONS, PointQuery, claim, subject_name
from benchmarks.harness import Result, interleaved, latency_pair
from benchmarks.reads import Lookup, growth, questions_for
from benchmarks.suite import Context, label
from erstwhile import Ledger
from erstwhile.eventstore import Backend

REPLAY_VALUES = "eventsourcing Aggregate per subject, replayed for every version's value"
RAW_EVENT_READ = "raw read of the memory's rows from the events table by its indexed id"


def lineage_lookups(context: Context) -> list[Result]:
    """Time ``chain`` and one memory's ``events`` at every data set size of the preset,
    then the chains of the smallest and largest sizes taking turns, for the growth."""
    sizes = context.sizes(context.preset.point_sizes)
    results = [row for memories in sizes for row in _lineage_at(context, memories)]
    if len(sizes) > 1:
        results.append(growth(context, "chain", "lineage", sizes,
                              lambda memories: _chain(context, memories)))  # fmt: skip
    return results


def _chain(context: Context, memories: int, latest: dict[int, UUID] | None = None) -> Lookup:
    """``chain`` from a subject's latest version, on the data set of ``memories``
    (``latest``: each question's latest version, when already looked up)."""
    ledger = context.dataset(memories).ledger
    ids = latest if latest is not None else _latest_ids(context, memories)

    def chained(q: PointQuery) -> list[str]:
        return [str(m.value) for m in ledger.chain(ids[q.index])]

    return chained


def _lineage_at(context: Context, memories: int) -> list[Result]:
    """Time the chain against replaying the subject, and one memory's events against
    reading its rows raw, after checking each pair agrees."""
    dataset, replay = context.dataset(memories), context.replay(memories)
    reader = context.cached(
        "raw event reader", memories,
        lambda: context.scratch.event_reader(dataset.store, Backend.events_table),
    )  # fmt: skip
    queries = questions_for(context, memories)
    latest = _latest_ids(context, memories)
    seed = context.preset.seed
    chained = _chain(context, memories, latest)

    def expected(q: PointQuery) -> list[str]:
        return [claim(q.index, version, seed).value for version in range(VERSIONS)]

    def replayed(q: PointQuery) -> list[str]:
        c = claim(q.index, 0, seed)
        return replay.values(c.subject, c.attribute)

    def logged(q: PointQuery) -> list[str]:
        return [e.type for e in dataset.ledger.events(memory_id=latest[q.index])]

    def raw(q: PointQuery) -> list[str]:
        return reader.types(latest[q.index])

    for q in queries:
        if not chained(q) == replayed(q) == expected(q):
            raise RuntimeError(f"chain of {subject_name(q.index)}: {chained(q)} != {expected(q)}")
        if logged(q) != raw(q) or not logged(q):
            raise RuntimeError(f"events of {subject_name(q.index)}: {logged(q)} != {raw(q)}")
    timed = interleaved([chained, replayed, logged, raw], queries, warmup=queries[:3])
    size = f"@{label(memories)}"
    return [
        *latency_pair(f"chain of {VERSIONS} versions {size}", context.backend, timed[0],
                      timed[1], REPLAY_VALUES, "lineage"),
        *latency_pair(f"events of one memory {size}", context.backend, timed[2], timed[3],
                      RAW_EVENT_READ, "lineage"),
    ]  # fmt: skip


def _latest_ids(context: Context, memories: int) -> dict[int, UUID]:
    """Each question's subject's latest version, by subject index (looked up untimed)."""
    ledger: Ledger = context.dataset(memories).ledger
    found = {}
    for q in questions_for(context, memories):
        c = claim(q.index, VERSIONS - 1, context.preset.seed)
        (memory,) = ledger.facts(c.subject, c.attribute)
        found[q.index] = memory.id
    return found
