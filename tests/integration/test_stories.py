"""Acceptance stories 1, 4, 5, 6 and 8 of the contract, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from erstwhile import Kind, Ledger, State, SupersessionRefused
from erstwhile.domain.memory import claim_of
from erstwhile.domain.rules import Side, check_supersession
from erstwhile.domain.time import Window
from tests.conftest import ManualClock

MAR_1 = "2026-03-01T00:00:00Z"
MAR_15 = "2026-03-15T00:00:00Z"
JUL_1 = "2026-07-01T00:00:00Z"


def values(memories: list) -> list[object]:  # type: ignore[type-arg]
    return [m.value for m in memories]


def test_story_1_supabase_in_march_aws_from_july(ledger: Ledger, clock: ManualClock) -> None:
    supabase = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                               value="Supabase", valid_from=MAR_1)  # fmt: skip
    clock.advance(days=1)
    aws = ledger.revise(supabase.id, "The team moved to AWS", value="AWS", at=JUL_1)

    assert values(ledger.facts("team", "database", as_of=MAR_15)) == ["Supabase"]
    assert values(ledger.facts("team", "database")) == ["AWS"]
    assert values(ledger.facts("team", "database", as_of=JUL_1)) == ["AWS"]
    assert ledger.get(aws.id).supersedes == [supabase.id]
    assert ledger.get(supabase.id).superseded_by == aws.id
    assert [m.id for m in ledger.chain(supabase.id)] == [supabase.id, aws.id]
    before_move = ledger.facts("team", "database", as_of=JUL_1, known_at=supabase.recorded_at)
    assert values(before_move) == ["Supabase"]


def test_story_4_a_meeting_is_never_replaced_by_a_later_meeting(ledger: Ledger) -> None:
    march = ledger.remember("Planning meeting held", kind="event", subject="planning",
                            attribute="meeting", occurred_at="2026-03-10T10:00:00Z")  # fmt: skip
    with pytest.raises(SupersessionRefused) as refused:
        ledger.remember("Planning meeting held", kind="event", subject="planning",
                        attribute="meeting", occurred_at="2026-07-10T10:00:00Z",
                        supersedes=[march.id])  # fmt: skip
    assert refused.value.reason == "event_kind"
    with pytest.raises(SupersessionRefused, match="event_kind"):
        ledger.revise(march.id, "Planning meeting moved", occurred_at="2026-07-10T10:00:00Z")
    july = ledger.remember("Planning meeting held", kind="event", subject="planning",
                           attribute="meeting", occurred_at="2026-07-10T10:00:00Z")  # fmt: skip
    held = ledger.facts("planning", "meeting")
    assert {m.id for m in held} == {march.id, july.id}
    assert all(m.kind is Kind.EVENT and m.valid_until is None for m in held)
    assert ledger.get(march.id).state is State.CURRENT


def test_story_5_a_late_correction(ledger: Ledger, clock: ManualClock) -> None:
    clock.set(datetime(2026, 1, 5, tzinfo=UTC))
    ten = ledger.remember("The price is 10", subject="widget", attribute="price", value=10,
                          valid_from="2026-01-01T00:00:00Z")  # fmt: skip
    clock.set(datetime(2026, 4, 10, 9, tzinfo=UTC))
    twelve = ledger.revise(ten.id, "From 1 February the price was 12", value=12,
                           at="2026-02-01T00:00:00Z")  # fmt: skip
    assert twelve.recorded_at.date() == datetime(2026, 4, 10, tzinfo=UTC).date()

    feb_15 = "2026-02-15T00:00:00Z"
    assert values(ledger.facts("widget", "price", as_of=feb_15)) == [12]
    assert values(ledger.facts("widget", "price", as_of=feb_15,
                               known_at="2026-04-09T00:00:00Z")) == [10]  # fmt: skip
    assert values(ledger.facts("widget", "price", as_of="2026-01-15T00:00:00Z")) == [10]
    assert values(ledger.facts("widget", "price", known_at="2026-04-09T00:00:00Z")) == [10]


def test_story_6_refusals_and_a_visible_reversal(ledger: Ledger, clock: ManualClock) -> None:
    supabase = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                               value="Supabase", valid_from=MAR_1)  # fmt: skip
    aws = ledger.revise(supabase.id, "The team moved to AWS", value="AWS", at=JUL_1)

    with pytest.raises(SupersessionRefused) as double:
        ledger.revise(supabase.id, "The team moved to GCP", value="GCP", at=JUL_1)
    assert double.value.reason == "already_superseded"

    itself = Side(aws.id, Kind.FACT, State.CURRENT, Window(aws.valid_from),
                  claim_of("team", "database", "AWS", aws.content))  # fmt: skip
    with pytest.raises(SupersessionRefused) as self_refused:
        check_supersession(itself, itself, datetime(2026, 8, 1, tzinfo=UTC))
    assert self_refused.value.reason == "self"

    with pytest.raises(SupersessionRefused) as resurrection:
        ledger.revise(
            supabase.id, "The team uses Supabase", value="Supabase", at="2026-09-01T00:00:00Z"
        )
    assert resurrection.value.reason == "already_superseded"
    assert ledger.get(supabase.id).state is State.SUPERSEDED

    back = ledger.revise(aws.id, "The team went back to Supabase", value="Supabase",
                         at="2026-08-15T00:00:00Z")  # fmt: skip
    assert back.id != supabase.id
    assert ledger.chain(supabase.id) == [ledger.get(i) for i in (supabase.id, aws.id, back.id)]
    assert values(ledger.facts("team", "database")) == ["Supabase"]
    assert values(ledger.facts("team", "database", as_of="2026-07-15T00:00:00Z")) == ["AWS"]


def test_story_8_rebuild_from_zero_gives_the_same_answers(
    ledger: Ledger, clock: ManualClock
) -> None:
    supabase = ledger.remember("The team uses Supabase", subject="team", attribute="database",
                               value="Supabase", valid_from=MAR_1)  # fmt: skip
    clock.advance(days=1)
    aws = ledger.revise(supabase.id, "The team moved to AWS", value="AWS", at=JUL_1)
    clock.advance(days=1)
    ledger.archive(ledger.remember("old note", kind="note", subject="team").id)
    ledger.forget(ledger.remember("typo", subject="team").id)

    def answers() -> tuple[object, ...]:
        return (
            ledger.facts("team"), ledger.facts("team", as_of=MAR_15),
            ledger.facts("team", as_of=JUL_1, known_at=supabase.recorded_at),
            ledger.chain(aws.id), ledger.history(supabase.id), list(ledger.events()),
        )  # fmt: skip

    before = answers()
    ledger.rebuild()
    assert answers() == before
