"""Profile erstwhile's slow paths with pyinstrument (``pip install pyinstrument``):
``python -m benchmarks.profiling [--memories N] [--backend sqlite|postgres]``.

Loads one data set, then profiles each path and prints, per path, the erstwhile
functions that take the largest share of its time (inclusive) and the functions where
the time is actually spent (self time, drivers and libraries included).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.console import Console

from benchmarks.datasets import (
    VERSIONS,
    claim,
    questions,
    subject_count,
)
from benchmarks.forgetting import current_memory
from benchmarks.stores import Scratch, load_ledger
from benchmarks.writes import fresh_claims
from erstwhile import Ledger

TOP = 8


def walk(frame: Any, stack: frozenset[str] = frozenset()) -> Iterator[tuple[Any, bool]]:
    """Yield every real (not synthetic) frame with whether its function is already on
    the stack above it."""
    name = qualified(frame)
    yield frame, name in stack
    for child in frame.children:
        if not child.is_synthetic:
            yield from walk(child, stack | {name})


def qualified(frame: Any) -> str:
    """Return ``file:function`` (with the class, when there is one) for a frame."""
    owner = f"{frame.class_name}." if frame.class_name else ""
    return f"{frame.file_path_short}:{owner}{frame.function}"


def shares(root: Any, top: int = TOP) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Return (erstwhile functions by inclusive share, all functions by self share).

    A frame's self time is its time minus its real children's, so time pyinstrument
    files under a synthetic ``[self]`` child stays with the frame.
    """
    inclusive: dict[str, float] = {}
    own: dict[str, float] = {}
    for frame, recursive in walk(root):
        name = qualified(frame)
        children = sum(c.time for c in frame.children if not c.is_synthetic)
        own[name] = own.get(name, 0.0) + frame.time - children
        if "erstwhile/" in (frame.file_path or "") and not recursive:
            inclusive[name] = inclusive.get(name, 0.0) + frame.time
    total = root.time or 1.0
    ranked = sorted(((n, t / total) for n, t in inclusive.items()), key=lambda p: -p[1])
    spent = sorted(((n, t / total) for n, t in own.items()), key=lambda p: -p[1])
    return ranked[:top], spent[:top]


def profile(name: str, work: Callable[[], object], console: Console, top: int = TOP) -> None:
    """Profile one path and print its hotspots."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    work()
    session = profiler.stop()
    root = session.root_frame()
    if root is None:
        return
    ranked, spent = shares(root, top)
    console.rule(f"{name}: {session.duration:.2f} s")
    for label, rows in (("inclusive (erstwhile)", ranked), ("self", spent)):
        console.print(f"[bold]{label}[/bold]")
        for function, share in rows:
            console.print(f"  {share:6.1%}  {function}", highlight=False)


def _forget_hard(ledger: Ledger, memory_ids: Sequence[Any]) -> None:
    """Hard-forget each memory in turn."""
    for memory_id in memory_ids:
        ledger.forget(memory_id, hard=True)


def paths(ledger: Ledger, memories: int) -> dict[str, Callable[[], object]]:
    """Return the paths to profile, each a call that does a few hundred operations."""
    rng = random.Random(1)
    subjects = rng.sample(range(subject_count(memories)), 200)
    asked = questions(50)
    bulk = [c.arguments() for c in fresh_claims(2_000, offset=5_000_000)]
    retired = [current_memory(ledger, i)[0] for i in subjects[100:]]
    return {
        "remember x100 (new subjects)": lambda: [
            ledger.remember(**c.arguments()) for c in fresh_claims(100, offset=6_000_000)
        ],
        "remember_many 4 x 500": lambda: [
            ledger.remember_many(bulk[i : i + 500]) for i in range(0, 2_000, 500)
        ],
        "facts as_of x500": lambda: [
            ledger.facts(claim(i, 2).subject, claim(i, 2).attribute, as_of=claim(i, 2).valid_from)
            for i in subjects * 2 + subjects[:100]
        ],
        "search x50": lambda: [ledger.search(q) for q in asked],
        "remember naming an entity x100": lambda: [
            ledger.remember(**claim(i, VERSIONS).arguments(entities=True)) for i in subjects[:100]
        ],
        "archive x50": lambda: [ledger.archive(memory_id) for memory_id in retired[:50]],
        "forget, hard x10": lambda: _forget_hard(ledger, retired[50:60]),
        "rebuild": ledger.rebuild,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Load a data set and profile every path on it."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profiling")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--only", action="append", metavar="PATH")
    parser.add_argument("--top", type=int, default=TOP, help="functions listed per path")
    options = parser.parse_args(argv)
    console = Console()
    with Scratch(options.backend) as scratch:
        ledger = scratch.open_ledger("profile")
        try:
            load_ledger(ledger, options.memories, 2_000, 20260901)
            for name, work in paths(ledger, options.memories).items():
                if not options.only or any(o in name for o in options.only):
                    profile(name, work, console, options.top)
        finally:
            ledger.close()


if __name__ == "__main__":
    main()
