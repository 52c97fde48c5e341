"""Saving a run's results, and comparing a run with one saved earlier.

``--json PATH`` keeps a run's results; ``--compare PATH`` prints, for every row the two
runs share, the earlier figure beside this run's and how the ratio to the baseline
moved. Both runs measured their own baselines, so the ratios compare across runs and
machines better than the raw figures: a machine twice as slow doubles both a figure and
its baseline.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from rich.table import Table

from benchmarks.harness import Result, format_figure, format_ratio


def save(path: Path, title: str, results: Sequence[Result]) -> None:
    """Write a run's title and results to ``path`` as JSON."""
    rows = [dataclasses.asdict(result) for result in results]
    path.write_bytes(orjson.dumps({"title": title, "results": rows}, option=orjson.OPT_INDENT_2))


def load(path: Path) -> tuple[str, list[Result]]:
    """Read a run saved by :func:`save`: its title and results."""
    try:
        saved: dict[str, Any] = orjson.loads(path.read_bytes())
        return saved["title"], [Result(**row) for row in saved["results"]]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as error:
        raise SystemExit(f"--compare {path}: not a run saved with --json ({error})") from error


def change(before: Result, now: Result) -> float:
    """How much better ``now`` is than ``before`` as a factor: above 1 is better, whether
    the figure is a latency (lower is better) or a rate."""
    if not before.figure or not now.figure:
        return math.nan
    return before.figure / now.figure if now.is_latency else now.figure / before.figure


def comparison_table(earlier_title: str, before: Sequence[Result], now: Sequence[Result]) -> Table:
    """Build the table of the rows both runs have, in this run's order."""
    earlier = {(r.workload, r.backend): r for r in before}
    grid = Table(title=f"compared with: {earlier_title}",
                 caption="better: how many times better this run's figure is")  # fmt: skip
    for column in ("workload", "backend"):
        grid.add_column(column)
    for column in ("before", "now", "better", "ratio before", "ratio now"):
        grid.add_column(column, justify="right")
    for result in now:
        old = earlier.get((result.workload, result.backend))
        if old is None:
            continue
        factor = change(old, result)
        grid.add_row(result.workload, result.backend, format_figure(old.figure, old.unit),
                     format_figure(result.figure, result.unit),
                     "-" if math.isnan(factor) else f"{factor:.2f}x",
                     format_ratio(old), format_ratio(result))  # fmt: skip
    return grid
