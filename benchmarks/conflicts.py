"""Contradictions: ``conflicts()`` over the whole namespace, against a self-join of the
plain bitemporal table finding the keys whose rows known now disagree over a shared
valid window.

The data sets hold no contradiction (each subject's versions supersede one another, so
their windows only touch): both sides look at every current claim and find none, which
is the cost that grows with the namespace. Comparing every pair of live claims once
took 0.85 s at 10k memories and grew with their square; this workload keeps that in
sight.
"""

from __future__ import annotations

from benchmarks.harness import Result, interleaved, percentile
from benchmarks.suite import Context, label

RAW_SELF_JOIN = (
    "raw self-join of the plain bitemporal table on its key index: keys whose rows known "
    "now disagree over a shared valid window"
)
ROUNDS = 5
"""Whole-namespace reports timed per size (each reads every live claim)."""


def conflicts_reports(context: Context) -> list[Result]:
    """Time ``conflicts()`` against the raw self-join at every point-query size."""
    return [_report_at(context, memories) for memories in context.sizes(context.preset.point_sizes)]


def _report_at(context: Context, memories: int) -> Result:
    dataset, raw = context.dataset(memories), context.raw_facts(memories)

    def ours(_: int) -> list[tuple[str, str]]:
        return sorted((c.subject, c.attribute) for c in dataset.ledger.conflicts())

    def plain(_: int) -> list[tuple[str, str]]:
        return list(raw.conflicting_keys())

    found, expected = ours(0), plain(0)
    if found != expected:
        raise RuntimeError(f"conflicts @{label(memories)}: {found[:5]} != {expected[:5]}")
    timed = interleaved([ours, plain], range(ROUNDS), warmup=[0])
    return Result(f"conflicts of the namespace @{label(memories)} p50", context.backend,
                  percentile(timed[0], 50), percentile(timed[1], 50), "ms", RAW_SELF_JOIN,
                  "conflicts")  # fmt: skip
