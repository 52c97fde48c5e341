"""Point queries: ``facts(subject, attribute, as_of=V)`` and ``facts(..., known_at=T)`` on
data sets where every subject has five versions, against a raw indexed lookup on a plain
bitemporal table and against replaying a plain eventsourcing aggregate; and
``timeline(subject, attribute)``, every version of a subject, against reading the same
rectangles from the plain table."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchmarks.baselines import OPEN_END, micros, recorded_mark
from benchmarks.datasets import VERSIONS, PointQuery, claim, point_queries, subject_name
from benchmarks.harness import Result, interleaved, latency_pair, percentile
from benchmarks.suite import Context, label

RAW_LOOKUP = "raw indexed lookup on a plain bitemporal table (index on subject, attribute)"
REPLAY = "eventsourcing Aggregate per subject, replayed and folded per query"
Lookup = Callable[[PointQuery], list[str]]
"""One way of answering a point question."""


def facts_lookups(context: Context) -> list[Result]:
    """Run the as-of and known-at lookups at every data set size of the preset, then
    the as-of lookups of the smallest and largest sizes taking turns, for the growth."""
    results: list[Result] = []
    sizes = context.sizes(context.preset.point_sizes)
    for memories in sizes:
        results += as_of_lookups(context, memories) + known_at_lookups(context, memories)
    if len(sizes) > 1:
        results.append(growth(context, "facts as_of", "facts", sizes,
                              lambda memories: _as_of(context, memories)))  # fmt: skip
    return results


def growth(context: Context, name: str, group: str, sizes: Sequence[int],
           asking: Callable[[int], Lookup]) -> Result:  # fmt: skip
    """The p50 at the largest size against the p50 at the smallest, timed taking turns
    question by question (each size's own questions), so that the machine's drift over
    a run, which can outlast a minute between the two sizes' own passes, hits both."""
    smallest, largest = sizes[0], sizes[-1]
    ask_small, ask_large = asking(smallest), asking(largest)
    pairs = list(
        zip(questions_for(context, smallest), questions_for(context, largest), strict=True)
    )
    small, large = interleaved(
        [lambda pair: ask_small(pair[0]), lambda pair: ask_large(pair[1])], pairs,
        warmup=pairs[:3],
    )  # fmt: skip
    return Result(f"{name} p50 @{label(largest)} vs @{label(smallest)}", context.backend,
                  percentile(large, 50), percentile(small, 50), "ms",
                  f"the same p50 at {label(smallest)} memories, timed in turns", group)  # fmt: skip


def _as_of(context: Context, memories: int) -> Lookup:
    """``facts(subject, attribute, as_of=V)`` on the data set of ``memories``."""
    dataset = context.dataset(memories)

    def ours(q: PointQuery) -> list[str]:
        c = claim(q.index, q.version, context.preset.seed)
        return [m.value for m in dataset.ledger.facts(c.subject, c.attribute, as_of=q.as_of)]

    return ours


def as_of_lookups(context: Context, memories: int) -> list[Result]:
    """Time ``facts(subject, attribute, as_of=V)`` and its two baselines."""
    queries = questions_for(context, memories)
    raw, replay = context.raw_facts(memories), context.replay(memories)
    latest = OPEN_END - 1
    ours = _as_of(context, memories)

    def plain(q: PointQuery) -> list[str]:
        c = claim(q.index, q.version, context.preset.seed)
        return [r[0] for r in raw.lookup(c.subject, c.attribute, micros(q.as_of), latest)]

    def replayed(q: PointQuery) -> list[str]:
        c = claim(q.index, q.version, context.preset.seed)
        return [str(replay.value_as_of(c.subject, c.attribute, q.as_of))]

    return _compare(context, memories, "facts as_of", queries, ours, plain, replayed)


def known_at_lookups(context: Context, memories: int) -> list[Result]:
    """Time ``facts(subject, attribute, known_at=T)``: what the ledger said at T was
    true at T, with T the end of one loading round, against its two baselines."""
    dataset, queries = context.dataset(memories), questions_for(context, memories)
    raw, replay = context.raw_facts(memories), context.replay(memories)

    def ours(q: PointQuery) -> list[str]:
        c = claim(q.index, q.version, context.preset.seed)
        facts = dataset.ledger.facts(c.subject, c.attribute, known_at=dataset.marks[q.version])
        return [m.value for m in facts]

    def plain(q: PointQuery) -> list[str]:
        c, mark = claim(q.index, q.version, context.preset.seed), recorded_mark(q.version)
        return [r[0] for r in raw.lookup(c.subject, c.attribute, mark, mark)]

    def replayed(q: PointQuery) -> list[str]:
        c, mark = claim(q.index, q.version, context.preset.seed), replay.marks[q.version]
        return [str(replay.value_known_at(c.subject, c.attribute, mark))]

    return _compare(context, memories, "facts known_at", queries, ours, plain, replayed)


RAW_RECTANGLES = "raw indexed read of the subject's rows from a plain bitemporal table"


def timeline_lookups(context: Context) -> list[Result]:
    """Time ``timeline(subject, attribute)`` at every data set size."""
    sizes = context.sizes(context.preset.point_sizes)
    return [row for memories in sizes for row in _timeline_at(context, memories)]


def _timeline_at(context: Context, memories: int) -> list[Result]:
    """Time ``timeline(subject, attribute)`` (nine rectangles: five versions, four of them
    superseded) against reading the same rows raw, after checking both agree."""
    dataset, raw = context.dataset(memories), context.raw_facts(memories)
    queries = questions_for(context, memories)

    def ours(q: PointQuery) -> list[tuple[str, int]]:
        c = claim(q.index, q.version, context.preset.seed)
        found = dataset.ledger.timeline(c.subject, c.attribute)
        return sorted((str(r.value), micros(r.valid_from)) for r in found)

    def plain(q: PointQuery) -> list[tuple[str, int]]:
        c = claim(q.index, q.version, context.preset.seed)
        return sorted((str(r[0]), r[1]) for r in raw.rectangles(c.subject, c.attribute))

    for q in queries:
        drawn, read = ours(q), plain(q)
        if drawn != read or len(drawn) != 2 * VERSIONS - 1:
            raise RuntimeError(f"timeline of {subject_name(q.index)}: {drawn} != {read}")
    timed = interleaved([ours, plain], queries, warmup=queries[:3])
    return latency_pair(f"timeline @{label(memories)}", context.backend, timed[0], timed[1],
                        RAW_RECTANGLES, "timeline")  # fmt: skip


def questions_for(context: Context, memories: int) -> list[PointQuery]:
    """The point questions asked of the data set of ``memories`` (the same every run)."""
    return point_queries(memories, context.preset.query_samples, context.preset.seed)


def _compare(context: Context, memories: int, name: str, queries: Sequence[PointQuery],
             ours: Lookup, plain: Lookup, replayed: Lookup) -> list[Result]:  # fmt: skip
    """Time the three ways of answering, check they agree, and return the result rows."""
    _check(context, queries, {"erstwhile": ours, "raw": plain, "replay": replayed})
    timed = interleaved([ours, plain, replayed], queries, warmup=queries[:3])
    title = f"{name} @{label(memories)}"
    return [
        *latency_pair(title, context.backend, timed[0], timed[1], RAW_LOOKUP, "facts"),
        *latency_pair(f"{title} (vs replay)", context.backend, timed[0], timed[2], REPLAY,
                      "facts"),
    ]  # fmt: skip


def _check(context: Context, queries: Sequence[PointQuery], ways: dict[str, Lookup]) -> None:
    """Refuse to time answers that are wrong: every way must name the expected value for
    every question. Asking each question once, untimed, also warms every way's caches
    alike, so the timed pass measures a warm store at every size, not the first reads of
    a file just written."""
    for q in queries:
        expected = [claim(q.index, q.version, context.preset.seed).value]
        for way, lookup in ways.items():
            answer = lookup(q)
            if answer != expected:
                raise RuntimeError(
                    f"{way} answered {answer} for {subject_name(q.index)} version "
                    f"{q.version} of {VERSIONS}; expected {expected}"
                )
