"""Rebuild: ``rebuild()`` of every projection from position 0, in events per second,
against reading the whole log raw (``SELECT`` of every row of ``erstwhile_events``)."""

from __future__ import annotations

from statistics import median
from typing import Any

from benchmarks.floor import LOG_TABLES, Batch, projection_rows, split
from benchmarks.harness import Result, interleaved, rate
from benchmarks.suite import Context, label
from erstwhile.eventstore import Backend

RAW_READ = "raw SELECT of every row of erstwhile_events in position order"
FLOOR_WRITES = (
    "the raw read, then the same rows written raw into the ledger's own empty tables, "
    "one unsynced transaction per 500 events"
)
REBUILD_FLOOR = "the rows a rebuild writes, written raw (the floor)"
REBUILD_VS_FLOOR = "rebuild against its rows written raw"
BUILD_BATCH = 500
"""Events a rebuild's build folds in one transaction (``ProjectionRunner``'s batch)."""
ROUNDS = 3
"""Rebuilds timed, taking turns with the raw read; the medians are reported (one rebuild's
rate moved by a tenth from one minute to the next)."""


def rebuild_rate(context: Context) -> list[Result]:
    """Time full rebuilds of the preset's rebuild data set, raw reads of its log, and its
    floor (a raw read of the log, then the rebuilt projections' rows written raw into
    empty tables: see :mod:`benchmarks.floor`), taking turns; return the medians."""
    (memories,) = context.sizes([context.preset.rebuild_size])
    dataset = context.dataset(memories)
    events = dataset.ledger.head()
    context.scratch.read_log(dataset.store, Backend.events_table)
    counted = 0

    def read() -> None:
        nonlocal counted
        counted = context.scratch.read_log(dataset.store, Backend.events_table)

    floors, parts = _floors(context, dataset.store, events)

    def floor(turn: int) -> None:
        context.scratch.read_log(dataset.store, Backend.events_table)
        for part in parts:
            floors[turn].write(part)

    # interleaved() keeps the collector out of the timed region, as everywhere: a
    # collection walks the whole process, which holds the suite's other data sets (with
    # the collector on, a medium run's rebuild ran at 15,200 events/s, 18,500 on its own).
    try:
        reads, rebuilds, floored = interleaved(
            [lambda _: read(), lambda _: dataset.ledger.rebuild(), floor], range(ROUNDS)
        )
    finally:
        for store in floors:
            store.close()
    theirs, ours, lowest = (int(median(t)) for t in (reads, rebuilds, floored))
    if counted != events:
        raise RuntimeError(f"read {counted} events raw, but the log's head is {events}")
    _check_floors(context, dataset.store)
    name = f"rebuild, {events:,} events (@{label(memories)})"
    backend = context.backend
    return [
        Result(name, backend, rate(events, ours), rate(counted, theirs), "events/s", RAW_READ,
               "rebuild"),
        Result(REBUILD_FLOOR, backend, rate(events, lowest), rate(counted, theirs), "events/s",
               RAW_READ, "rebuild"),
        Result(REBUILD_VS_FLOOR, backend, rate(events, ours), rate(events, lowest), "events/s",
               FLOOR_WRITES, "rebuild"),
    ]  # fmt: skip


def _floors(context: Context, store: str, events: int) -> tuple[list[Any], list[Batch]]:
    """Create a fresh store for each round's floor, and cut the rows the projections of
    ``store`` hold into transactions of about as many events as a build folds in one."""
    stores = [f"rebuild_floor_{turn}" for turn in range(ROUNDS)]
    tables, empty = context.scratch.tables(store), None
    try:
        floors = [context.scratch.floor(name, tables.keys, durable=False) for name in stores]
        empty = context.scratch.tables(stores[0])
        rows = projection_rows(tables, empty)
    finally:
        tables.close()
        if empty is not None:
            empty.close()
    return floors, split(rows, max(1, -(-events // BUILD_BATCH)))


def _check_floors(context: Context, store: str) -> None:
    """Make sure every round's floor wrote what the projections hold: as many rows in
    every table."""
    counts = []
    for name in (store, *(f"rebuild_floor_{turn}" for turn in range(ROUNDS))):
        tables = context.scratch.tables(name)
        try:
            counts.append({t: len(r) for t, r in tables.rows().items() if t not in LOG_TABLES})
        finally:
            tables.close()
    for found in counts[1:]:
        if found != counts[0]:
            raise RuntimeError(f"a rebuild's floor wrote {found}, the projections hold {counts[0]}")
