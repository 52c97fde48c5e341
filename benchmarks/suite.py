"""The sizes of a run, the context workloads share, and the loop that runs them.

A :class:`Context` builds each data set (and each baseline's copy of it) the first time
a workload asks for it, keeps it for the other workloads of the same backend, and
removes it when the backend's run ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rich.console import Console

from benchmarks.baselines import ReplayBaseline, fact_rows
from benchmarks.datasets import SEED
from benchmarks.harness import Result
from benchmarks.stores import Dataset, Scratch, load_ledger

T = TypeVar("T")


@dataclass(frozen=True)
class Preset:
    """How big each workload is."""

    name: str
    point_sizes: tuple[int, ...]
    search_sizes: tuple[int, ...]
    proposal_sizes: tuple[int, ...]
    rebuild_size: int
    remember_samples: int = 200
    bulk_memories: int = 5_000
    bulk_batch: int = 500
    query_samples: int = 500
    search_samples: int = 200
    build_batch: int = 2_000
    postgres_max: int | None = None
    """The largest data set PostgreSQL builds (its loads are slower); larger sizes shrink
    to it there."""
    seed: int = SEED

    def sizes(self, sizes: Sequence[int], backend: str) -> tuple[int, ...]:
        """Return the data set sizes to use on ``backend``: capped on PostgreSQL."""
        cap = self.postgres_max if backend == "postgres" else None
        return tuple(dict.fromkeys(size if cap is None else min(size, cap) for size in sizes))


PRESETS = {
    "tiny": Preset("tiny", (50,), (50,), (25, 50), 50, remember_samples=5,
                   bulk_memories=100, bulk_batch=50, query_samples=10, search_samples=5),
    "small": Preset("small", (1_000, 10_000), (10_000,), (1_000, 10_000), 1_000,
                    remember_samples=100, bulk_memories=2_000, query_samples=300,
                    search_samples=100, postgres_max=5_000),
    "medium": Preset("medium", (10_000, 100_000), (100_000,), (10_000, 100_000), 10_000,
                     search_samples=100, postgres_max=50_000),
    "full": Preset("full", (10_000, 100_000, 1_000_000), (100_000, 1_000_000),
                   (10_000, 100_000, 1_000_000), 100_000, build_batch=5_000),
}  # fmt: skip


def label(size: int) -> str:
    """Return a size as ``10k`` or ``1M``."""
    if size >= 1_000_000 and size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    if size >= 1_000 and size % 1_000 == 0:
        return f"{size // 1_000}k"
    return str(size)


@dataclass
class Context:
    """What one backend's workloads share: the preset, scratch stores and data sets."""

    preset: Preset
    scratch: Scratch
    console: Console
    datasets: dict[int, Dataset] = field(default_factory=dict)
    built: dict[tuple[str, int], Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def backend(self) -> str:
        return self.scratch.backend

    def sizes(self, sizes: Sequence[int]) -> tuple[int, ...]:
        """Return the data set sizes to use on this context's backend."""
        return self.preset.sizes(sizes, self.backend)

    def dataset(self, memories: int) -> Dataset:
        """Return the ledger holding ``memories`` memories, loading it on first use."""
        if memories not in self.datasets:
            store = f"ledger_{label(memories).lower()}"
            ledger = self.scratch.open_ledger(store)
            with self.timed(f"load {label(memories)} memories with remember_many") as clock:
                marks = load_ledger(ledger, memories, self.preset.build_batch, self.preset.seed)
            self.datasets[memories] = Dataset(memories, store, ledger, marks, clock())
        return self.datasets[memories]

    def cached(self, kind: str, memories: int, build: Callable[[], T]) -> T:
        """Return the baseline ``kind`` for a data set size, building it on first use."""
        key = (kind, memories)
        if key not in self.built:
            with self.timed(f"build {kind} baseline, {label(memories)} memories"):
                self.built[key] = build()
        value: T = self.built[key]
        return value

    def raw_facts(self, memories: int) -> Any:
        """Return plain tables holding the data set's bitemporal rows."""

        def build() -> Any:
            raw = self.scratch.raw(f"raw_facts_{label(memories).lower()}")
            raw.load_facts(fact_rows(memories, self.preset.seed))
            return raw

        return self.cached("raw facts", memories, build)

    def replay(self, memories: int) -> ReplayBaseline:
        """Return the eventsourcing application holding the data set's subjects."""

        def build() -> ReplayBaseline:
            replay = self.scratch.replay(f"replay_{label(memories).lower()}")
            replay.load(memories, self.preset.seed, self.preset.build_batch // 5)
            return replay

        return self.cached("eventsourcing replay", memories, build)

    @contextmanager
    def timed(self, what: str) -> Iterator[Callable[[], float]]:
        """Log how long a step took, and note it for the report."""
        started = time.perf_counter()
        self.console.log(f"{self.backend}: {what} ...", markup=False)
        yield lambda: time.perf_counter() - started
        seconds = time.perf_counter() - started
        self.notes.append(f"{self.backend}: {what}: {seconds:.1f} s")
        self.console.log(f"{self.backend}: {what}: {seconds:.1f} s", markup=False)

    def close(self) -> None:
        """Close every ledger and baseline this context opened."""
        for dataset in self.datasets.values():
            dataset.ledger.close()
        for baseline in self.built.values():
            baseline.close()


Workload = Callable[[Context], list[Result]]


def workloads() -> dict[str, Workload]:
    """Return every workload by name, in the order a run performs them.

    ``proposal``, ``curation`` and ``forget`` write into the shared data sets, so they
    run after the reads.
    """
    from benchmarks import (
        audit,
        command_line,
        conflicts,
        curation,
        following,
        forgetting,
        lineage,
        memory,
        reads,
        rebuild,
        search,
        writes,
    )

    return {
        "remember": writes.remember_latency,
        "bulk": writes.bulk_throughput,
        "follow": following.follow_rates,
        "facts": reads.facts_lookups,
        "timeline": reads.timeline_lookups,
        "lineage": lineage.lineage_lookups,
        "memory": memory.memory_lookups,
        "search": search.search_latency,
        "conflicts": conflicts.conflicts_reports,
        "command": command_line.command_line_latency,
        "proposal": writes.proposal_check,
        "curation": curation.curation_latency,
        "forget": forgetting.forget_latency,
        "rebuild": rebuild.rebuild_rate,
        "audit": audit.audit_rates,
    }


def run_backend(
    backend: str, preset: Preset, only: Sequence[str] | None, console: Console
) -> tuple[list[Result], list[str]]:
    """Run the chosen workloads on one backend; return the results and timing notes."""
    chosen = {n: w for n, w in workloads().items() if not only or n in only}
    results: list[Result] = []
    with Scratch(backend) as scratch:
        context = Context(preset, scratch, console)
        try:
            for name, workload in chosen.items():
                with context.timed(f"workload {name}"):
                    results.extend(workload(context))
        finally:
            context.close()
    return results, context.notes
