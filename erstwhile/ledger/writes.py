"""Write commands: each validates against the memories it touches, appends its events
atomically, and brings the projections up to its own write before returning."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from erstwhile.domain.bar import ClaimView, clears_bar
from erstwhile.domain.errors import (
    ConcurrencyConflict,
    IdempotencyMismatch,
    NotFound,
    StoreUnavailable,
    SupersessionRefused,
    ValidationError,
)
from erstwhile.domain.events import (
    Archived,
    Asserted,
    Forgotten,
    LedgerEvent,
)
from erstwhile.domain.ids import MEMORY_IDS
from erstwhile.domain.memory import Kind, Memory, State
from erstwhile.domain.time import Instant, optional_utc, to_micros
from erstwhile.domain.writes import Existing, WritePlan, plan_writes
from erstwhile.eventstore import (
    ERASED_FINGERPRINT,
    IdempotencyClaim,
    RecordedEvent,
    Sql,
    translated_errors,
)
from erstwhile.ledger.arguments import flag, optional_text
from erstwhile.ledger.core import LedgerCore
from erstwhile.projections.base import Folded
from erstwhile.projections.candidates import candidates, prefetch_candidates, probe_of_request
from erstwhile.projections.reader import (
    LATEST,
    MemoryState,
    NewLinks,
    links_from_fold,
    memories_from_append,
)

PURGED_PER_APPEND = 500
"""How many hard forgets a purge appends at once: one transaction, one fold and, on
SQLite, one merge of the full-text indexes (which drops the erased rows' tokens) for
them all. Appended one at a time, a purge of 200 soft forgets at 100k memories on
SQLite took 14.5 s, each merge rewriting the whole index."""
DEFAULT_GRACE = timedelta(days=30)
"""How long a soft forget stays recoverable before ``purge`` makes it hard."""


class WriteCommands(LedgerCore):
    """remember, remember_many, revise, archive, forget."""

    def remember(
        self,
        content: str,
        *,
        kind: Kind | str = Kind.FACT,
        subject: str | None = None,
        attribute: str | None = None,
        value: Any = None,
        entities: Sequence[str] = (),
        valid_from: Instant | None = None,
        valid_until: Instant | None = None,
        occurred_at: Instant | None = None,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        extractor_id: str | None = None,
        extracted_at: Instant | None = None,
        metadata: Mapping[str, Any] | None = None,
        supersedes: Sequence[UUID | str] = (),
        policy: str = "propose",
        idempotency_key: str | None = None,
        observed_position: int | None = None,
    ) -> Memory:
        """Assert a new memory (optionally superseding others); return it.

        ``value`` and ``metadata`` (an object) are JSON; ``confidence`` is from 0 to 1;
        ``supersedes`` names the memories this one replaces at its ``valid_from``;
        ``policy`` is ``"propose"`` (a likely replacement becomes a proposal) or
        ``"timestamp_wins"`` (it supersedes at once); a retry under the same
        ``idempotency_key`` returns the first result (``NotFound`` if it has since been
        forgotten); ``observed_position`` is the log
        position the writer had read (its vector clock). Instants are aware datetimes or
        ISO 8601 text with an offset. Anything else is refused with ``ValidationError``.
        """
        return self.remember_many([{
            "content": content, "kind": kind, "subject": subject, "attribute": attribute,
            "value": value, "entities": entities, "valid_from": valid_from,
            "valid_until": valid_until, "occurred_at": occurred_at, "confidence": confidence,
            "evidence": evidence, "extractor_id": extractor_id, "extracted_at": extracted_at,
            "metadata": metadata, "supersedes": supersedes, "policy": policy,
            "idempotency_key": idempotency_key, "observed_position": observed_position,
        }])[0]  # fmt: skip

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[Memory]:
        """Assert many memories in one atomic append: all of them, or none.

        An item repeating an earlier item's idempotency key with the same payload is
        that item's retry (one memory, returned for both), as it would be in two calls;
        with another payload it is refused with ``IdempotencyMismatch``.
        """
        if isinstance(items, Mapping | str | bytes):  # one item, or text: not a list of items
            raise ValidationError(
                f"remember_many takes a list of mappings (one per memory), got one "
                f"{type(items).__name__}: for one memory, pass [item] or call remember"
            )
        try:
            items = list(items)
        except TypeError:
            raise ValidationError(
                f"remember_many takes a list of mappings, got {type(items).__name__}"
            ) from None
        for place, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ValidationError(
                    f"item {place}: expected a mapping of remember's arguments, "
                    f"got {type(item).__name__}"
                )
        if not items:
            return []
        plans, places = _first_of_each_key(_parsed(items))
        written = self._remember_plans(plans)
        return [written[place] for place in places]

    def _remember_plans(
        self, plans: list[WritePlan], known: Mapping[UUID, Existing] | None = None
    ) -> list[Memory]:
        """Append the plans (no two with the same idempotency key) and fold them.
        ``known``: memories they supersede as the caller read them (caught up), which
        need not be read again."""
        replay = self._idempotent_replay(plans)
        if replay is not None:
            return replay
        self._check_observed(plans)
        now = self.now()
        ids = MEMORY_IDS.issue(now, len(plans))
        olders: dict[UUID, Existing] = dict(known or {})
        requested = plans
        unread = list(dict.fromkeys(o for p in plans for o in p.supersedes if o not in olders))
        if all(p.policy == "propose" for p in plans):
            # Validate against the memories superseded, as the whole log now says: one
            # statement each (a read transaction cost PostgreSQL two more round trips).
            # The append's own versions refuse any another writer changes meanwhile.
            olders.update((older_id, self._state(older_id).existing) for older_id in unread)
        else:
            # Validate against the memories touched, as the whole log now says (their
            # reads sent ahead, with the check's own).
            def ahead(sql: Sql) -> None:
                for older_id in sorted(unread):
                    self.reader.prefetch_state(sql, older_id)

            with self._read_caught_up(ahead) as sql:
                plans = self._apply_policies(sql, plans, ids, self.log.next_start(sql, now))
                own = set(ids)  # superseded within the batch: plan_writes knows them
                olders.update(
                    (older_id, self.reader.state(sql, older_id).existing)
                    for plan in plans
                    for older_id in plan.supersedes
                    if older_id not in own and older_id not in olders
                )
        claims = [
            IdempotencyClaim(self.namespace, plan.idempotency_key, plan.fingerprint, new_id)
            for plan, new_id in zip(plans, ids, strict=True)
            if plan.idempotency_key is not None
        ]
        written: list[tuple[RecordedEvent, LedgerEvent]] = []
        links: dict[UUID, NewLinks] = {}
        made: list[Memory] = []
        pipelined = self.log.backend.dialect == "postgresql"

        def fold(sql: Sql, previous_head: int, appended: Folded) -> None:
            written[:] = appended
            self._fold_in_append(sql, previous_head, appended)
            if self._folded:
                positions = {older_id: older.position for older_id, older in olders.items()}
                positions.update(  # memories this very batch asserted, then superseded
                    (record.memory_id, record.position)
                    for record, event in appended
                    if isinstance(event, Asserted)
                )
                links.update(links_from_fold(appended, self.memories_projection.clocks, positions))
                if pipelined:
                    # Built before the COMMIT is sent, while the server is still storing
                    # the fold's rows (for a batch of 500, about 14 ms of its work left
                    # against 4 to 6.5 ms to build them), so the COMMIT, and with it the
                    # write lock's release, come no later. On SQLite, where the
                    # statements have run by now, it would only hold the lock longer.
                    made[:] = memories_from_append(appended, self.namespace, links)

        read: list[datetime] = []

        def clock() -> datetime:
            """The clock as first read under the write lock, at every call: the winners
            are found again at the very start the append is stamped with."""
            if not read:
                read.append(self.now())
            return read[0]

        def decide_again(sql: Sql) -> None:
            nonlocal plans
            plans = self._ahead_of_write(sql, clock, requested, plans, ids, olders)

        result = self.log.append(
            lambda start: plan_writes(plans, ids, olders, start),
            actor=self.actor,
            namespace=self.namespace,
            clock=clock,
            idempotency=claims,
            then=fold,
            ahead=decide_again,
        )
        if result.replayed:
            return self._replayed(plans, result.replayed)
        if not self.sync_projections:
            return memories_from_append(written, self.namespace)
        self._after_append(result.position)
        if not links:
            # The projections lagged behind the log, so the append did not fold itself.
            return [self.get(new_id) for new_id in ids]
        return made or memories_from_append(written, self.namespace, links)

    def revise(
        self, older_id: UUID | str, content: str, *, at: Instant | None = None, **fields: Any
    ) -> Memory:
        """Assert a memory that supersedes ``older_id`` at ``at``; unset structured fields
        (kind, subject, attribute, value, entities) are copied from the older memory."""
        target = self._state(older_id, "older_id")
        older = target.memory or self._retried_revision_of(target, fields.get("idempotency_key"))
        at_instant = optional_utc(at, "at")
        if at_instant is not None:
            given = optional_utc(fields.get("valid_from"), "valid_from")
            if given is not None and given != at_instant:
                raise ValidationError("at and valid_from disagree: the new memory opens at `at`")
            fields["valid_from"] = at_instant
        for name in ("kind", "subject", "attribute", "value", "entities"):
            if fields.get(name) is None:
                fields[name] = getattr(older, name)
        if "supersedes" in fields:
            raise ValidationError("revise supersedes exactly older_id: do not pass supersedes")
        (plan,) = _parsed([{"content": content, "supersedes": [older.id], **fields}])
        # The older memory as just read is what the write is decided on: the append's
        # versions refuse it if another writer changed that memory meanwhile.
        return self._remember_plans([plan], known={older.id: target.existing})[0]

    def _retried_revision_of(self, target: MemoryState, key: Any) -> Memory:
        """The forgotten memory a ``revise`` names, when the revise is the retry of one
        made before the forget (its idempotency key is claimed): the retry builds the
        same request from the claim the forget kept, and answers as the first did. A
        forgotten memory is otherwise refused, as is an erased one (its claim is gone,
        so a retry's payload cannot be compared)."""
        retried = isinstance(key, str) and self.log.claimed(self.namespace, [key])
        if target.kept is not None and retried:
            return target.kept
        raise SupersessionRefused("not_current", f"memory {target.id} is forgotten")

    def archive(self, memory_id: UUID | str, *, reason: str | None = None) -> Memory:
        """Retire a memory from "what is true now" without touching its window.

        Archiving an archived memory changes nothing and returns it.
        """
        reason = optional_text(reason, "reason")
        target = self._state(memory_id)
        if target.memory is None:
            raise NotFound(f"memory {target.id} was forgotten")
        if target.state is State.ARCHIVED:
            return target.memory
        try:
            position = self._append_one(
                Archived(
                    originator_id=target.id, originator_version=target.version + 1, reason=reason
                )
            )
        except ConcurrencyConflict:
            # Another process archived it meanwhile: what it did is what was asked, as
            # when the two come one after the other.
            now = self._state(memory_id)
            if now.memory is None or now.state is not State.ARCHIVED:
                raise
            return now.memory
        self._fold_own_write(position)
        return self.get(target.id)

    def forget(
        self, memory_id: UUID | str, *, hard: bool = False, reason: str | None = None
    ) -> None:
        """Forget a memory: it disappears from every read at once; the log keeps the proof.

        Soft: the content stays in the log for audit. Hard: the memory's key is destroyed
        with the ``Forgotten`` event, its projection rows and search entry are wiped and
        the database files scrubbed, so the content is unrecoverable; the skeleton (id,
        kind, times, links, actor) and the event remain. Forgetting a forgotten memory
        appends nothing; a soft forget may be upgraded to hard, and a hard forget of an
        erased memory scrubs the files again (after a scrub that failed or could not
        finish: ``StoreUnavailable`` says the erase itself committed; where the store
        stopped answering during the commit, its note says the erase may have committed).
        """
        hard, reason = flag(hard, "hard"), optional_text(reason, "reason")
        with self._scrubbing() as erased:
            self._forget(memory_id, hard=hard, reason=reason, erased=erased)

    @contextmanager
    def _scrubbing(self) -> Iterator[list[UUID]]:
        """Gather the memories erased in the block (each added as soon as its erasure
        has committed) and scrub the database files once for them all when it ends,
        also when it raises: then the scrub's own failure is noted on that error."""
        erased: list[UUID] = []
        try:
            yield erased
        except BaseException as error:
            if erased:
                try:
                    self._scrub(erased)
                except StoreUnavailable as unscrubbed:
                    error.add_note(str(unscrubbed))
            raise
        if erased:
            self._scrub(erased)

    def _forget(
        self, memory_id: UUID | str, *, hard: bool, reason: str | None, erased: list[UUID]
    ) -> None:
        """Append the forget, unless nothing is left to append; add to ``erased`` the
        memory whose erasure the database files must be scrubbed of (a hard forget's,
        made now, as soon as it commits, or before: a scrub that failed left them
        unscrubbed)."""
        target = self._state(memory_id)
        if self._forgotten_already(target, hard):
            if hard:
                erased.append(target.id)
            return
        if hard and not self._has_key(target.id):
            again = self._state(memory_id)
            if self._forgotten_already(again, hard):
                erased.append(again.id)  # another process's hard forget came first
                return
            raise ValidationError(
                f"memory {target.id} was written before content encryption (event schema 1): "
                "its content sits in the log in plain text and cannot be erased; forget it softly"
            )
        event = Forgotten(
            originator_id=target.id,
            originator_version=target.version + 1,
            hard=hard,
            reason=reason,
        )
        try:
            position = self._append_committed([event], erase=[target.id] if hard else ())
        except ConcurrencyConflict:
            # Another process forgot it meanwhile: what it did may be what was asked.
            now = self._state(memory_id)
            if self._forgotten_already(now, hard):
                if hard:
                    erased.append(now.id)
                return
            if hard and now.state is State.FORGOTTEN and target.state is not State.FORGOTTEN:
                # It forgot it softly meanwhile: this forget upgrades that one, as it
                # would have done after it (once: the retry reads it forgotten already).
                self._forget(memory_id, hard=True, reason=reason, erased=erased)
                return
            raise
        if hard:
            erased.append(target.id)
        self._after_append(position)
        # A forget takes effect in every read at once, whoever folds the log.
        self._fold_own_write(position)

    def _forgotten_already(self, memory: MemoryState, hard: bool) -> bool:
        """Whether a forget of ``memory`` (its state now) has nothing left to append:
        it is erased, or forgotten when a soft forget is asked."""
        return memory.erased or (memory.state is State.FORGOTTEN and not hard)

    def _scrub(self, erased: Sequence[UUID]) -> None:
        """Scrub the database files after the hard forgets of ``erased`` (committed
        already), saying so if the scrub fails or cannot finish."""
        try:
            with translated_errors():
                self.log.backend.scrub()
        except StoreUnavailable as error:
            done = (
                f"memory {erased[0]} is erased (its key destroyed, the forget recorded)"
                if len(erased) == 1
                else f"memories {', '.join(map(str, erased))} are erased (their keys "
                "destroyed, the forgets recorded)"
            )
            again = "it" if len(erased) == 1 else "any of them"
            raise StoreUnavailable(
                f"{done}, but the database files are not scrubbed yet: {error}; forget "
                f"{again} again (hard) to scrub the files"
            ) from error

    def purge(self, *, grace: timedelta = DEFAULT_GRACE) -> list[UUID]:
        """Turn soft forgets at least ``grace`` old (default 30 days) into hard ones;
        return the ids erased. Their age is counted to the ledger's "now" (never behind
        the log, as for reads), so ``grace=timedelta(0)`` erases every soft forget even
        while the clock runs behind the last recorded instant. Memories written before
        content encryption are left as they are. Each memory due gets a hard forget of
        its own, appended 500 at a time (each group in one transaction: all or none),
        then the database files are scrubbed once for them all
        (``StoreUnavailable`` names every memory erased if that scrub fails or cannot
        finish; a hard forget of any of them scrubs the files again)."""
        if not isinstance(grace, timedelta) or grace < timedelta(0):
            raise ValidationError("grace must be a non-negative timedelta")
        with self._read_caught_up() as sql:
            try:
                cutoff = to_micros(self._present(sql) - grace)
            except OverflowError:  # a grace longer than the calendar: nothing is that old
                return []
            due = self.reader.soft_forgotten_before(sql, cutoff)
            keyed = self.log.keyring.present(sql, [str(memory_id) for memory_id in due])
            due = [memory_id for memory_id in due if str(memory_id) in keyed]
        # One scrub for them all, after the last erase (each hard forget's own scrub
        # rewrites or vacuums the whole content tables: a purge of many took as many),
        # and of what was erased before an error, should one come.
        with self._scrubbing() as erased:
            for start in range(0, len(due), PURGED_PER_APPEND):
                self._erase_at_once(due[start : start + PURGED_PER_APPEND], erased)
        return due

    def _erase_at_once(self, group: Sequence[UUID], erased: list[UUID]) -> None:
        """Hard-forget the memories in one append, as read just before it (those erased
        already need none), adding them to ``erased`` once it commits (see
        :meth:`_forget`). Where another writer changed one of them since it was read,
        each is forgotten on its own instead, read again."""

        def ahead(sql: Sql) -> None:
            for memory_id in group:
                self.reader.prefetch_state(sql, memory_id)

        with self._read_caught_up(ahead) as sql:
            targets = [self.reader.state(sql, memory_id) for memory_id in group]
        reason = "purge after grace period"
        erased.extend(target.id for target in targets if target.erased)
        due = [target for target in targets if not target.erased]
        if not due:
            return
        events = [
            Forgotten(originator_id=target.id, originator_version=target.version + 1,
                      hard=True, reason=reason)
            for target in due
        ]  # fmt: skip
        try:
            position = self._append_committed(events, erase=[target.id for target in due])
        except ConcurrencyConflict:
            for target in due:
                self._forget(target.id, hard=True, reason=reason, erased=erased)
            return
        erased.extend(target.id for target in due)
        self._after_append(position)
        self._fold_own_write(position)

    def _ahead_of_write(
        self,
        sql: Sql,
        clock: Callable[[], datetime],
        requested: Sequence[WritePlan],
        planned: list[WritePlan],
        ids: Sequence[UUID],
        olders: dict[UUID, Existing],
    ) -> list[WritePlan]:
        """At the start of the append's transaction (the write lock held): under
        ``timestamp_wins``, find the winners again, at the instant the append will be
        stamped with (``clock``, read under the lock); return the plans to append. Then
        send the reads ahead.

        Where the winners differ from those found before the lock (another writer's
        memory became one or stopped being one, or the clock moved past a window's
        edge), the write is decided again on the log as it stands: the new winners'
        states are read here, into ``olders``. (Until 2026-12-05 that was a
        ``ConcurrencyConflict`` naming another writer, even where only the clock had
        moved; and the winners were found at one reading of the clock and the window
        stored at the next, so a winner could end before the window it was superseded
        at, refused as ``no_overlap``, or a memory meeting the bar be left current and
        proposed.)"""
        if any(p.policy == "timestamp_wins" for p in requested) and not self._retried(
            sql, requested
        ):
            # What writers that leave folding to a follower appended meanwhile is in
            # the log only: fold it first, in this transaction.
            self.runner.fold_to_tip(sql)
            again = self._apply_policies(sql, requested, ids, self.log.start_now(sql, clock))
            if [p.supersedes for p in again] != [p.supersedes for p in planned]:
                own = set(ids)
                for plan in again:
                    for older_id in plan.supersedes:
                        if older_id not in own and older_id not in olders:
                            olders[older_id] = self.reader.state(sql, older_id).existing
                planned = again
        self._ahead_of_append(sql)
        self._prefetch_candidates(sql, planned, ids)
        return planned

    def _prefetch_candidates(
        self, sql: Sql, plans: Sequence[WritePlan], ids: Sequence[UUID]
    ) -> None:
        """On PostgreSQL, send ahead the proposals fold's read of the new memories'
        candidates, where it can go ahead: a write that supersedes nothing (see
        :func:`prefetch_candidates`). Its answer then comes with the log's tip, and the
        fold does not wait for the server to write the batch before it reads them."""
        pipelined = self.log.backend.dialect == "postgresql"
        if pipelined and self.sync_projections and not any(p.supersedes for p in plans):
            probes = [probe_of_request(p.draft, i) for p, i in zip(plans, ids, strict=True)]
            prefetch_candidates(sql, self.namespace, probes)

    def _retried(self, sql: Sql, plans: Sequence[WritePlan]) -> bool:
        """Whether this write is a retry whose first attempt has committed (the append
        then answers it with that attempt's memories)."""
        keys = [p.idempotency_key for p in plans if p.idempotency_key is not None]
        return bool(keys) and bool(self.log.claims_in(sql, self.namespace, keys))

    def _apply_policies(
        self, sql: Sql, plans: Sequence[WritePlan], ids: Sequence[UUID], start: datetime
    ) -> list[WritePlan]:
        """Under ``timestamp_wins``, add every older memory that clears the bar, as the
        batch leaves it so far, so that a batch does what its items would do one after
        another: a memory an earlier item superseded is no longer current, and an
        earlier item is a candidate like a stored memory. An undated claim opens at
        ``start``, the instant the append starts at (the clock's, unless the log's last
        event is later), as it will be written."""
        superseded: set[UUID] = set()
        earlier = EarlierClaims()
        applied = []
        for place, (plan, new_id) in enumerate(zip(plans, ids, strict=True)):
            newer = plan.claim_view(start)
            if plan.policy == "timestamp_wins":
                stored = candidates(sql, self.namespace, newer, LATEST, self.log.backend.dialect)
                named = set(plan.supersedes)
                winners = [
                    c.id for c in [*stored, *earlier.meeting(newer)]
                    if c.id not in superseded and c.id not in named and clears_bar(c, newer)
                ]  # fmt: skip
                plan = replace(plan, supersedes=(*plan.supersedes, *winners))
            superseded.update(plan.supersedes)
            earlier.retire(plan.supersedes)
            earlier.add(replace(newer, id=new_id, position=place))
            applied.append(plan)
        return applied

    def _check_observed(self, plans: Sequence[WritePlan]) -> None:
        """Refuse an ``observed_position`` past the log's head: no writer can have read
        it (the head only grows, so a position the head has reached stays valid)."""
        observed = [p.observed_position for p in plans if p.observed_position is not None]
        if observed and max(observed) > (head := self.log.head()):
            raise ValidationError(
                f"observed_position {max(observed)} is past the log's head ({head}): "
                "give the position the writer had read (ledger.head())"
            )

    def _idempotent_replay(self, plans: Sequence[WritePlan]) -> list[Memory] | None:
        keyed = [p for p in plans if p.idempotency_key is not None]
        if not keyed:
            return None
        found = self.log.claimed(self.namespace, [p.idempotency_key or "" for p in keyed])
        if not found:
            return None
        return self._replayed(plans, found)

    def _replayed(
        self, plans: Sequence[WritePlan], claims: Sequence[IdempotencyClaim]
    ) -> list[Memory]:
        by_key = {claim.key: claim for claim in claims}
        if any(p.idempotency_key is None for p in plans):
            raise IdempotencyMismatch(
                "some idempotency keys of this batch were used before, and some of its items "
                "carry none: only a batch whose every item carries a key can be retried "
                "(an item without one is new each time)"
            )
        if len(by_key) != len(plans) or any(p.idempotency_key not in by_key for p in plans):
            raise IdempotencyMismatch(
                "some idempotency keys of this batch were used before and some were not; "
                "retry the exact same batch"
            )
        for plan in plans:
            claim = by_key[plan.idempotency_key or ""]
            if claim.fingerprint == ERASED_FINGERPRINT:
                raise NotFound(
                    f"idempotency key {plan.idempotency_key!r} made memory {claim.memory_id}, "
                    "which was forgotten for good"
                )
            if not plan.matches(claim.fingerprint):
                raise IdempotencyMismatch(
                    f"idempotency key {plan.idempotency_key!r} was first used "
                    "with a different payload"
                )
        self.runner.catch_up()
        return [self._made_under(p.idempotency_key or "", by_key) for p in plans]

    def _made_under(self, key: str, claims: Mapping[str, IdempotencyClaim]) -> Memory:
        """The memory an idempotency key made, for a retry to answer with; a forgotten
        one is ``NotFound`` naming the key (the retry never said which memory it meant)."""
        memory_id = claims[key].memory_id
        try:
            return self.get(memory_id)
        except NotFound:
            raise NotFound(
                f"idempotency key {key!r} made memory {memory_id}, which was forgotten"
            ) from None


def _parsed(items: list[Mapping[str, Any]]) -> list[WritePlan]:
    """Parse a batch's items; in a batch of several, a refusal names its item."""
    if len(items) == 1:
        return [WritePlan.parse(items[0])]
    plans = []
    for place, item in enumerate(items):
        try:
            plans.append(WritePlan.parse(item))
        except (ValidationError, NotFound) as error:
            raise type(error)(f"item {place}: {error}") from None
    return plans


def _first_of_each_key(plans: list[WritePlan]) -> tuple[list[WritePlan], list[int]]:
    """Keep the first plan of each idempotency key; return the plans kept and, for every
    plan given, the index of the kept plan that answers it."""
    kept: list[WritePlan] = []
    places: list[int] = []
    first: dict[str, int] = {}
    for plan in plans:
        key = plan.idempotency_key
        if key is None or key not in first:
            if key is not None:
                first[key] = len(kept)
            places.append(len(kept))
            kept.append(plan)
            continue
        if kept[first[key]].fingerprint != plan.fingerprint:
            raise IdempotencyMismatch(
                f"idempotency key {key!r} is given twice in this batch with different payloads"
            )
        places.append(first[key])
    return kept, places


class EarlierClaims:
    """The claims of a batch's earlier items still current, found the way stored
    candidates are: a structured claim by its key, any claim by a shared entity (a
    structured claim meets another structured one by key alone)."""

    def __init__(self) -> None:
        self.claims: dict[UUID, ClaimView] = {}
        self.by_key: dict[tuple[str | None, str | None], dict[UUID, ClaimView]] = {}
        self.by_entity: dict[str, dict[UUID, ClaimView]] = {}

    def add(self, claim: ClaimView) -> None:
        self.claims[claim.id] = claim
        if claim.keyed:
            self.by_key.setdefault((claim.subject_key, claim.attribute_key), {})[claim.id] = claim
        for entity in claim.entities:
            self.by_entity.setdefault(entity, {})[claim.id] = claim

    def retire(self, ids: Iterable[UUID]) -> None:
        """Drop the claims a later item superseded: no longer current, they meet no
        item after it (kept, each item walked every earlier claim of its key, and a
        batch revising one value n times took time in n cubed)."""
        for memory_id in ids:
            claim = self.claims.pop(memory_id, None)
            if claim is None:
                continue
            self.by_key.get((claim.subject_key, claim.attribute_key), {}).pop(memory_id, None)
            for entity in claim.entities:
                self.by_entity[entity].pop(memory_id, None)

    def meeting(self, newer: ClaimView) -> list[ClaimView]:
        """The earlier claims that may share ``newer``'s subject, in batch order."""
        found = dict(self.by_key.get((newer.subject_key, newer.attribute_key), {})
                     if newer.keyed else {})  # fmt: skip
        for entity in newer.entities:
            found.update((c.id, c) for c in self.by_entity.get(entity, {}).values()
                         if not (newer.keyed and c.keyed))  # fmt: skip
        return sorted(found.values(), key=lambda c: c.position)
