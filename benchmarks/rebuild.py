"""Rebuild: ``rebuild()`` of every projection from position 0, in events per second,
against reading the whole log raw (``SELECT`` of every row of ``erstwhile_events``)."""

from __future__ import annotations

from statistics import median

from benchmarks.harness import Result, interleaved, rate
from benchmarks.suite import Context, label
from erstwhile.eventstore import Backend

RAW_READ = "raw SELECT of every row of erstwhile_events in position order"
ROUNDS = 3
"""Rebuilds timed, taking turns with the raw read; the medians are reported (one rebuild's
rate moved by a tenth from one minute to the next)."""


def rebuild_rate(context: Context) -> list[Result]:
    """Time full rebuilds of the preset's rebuild data set and raw reads of its log,
    taking turns; return the medians."""
    (memories,) = context.sizes([context.preset.rebuild_size])
    dataset = context.dataset(memories)
    events = dataset.ledger.head()
    context.scratch.read_log(dataset.store, Backend.events_table)
    counted = 0

    def read() -> None:
        nonlocal counted
        counted = context.scratch.read_log(dataset.store, Backend.events_table)

    # interleaved() keeps the collector out of the timed region, as everywhere: a
    # collection walks the whole process, which holds the suite's other data sets (with
    # the collector on, a medium run's rebuild ran at 15,200 events/s, 18,500 on its own).
    reads, rebuilds = interleaved(
        [lambda _: read(), lambda _: dataset.ledger.rebuild()], range(ROUNDS)
    )
    theirs, ours = int(median(reads)), int(median(rebuilds))
    if counted != events:
        raise RuntimeError(f"read {counted} events raw, but the log's head is {events}")
    name = f"rebuild, {events:,} events (@{label(memories)})"
    return [Result(name, context.backend, rate(events, ours), rate(counted, theirs), "events/s",
                   RAW_READ, "rebuild")]  # fmt: skip
