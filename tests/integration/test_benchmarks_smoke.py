"""Keep the benchmark harness working: every workload runs at a tiny size.

These are not benchmarks: nothing here looks at how fast anything was, only that each
workload ran, checked its answers and produced a figure and a baseline.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rich.console import Console

from benchmarks.__main__ import main
from benchmarks.harness import Result, markdown, percentile
from benchmarks.suite import PRESETS, run_backend, workloads


def run_tiny(backend: str) -> list[Result]:
    results, _ = run_backend(backend, PRESETS["tiny"], None, Console(stderr=True, quiet=True))
    return results


def assert_complete(results: list[Result]) -> None:
    assert {r.group for r in results} == set(workloads())
    for result in results:
        assert result.figure > 0 and math.isfinite(result.figure), result
        assert result.baseline > 0 and math.isfinite(result.baseline), result
        assert result.baseline_name


def test_every_workload_runs_on_sqlite() -> None:
    assert_complete(run_tiny("sqlite"))


@pytest.mark.postgres
def test_every_workload_runs_on_postgres(
    postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERSTWHILE_BENCH_POSTGRES_URL", postgres_database)
    assert_complete(run_tiny("postgres"))


def test_the_command_prints_the_table_and_writes_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "table.md"
    assert main(["--backend", "sqlite", "--only", "remember", "--markdown", str(target)]) == 0
    assert "remember, one durable p50" in capsys.readouterr().out
    assert "| remember, one durable p99 | sqlite |" in target.read_text()


def test_percentiles_are_nearest_rank_in_milliseconds() -> None:
    samples = [n * 1_000_000 for n in range(1, 101)]
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile([3_000_000], 99) == 3.0


def test_markdown_lists_each_baseline_once() -> None:
    rows = [
        Result("w p50", "sqlite", 2.0, 1.0, "ms", "raw thing", "w"),
        Result("w p99", "sqlite", 4.0, 2.0, "ms", "raw thing", "w"),
    ]
    text = markdown(rows)
    assert text.count("raw thing") == 1
    assert "| w p50 | sqlite | 2 ms | 1 ms | 2.00x |" in text
