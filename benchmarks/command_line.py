"""The command line: one ``erstwhile --json facts SUBJECT ATTRIBUTE`` run as a process of
its own (start-up, imports, opening the store, the query, the JSON), against a Python
process that connects with the bare driver, runs the same lookup on the plain
bitemporal table and prints its rows as JSON.

An agent or a script that shells out to ``erstwhile`` pays the whole process each time:
this workload keeps that cost in sight (until 2026-12-04 every run loaded the PostgreSQL
driver, SQLite or not: about 0.13 s of a 0.87 s run here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.baselines import FACTS_LOOKUP, OPEN_END, micros
from benchmarks.datasets import VERSIONS, claim, subject_count
from benchmarks.harness import Result, interleaved, latency_pair
from benchmarks.suite import Context, label

RAW_PROCESS = (
    "a Python process: the bare driver connects, runs the same lookup on the plain "
    "bitemporal table and prints its rows as JSON"
)
SAMPLES = {"tiny": 2, "small": 6}
"""Runs of each process per preset (10 for the larger ones): each takes most of a second."""
RAW_SQLITE = """
import json, sqlite3, sys
connection = sqlite3.connect(sys.argv[1])
rows = connection.execute({lookup!r}, sys.argv[2:4] + [int(a) for a in sys.argv[4:]])
print(json.dumps([row[0] for row in rows]))
"""
RAW_POSTGRES = """
import json, sys
import psycopg
with psycopg.connect(sys.argv[1]) as connection:
    connection.execute("SET search_path TO " + sys.argv[2])
    rows = connection.execute({lookup!r}, sys.argv[3:5] + [int(a) for a in sys.argv[5:]])
    print(json.dumps([row[0] for row in rows]))
"""


def command_line_latency(context: Context) -> list[Result]:
    """Time ``erstwhile --json facts`` against the raw process, taking turns, on the
    smallest point-query data set (subjects taken in turn)."""
    memories = context.sizes(context.preset.point_sizes)[0]
    dataset, raw_store = context.dataset(memories), f"raw_facts_{label(memories).lower()}"
    context.raw_facts(memories)  # built (or already built by ``facts``)
    command = str(Path(sys.executable).with_name("erstwhile"))
    url = context.scratch.ledger_url(dataset.store)
    now, seed = micros(datetime.now(UTC)), context.preset.seed

    def ours(index: int) -> list[str]:
        c = claim(index, VERSIONS - 1, seed)
        arguments = ["--db", url, "--namespace", "bench", "--json", "facts", c.subject,
                     c.attribute]  # fmt: skip
        return [m["value"] for m in json.loads(_run([command, *arguments]))]

    def plain(index: int) -> list[str]:
        c = claim(index, VERSIONS - 1, seed)
        bounds = [str(now), str(now), str(OPEN_END - 1), str(OPEN_END - 1)]
        if context.backend == "sqlite":
            script = RAW_SQLITE.format(lookup=FACTS_LOOKUP.format("?"))
            place = [context.scratch.path(raw_store)]
        else:
            script = RAW_POSTGRES.format(lookup=FACTS_LOOKUP.format("%s"))
            place = [context.scratch.database_url, raw_store]
        output = _run([sys.executable, "-c", script, *place, c.subject, c.attribute, *bounds])
        return list(json.loads(output))

    subjects = list(range(0, subject_count(memories), 97))
    samples = SAMPLES.get(context.preset.name, 10)
    inputs = (subjects * (samples // len(subjects) + 3))[: samples + 2]
    _check(ours, plain, inputs[:2], memories, seed)
    timed = interleaved([ours, plain], inputs[2:])
    return latency_pair(f"command line, facts now @{label(memories)}", context.backend,
                        timed[0], timed[1], RAW_PROCESS, "command")  # fmt: skip


def _run(arguments: Sequence[str]) -> str:
    """Run a process to its end; return what it printed (it must succeed)."""
    done = subprocess.run(arguments, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{arguments[0]} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _check(
    ours: Callable[[int], list[str]], plain: Callable[[int], list[str]],
    inputs: Sequence[int], memories: int, seed: int,
) -> None:  # fmt: skip
    """Both processes must name the subject's latest value before either is timed (which
    also warms the disk cache for both alike)."""
    for index in inputs:
        expected = [claim(index, VERSIONS - 1, seed).value]
        found, raw = ours(index), plain(index)
        if found != expected or raw != expected:
            raise RuntimeError(f"command line @{label(memories)}: {found} / {raw} != {expected}")
