"""Write workloads: one durable ``remember``, bulk ``remember_many``, and the cost of the
proposal check on a subject that already has versions."""

from __future__ import annotations

import random
from contextlib import ExitStack, closing
from typing import Any

from benchmarks.baselines import raw_row
from benchmarks.datasets import VERSIONS, Claim, chunks, claim, subject_count
from benchmarks.floor import Batch, against_floor_row, capture, floor_row, row_counts
from benchmarks.harness import Result, interleaved, latency_pair, percentile, rate
from benchmarks.suite import Context, label
from erstwhile import Ledger

FRESH_SUBJECTS = 10_000_000
"""Subject numbers from here on are in no data set: writes about them meet no candidate."""
RAW_COMMIT = {
    "sqlite": "raw sqlite3 INSERT of one row of the same size + COMMIT (WAL, synchronous=FULL)",
    "postgres": "raw psycopg INSERT of one row of the same size (autocommit)",
}
RAW_BULK = {
    "sqlite": "raw sqlite3 executemany of rows of the same size, one transaction per batch",
    "postgres": "raw psycopg executemany of rows of the same size, one transaction per batch",
}

FLOOR_BASELINE = {
    "sqlite": "the same rows written raw into the ledger's own tables: sqlite3 executemany "
    "(INSERT OR REPLACE) in key order, one durable transaction per batch",
    "postgres": "the same rows written raw into the ledger's own tables: psycopg COPY "
    "in key order (UPDATE for rows changed in place), GIN pending lists merged, one "
    "transaction per batch",
}

FLOOR_ONE = {
    "sqlite": "the same rows written raw into the ledger's own tables: sqlite3 executemany "
    "(INSERT OR REPLACE), one durable transaction",
    "postgres": "the same rows written raw into the ledger's own tables: BEGIN, a "
    "prepared INSERT, UPDATE or DELETE per row and COMMIT in one psycopg pipeline (one "
    "round trip)",
}

REVISION = f"remember, revision of a subject with {VERSIONS} versions"
NAMED = "remember, revision naming its subject as an entity"
NEW_SUBJECT = "erstwhile remember on a new subject, same namespace"
SAME_WITHOUT_ENTITY = "the same revision without entities (subject and attribute only)"


def fresh_claims(count: int, offset: int = 0) -> list[Claim]:
    """Return first versions of ``count`` subjects no data set has."""
    return [claim(FRESH_SUBJECTS + offset + i, 0) for i in range(count)]


def remember_latency(context: Context) -> list[Result]:
    """One durable ``remember`` at a time, against one raw single-row durable commit
    and against its floor (the rows that ``remember`` writes, written raw into the
    ledger's own tables in one durable transaction: see :mod:`benchmarks.floor`),
    taking turns."""
    claims = fresh_claims(context.preset.remember_samples + 3)
    arguments = [c.arguments() for c in claims]
    written = _captured(context, [[a] for a in arguments], "remember_capture")
    rows = [raw_row(c, i) for i, c in enumerate(claims, start=1)]
    inputs = list(zip(arguments, rows, written, strict=True))
    with ExitStack() as stack:
        ledger = stack.enter_context(closing(context.scratch.open_ledger("remember")))
        raw = stack.enter_context(closing(context.scratch.raw("raw_commit")))
        floor = stack.enter_context(closing(context.scratch.floor("remember_floor", single=True)))
        ours, theirs, floors = interleaved(
            [lambda p: ledger.remember(**p[0]), lambda p: raw.commit_one(p[1]),
             lambda p: floor.write(p[2])],
            inputs[3:],
            warmup=inputs[:3],
        )  # fmt: skip
    _same_rows(context, "remember", "remember_floor")
    backend, name = context.backend, "remember, one durable"
    return [
        *latency_pair(name, backend, ours, theirs, RAW_COMMIT[backend], "remember"),
        *(Result(floor_row(f"{name} p{q}"), backend, percentile(floors, q),
                 percentile(theirs, q), "ms", RAW_COMMIT[backend], "remember")
          for q in (50, 99)),
        Result(against_floor_row(f"{name} p50"), backend, percentile(ours, 50),
               percentile(floors, 50), "ms", FLOOR_ONE[backend], "remember"),
    ]  # fmt: skip


def bulk_throughput(context: Context) -> list[Result]:
    """``remember_many`` in batches, against raw ``executemany`` of as many rows in one
    transaction per batch and against the floor (the rows ``remember_many`` writes,
    written raw into the ledger's own tables: see :mod:`benchmarks.floor`), taking turns
    batch by batch."""
    preset = context.preset
    parts = list(chunks(fresh_claims(preset.bulk_memories), preset.bulk_batch))
    requests = [[c.arguments() for c in part] for part in parts]
    rows = [[raw_row(c, i) for i, c in enumerate(part, start=1)] for part in parts]
    written = _captured(context, requests)
    with ExitStack() as stack:
        ledger = stack.enter_context(closing(context.scratch.open_ledger("bulk")))
        raw = stack.enter_context(closing(context.scratch.raw("raw_bulk")))
        floor = stack.enter_context(closing(context.scratch.floor("bulk_floor")))
        ours, theirs, floors = interleaved(
            [lambda b: ledger.remember_many(b[0]), lambda b: raw.commit_many(b[1]),
             lambda b: floor.write(b[2])],
            list(zip(requests, rows, written, strict=True)),
        )  # fmt: skip
    _same_rows(context, "bulk", "bulk_floor")
    count, backend = preset.bulk_memories, context.backend
    ours_rate, raw_rate, floor_rate = (rate(count, sum(t)) for t in (ours, theirs, floors))
    name = f"remember_many, batches of {preset.bulk_batch}"
    return [
        Result(name, backend, ours_rate, raw_rate, "memories/s", RAW_BULK[backend], "bulk"),
        Result(floor_row(name), backend, floor_rate, raw_rate, "memories/s", RAW_BULK[backend],
               "bulk"),
        Result(against_floor_row(name), backend, ours_rate, floor_rate, "memories/s",
               FLOOR_BASELINE[backend], "bulk"),
    ]  # fmt: skip


def _same_rows(context: Context, ours: str, floor: str) -> None:
    """Fail unless the floor's store holds as many rows, table by table, as erstwhile's."""
    counts = [_row_counts(context, name) for name in (ours, floor)]
    if counts[0] != counts[1]:
        raise RuntimeError(f"the floor wrote {counts[1]}, erstwhile {counts[0]} rows")


def _row_counts(context: Context, store: str) -> dict[str, int]:
    """How many rows each table of a store holds."""
    with closing(context.scratch.tables(store)) as tables:
        return row_counts(tables)


def _captured(
    context: Context, requests: list[list[dict[str, Any]]], store: str = "bulk_capture"
) -> list[Batch]:
    """Write the batches once, untimed, into a fresh ledger (in store ``store``);
    return the rows each batch wrote, table by table."""
    with (
        closing(context.scratch.open_ledger(store)) as ledger,
        closing(context.scratch.tables(store)) as tables,
    ):
        return capture(ledger, tables, requests)


def proposal_check(context: Context) -> list[Result]:
    """Time ``remember`` of a new version of a subject that already has versions (the
    ledger looks for memories it might replace, to propose supersessions) at each
    namespace size; then the p50 at the largest size against the p50 at the smallest."""
    sizes = context.sizes(context.preset.proposal_sizes)
    results = [row for memories in sizes for row in _proposal_at(context, memories)]
    for variant in (REVISION, NAMED):
        medians = [r.figure for r in results if r.workload.startswith(f"{variant} @")
                   and r.workload.endswith("p50")]  # fmt: skip
        if len(medians) > 1:
            results.append(
                Result(f"{variant} p50 @{label(sizes[-1])} vs @{label(sizes[0])}",
                       context.backend, medians[-1], medians[0], "ms",
                       f"the same p50 at {label(sizes[0])} memories", "proposal")
            )  # fmt: skip
    return results


def _proposal_at(context: Context, memories: int) -> list[Result]:
    """In one data set, time revisions of existing subjects against writes about new
    subjects, then revisions that also name their subject as an entity against plain
    revisions (the entity path of the candidate search is separate)."""
    ledger = context.dataset(memories).ledger
    subjects = subject_count(memories)
    count = min(context.preset.remember_samples, subjects // 2)
    chosen = random.Random(f"proposal:{memories}").sample(range(subjects), 2 * count)
    keyed = [claim(index, VERSIONS).arguments() for index in chosen[:count]]
    named = [claim(index, VERSIONS).arguments(entities=True) for index in chosen[count:]]
    fresh = [c.arguments() for c in fresh_claims(count, offset=memories)]
    timed = interleaved(
        [lambda t: ledger.remember(**t[0]), lambda t: ledger.remember(**t[1]),
         lambda t: ledger.remember(**t[2])],
        list(zip(keyed, fresh, named, strict=True)),
    )  # fmt: skip
    _check_proposed(ledger, 2 * count)
    size = label(memories)
    return [
        *latency_pair(f"{REVISION} @{size}", context.backend, timed[0], timed[1], NEW_SUBJECT,
                      "proposal"),
        *latency_pair(f"{NAMED} @{size}", context.backend, timed[2], timed[0],
                      SAME_WITHOUT_ENTITY, "proposal"),
    ]  # fmt: skip


def _check_proposed(ledger: Ledger, expected: int) -> None:
    """Make sure the revisions were really checked: each one left an open proposal."""
    found = len(ledger.proposals())
    if found < expected:
        raise RuntimeError(f"expected at least {expected} open proposals, found {found}")
