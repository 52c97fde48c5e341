"""Audit and transfer: ``export``, ``verify`` and ``replay`` of the rebuild data set's
log, against reading that log raw; ``import_events`` of its export into an empty store,
against raw ``executemany`` of the same lines into a plain table, one transaction each."""

from __future__ import annotations

import io
import uuid
from statistics import median

from benchmarks.harness import Result, interleaved, rate
from benchmarks.suite import Context, label
from erstwhile.eventstore import Backend

RAW_READ = "raw SELECT of every row of erstwhile_events in position order"
RAW_INSERT = "raw executemany of the export's lines as log rows, one transaction"
ROUNDS = 3
"""Rounds taken in turns with the baselines; the medians are reported."""


def audit_rates(context: Context) -> list[Result]:
    """Time ``export``, ``verify``, ``replay`` (as known at the end of the load's third
    round) and ``import_events`` of the rebuild data set, each taking turns with its raw
    baseline; return the medians in events per second."""
    (memories,) = context.sizes([context.preset.rebuild_size])
    dataset = context.dataset(memories)
    ledger, events = dataset.ledger, dataset.ledger.head()
    exported = io.BytesIO()
    written = ledger.export(exported)
    lines = exported.getvalue().splitlines()
    if written != events or len(lines) != events:
        raise RuntimeError(f"exported {written} events in {len(lines)} lines of {events}")
    rows = [(str(uuid.UUID(int=i)), line, i, bytes(32)) for i, line in enumerate(lines, 1)]

    def read(_: int) -> None:
        context.scratch.read_log(dataset.store, Backend.events_table)

    def verify(_: int) -> None:
        report = ledger.verify()
        if not report.ok or report.checked != events:
            raise RuntimeError(f"verify checked {report.checked} of {events}: {report}")

    known_at = dataset.marks[2]
    with ledger.replay(known_at) as past:
        replayed = past.head()
    if not 0 < replayed < events:
        raise RuntimeError(f"a replay as known at the third round holds {replayed} events")

    def replay(_: int) -> None:
        with ledger.replay(known_at) as past:
            if past.head() != replayed:
                raise RuntimeError(f"replayed {past.head()} events of {replayed}")

    reads, exports, verifies, replays = interleaved(
        [read, lambda _: ledger.export(io.BytesIO()), verify, replay], range(ROUNDS)
    )
    targets = [context.scratch.open_ledger(f"import_{i}") for i in range(ROUNDS)]
    raws = [context.scratch.raw(f"raw_import_{i}") for i in range(ROUNDS)]
    try:
        imports, inserts = interleaved(
            [lambda i: targets[i].import_events(lines), lambda i: raws[i].commit_many(rows)],
            range(ROUNDS),
        )
        if any(target.head() != events for target in targets):
            raise RuntimeError(f"an import holds {[t.head() for t in targets]} of {events} events")
    finally:
        for target in targets:
            target.close()
        for raw in raws:
            raw.close()
    size = f"{events:,} events (@{label(memories)})"

    def result(what: str, count: int, ours: list[int], theirs: list[int], baseline: str) -> Result:
        ours_rate, their_rate = rate(count, int(median(ours))), rate(events, int(median(theirs)))
        return Result(what, context.backend, ours_rate, their_rate, "events/s", baseline, "audit")

    return [
        result(f"export, {size}", events, exports, reads, RAW_READ),
        result(f"verify, {size}", events, verifies, reads, RAW_READ),
        result(
            f"replay as known after 3 of 5 rounds, {replayed:,} events",
            replayed,
            replays,
            reads,
            RAW_READ,
        ),
        result(f"import, {size}", events, imports, inserts, RAW_INSERT),
    ]
