"""The performance targets, and whether a run's results meet them.

A run ends with a verdict per target, computed from the same results the table shows,
so where each target stands on the machine a run used is read off the run, not worked
out by hand. A target whose figure the run did not measure (another size, another
backend, a workload left out with ``--only``) says so instead of guessing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from rich.table import Table

from benchmarks.floor import floor_row
from benchmarks.harness import Result, format_figure


class Verdict(Enum):
    MET = "met"
    NOT_MET = "not met"
    NOT_MEASURED = "not measured"


class Reading(Enum):
    """Which number of a result a target bounds."""

    RATIO = "ratio"
    """erstwhile / baseline, as the table shows it."""
    FIGURE = "figure"
    """erstwhile's own figure (milliseconds or a rate)."""
    SPEEDUP = "speedup"
    """baseline / erstwhile: how many times faster than the baseline erstwhile is."""


@dataclass(frozen=True)
class Target:
    """One bound on the results of one backend.

    ``workload`` is a regular expression matched against whole workload names; when it
    matches several results (one per data set size), every one of them must meet the
    bound and the verdict shows the worst. ``size`` names the data set size the target
    is about, when the run's own sizes may differ (for example ``1M``).
    """

    text: str
    backend: str
    workload: str
    reading: Reading
    bound: float
    at_most: bool
    size: str | None = None
    nearby: str | None = None
    """For a target about one size: the same figure at other sizes, shown (but not
    judged) when the run did not measure the target's own size."""
    floored: bool = False
    """The run measures a floor for the target's workload (its rows written raw, see
    ``benchmarks/floor.py``): read as the target reads its own figure, the floor is
    shown beside the verdict, so a run tells whether the bound is within reach at all."""

    def matching(self, results: Sequence[Result], workload: str | None = None) -> list[Result]:
        pattern = re.compile(workload or self.workload)
        return [r for r in results if r.backend == self.backend and pattern.fullmatch(r.workload)]

    def value(self, result: Result) -> float:
        if self.reading is Reading.RATIO:
            return result.ratio
        if self.reading is Reading.SPEEDUP:
            return result.baseline / result.figure if result.figure else math.nan
        return result.figure

    def holds(self, value: float) -> bool:
        return value <= self.bound if self.at_most else value >= self.bound


@dataclass(frozen=True)
class Standing:
    """Where one target stands in a run: its verdict and the figures behind it."""

    target: Target
    verdict: Verdict
    shown: str
    """The worst figure the run measured for the target, with the workload it came from."""


TARGETS = (
    Target("SQLite remember p50 ≤ 3x a raw durable commit", "sqlite",
           r"remember, one durable p50", Reading.RATIO, 3.0, at_most=True, floored=True),
    Target("SQLite bulk ≥ 10% of raw executemany rows/s", "sqlite",
           r"remember_many, batches of \d+", Reading.RATIO, 0.10, at_most=False,
           floored=True),
    Target("SQLite point as-of p50 (as_of, known_at) ≤ 10x a raw indexed lookup", "sqlite",
           r"facts (as_of|known_at) @\S+ p50", Reading.RATIO, 10.0, at_most=True),
    Target("SQLite as-of p50 at 1M ≤ 1.5x the p50 at 10k", "sqlite",
           r"facts as_of p50 @1M vs @10k", Reading.RATIO, 1.5, at_most=True, size="1M",
           nearby=r"facts as_of p50 @\S+ vs @\S+"),
    Target("SQLite point as-of (as_of, known_at) ≥ 10x faster than eventsourcing replay",
           "sqlite", r"facts (as_of|known_at) @\S+ \(vs replay\) p50", Reading.SPEEDUP, 10.0,
           at_most=False),
    Target("SQLite search p50 ≤ 5 ms at 100k memories", "sqlite",
           r"search @100k p50", Reading.FIGURE, 5.0, at_most=True, size="100k",
           nearby=r"search @\S+ p50"),
    Target("SQLite rebuild ≥ 20k events/s", "sqlite",
           r"rebuild, [\d,]+ events \(@\S+\)", Reading.FIGURE, 20_000, at_most=False,
           floored=True),
    Target("PostgreSQL remember p50 ≤ 3x a raw psycopg commit", "postgres",
           r"remember, one durable p50", Reading.RATIO, 3.0, at_most=True, floored=True),
    Target("PostgreSQL bulk ≥ 10k memories/s", "postgres",
           r"remember_many, batches of \d+", Reading.FIGURE, 10_000, at_most=False,
           floored=True),
)  # fmt: skip
"""The targets erstwhile is held to (docs/performance.md, "Targets")."""


def stand(target: Target, results: Sequence[Result]) -> Standing:
    """Judge one target against a run's results."""
    found = measured(target, target.matching(results))
    if found:
        verdict = Verdict.MET if all(target.holds(v) for v, _ in found) else Verdict.NOT_MET
        shown = worst(target, found)
        if target.floored:
            shown += floor_beside(target, results, worst_result(target, found))
        return Standing(target, verdict, shown)
    size = f" at {target.size}" if target.size else ""
    shown = f"no {target.backend} figure{size} in this run"
    if target.nearby and (near := measured(target, target.matching(results, target.nearby))):
        shown += f"; {worst(target, near)}"
    return Standing(target, Verdict.NOT_MEASURED, shown)


def measured(target: Target, results: Sequence[Result]) -> list[tuple[float, Result]]:
    """The values a target reads off results (those with a value)."""
    found = [(target.value(r), r) for r in results]
    return [(value, r) for value, r in found if not math.isnan(value)]


def worst_result(target: Target, found: Sequence[tuple[float, Result]]) -> Result:
    """The result with the worst of the values found."""
    return (max if target.at_most else min)(found, key=lambda pair: pair[0])[1]


def worst(target: Target, found: Sequence[tuple[float, Result]]) -> str:
    """The worst of the values found, with the workload it came from."""
    result = worst_result(target, found)
    return f"{describe(target, target.value(result), result)} ({result.workload})"


def floor_beside(target: Target, results: Sequence[Result], result: Result) -> str:
    """The floor of ``result``'s workload, read as the target reads it ("" if the run
    has none)."""
    floors = measured(target, target.matching(results, re.escape(floor_row(result.workload))))
    if not floors:
        return ""
    value, floor = floors[0]
    return f"; the same rows written raw: {describe(target, value, floor)}"


def describe(target: Target, value: float, result: Result) -> str:
    """The number a target bounds, written as the target writes it."""
    if target.reading is Reading.FIGURE:
        return format_figure(value, result.unit)
    if target.reading is Reading.SPEEDUP:
        return f"{value:.2f}x faster"
    if target.bound < 1:
        return f"{value:.1%}"
    return f"{value:.2f}x"


def standings(results: Sequence[Result], targets: Sequence[Target] = TARGETS) -> list[Standing]:
    """Judge every target against a run's results, in the order the targets are listed."""
    return [stand(target, results) for target in targets]


def targets_table(found: Sequence[Standing]) -> Table:
    """Build the rich table of verdicts."""
    grid = Table(title="targets")
    for column in ("target", "this run (worst)", "verdict"):
        grid.add_column(column)
    for standing in found:
        grid.add_row(standing.target.text, standing.shown, standing.verdict.value)
    return grid


def targets_markdown(found: Sequence[Standing]) -> str:
    """Return the verdicts as a Markdown table."""
    rows = ["| target | this run (worst) | verdict |", "|---|---|---|"]
    rows += [f"| {s.target.text} | {s.shown} | {s.verdict.value} |" for s in found]
    return "\n".join(rows) + "\n"
