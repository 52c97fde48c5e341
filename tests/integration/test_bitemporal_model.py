"""Random histories against a small in-memory oracle of the bitemporal rules.

Hypothesis drives remember, revise, archive, forget and purge, with the clock moving
forward and sometimes back, and compares ``facts(as_of=..., known_at=...)``,
``get(known_at=...)`` and ``replay(known_at=...)`` with what the oracle says, on a
SQLite file and on PostgreSQL. Reads take "now" as the clock, never behind the last recorded instant.
The oracle shares no code with the ledger: it keeps, per memory, the list of versions
(recorded_from, state, valid_until, superseded_by) and answers by scanning them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from erstwhile import Ledger, NotFound, SupersessionRefused
from tests.conftest import ManualClock

EXAMPLES = int(os.environ.get("ERSTWHILE_HYPOTHESIS_EXAMPLES", "60"))
STEPS = int(os.environ.get("ERSTWHILE_HYPOTHESIS_STEPS", "20"))
BASE = datetime(2026, 1, 1, tzinfo=UTC)
MICRO = timedelta(microseconds=1)
APPEND_GAP = 2 * MICRO
"""An append starts at least this long after the one before ended (the ledger's rule)."""
SUBJECTS = ["team", "ada"]
VALUES = ["Supabase", "AWS", "GCP"]
KINDS = ["fact", "fact", "note", "event"]


def day(n: int) -> datetime:
    return BASE + timedelta(days=n)


@dataclass
class Version:
    recorded_from: datetime
    state: str
    valid_until: datetime | None
    superseded_by: UUID | None


@dataclass
class OracleMemory:
    id: UUID
    kind: str
    subject: str
    value: str
    content: str
    valid_from: datetime
    position: int
    versions: list[Version] = field(default_factory=list)
    erased: bool = False
    """Hard-forgotten (by a purge): no read finds it, whatever the instants."""

    def forgotten_at(self) -> datetime | None:
        """When it was first forgotten (None while it is not)."""
        return next((v.recorded_from for v in self.versions if v.state == "forgotten"), None)

    def at(self, known_at: datetime | None) -> Version | None:
        """The version the ledger held at ``known_at`` (latest when None)."""
        seen = [v for v in self.versions if known_at is None or v.recorded_from <= known_at]
        return seen[-1] if seen else None

    def change(self, recorded: datetime, **updates: object) -> None:
        latest = self.versions[-1]
        fields = {**latest.__dict__, "recorded_from": recorded, **updates}
        self.versions.append(Version(**fields))  # type: ignore[arg-type]


class Oracle:
    """The bitemporal rules, written as plainly as possible."""

    def __init__(self) -> None:
        self.memories: dict[UUID, OracleMemory] = {}
        self.last_recorded: datetime | None = None
        self.position = 0

    def next_instants(self, now: datetime, count: int) -> list[datetime]:
        start = now if self.last_recorded is None else max(now, self.last_recorded + APPEND_GAP)
        instants = [start + i * MICRO for i in range(count)]
        self.last_recorded = instants[-1]
        self.position += count
        return instants

    def visible(self, memory: OracleMemory, known_at: datetime | None) -> Version | None:
        version = memory.at(known_at)
        if memory.erased or version is None or version.state == "forgotten":
            return None
        return version

    def facts(
        self, subject: str, as_of: datetime | None, known_at: datetime | None, now: datetime
    ) -> list[UUID]:
        instant = as_of or known_at or now
        found = []
        for memory in self.memories.values():
            version = self.visible(memory, known_at)
            if memory.subject != subject or version is None:
                continue
            if as_of is None and version.state == "archived":
                continue
            ends = version.valid_until
            if memory.valid_from <= instant and (ends is None or instant < ends):
                found.append(memory)
        found.sort(key=lambda m: (m.valid_from, m.position), reverse=True)
        return [m.id for m in found]

    def refusal(self, older: OracleMemory, value: str, content: str, at: datetime) -> str | None:
        version = older.versions[-1]
        if version.state == "forgotten":
            return "not_current"
        if older.kind == "event":
            return "event_kind"
        if version.state == "superseded":
            return "already_superseded"
        if version.state != "current":
            return "not_current"
        if at <= older.valid_from:
            return "empty_window"
        if version.valid_until is not None and version.valid_until <= at:
            return "no_overlap"
        if (older.value, older.content) == (value, content):
            return "identical_claim"
        return None

    def supersedes(self, memory_id: UUID, known_at: datetime | None) -> list[UUID]:
        olders = [
            m for m in self.memories.values()
            if (v := m.at(known_at)) is not None and v.superseded_by == memory_id
        ]  # fmt: skip
        return [m.id for m in sorted(olders, key=lambda m: m.position)]


class LedgerMachine(RuleBasedStateMachine):
    """Drives a real ledger and the oracle side by side."""

    url_factory: Callable[[], str]

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(day(200))
        self.oracle = Oracle()
        self.ledger = Ledger.open(self.url_factory(), namespace="model", actor="machine",
                                  clock=self.clock)  # fmt: skip
        self.recorded: list[datetime] = []

    def teardown(self) -> None:
        self.ledger.close()

    @initialize(
        seeds=st.lists(
            st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(VALUES), st.integers(0, 150)),
            min_size=1,
            max_size=4,
        )
    )
    def seed(self, seeds: list[tuple[str, str, int]]) -> None:
        for subject, value, start in seeds:
            self.remember(subject, value, "fact", start, None, 0)

    @rule(
        subject=st.sampled_from(SUBJECTS),
        value=st.sampled_from(VALUES),
        kind=st.sampled_from(KINDS),
        start=st.one_of(st.none(), st.integers(0, 300)),
        length=st.one_of(st.none(), st.integers(1, 120)),
        shift=st.integers(-240, 24 * 30),
    )
    def remember_rule(self, subject: str, value: str, kind: str, start: int | None,
                      length: int | None, shift: int) -> None:  # fmt: skip
        self.remember(subject, value, kind, start, length, shift)

    def remember(self, subject: str, value: str, kind: str, start: int | None,
                 length: int | None, shift: int) -> None:  # fmt: skip
        self.clock.advance(hours=shift)
        valid_from = None if start is None else day(start)
        valid_until = None
        if kind != "event" and length is not None and start is not None:
            valid_until = day(start + length)
        content = f"{subject} uses {value}"
        memory = self.ledger.remember(content, kind=kind, subject=subject, attribute="uses",
                                      value=value, valid_from=valid_from,
                                      valid_until=valid_until)  # fmt: skip
        (recorded,) = self.oracle.next_instants(self.clock(), 1)
        assert memory.recorded_at == recorded
        assert memory.valid_from == (valid_from or recorded)
        self.recorded.append(recorded)
        entry = OracleMemory(memory.id, kind, subject, value, content, memory.valid_from,
                             self.oracle.position)  # fmt: skip
        entry.versions.append(Version(recorded, "current", valid_until, None))
        self.oracle.memories[memory.id] = entry

    @precondition(lambda self: self.oracle.memories)
    @rule(
        data=st.data(),
        value=st.sampled_from(VALUES),
        at=st.one_of(st.none(), st.integers(0, 300)),
        shift=st.integers(-240, 24 * 30),
        live_only=st.booleans(),
    )
    def revise(self, data: st.DataObject, value: str, at: int | None, shift: int,
               live_only: bool) -> None:  # fmt: skip
        self.clock.advance(hours=shift)
        candidates = self._memories(live_only)
        older = data.draw(st.sampled_from(candidates))
        content = f"{older.subject} uses {value}"
        now_start = self.oracle.last_recorded
        expected_at = (
            day(at)
            if at is not None
            else max(self.clock(), (now_start + APPEND_GAP) if now_start else self.clock())
        )
        reason = self.oracle.refusal(older, value, content, expected_at)
        try:
            newer = self.ledger.revise(older.id, content, value=value,
                                       at=day(at) if at is not None else None)  # fmt: skip
        except SupersessionRefused as refused:
            assert refused.reason == reason
            return
        assert reason is None, f"expected refusal {reason}"
        superseded_at, asserted_at = self.oracle.next_instants(self.clock(), 2)
        assert newer.recorded_at == asserted_at and newer.valid_from == expected_at
        older.change(superseded_at, state="superseded", valid_until=expected_at,
                     superseded_by=newer.id)  # fmt: skip
        self.recorded += [superseded_at, asserted_at]
        entry = OracleMemory(newer.id, older.kind, older.subject, value, content, expected_at,
                             self.oracle.position)  # fmt: skip
        entry.versions.append(Version(asserted_at, "current", None, None))
        self.oracle.memories[newer.id] = entry

    @precondition(lambda self: self.oracle.memories)
    @rule(data=st.data(), shift=st.integers(-240, 24 * 30))
    def archive(self, data: st.DataObject, shift: int) -> None:
        self.clock.advance(hours=shift)
        target = data.draw(st.sampled_from(self._memories()))
        state = target.versions[-1].state
        if state == "forgotten":
            with pytest.raises(NotFound):
                self.ledger.archive(target.id)
            return
        archived = self.ledger.archive(target.id)
        assert archived.state.value == "archived"
        if state != "archived":
            (recorded,) = self.oracle.next_instants(self.clock(), 1)
            target.change(recorded, state="archived")
            self.recorded.append(recorded)

    @precondition(lambda self: self.oracle.memories)
    @rule(data=st.data(), shift=st.integers(-240, 24 * 30))
    def forget(self, data: st.DataObject, shift: int) -> None:
        self.clock.advance(hours=shift)
        target = data.draw(st.sampled_from(self._memories()))
        self.ledger.forget(target.id)
        if target.versions[-1].state != "forgotten":
            (recorded,) = self.oracle.next_instants(self.clock(), 1)
            target.change(recorded, state="forgotten")
            self.recorded.append(recorded)

    @precondition(
        lambda self: any(m.forgotten_at() and not m.erased for m in self.oracle.memories.values())
    )
    @rule(shift=st.integers(0, 24 * 40), grace_days=st.integers(0, 20))
    def purge(self, shift: int, grace_days: int) -> None:
        """Soft forgets at least ``grace`` old (to the ledger's "now") become hard, oldest
        forget first: one group, one append of that many events."""
        self.clock.advance(hours=shift)
        grace = timedelta(days=grace_days)
        now = max(self.clock(), self.oracle.last_recorded or self.clock())
        due = sorted(
            (m for m in self.oracle.memories.values()
             if not m.erased and (at := m.forgotten_at()) is not None and at <= now - grace),
            key=lambda m: m.forgotten_at() or now,
        )  # fmt: skip
        assert self.ledger.purge(grace=grace) == [m.id for m in due]
        if due:
            self.recorded += self.oracle.next_instants(self.clock(), len(due))
            for memory in due:
                memory.erased = True

    @rule(data=st.data())
    def compare(self, data: st.DataObject) -> None:
        """Ask a few random questions of both, as of and as known at drawn instants."""
        for subject in SUBJECTS:
            known_at = self._draw_known_at(data)
            valid = self._draw_valid_at(data)
            now = max(self.clock(), self.oracle.last_recorded or self.clock())
            expected = self.oracle.facts(subject, valid, known_at, now)
            actual = [m.id for m in self.ledger.facts(subject, as_of=valid, known_at=known_at)]
            assert actual == expected, (subject, valid, known_at)
        for _ in range(2):
            self._compare_get(data.draw(st.sampled_from(self._memories())), data)

    def _memories(self, live_only: bool = False) -> list[OracleMemory]:
        ordered = sorted(self.oracle.memories.values(), key=lambda m: m.position)
        live = [m for m in ordered if m.versions[-1].state == "current"]
        return live if live_only and live else ordered

    def _compare_get(self, target: OracleMemory, data: st.DataObject) -> None:
        known_at = self._draw_known_at(data)
        version = self.oracle.visible(target, known_at)
        if version is None:
            with pytest.raises(NotFound):
                self.ledger.get(target.id, known_at=known_at)
            return
        memory = self.ledger.get(target.id, known_at=known_at)
        assert (memory.state.value, memory.valid_until, memory.superseded_by) == (
            version.state, version.valid_until, version.superseded_by,
        )  # fmt: skip
        assert memory.valid_from == target.valid_from and memory.value == target.value
        assert memory.supersedes == self.oracle.supersedes(target.id, known_at)

    @precondition(lambda self: self.recorded)
    @rule(data=st.data())
    def compare_replay(self, data: st.DataObject) -> None:
        """A replay at T answers what ``known_at=T`` answers."""
        instant = data.draw(st.sampled_from(self.recorded))
        with self.ledger.replay(known_at=instant) as past:
            for subject in SUBJECTS:
                valid = self._draw_valid_at(data)
                expected = self.oracle.facts(subject, valid, instant, instant)
                assert [m.id for m in past.facts(subject, as_of=valid)] == expected
                live = self.ledger.facts(subject, as_of=valid, known_at=instant)
                assert [m.id for m in live] == expected

    @precondition(lambda self: self.recorded)
    @rule()
    def compare_proposals(self) -> None:
        """The open proposals the ledger's own folds made (a remember that supersedes
        nothing reads its candidates ahead of its batch on PostgreSQL) are those a fold
        of the whole log makes."""
        with self.ledger.replay() as past:
            folded = sorted((p.older_id, p.newer_id) for p in past.proposals())
        assert sorted((p.older_id, p.newer_id) for p in self.ledger.proposals()) == folded

    @invariant()
    def head_matches(self) -> None:
        assert self.ledger.head() == self.oracle.position

    def _draw_valid_at(self, data: st.DataObject) -> datetime | None:
        """None, any day, or (most often) right at or beside a window boundary."""
        boundaries = sorted(
            {m.valid_from for m in self.oracle.memories.values()}
            | {v.valid_until for m in self.oracle.memories.values() for v in m.versions
               if v.valid_until is not None}
        )  # fmt: skip
        choice = data.draw(st.sampled_from(["none", "day", "edge", "edge"]))
        if choice == "none":
            return None
        if choice == "day" or not boundaries:
            return day(data.draw(st.integers(-5, 320)))
        edge = data.draw(st.sampled_from(boundaries))
        return edge + data.draw(st.sampled_from([-MICRO, timedelta(0), MICRO]))

    def _draw_known_at(self, data: st.DataObject) -> datetime | None:
        if not self.recorded or data.draw(st.booleans()):
            return None
        instant = data.draw(st.sampled_from(self.recorded))
        return instant + data.draw(st.sampled_from([-MICRO, timedelta(0), MICRO]))


def run_machine(url_factory: Callable[[], str], examples: int) -> None:
    machine = type("Machine", (LedgerMachine,), {"url_factory": staticmethod(url_factory)})
    run_state_machine_as_test(
        machine,  # type: ignore[arg-type]
        settings=settings(
            max_examples=examples,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


def test_sqlite_ledger_matches_the_oracle(tmp_path: Path) -> None:
    # In pytest's own folder, which it prunes: a folder of its own stayed after each run.
    run_machine(lambda: f"sqlite:///{tmp_path}/{secrets.token_hex(6)}.db", EXAMPLES)


@pytest.mark.postgres
def test_postgres_ledger_matches_the_oracle(postgres_database: str) -> None:
    run_machine(
        lambda: f"{postgres_database}?schema=m_{secrets.token_hex(6)}", max(5, EXAMPLES // 2)
    )
