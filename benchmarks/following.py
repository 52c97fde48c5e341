"""Following: a writer that leaves folding to a follower (``sync_projections=False``, as
beside ``erstwhile projections run``) appends ``remember_many`` batches, and a follower
folds them (the catch-up ``follow()`` runs each time the log grows), in memories/s and
events/s, against raw ``executemany`` of rows of the same size and a raw read of the
log."""

from __future__ import annotations

from contextlib import ExitStack, closing

from benchmarks.baselines import raw_row
from benchmarks.datasets import chunks
from benchmarks.harness import Result, interleaved, rate
from benchmarks.rebuild import RAW_READ
from benchmarks.stores import BENCH_ACTOR
from benchmarks.suite import Context
from benchmarks.writes import RAW_BULK, fresh_claims
from erstwhile import Ledger, Memory
from erstwhile.eventstore import Backend

STORE = "follow"


def follow_rates(context: Context) -> list[Result]:
    """Append the bulk workload's batches with a writer that does not fold, taking turns
    with raw ``executemany`` of as many rows; then time a follower's catch-up on the
    whole of it, taking turns with a raw read of the log; check that the follower
    answers for the last memory written."""
    preset = context.preset
    parts = list(chunks(fresh_claims(preset.bulk_memories), preset.bulk_batch))
    requests = [[c.arguments() for c in part] for part in parts]
    rows = [[raw_row(c, i) for i, c in enumerate(part, start=1)] for part in parts]
    with ExitStack() as stack:
        follower = stack.enter_context(closing(context.scratch.open_ledger(STORE)))
        writer = stack.enter_context(closing(Ledger.open(
            context.scratch.ledger_url(STORE), namespace="bench", actor=BENCH_ACTOR,
            sync_projections=False,
        )))  # fmt: skip
        raw = stack.enter_context(closing(context.scratch.raw("raw_follow")))
        written: list[Memory] = []
        appended, inserted = interleaved(
            [lambda b: written.extend(writer.remember_many(b[0])), lambda b: raw.commit_many(b[1])],
            list(zip(requests, rows, strict=True)),
        )  # fmt: skip
        events = writer.head()
        read = 0

        def read_log() -> None:
            nonlocal read
            read = context.scratch.read_log(STORE, Backend.events_table)

        caught, reads = interleaved([lambda _: follower.runner.catch_up(), lambda _: read_log()],
                                    [None])  # fmt: skip
        _check_followed(follower, written, events, read)
    count, backend = preset.bulk_memories, context.backend
    return [
        Result(f"remember_many, batches of {preset.bulk_batch}, append only "
               "(sync_projections=False)", backend, rate(count, sum(appended)),
               rate(count, sum(inserted)), "memories/s", RAW_BULK[backend], "follow"),
        Result(f"follower catch-up, {events:,} events", backend, rate(events, caught[0]),
               rate(read, reads[0]), "events/s", RAW_READ, "follow"),
    ]  # fmt: skip


def _check_followed(follower: Ledger, written: list[Memory], events: int, read: int) -> None:
    """Fail unless the follower has applied the whole log and serves what was written."""
    if read != events:
        raise RuntimeError(f"read {read} events raw, but the log's head is {events}")
    behind = [s.name for s in follower.projection_status() if s.lag]
    if behind:
        raise RuntimeError(f"after its catch-up, the follower's {behind} still lag")
    last = written[-1]
    found = follower.get(last.id)
    if found.content != last.content:
        raise RuntimeError(f"the follower answers {found.content!r} for the last memory written")
