"""Racing writers: real OS processes writing to one store at once, on SQLite and PostgreSQL.

Each worker is a process started with "spawn" that opens its own ledger (its own
connections), so the only things the writers share are the database and its locks.
One race: several processes supersede the same memory at once; exactly one wins and
nothing of the losers is stored. One crowd: several processes append side by side, one
of them with a clock a day behind, and transaction time still strictly increases in
log order.

And a crowd of opens: several processes open one brand-new store at once, and every
open succeeds (setup is serialised across processes, and the switch of a new file to
WAL mode waits for a busy file).
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from erstwhile import ConcurrencyConflict, ErstwhileError, Ledger, Memory, SupersessionRefused
from erstwhile.eventstore.sqlite import enter_wal
from tests.conftest import OpenLedger, event_count

SPAWN = multiprocessing.get_context("spawn")
WRITERS = 4
ROUNDS = ("revise", "remember", "revise", "remember")
APPENDS = 20
TIMEOUT = 30.0
MAR = "2026-03-01T00:00:00Z"
JUL = "2026-07-01T00:00:00Z"
LOSSES = {("ConcurrencyConflict", ""), ("SupersessionRefused", "already_superseded")}

Outcome = tuple[str, str]


@dataclass(frozen=True)
class Race:
    """One round: supersede ``old_id`` in ``namespace``, by ``revise`` or by ``remember``."""

    url: str
    namespace: str
    old_id: str
    via: str


class DayBehindClock:
    """A clock one day behind the real one (module-level, so "spawn" can pickle it)."""

    def __call__(self) -> datetime:
        return datetime.now(UTC) - timedelta(days=1)


# ------------------------------------------------------------------ in the workers


def race_worker(n: int, tasks: Queue[Race | None], barrier: Barrier, results: Queue[Any]) -> None:
    """Run races until told to stop, reporting each outcome (or the crash) by number."""
    while (race := tasks.get(timeout=TIMEOUT)) is not None:
        try:
            results.put((n, race_once(n, race, barrier)))
        except Exception as error:
            barrier.abort()
            results.put((n, ("crashed", repr(error))))


def race_once(n: int, race: Race, barrier: Barrier) -> Outcome:
    """Read the memory, wait for the others, then try to supersede it."""
    with Ledger.open(race.url, namespace=race.namespace, actor=f"writer-{n}") as ledger:
        ledger.get(race.old_id)
        barrier.wait(timeout=TIMEOUT)
        try:
            memory = supersede(ledger, race, n)
        except SupersessionRefused as error:
            return ("SupersessionRefused", error.reason)
        except ErstwhileError as error:
            return (type(error).__name__, "")
    return ("won", str(memory.id))


def supersede(ledger: Ledger, race: Race, n: int) -> Memory:
    """Supersede the race's memory with writer ``n``'s claim, the round's way."""
    if race.via == "revise":
        return ledger.revise(race.old_id, f"moved to cloud {n}", value=f"cloud-{n}", at=JUL)
    return ledger.remember(
        f"moved to cloud {n}",
        subject="team",
        attribute="database",
        value=f"cloud-{n}",
        valid_from=JUL,
        supersedes=[race.old_id],
    )


def append_worker(
    n: int,
    url: str,
    clock: Callable[[], datetime] | None,
    barrier: Barrier,
    results: Queue[Any],
) -> None:
    """Append ``APPENDS`` memories as ``appender-n``; report their ids (or the crash)."""
    try:
        with Ledger.open(url, namespace="crowd", actor=f"appender-{n}", clock=clock) as ledger:
            barrier.wait(timeout=TIMEOUT)
            ids = [str(ledger.remember(f"note {i} from {n}").id) for i in range(APPENDS)]
        results.put((n, ids))
    except Exception as error:
        barrier.abort()
        results.put((n, repr(error)))


# ------------------------------------------------------------------- in the test


@contextmanager
def running(target: Callable[..., None], argsets: list[tuple[Any, ...]]) -> Iterator[None]:
    """Start one spawned process per argument tuple; join them, or kill them on failure."""
    processes: list[BaseProcess] = [
        SPAWN.Process(target=target, args=args, daemon=True) for args in argsets
    ]
    for process in processes:
        process.start()
    try:
        yield
    except BaseException:
        for process in processes:
            process.terminate()
        raise
    finally:
        for process in processes:
            process.join(timeout=TIMEOUT)
            if process.is_alive():
                process.terminate()
                process.join()


def collect(results: Queue[Any], count: int) -> dict[int, Any]:
    """Return ``count`` reports from the workers, by worker number."""
    return dict(results.get(timeout=TIMEOUT) for _ in range(count))


def open_round(open_ledger: OpenLedger, number: int) -> tuple[Ledger, UUID]:
    """A ledger in the round's own namespace, holding one memory to race over."""
    ledger = open_ledger(namespace=f"race-{number}")
    old = ledger.remember(
        "The team uses Supabase",
        subject="team",
        attribute="database",
        value="Supabase",
        valid_from=MAR,
    )
    return ledger, old.id


def check_round(ledger: Ledger, old_id: UUID, outcomes: dict[int, Outcome], number: int) -> None:
    """Exactly one winner, every loser refused cleanly, and only the winner's write stored.

    A loser that read the memory before the winner committed clashes on the memory's
    version (``ConcurrencyConflict``); one that read it after is refused by the rules
    (``already_superseded``). Which happens depends on scheduling: both are right.
    """
    winners = [(n, result) for n, (kind, result) in outcomes.items() if kind == "won"]
    assert len(winners) == 1, outcomes
    assert all(o in LOSSES for o in outcomes.values() if o[0] != "won"), outcomes
    n, winner_id = winners[0][0], UUID(winners[0][1])
    winner = ledger.get(winner_id)
    assert (winner.actor, winner.value) == (f"writer-{n}", f"cloud-{n}")
    assert event_count(ledger) == 3 * number
    stored = [(e.type, e.memory_id) for e in ledger.events()]
    assert stored == [("Asserted", old_id), ("Superseded", old_id), ("Asserted", winner_id)]
    assert ledger.get(old_id).superseded_by == winner_id
    assert [m.id for m in ledger.chain(old_id)] == [old_id, winner_id]
    assert [m.id for m in ledger.facts("team", "database")] == [winner_id]


def test_racing_supersessions_have_one_winner_and_store_nothing_else(
    store_url: str, open_ledger: OpenLedger
) -> None:
    tasks: list[Queue[Race | None]] = [SPAWN.Queue() for _ in range(WRITERS)]
    results: Queue[Any] = SPAWN.Queue()
    barrier = SPAWN.Barrier(WRITERS)
    argsets = [(n, tasks[n], barrier, results) for n in range(WRITERS)]
    with running(race_worker, argsets):
        for number, via in enumerate(ROUNDS, start=1):
            ledger, old_id = open_round(open_ledger, number)
            for queue in tasks:
                queue.put(Race(store_url, ledger.namespace, str(old_id), via))
            check_round(ledger, old_id, collect(results, WRITERS), number)
        for queue in tasks:
            queue.put(None)


@pytest.mark.parametrize("change", ["archive", "forget", "revise"])
def test_a_revise_decided_on_a_memory_changed_before_its_write_is_a_conflict(
    open_ledger: OpenLedger, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """``revise`` writes on the older memory as it read it: another writer that archives,
    forgets or revises that memory between the read and the write makes the revise a
    ``ConcurrencyConflict`` (the memory's version moved), and the revise stores nothing."""
    mine = open_ledger(namespace="acme")
    theirs = open_ledger(namespace="acme", actor="other")
    older = mine.remember("The team uses Supabase", subject="team", attribute="database",
                          value="Supabase")  # fmt: skip
    writes = mine._remember_plans

    def changed_first(*args: Any, **kwargs: Any) -> list[Memory]:
        if change == "revise":
            theirs.revise(older.id, "The team uses Neon", value="Neon")
        else:
            getattr(theirs, change)(older.id)
        return writes(*args, **kwargs)

    monkeypatch.setattr(mine, "_remember_plans", changed_first)
    with pytest.raises(ConcurrencyConflict):
        mine.revise(older.id, "The team uses Postgres", value="Postgres")
    assert [e.actor for e in mine.events()][1:] == ["other"] * (2 if change == "revise" else 1)
    assert "Postgres" not in [m.value for m in mine.timeline("team", "database")]


def test_recorded_at_strictly_increases_across_processes_with_a_clock_behind(
    store_url: str, open_ledger: OpenLedger
) -> None:
    ledger = open_ledger(namespace="crowd")
    results: Queue[Any] = SPAWN.Queue()
    barrier = SPAWN.Barrier(WRITERS)
    clocks = [DayBehindClock(), *([None] * (WRITERS - 1))]
    argsets = [(n, store_url, clocks[n], barrier, results) for n in range(WRITERS)]
    with running(append_worker, argsets):
        reported = collect(results, WRITERS)
    assert all(isinstance(ids, list) for ids in reported.values()), reported
    events = list(ledger.events())
    positions = [e.position for e in events]
    instants = [e.recorded_at for e in events]
    assert len(events) == APPENDS * WRITERS
    assert all(a < b for a, b in pairwise(positions))
    assert all(a < b for a, b in pairwise(instants))
    assert len({e.memory_id for e in events}) == len(events)
    assert {str(e.memory_id) for e in events} == {i for ids in reported.values() for i in ids}
    for n in range(WRITERS):
        assert sum(e.actor == f"appender-{n}" for e in events) == APPENDS


def open_worker(n: int, url: str, barrier: Barrier, results: Queue[Any]) -> None:
    """Open a brand-new store at the same moment as the others, and write once."""
    try:
        barrier.wait(timeout=TIMEOUT)
        with Ledger.open(url, namespace="openers", actor=f"opener-{n}") as ledger:
            results.put((n, str(ledger.remember(f"opened by {n}").id)))
    except Exception as error:
        barrier.abort()
        results.put((n, repr(error)))


def test_concurrent_opens_of_a_new_store_all_succeed(store_url: str) -> None:
    results: Queue[Any] = SPAWN.Queue()
    barrier = SPAWN.Barrier(WRITERS)
    with running(open_worker, [(n, store_url, barrier, results) for n in range(WRITERS)]):
        reported = collect(results, WRITERS)
    assert all(not text.startswith(("StoreUnavailable", "Err")) for text in reported.values()), (
        reported
    )
    with Ledger.open(store_url, namespace="openers") as ledger:
        assert {str(e.memory_id) for e in ledger.events()} == set(reported.values())


def test_a_new_file_waits_for_the_lock_to_enter_wal_mode(tmp_path: Path) -> None:
    """The switch to WAL mode can fail at once while another connection holds the file
    (it does not always wait in the busy handler): it is retried until the lock is free.
    The opener here has no busy handler at all, so only the retry can make it wait."""
    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    opener = sqlite3.connect(path, isolation_level=None, timeout=0)
    release = threading.Timer(0.2, holder.execute, ("COMMIT",))
    release.start()
    try:
        enter_wal(opener, timeout=TIMEOUT)
        assert opener.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        release.join()
        opener.close()
        holder.close()


def test_entering_wal_mode_gives_up_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    opener = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            enter_wal(opener, timeout=0.1)
    finally:
        opener.close()
        holder.close()


def test_threads_sharing_a_ledger_wait_for_a_long_write_as_processes_do(tmp_path: Path) -> None:
    """A write waits for another thread's write as long as for another process's (30 s,
    the busy timeout): the connection pool's own wait for its writer gave up after 5 s."""
    with Ledger.open(tmp_path / "shared.db") as ledger:
        ledger.remember("before")
        holding = threading.Event()

        def hold_the_writer() -> None:
            with ledger.log.backend.write():
                holding.set()
                time.sleep(5.5)

        holder = threading.Thread(target=hold_the_writer)
        holder.start()
        try:
            assert holding.wait(10)
            waited = time.monotonic()
            after = ledger.remember("after")
            assert time.monotonic() - waited >= 5
        finally:
            holder.join()
        assert ledger.get(after.id).content == "after"
