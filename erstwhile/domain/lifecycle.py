"""Whether a log is one the ledger's commands could have written.

An import takes a log from outside, so before it is written each event is checked
against the life of its memory so far, as the commands would have checked it: a
memory is asserted once, then moves only along the allowed transitions, one version
at a time, in its own namespace; nothing follows a hard forget; every supersession
keeps the invariants of ``rules.py`` and is linked both ways (the ``Superseded``
event and the newer memory's ``supersedes``); a proposal is rejected at most once and
never after it was accepted. The check reads each event once and remembers a few
fields per memory: O(events) time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from erstwhile.domain.errors import ValidationError
from erstwhile.domain.events import (
    Archived,
    Asserted,
    Forgotten,
    LedgerEvent,
    ProposalRejected,
    Superseded,
    proposal_id,
)
from erstwhile.domain.ids import UUID_VERSION
from erstwhile.domain.memory import (
    LAST_IMPORTABLE_POSITION,
    LOG_POSITIONS,
    Kind,
    MemoryDraft,
    State,
    check_idempotency_key,
    check_position,
    claim_of,
    parse_draft,
)
from erstwhile.domain.rules import can_transition
from erstwhile.domain.time import LAST_RECORDABLE, end_to_micros, to_micros, to_utc

DRAFT_FIELDS = tuple(MemoryDraft.model_fields)


class Impossible(Exception):
    """An event the commands could never have written where it stands."""


@dataclass(slots=True)
class Life:
    """What the check keeps of one memory: enough to judge its next event."""

    line: int
    namespace: str
    kind: Kind
    start: int
    end: int
    """Where its valid window ends, in µs (``OPEN_END`` while open-ended)."""
    state: State = State.CURRENT
    version: int = 1
    hard: bool = False
    erased: bool = False
    awaiting: set[UUID] | None = None
    """Older memories its ``supersedes`` lists whose ``Superseded`` is still to come
    (the first versions wrote a new memory's ``Asserted`` before them)."""
    claim_digest: bytes | None = None
    """A digest of its claim (see :func:`claim_digest`); None once erased."""


@dataclass(frozen=True, slots=True)
class Forward:
    """A ``Superseded`` naming a newer memory no line has asserted yet."""

    line: int
    namespace: str
    kind: Kind
    at: int
    claim_digest: bytes | None
    """The older memory's (see :func:`claim_digest`)."""


@dataclass
class LogCheck:
    """Follow a log event by event; refuse the first event the commands could not
    have written there, naming its line."""

    lives: dict[UUID, Life] = field(default_factory=dict)
    forwards: dict[UUID, dict[UUID, Forward]] = field(default_factory=dict)
    proposals: dict[UUID, str] = field(default_factory=dict)
    claims: set[tuple[str, str]] = field(default_factory=set)
    position: int = 0
    recorded: int | None = None

    def follow(
        self, line: int, position: int, recorded_at: datetime, namespace: str, event: LedgerEvent
    ) -> None:
        """Check the event on ``line``, stored at ``position`` and ``recorded_at`` in
        ``namespace``; raise ``ValidationError`` naming the line if it is impossible."""
        try:
            self._order(position, recorded_at)
            if isinstance(event, Asserted):
                self._asserted(line, namespace, event)
            elif isinstance(event, Superseded):
                self._superseded(line, namespace, event)
            elif isinstance(event, Archived | Forgotten):
                self._retired(namespace, event)
            elif isinstance(event, ProposalRejected):
                self._rejected(line, namespace, event)
        except (Impossible, ValidationError) as error:
            raise ValidationError(f"import line {line}: {error}") from None

    def finish(self) -> None:
        """Refuse a log that ends with a link or an erasure left half written."""
        loose: list[tuple[int, str]] = []
        for newer_id, olders in self.forwards.items():
            loose.extend(
                (f.line, f"memory {older_id} is superseded by {newer_id}, which no line asserts")
                for older_id, f in olders.items()
            )
        for memory_id, life in self.lives.items():
            if life.awaiting:
                older_id = min(life.awaiting)
                loose.append((life.line, f"memory {memory_id} supersedes {older_id}, but no line "
                                         f"supersedes {older_id} by it"))  # fmt: skip
            if life.erased and not life.hard:
                loose.append((life.line, f"memory {memory_id} comes erased, but no line "
                                         "forgets it for good (hard)"))  # fmt: skip
        if loose:
            line, reason = min(loose)
            raise ValidationError(f"import line {line}: {reason}")

    def _order(self, position: int, recorded_at: datetime) -> None:
        if position not in LOG_POSITIONS or position == 0:
            raise Impossible(f"position {position} is not a log position (1 or more)")
        if position > LAST_IMPORTABLE_POSITION:
            raise Impossible(f"position {position} leaves no room for later writes (an "
                             f"import's positions end at {LAST_IMPORTABLE_POSITION})")  # fmt: skip
        if position <= self.position:
            raise Impossible(
                f"position {position} does not come after the line before's ({self.position})"
            )
        recorded = to_micros(recorded_at)
        if recorded_at > LAST_RECORDABLE:
            raise Impossible(
                f"recorded_at {recorded_at.isoformat()} leaves no instant for a later write"
            )
        if self.recorded is not None and recorded <= self.recorded:
            raise Impossible(
                f"recorded_at {recorded_at.isoformat()} is not later than the line before's"
            )
        self.position, self.recorded = position, recorded

    def _asserted(self, line: int, namespace: str, event: Asserted) -> None:
        memory_id = event.originator_id
        if memory_id in self.lives or memory_id in self.proposals:
            raise Impossible(f"memory {memory_id} is asserted again (an id is asserted once)")
        if event.originator_version != 1:
            raise Impossible(
                f"an Asserted opens its memory's stream (version 1), not version "
                f"{event.originator_version}"
            )
        if memory_id.version != UUID_VERSION:
            raise Impossible(f"memory id {memory_id} is not a UUIDv7, as every memory's is")
        check_claim(event)
        if event.observed_position is not None and event.observed_position >= self.position:
            raise Impossible(
                f"observed_position {event.observed_position} is not before the memory's own "
                f"position {self.position} (a writer reads what the log held before its write)"
            )
        named = set()
        for older in event.supersedes:
            if older in named:
                raise Impossible(f"supersedes names memory {older} twice")
            named.add(older)
        start, end = to_micros(event.valid_from), end_to_micros(event.valid_until)
        life = Life(line, namespace, event.kind, start, end, erased=event.erased,
                    claim_digest=claim_digest(event))  # fmt: skip
        self._links(life, memory_id, event.supersedes)
        if event.idempotency_key is not None:
            claim = (namespace, event.idempotency_key)
            if claim in self.claims:
                raise Impossible(f"idempotency key {event.idempotency_key!r} is used again")
            self.claims.add(claim)
        self.lives[memory_id] = life

    def _links(self, life: Life, memory_id: UUID, supersedes: tuple[UUID, ...]) -> None:
        """Match the new memory's ``supersedes`` with the ``Superseded`` events naming
        it: those before it (as the commands write them), or after it (as the first
        versions did)."""
        forwards = self.forwards.pop(memory_id, {})
        for older_id, forward in forwards.items():
            if older_id not in supersedes:
                raise Impossible(f"line {forward.line} supersedes {older_id} by this memory, "
                                 "but this memory's supersedes does not list it")  # fmt: skip
            _meets(life, forward.namespace, forward.kind, forward.at, forward.claim_digest,
                   f"the supersession on line {forward.line}")  # fmt: skip
        for older_id in supersedes:
            if older_id in forwards:
                continue
            older = self.lives.get(older_id)
            if older is None or older.namespace != life.namespace:
                raise Impossible(f"supersedes {older_id}, which no earlier line asserts")
            if older.state is not State.CURRENT:
                raise Impossible(f"supersedes {older_id}, which is {older.state} by then")
            life.awaiting = (life.awaiting or set()) | {older_id}

    def _superseded(self, line: int, namespace: str, event: Superseded) -> None:
        older = self._life(namespace, event)
        older_id, newer_id = event.originator_id, event.newer_id
        if newer_id == older_id:
            raise Impossible(f"memory {older_id} supersedes itself")
        if older.kind is Kind.EVENT:
            raise Impossible(f"memory {older_id} is an event: events are never superseded")
        if not can_transition(older.state, State.SUPERSEDED):
            raise Impossible(f"memory {older_id} is {older.state}: only a current one is "
                             "superseded")  # fmt: skip
        at = to_micros(to_utc(event.at, "at"))
        if at <= older.start or older.end <= at:
            raise Impossible(
                f"superseding {older_id} at {event.at.isoformat()} is outside its window"
            )
        newer = self.lives.get(newer_id)
        if newer is None:
            if event.proposal_id is not None:
                raise Impossible(f"accepts a proposal whose newer memory {newer_id} no earlier "
                                 "line asserts")  # fmt: skip
            self.forwards.setdefault(newer_id, {})[older_id] = Forward(
                line, namespace, older.kind, at, older.claim_digest
            )
        else:
            if newer.hard or newer.state is State.FORGOTTEN:
                raise Impossible(f"the newer memory {newer_id} is forgotten")
            if event.proposal_id is not None and newer.state is not State.CURRENT:
                raise Impossible(f"accepts a proposal whose newer memory {newer_id} is "
                                 f"{newer.state}: accept takes a current one")  # fmt: skip
            _meets(newer, namespace, older.kind, at, older.claim_digest, "the supersession")
            self._linked(older_id, newer_id, newer, event.proposal_id)
        older.state, older.end = State.SUPERSEDED, at

    def _linked(self, older_id: UUID, newer_id: UUID, newer: Life, accepted: UUID | None) -> None:
        """A supersession by an asserted memory: one its ``supersedes`` listed, or an
        accepted proposal."""
        if newer.awaiting and older_id in newer.awaiting:
            newer.awaiting.discard(older_id)
            return
        if accepted is None:
            raise Impossible(f"memory {newer_id} does not list {older_id} in supersedes, and "
                             "no proposal is accepted")  # fmt: skip
        if accepted != proposal_id(older_id, newer_id):
            raise Impossible(f"proposal {accepted} is not the one of {older_id} and {newer_id}")
        if self.proposals.get(accepted) == "rejected":
            raise Impossible(f"proposal {accepted} was rejected: it cannot be accepted")
        self.proposals[accepted] = "accepted"

    def _retired(self, namespace: str, event: Archived | Forgotten) -> None:
        life = self._life(namespace, event)
        memory_id = event.originator_id
        if isinstance(event, Archived):
            if not can_transition(life.state, State.ARCHIVED):
                raise Impossible(f"memory {memory_id} is {life.state}: it cannot be archived")
            life.state = State.ARCHIVED
            return
        if life.state is State.FORGOTTEN and not event.hard:
            raise Impossible(f"memory {memory_id} is forgotten already: only a hard forget "
                             "may follow")  # fmt: skip
        life.state, life.hard = State.FORGOTTEN, event.hard

    def _rejected(self, line: int, namespace: str, event: ProposalRejected) -> None:
        proposal = event.originator_id
        if event.originator_version != 1:
            raise Impossible(f"a proposal is rejected once (version 1), not version "
                             f"{event.originator_version}")  # fmt: skip
        if proposal in self.lives:
            raise Impossible(f"proposal {proposal} has the id of a memory")
        if proposal in self.proposals:
            raise Impossible(f"proposal {proposal} was {self.proposals[proposal]} before")
        for memory_id in (event.older_id, event.newer_id):
            known = self.lives.get(memory_id)
            if known is None or known.namespace != namespace:
                raise Impossible(f"the proposal names memory {memory_id}, which no earlier "
                                 f"line asserts in namespace {namespace!r}")  # fmt: skip
        if event.older_id == event.newer_id or proposal != proposal_id(
            event.older_id, event.newer_id
        ):
            raise Impossible(
                f"{proposal} is not the proposal of {event.older_id} and {event.newer_id}"
            )
        self.proposals[proposal] = "rejected"

    def _life(self, namespace: str, event: LedgerEvent) -> Life:
        """The memory an event changes, which must be asserted, alive and in the same
        namespace; the event must be its next version."""
        memory_id, kind = event.originator_id, type(event).__name__
        life = self.lives.get(memory_id)
        if life is None:
            raise Impossible(f"{kind} names memory {memory_id}, which no earlier line asserts")
        if life.namespace != namespace:
            raise Impossible(f"memory {memory_id} belongs to namespace {life.namespace!r}, "
                             f"not {namespace!r}")  # fmt: skip
        if life.hard:
            raise Impossible(f"memory {memory_id} was forgotten for good (hard): no event "
                             "follows that")  # fmt: skip
        if event.originator_version != life.version + 1:
            raise Impossible(f"{kind} is version {event.originator_version} of memory "
                             f"{memory_id}, whose next is {life.version + 1}")  # fmt: skip
        life.version += 1
        return life


def check_claim(event: Asserted) -> None:
    """Refuse an ``Asserted`` whose claim ``remember`` would refuse (of an erased one,
    what is left: kind, window, instants, confidence, labels)."""
    fields = {name: getattr(event, name) for name in DRAFT_FIELDS}
    if event.erased:
        fields["content"] = "erased"
    parse_draft(fields)
    if event.idempotency_key is not None:
        check_idempotency_key(event.idempotency_key)
    if event.observed_position is not None:
        check_position(event.observed_position, "observed_position")


def claim_digest(event: Asserted) -> bytes | None:
    """Return a digest of what makes two claims identical (:func:`claim_of`).

    It is kept per memory instead of the claim itself; None for an erased claim, which
    compares with none."""
    if event.erased:
        return None
    claim = claim_of(event.subject, event.attribute, event.value, event.content)
    return hashlib.blake2b(repr(claim).encode(), digest_size=16).digest()


def _meets(
    newer: Life, namespace: str, kind: Kind, at: int, digest: bytes | None, what: str
) -> None:
    """Refuse a supersession by ``newer`` across namespaces, across kinds, at an
    instant other than where ``newer`` opens (the commands supersede exactly there), or
    of a memory whose claim ``digest`` is ``newer``'s (the same claim corroborates, it
    does not supersede: ``identical_claim``)."""
    if newer.namespace != namespace:
        raise Impossible(f"{what} crosses from namespace {namespace!r} to {newer.namespace!r}")
    if newer.kind is not kind or kind is Kind.EVENT:
        raise Impossible(f"{what} puts a {newer.kind} in place of a {kind}")
    if newer.start != at:
        raise Impossible(f"{what} is not at the instant its newer memory opens")
    if digest is not None and digest == newer.claim_digest:
        raise Impossible(f"{what} replaces a claim by the same claim (identical_claim: "
                         "the same claim corroborates the older one)")  # fmt: skip
