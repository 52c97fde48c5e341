"""Run erstwhile's benchmarks: ``python -m benchmarks [--size S] [--backend B] [--only W]``.

Every workload runs on SQLite and PostgreSQL (unless ``--backend`` picks one) and every
figure is printed beside a baseline measured in the same run, and the run ends with a
verdict on each performance target (``benchmarks/targets.py``) of the backends it ran.
Progress goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import platform
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from benchmarks.compare import comparison_table, load, save
from benchmarks.harness import WIDE, Result, markdown, print_results
from benchmarks.stores import postgres_reachable, server_url
from benchmarks.suite import PRESETS, run_backend, workloads
from benchmarks.targets import TARGETS, standings, targets_markdown, targets_table


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--size",
        choices=["small", "medium", "full"],
        default="small",
        help="how big the data sets are (default: small)",
    )
    parser.add_argument(
        "--backend",
        choices=["sqlite", "postgres", "both"],
        default="both",
        help="which store to run on (default: both)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(workloads()),
        metavar="NAME",
        help=f"run only this workload (repeatable): {', '.join(workloads())}",
    )
    parser.add_argument("--markdown", type=Path, metavar="PATH",
                        help="also write the table as Markdown to PATH")  # fmt: skip
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also save the results as JSON to PATH (for --compare)")  # fmt: skip
    parser.add_argument("--compare", type=Path, metavar="PATH",
                        help="also compare the results with a run saved with --json")  # fmt: skip
    return parser.parse_args(argv)


def code_version() -> str:
    """Return the commit erstwhile was measured at, and how many of its files differ
    from it (read-only git queries; ``unknown`` outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent

    def git(*arguments: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True,
                              text=True, check=False)  # fmt: skip
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = len(git("status", "--porcelain", "--", "erstwhile").splitlines())
    return f"{commit} + {changed} changed files" if changed else commit


def backends(choice: str, console: Console) -> list[str]:
    """Return the backends to run, leaving PostgreSQL out (with a warning) if it is down
    and was not asked for by name."""
    if choice != "both":
        return [choice]
    if postgres_reachable():
        return ["sqlite", "postgres"]
    console.log(f"PostgreSQL is not reachable at {server_url()}: running SQLite only")
    return ["sqlite"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks and print the table."""
    options = parse(argv)
    earlier = load(options.compare) if options.compare is not None else None
    version = code_version()  # now, as the code is imported; it may change during a run
    progress = Console(stderr=True)
    preset = PRESETS[options.size]
    results: list[Result] = []
    notes: list[str] = []
    ran = backends(options.backend, progress)
    for backend in ran:
        found, timings = run_backend(backend, preset, options.only, progress)
        results.extend(found)
        notes.extend(timings)
    title = (f"erstwhile {version}, size {preset.name} (Python "
             f"{platform.python_version()}, SQLite {sqlite3.sqlite_version})")  # fmt: skip
    console = Console(width=None if sys.stdout.isatty() else WIDE)
    print_results(results, title, console)
    verdicts = standings(results, [t for t in TARGETS if t.backend in ran])
    console.print(targets_table(verdicts))
    if earlier is not None:
        console.print(comparison_table(earlier[0], earlier[1], results))
    if options.json is not None:
        save(options.json, title, results)
    if options.markdown is not None:
        steps = "\n".join(f"- {note}" for note in notes)
        options.markdown.write_text(
            f"{title}\n\n{markdown(results)}\nTargets:\n\n{targets_markdown(verdicts)}\n"
            f"Timings:\n\n{steps}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
