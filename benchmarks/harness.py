"""Timing helpers, the result of one measurement, and the table that shows them.

Every figure is compared with a baseline measured in the same run on the same machine,
so the ratio means something even when the machine is busy or slow.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from rich.console import Console
from rich.table import Table

T = TypeVar("T")
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
WIDE = 140
"""Columns of the table when stdout is not a terminal (a file or a pipe)."""


@dataclass(frozen=True)
class Result:
    """One row of the table: an erstwhile figure, its baseline and what the baseline is.

    ``unit`` is ``ms`` for latencies (lower is better) or a rate such as ``memories/s``
    (higher is better); the ratio is always erstwhile divided by the baseline.
    """

    workload: str
    backend: str
    figure: float
    baseline: float
    unit: str
    baseline_name: str
    group: str

    @property
    def ratio(self) -> float:
        """Erstwhile's figure divided by the baseline's (``nan`` if the baseline is 0)."""
        return self.figure / self.baseline if self.baseline else math.nan

    @property
    def is_latency(self) -> bool:
        """Whether lower is better for this figure."""
        return self.unit == "ms"


def percentile(samples_ns: Sequence[int], quantile: float) -> float:
    """Return the nearest-rank percentile of nanosecond samples, in milliseconds."""
    if not samples_ns:
        raise ValueError("no samples")
    ordered = sorted(samples_ns)
    rank = max(1, math.ceil(quantile / 100 * len(ordered)))
    return ordered[rank - 1] / NS_PER_MS


def rate(count: int, elapsed_ns: int) -> float:
    """Return ``count`` items over ``elapsed_ns`` nanoseconds, per second."""
    return count * NS_PER_S / max(elapsed_ns, 1)


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect garbage first, then keep the collector out of the timed region."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def interleaved(
    calls: Sequence[Callable[[T], object]], inputs: Iterable[T], warmup: Sequence[T] = ()
) -> list[list[int]]:
    """Time every call once per input, taking turns (the first call rotates from input to
    input), so erstwhile and its baselines meet the same machine: a busy neighbour or a
    slow disk spell slows them all, not whichever ran second. ``warmup`` inputs run
    untimed first. Return one list of nanosecond samples per call."""
    for item in warmup:
        for call in calls:
            call(item)
    samples: list[list[int]] = [[] for _ in calls]
    with quiet_gc():
        for turn, item in enumerate(inputs):
            for offset in range(len(calls)):
                index = (turn + offset) % len(calls)
                started = time.perf_counter_ns()
                calls[index](item)
                samples[index].append(time.perf_counter_ns() - started)
    return samples


def elapsed(call: Callable[[], object]) -> int:
    """Return how long one call of ``call`` takes, in nanoseconds."""
    started = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - started


def latency_pair(
    name: str,
    backend: str,
    ours: Sequence[int],
    theirs: Sequence[int],
    baseline_name: str,
    group: str,
) -> list[Result]:
    """Return the p50 and p99 rows comparing two sets of latency samples."""
    return [
        Result(f"{name} p{q}", backend, percentile(ours, q), percentile(theirs, q), "ms",
               baseline_name, group)
        for q in (50, 99)
    ]  # fmt: skip


def format_figure(value: float, unit: str) -> str:
    """Format a latency in ms with 3 significant digits, a rate as a whole number."""
    if math.isnan(value):
        return "-"
    if unit == "ms":
        return f"{value:.3g} ms" if value >= 0.1 else f"{value * 1000:.3g} µs"
    return f"{value:,.0f} {unit}"


def format_ratio(result: Result) -> str:
    """Format the ratio with two significant digits below 1 (``0.0043x``), two decimals
    up to 10 (``6.47x``), whole numbers above (``16x``)."""
    ratio = result.ratio
    if math.isnan(ratio):
        return "-"
    if ratio < 0.1:
        return f"{ratio:.2g}x"
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def legend(results: Sequence[Result]) -> list[str]:
    """Return one line per baseline: which workload group and backends it serves."""
    served: dict[str, tuple[str, list[str]]] = {}
    for result in results:
        backends = served.setdefault(result.baseline_name, (result.group, []))[1]
        if result.backend not in backends:
            backends.append(result.backend)
    return [f"{group} ({', '.join(backends)}): baseline = {name}"
            for name, (group, backends) in served.items()]  # fmt: skip


def table(results: Sequence[Result], title: str) -> Table:
    """Build the rich table of results."""
    grid = Table(title=title, caption="ratio = erstwhile / baseline (ms: lower is better; "
                 "per second: higher is better)")  # fmt: skip
    for column in ("workload", "backend"):
        grid.add_column(column)
    for column in ("erstwhile", "baseline", "ratio"):
        grid.add_column(column, justify="right")
    for result in results:
        grid.add_row(result.workload, result.backend, format_figure(result.figure, result.unit),
                     format_figure(result.baseline, result.unit), format_ratio(result))  # fmt: skip
    return grid


def print_results(results: Sequence[Result], title: str, console: Console | None = None) -> None:
    """Print the table and, under it, what each baseline is."""
    console = console or Console(width=None if sys.stdout.isatty() else WIDE)
    console.print(table(results, title))
    for line in legend(results):
        console.print(line, highlight=False)


def markdown(results: Sequence[Result]) -> str:
    """Return the results as a Markdown table followed by the baseline legend."""
    rows = ["| workload | backend | erstwhile | baseline | ratio |", "|---|---|--:|--:|--:|"]
    for r in results:
        rows.append(f"| {r.workload} | {r.backend} | {format_figure(r.figure, r.unit)} | "
                    f"{format_figure(r.baseline, r.unit)} | {format_ratio(r)} |")  # fmt: skip
    return "\n".join([*rows, "", *(f"- {line}" for line in legend(results))]) + "\n"
