"""Retiring memories: ``archive``, a soft ``forget`` and a hard one, each of a current
memory of a shared data set, against the plain table's way of doing the same to the
same subject's current row: a durable one-row ``UPDATE`` closing its recorded window;
for the hard forget, an ``UPDATE`` wiping its text, then the store's own scrub. Then one
``purge`` makes the soft forgets hard, against the plain table's ``UPDATE`` wiping each
of their rows' text, then one scrub.

Runs after the reads: it retires memories of the shared data sets (a few hundred of
thousands) and their rows in the plain tables.
"""

from __future__ import annotations

import random
from datetime import timedelta
from uuid import UUID

from benchmarks.baselines import RawStore
from benchmarks.datasets import attribute_of, subject_count, subject_name
from benchmarks.harness import NS_PER_MS, Result, interleaved, latency_pair
from benchmarks.suite import Context, label
from erstwhile import Ledger

HARD_SAMPLES = 20
"""Hard forgets timed per data set size: each scrubs the store's files (on SQLite it
merges both full-text indexes whole), so they take tens to hundreds of milliseconds."""
RETIRE = "raw UPDATE closing the subject's current row (recorded_until) + COMMIT"
ERASE = {
    "sqlite": "raw UPDATE wiping the current row's text + COMMIT (secure_delete=ON), "
    "then VACUUM and wal_checkpoint(TRUNCATE)",
    "postgres": "raw UPDATE wiping the current row's text (autocommit), then VACUUM of the table",
}
PURGE = {
    "sqlite": "raw UPDATE wiping each row's text + COMMIT (secure_delete=ON), then one "
    "VACUUM and wal_checkpoint(TRUNCATE)",
    "postgres": "raw UPDATE wiping each row's text (autocommit), then one VACUUM of the table",
}

Target = tuple[UUID, str, str]
"""A memory to retire, with the subject and attribute of its row in the plain table."""


def forget_latency(context: Context) -> list[Result]:
    """Time archives, soft and hard forgets at each size of the proposal check."""
    sizes = context.sizes(context.preset.proposal_sizes)
    return [row for memories in sizes for row in _forget_at(context, memories)]


def _forget_at(context: Context, memories: int) -> list[Result]:
    """In one data set, retire current memories of distinct subjects three ways, each
    taking turns with the plain table's retirement of the same subject's row."""
    ledger, raw = context.dataset(memories).ledger, context.raw_facts(memories)
    subjects = subject_count(memories)
    each = min(context.preset.remember_samples, subjects // 3)
    hard = min(HARD_SAMPLES, each)
    chosen = random.Random(f"forget:{memories}").sample(range(subjects), 2 * each + hard)
    targets = [current_memory(ledger, index) for index in chosen]
    archived, softly, erased = targets[:each], targets[each : 2 * each], targets[2 * each :]
    size, backend = label(memories), context.backend
    archive, archive_raw = interleaved(
        [lambda t: ledger.archive(t[0]), lambda t: raw.retire(*t[1:])], archived
    )
    soft, soft_raw = interleaved(
        [lambda t: ledger.forget(t[0]), lambda t: raw.retire(*t[1:])], softly
    )
    erase, erase_raw = interleaved(
        [lambda t: ledger.forget(t[0], hard=True), lambda t: raw.erase(*t[1:])], erased
    )
    _check_retired(ledger, targets)
    purged, wiped = _purge(ledger, raw, softly)
    return [
        *latency_pair(f"archive @{size}", backend, archive, archive_raw, RETIRE, "forget"),
        *latency_pair(f"forget, soft @{size}", backend, soft, soft_raw, RETIRE, "forget"),
        *latency_pair(f"forget, hard @{size}", backend, erase, erase_raw, ERASE[backend], "forget"),
        Result(f"purge of {len(softly)} soft forgets @{size}", backend, purged, wiped, "ms",
               PURGE[backend], "forget"),
    ]  # fmt: skip


def _purge(ledger: Ledger, raw: RawStore, softly: list[Target]) -> tuple[float, float]:
    """Time one ``purge`` that makes the soft forgets hard, and the plain table's wipe
    of the same rows, in turns; return both in milliseconds."""
    keys = [t[1:] for t in softly]
    purges: list[list[UUID]] = []
    (ours,), (theirs,) = interleaved(
        [lambda _: purges.append(ledger.purge(grace=timedelta(0))), lambda _: raw.erase_many(keys)],
        [None],
    )  # fmt: skip
    if sorted(purges[0]) != sorted(t[0] for t in softly):
        raise RuntimeError(f"purge erased {len(purges[0])} memories, not the {len(softly)} due")
    return ours / NS_PER_MS, theirs / NS_PER_MS


def current_memory(ledger: Ledger, index: int) -> Target:
    """The newest current memory of subject ``index`` (its last version, or a revision
    the proposal check added)."""
    subject, attribute = subject_name(index), attribute_of(index)
    found = ledger.facts(subject, attribute)
    if not found:
        raise RuntimeError(f"no current memory about {subject} {attribute}")
    return found[-1].id, subject, attribute


def _check_retired(ledger: Ledger, targets: list[Target]) -> None:
    """Make sure every call did its work: no retired memory is current any more."""
    retired = {t[0] for t in targets}
    left = [t for t in targets if {m.id for m in ledger.facts(t[1], t[2])} & retired]
    if left:
        raise RuntimeError(f"{len(left)} retired memories are still current, e.g. {left[0]}")
