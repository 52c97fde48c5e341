"""Audit and transfer: ``export`` and ``verify`` of the rebuild data set's log, against
reading that log raw; ``import_events`` of its export into an empty store, against raw
``executemany`` of the same lines into a plain table, one transaction each."""

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


def transfer_rates(context: Context) -> list[Result]:
    """Time ``export``, ``verify`` and ``import_events`` of the rebuild data set, each
    taking turns with its raw baseline; return the medians in events per second."""
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

    reads, exports, verifies = interleaved(
        [read, lambda _: ledger.export(io.BytesIO()), verify], range(ROUNDS)
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

    def result(what: str, ours: list[int], theirs: list[int], baseline: str) -> Result:
        ours_rate, their_rate = rate(events, int(median(ours))), rate(events, int(median(theirs)))
        return Result(f"{what}, {size}", context.backend, ours_rate, their_rate, "events/s",
                      baseline, "transfer")  # fmt: skip

    return [
        result("export", exports, reads, RAW_READ),
        result("verify", verifies, reads, RAW_READ),
        result("import", imports, inserts, RAW_INSERT),
    ]
