"""Rebuild: ``rebuild()`` of every projection from position 0, in events per second,
against reading the whole log raw (``SELECT`` of every row of ``erstwhile_events``)."""

from __future__ import annotations

from contextlib import ExitStack, closing
from statistics import median
from typing import Any

from benchmarks.floor import (
    LOG_TABLES,
    Batch,
    against_floor_row,
    floor_row,
    projection_rows,
    split,
)
from benchmarks.harness import Result, interleaved, rate
from benchmarks.suite import Context, label
from erstwhile.eventstore import Backend

RAW_READ = "raw SELECT of every row of erstwhile_events in position order"
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

    batch = dataset.ledger.runner.batch
    stores = [f"rebuild_floor_{turn}" for turn in range(ROUNDS)]
    with ExitStack() as stack:
        floors = [stack.enter_context(closing(context.scratch.floor(s, durable=False)))
                  for s in stores]  # fmt: skip
        held, rows = _projection_rows(context, dataset.store, stores[0])
        parts = split(rows, -(-events // batch))

        def floor(turn: int) -> None:
            context.scratch.read_log(dataset.store, Backend.events_table)
            for part in parts:
                floors[turn].write(part)

        # interleaved() keeps the collector out of the timed region, as everywhere: a
        # collection walks the whole process, which holds the suite's other data sets
        # (with the collector on, a medium run's rebuild ran at 15,200 events/s, 18,500
        # on its own).
        reads, rebuilds, floored = interleaved(
            [lambda _: read(), lambda _: dataset.ledger.rebuild(), floor], range(ROUNDS)
        )
    theirs, ours, floor_time = (int(median(t)) for t in (reads, rebuilds, floored))
    if counted != events:
        raise RuntimeError(f"read {counted} events raw, but the log's head is {events}")
    _check_floors(context, held, stores)
    name, backend = f"rebuild, {events:,} events (@{label(memories)})", context.backend
    floor_writes = (
        "the raw read, then the same rows written raw into the ledger's own empty tables "
        f"in key order, one unsynced transaction per {batch} events"
    )
    return [
        Result(name, backend, rate(events, ours), rate(counted, theirs), "events/s", RAW_READ,
               "rebuild"),
        Result(floor_row(name), backend, rate(events, floor_time), rate(counted, theirs),
               "events/s", RAW_READ, "rebuild"),
        Result(against_floor_row(name), backend, rate(events, ours), rate(events, floor_time),
               "events/s", floor_writes, "rebuild"),
    ]  # fmt: skip


def _projection_rows(
    context: Context, store: str, empty: str
) -> tuple[dict[str, set[tuple[Any, ...]]], Batch]:
    """The rows the projections of ``store`` hold now, and a batch that brings the empty
    store ``empty`` (a ledger's tables, no event) to them."""
    with (
        closing(context.scratch.tables(store)) as tables,
        closing(context.scratch.tables(empty)) as nothing,
    ):
        held = {t: rows for t, rows in tables.rows().items() if t not in LOG_TABLES}
        return held, projection_rows(held, nothing)


def _check_floors(
    context: Context, held: dict[str, set[tuple[Any, ...]]], floors: list[str]
) -> None:
    """Make sure every round's floor wrote exactly the rows the projections held."""
    for name in floors:
        with closing(context.scratch.tables(name)) as tables:
            found = {t: r for t, r in tables.rows().items() if t not in LOG_TABLES}
        if found != held:
            differing = sorted(t for t in held if found.get(t) != held[t])
            raise RuntimeError(f"a rebuild's floor wrote other rows than the projections hold "
                               f"in {', '.join(differing)}")  # fmt: skip
