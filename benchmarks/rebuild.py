"""Rebuild: ``rebuild()`` of every projection from position 0, in events per second,
against reading the whole log raw (``SELECT`` of every row of ``erstwhile_events``)."""

from __future__ import annotations

from benchmarks.harness import Result, elapsed, quiet_gc, rate
from benchmarks.suite import Context, label
from erstwhile.eventstore import Backend

RAW_READ = "raw SELECT of every row of erstwhile_events in position order"


def rebuild_rate(context: Context) -> list[Result]:
    """Time one full rebuild of the preset's rebuild data set, and one raw read of its log."""
    (memories,) = context.sizes([context.preset.rebuild_size])
    dataset = context.dataset(memories)
    events = dataset.ledger.head()
    context.scratch.read_log(dataset.store, Backend.events_table)
    counted = 0

    def read() -> None:
        nonlocal counted
        counted = context.scratch.read_log(dataset.store, Backend.events_table)

    # Out of the collector's way, as every other timed region: a collection walks the
    # whole process, which holds the suite's other data sets (with the collector on, a
    # medium run's rebuild ran at 15,200 events/s, and 18,500 run on its own).
    with quiet_gc():
        theirs = elapsed(read)
        ours = elapsed(dataset.ledger.rebuild)
    if counted != events:
        raise RuntimeError(f"read {counted} events raw, but the log's head is {events}")
    name = f"rebuild, {events:,} events (@{label(memories)})"
    return [Result(name, context.backend, rate(events, ours), rate(counted, theirs), "events/s",
                   RAW_READ, "rebuild")]  # fmt: skip
