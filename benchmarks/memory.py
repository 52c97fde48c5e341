"""One memory by its id: ``get(id)``, ``get(id, known_at=T)`` and ``history(id)`` (the
memory with what superseded it and what it superseded), at every data set size, against
the plain bitemporal table's indexed reads of the same version's row and of the
subject's rows."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from benchmarks.baselines import OPEN_END, micros, recorded_mark
from benchmarks.datasets import VERSIONS, PointQuery, claim, subject_name
from benchmarks.harness import Result, interleaved, latency_pair
from benchmarks.reads import RAW_LOOKUP, RAW_RECTANGLES, Lookup, questions_for
from benchmarks.suite import Context, label

RAW_VERSION_LOOKUP = f"{RAW_LOOKUP}: the same version's row"
RAW_VERSION_KNOWN = f"{RAW_LOOKUP}: the same version's row as known at its round's end"


def memory_lookups(context: Context) -> list[Result]:
    """Time ``get``, ``get`` as known at a past instant and ``history`` at every data
    set size of the preset."""
    sizes = context.sizes(context.preset.point_sizes)
    return [row for memories in sizes for row in _memory_at(context, memories)]


def _memory_at(context: Context, memories: int) -> list[Result]:
    """In one data set, time each read of a question's version by its id against the
    plain table's read of the same rows, taking turns, after checking they agree."""
    dataset, raw = context.dataset(memories), context.raw_facts(memories)
    ledger, seed = dataset.ledger, context.preset.seed
    queries = questions_for(context, memories)
    ids = _version_ids(context, memories)

    def got(q: PointQuery) -> list[str]:
        return [str(ledger.get(ids[q]).value)]

    def got_known(q: PointQuery) -> list[str]:
        return [str(ledger.get(ids[q], known_at=dataset.marks[q.version]).value)]

    def read(q: PointQuery) -> list[str]:
        c = claim(q.index, q.version, seed)
        return [r[0] for r in raw.lookup(c.subject, c.attribute, micros(q.as_of), OPEN_END - 1)]

    def read_known(q: PointQuery) -> list[str]:
        c = claim(q.index, q.version, seed)
        return [r[0] for r in raw.lookup(c.subject, c.attribute, micros(q.as_of),
                                         recorded_mark(q.version))]  # fmt: skip

    def lineage(q: PointQuery) -> list[str]:
        found = ledger.history(ids[q])
        linked = [found.superseded_by] if found.superseded_by else []
        return [str(m.value) for m in [*found.supersedes, found.memory, *linked]]

    def rectangles(q: PointQuery) -> list[str]:
        c = claim(q.index, q.version, seed)
        return [str(r[0]) for r in raw.rectangles(c.subject, c.attribute)]

    _check(context, queries, [got, got_known, read, read_known], lineage, rectangles)
    timed = interleaved([got, read, got_known, read_known, lineage, rectangles], queries,
                        warmup=queries[:3])  # fmt: skip
    size, backend = f"@{label(memories)}", context.backend
    return [
        *latency_pair(f"get {size}", backend, timed[0], timed[1], RAW_VERSION_LOOKUP, "memory"),
        *latency_pair(f"get known_at its round's end {size}", backend, timed[2], timed[3],
                      RAW_VERSION_KNOWN, "memory"),
        *latency_pair(f"history {size}", backend, timed[4], timed[5], RAW_RECTANGLES, "memory"),
    ]  # fmt: skip


def _version_ids(context: Context, memories: int) -> dict[PointQuery, UUID]:
    """The memory id of each question's version (looked up untimed, by its valid
    instant)."""
    ledger, seed = context.dataset(memories).ledger, context.preset.seed
    found = {}
    for q in questions_for(context, memories):
        c = claim(q.index, q.version, seed)
        (memory,) = ledger.facts(c.subject, c.attribute, as_of=q.as_of)
        found[q] = memory.id
    return found


def _check(context: Context, queries: Sequence[PointQuery], reads: Sequence[Lookup],
           lineage: Lookup, rectangles: Lookup) -> None:  # fmt: skip
    """Refuse to time wrong answers: every read names the question's version, the
    history holds the versions next to it, and the plain table holds every version."""
    seed = context.preset.seed
    for q in queries:
        expected = claim(q.index, q.version, seed).value
        for way in reads:
            if way(q) != [expected]:
                raise RuntimeError(f"{way.__name__} answered {way(q)} for "
                                   f"{subject_name(q.index)} version {q.version}")  # fmt: skip
        around = range(max(q.version - 1, 0), min(q.version + 2, VERSIONS))
        if lineage(q) != [claim(q.index, v, seed).value for v in around]:
            raise RuntimeError(f"history of {subject_name(q.index)} version {q.version}: "
                               f"{lineage(q)}")  # fmt: skip
        if len(rectangles(q)) != 2 * VERSIONS - 1:
            raise RuntimeError(f"{subject_name(q.index)} has {len(rectangles(q))} raw rows")
