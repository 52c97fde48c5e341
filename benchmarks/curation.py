"""Curation: ``revise`` (a new version that supersedes the current one at once) and, for
new versions remembered without ``supersedes`` (each leaves a proposal), listing the open
``proposals``, ``knows`` between the two memories of a proposal, ``accept`` and
``reject``, at each size of the proposal check.

Baselines: a revision of the plain bitemporal table in one durable transaction; the
ledger's own query for the open proposals, and the two vector clocks, read raw from its
tables; for accept and reject, a durable one-row ``UPDATE`` closing the subject's
current row of the plain table. Runs after the reads, in the shared data sets, on subjects
of their own: each first remembered (untimed) with one version, then revised, or given a
second version that leaves a proposal.
"""

from __future__ import annotations

from contextlib import closing
from datetime import UTC, datetime
from uuid import UUID

from benchmarks.baselines import OPEN_END, micros
from benchmarks.datasets import Claim, attribute_of, claim, subject_name
from benchmarks.forgetting import RETIRE
from benchmarks.harness import Result, interleaved, latency_pair
from benchmarks.suite import Context, label
from benchmarks.writes import FRESH_SUBJECTS, fresh_claims
from erstwhile import Ledger

RAW_REVISE = (
    "raw revision of a plain bitemporal table: INSERT of the current row's closed window, "
    "UPDATE closing the current row, INSERT of the new row, one durable transaction"
)
RAW_PROPOSALS = "the ledger's own query for the open proposals, run raw on its tables"
RAW_CLOCKS = "both memories' vector clocks read raw by primary key and compared"
FRESH_OFFSET = 3
"""The subjects curated at a data set size of ``m`` memories are the fresh ones from
``3m`` on (the proposal check's new subjects start at ``m``)."""
LISTINGS = 50
"""How many times the open proposals are listed (at most; the tiny preset lists fewer)."""


def curation_latency(context: Context) -> list[Result]:
    """Time revisions and the life of proposals at each size of the proposal check."""
    sizes = context.sizes(context.preset.proposal_sizes)
    return [row for memories in sizes for row in _curation_at(context, memories)]


def _curation_at(context: Context, memories: int) -> list[Result]:
    """In one data set, revise some subjects and leave proposals on others, then list,
    compare, accept and reject them, each taking turns with its baseline."""
    dataset, raw = context.dataset(memories), context.raw_facts(memories)
    ledger, seed, backend = dataset.ledger, context.preset.seed, context.backend
    each = context.preset.remember_samples
    firsts = fresh_claims(3 * each, offset=FRESH_OFFSET * memories)
    ledger.remember_many([c.arguments() for c in firsts])
    for c in firsts:  # the plain table's rows of the same first versions
        raw.revise(c.subject, c.attribute, _row(c))
    subjects = [FRESH_SUBJECTS + FRESH_OFFSET * memories + i for i in range(3 * each)]
    revised, accepted, rejected = (subjects[i * each : (i + 1) * each] for i in range(3))
    current = {index: ledger.facts(subject_name(index), attribute_of(index))[0].id
               for index in subjects}  # fmt: skip
    revisions = interleaved(
        [lambda index: _revise(ledger, current[index], claim(index, 1, seed)),
         lambda index: raw.revise(subject_name(index), attribute_of(index),
                                  _row(claim(index, 1, seed)))],
        revised,
    )  # fmt: skip
    proposed = _propose(ledger, [claim(index, 1, seed) for index in accepted + rejected],
                        {current[index]: index for index in accepted + rejected})  # fmt: skip
    with closing(context.scratch.ledger_reader(dataset.store)) as reader:
        listed = [p.id for p in ledger.proposals()]
        if listed != [UUID(str(row[0])) for row in reader.open_proposals(ledger.namespace)]:
            raise RuntimeError("the raw query lists other proposals than the ledger")
        listings = interleaved([lambda _: ledger.proposals(),
                                lambda _: reader.open_proposals(ledger.namespace)],
                               range(min(LISTINGS, 10 * each)))  # fmt: skip
        pairs = [(proposed[index][2], proposed[index][1]) for index in accepted]
        for later, earlier in pairs:
            if not (ledger.knows(later, earlier) and reader.knows(later, earlier)):
                raise RuntimeError(f"{later} was written after {earlier}, knowing it")
            if ledger.knows(earlier, later) or reader.knows(earlier, later):
                raise RuntimeError(f"{earlier} was written before {later}, not knowing it")
        knowing = interleaved([lambda p: ledger.knows(*p), lambda p: reader.knows(*p)], pairs)
    accepts = interleaved(
        [lambda index: ledger.accept(proposed[index][0]),
         lambda index: raw.retire(subject_name(index), attribute_of(index))],
        accepted,
    )  # fmt: skip
    rejects = interleaved(
        [lambda index: ledger.reject(proposed[index][0]),
         lambda index: raw.retire(subject_name(index), attribute_of(index))],
        rejected,
    )  # fmt: skip
    _check_curated(ledger, seed, revised, accepted, rejected, proposed)
    if any(len(raw.rectangles(subject_name(i), attribute_of(i))) != 3 for i in revised):
        raise RuntimeError("a raw revision did not keep, close and add the rows it should")
    size = f"@{label(memories)}"
    rows = [
        (f"revise {size}", revisions, RAW_REVISE),
        (f"proposals, {len(listed)} open {size}", listings, RAW_PROPOSALS),
        (f"knows {size}", knowing, RAW_CLOCKS),
        (f"accept {size}", accepts, RETIRE),
        (f"reject {size}", rejects, RETIRE),
    ]
    return [
        result
        for name, (ours, theirs), baseline in rows
        for result in latency_pair(name, backend, ours, theirs, baseline, "curation")
    ]


def _revise(ledger: Ledger, older: UUID, c: Claim) -> None:
    ledger.revise(older, c.content, at=c.valid_from, value=c.value)


def _row(c: Claim) -> tuple[str, str, str, str, int, int, int, int]:
    """The plain table's row of a revision recorded now."""
    now = micros(datetime.now(UTC))
    return (c.subject, c.attribute, c.value, c.content, micros(c.valid_from), OPEN_END, now,
            OPEN_END)  # fmt: skip


def _propose(
    ledger: Ledger, claims: list[Claim], olders: dict[UUID, int]
) -> dict[int, tuple[UUID, UUID, UUID]]:
    """Remember the claims without naming what they replace (untimed): each leaves a
    proposal against its subject's current memory. Return, by subject, the proposal's
    id, the older memory's and the newer's."""
    ledger.remember_many([c.arguments() for c in claims])
    found = {olders[p.older_id]: (p.id, p.older_id, p.newer_id)
             for p in ledger.proposals() if p.older_id in olders}  # fmt: skip
    if len(found) != len(claims):
        raise RuntimeError(f"{len(claims)} new versions left {len(found)} proposals")
    return found


def _check_curated(
    ledger: Ledger,
    seed: int,
    revised: list[int],
    accepted: list[int],
    rejected: list[int],
    proposed: dict[int, tuple[UUID, UUID, UUID]],
) -> None:
    """Make sure every call did its work: a revised or accepted subject's one current
    memory is the new version; a rejected one keeps both, and no proposal stays open."""
    for index in revised + accepted:
        found = [str(m.value) for m in ledger.facts(subject_name(index), attribute_of(index))]
        if found != [claim(index, 1, seed).value]:
            raise RuntimeError(f"{subject_name(index)} holds {found} after its revision")
    for index in rejected:
        if len(ledger.facts(subject_name(index), attribute_of(index))) != 2:
            raise RuntimeError(f"{subject_name(index)} lost a memory to a rejection")
    still = {p.id for p in ledger.proposals()} & {proposed[i][0] for i in accepted + rejected}
    if still:
        raise RuntimeError(f"{len(still)} accepted or rejected proposals are still open")
