"""The timeline: every version of a subject's memories as bi-temporal rectangles, read
from the versions projection, on a SQLite file and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from erstwhile import Ledger, Rectangle, State, ValidationError
from tests.conftest import ManualClock, OpenLedger, event_count

MAR, JUL, SEP = "2026-03-01T00:00:00Z", "2026-07-01T00:00:00Z", "2026-09-01T00:00:00Z"


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def the_move(ledger: Ledger, clock: ManualClock) -> list[Rectangle]:
    """Supabase from March, AWS from July, GCP from September, a day apart in the log."""
    supabase = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                               value="Supabase", valid_from=MAR)  # fmt: skip
    clock.advance(days=1)
    aws = ledger.revise(supabase.id, "The team moved to AWS", value="AWS", at=JUL)
    clock.advance(days=1)
    ledger.revise(aws.id, "The team moved to GCP", value="GCP", at=SEP)
    return ledger.timeline("Team", "DATABASE")  # labels compare normalised


def test_an_assertion_is_one_open_version(ledger: Ledger) -> None:
    memory = ledger.remember("Ada prefers tea", kind="preference", subject="ada",
                             attribute="drink", value="tea", valid_from=MAR, valid_until=SEP)  # fmt: skip
    assert ledger.timeline("ada") == [
        Rectangle(memory_id=memory.id, kind="preference", state=State.CURRENT,
                  content="Ada prefers tea", value="tea", valid_from=day(MAR[:10]),
                  valid_until=day(SEP[:10]), recorded_from=memory.recorded_at,
                  recorded_until=None)
    ]  # fmt: skip


def test_supersessions_close_versions_and_open_shorter_ones_in_recorded_order(
    ledger: Ledger, clock: ManualClock
) -> None:
    found = the_move(ledger, clock)
    assert [(r.value, r.state, r.valid_until) for r in found] == [
        ("Supabase", "current", None),
        ("Supabase", "superseded", day("2026-07-01")),
        ("AWS", "current", None),
        ("AWS", "superseded", day("2026-09-01")),
        ("GCP", "current", None),
    ]
    assert [r.recorded_from for r in found] == sorted(r.recorded_from for r in found)
    first, second, aws = found[:3]
    assert first.recorded_until == second.recorded_from
    assert second.recorded_from < aws.recorded_from  # the older is closed first in the log
    assert second.valid_from == first.valid_from == day("2026-03-01")
    assert [r.recorded_until is None for r in found] == [False, True, False, True, True]


def test_archive_changes_the_state_not_the_window_and_a_forget_ends_the_versions(
    ledger: Ledger, clock: ManualClock
) -> None:
    """A soft forget hides the memory from every read from then on, so its versions end
    at the forget: what was known before it stays drawn, as ``known_at`` reads see it."""
    memory = ledger.remember("Ada drinks tea", subject="ada", attribute="drink", valid_from=MAR)
    clock.advance(days=1)
    ledger.archive(memory.id)
    clock.advance(days=1)
    ledger.forget(memory.id)
    found = ledger.timeline("ada")
    assert [r.state for r in found] == ["current", "archived"]
    assert {(r.valid_from, r.valid_until, r.content) for r in found} == {
        (day("2026-03-01"), None, "Ada drinks tea")
    }
    forgotten_at = found[-1].recorded_until
    assert forgotten_at is not None
    assert ledger.get(memory.id, known_at=forgotten_at - timedelta(microseconds=1)).id == memory.id


def test_a_hard_forgotten_memory_has_no_versions_left(ledger: Ledger) -> None:
    """Only the audit log shows its skeleton: softly forgotten first or not."""
    kept = ledger.remember("The door is blue", subject="vault", attribute="door", value="blue")
    for hard_at_once in (True, False):
        memory = ledger.remember("The code is 1234", subject="vault", attribute="code",
                                 value="1234", valid_from=MAR)  # fmt: skip
        if not hard_at_once:
            ledger.forget(memory.id)
        ledger.forget(memory.id, hard=True)
        assert ledger.timeline("vault", "code") == []
        assert [r.memory_id for r in ledger.timeline("vault")] == [kept.id]


def test_other_subjects_attributes_and_namespaces_are_left_out(
    open_ledger: OpenLedger, clock: ManualClock
) -> None:
    ledger = open_ledger(namespace="acme")
    the_move(ledger, clock)
    ledger.remember("The office is in Paris", subject="office", attribute="city", value="Paris")
    ledger.remember("The team colour is blue", subject="team", attribute="colour", value="blue")
    open_ledger(namespace="rival").remember("Theirs", subject="team", attribute="database")
    assert {r.value for r in ledger.timeline("team", "database")} == {"Supabase", "AWS", "GCP"}
    assert {r.value for r in ledger.timeline("team")} == {"Supabase", "AWS", "GCP", "blue"}
    assert ledger.timeline("nobody") == []


def test_a_rebuilt_projection_draws_the_same_timeline(ledger: Ledger, clock: ManualClock) -> None:
    before = the_move(ledger, clock)
    ledger.forget(before[-1].memory_id, hard=True)
    drawn = ledger.timeline("team")
    ledger.rebuild()
    assert ledger.timeline("team") == drawn


def test_a_replay_draws_the_timeline_as_it_stood(ledger: Ledger, clock: ManualClock) -> None:
    found = the_move(ledger, clock)
    with ledger.replay(known_at=found[2].recorded_from) as then:
        assert [(r.value, r.state) for r in then.timeline("team")] == [
            ("Supabase", "current"),
            ("Supabase", "superseded"),
            ("AWS", "current"),
        ]


@pytest.mark.parametrize(
    ("subject", "attribute"),
    [("", None), ("   ", None), (None, None), (7, None), ("team", ""), ("team", 3)],
)
def test_bad_subjects_and_attributes_are_refused_and_change_nothing(
    ledger: Ledger, clock: ManualClock, subject: object, attribute: object
) -> None:
    the_move(ledger, clock)
    before = event_count(ledger)
    with pytest.raises(ValidationError):
        ledger.timeline(subject, attribute)  # type: ignore[arg-type]
    assert event_count(ledger) == before
    assert len(ledger.timeline("team")) == 5
