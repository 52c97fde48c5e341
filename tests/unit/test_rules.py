"""The life cycle and every supersession invariant, each with its reason."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from erstwhile import SupersessionRefused, ValidationError
from erstwhile.domain.memory import Kind, State, claim_of
from erstwhile.domain.rules import (
    ALLOWED_TRANSITIONS,
    Side,
    can_transition,
    check_supersession,
    require_transition,
)
from erstwhile.domain.time import Window

MAR = datetime(2026, 3, 1, tzinfo=UTC)
MAY = datetime(2026, 5, 1, tzinfo=UTC)
JUL = datetime(2026, 7, 1, tzinfo=UTC)


def side(
    kind: Kind = Kind.FACT,
    state: State = State.CURRENT,
    window: Window | None = None,
    value: str = "Supabase",
    content: str = "The team uses Supabase",
) -> Side:
    return Side(uuid4(), kind, state, window or Window(MAR), claim_of("team", "db", value, content))


def newer(**overrides: object) -> Side:
    fields: dict[str, object] = {"value": "AWS", "content": "The team moved to AWS"}
    fields.update(overrides)
    return side(**fields)  # type: ignore[arg-type]


def test_a_valid_supersession_passes() -> None:
    check_supersession(side(), newer(window=Window(JUL)), JUL)


@pytest.mark.parametrize(
    ("older", "at", "reason"),
    [
        (side(kind=Kind.EVENT), JUL, "event_kind"),
        (side(state=State.SUPERSEDED), JUL, "already_superseded"),
        (side(state=State.ARCHIVED), JUL, "not_current"),
        (side(state=State.FORGOTTEN), JUL, "not_current"),
        (side(kind=Kind.DECISION), JUL, "kind_mismatch"),
        (side(), MAR, "empty_window"),
        (side(window=Window(MAY)), MAR, "empty_window"),
        (side(window=Window(MAR, MAY)), JUL, "no_overlap"),
        (side(window=Window(MAR, JUL)), JUL, "no_overlap"),
    ],
)
def test_each_invariant_is_refused_with_its_reason(older: Side, at: datetime, reason: str) -> None:
    with pytest.raises(SupersessionRefused) as refused:
        check_supersession(older, newer(window=Window(at)), at)
    assert refused.value.reason == reason


def test_a_window_that_ends_where_the_successor_would_start_says_so() -> None:
    """Touching windows share no instant (half-open): the refusal says the older one
    ended at that very instant, not before it."""
    with pytest.raises(SupersessionRefused, match="at 2026-07-01T00:00:00\\+00:00, the instant"):
        check_supersession(side(window=Window(MAR, JUL)), newer(window=Window(JUL)), JUL)
    with pytest.raises(SupersessionRefused, match="before 2026-07-01"):
        check_supersession(side(window=Window(MAR, MAY)), newer(window=Window(JUL)), JUL)


def test_a_memory_cannot_supersede_itself() -> None:
    older = side()
    with pytest.raises(SupersessionRefused) as refused:
        check_supersession(older, older, JUL)
    assert refused.value.reason == "self"


def test_a_newer_event_cannot_supersede() -> None:
    with pytest.raises(SupersessionRefused) as refused:
        check_supersession(side(), newer(kind=Kind.EVENT), JUL)
    assert refused.value.reason == "event_kind"


def test_identical_claim_is_corroboration() -> None:
    with pytest.raises(SupersessionRefused) as refused:
        check_supersession(side(), side(window=Window(JUL)), JUL)
    assert refused.value.reason == "identical_claim"


def test_identical_claim_compares_labels_normalised() -> None:
    older = Side(uuid4(), Kind.FACT, State.CURRENT, Window(MAR), claim_of("Team", "DB", 1, "x "))
    same = Side(uuid4(), Kind.FACT, State.CURRENT, Window(JUL), claim_of(" team", "db", 1, "x"))
    with pytest.raises(SupersessionRefused, match="identical_claim"):
        check_supersession(older, same, JUL)


def test_a_different_value_with_the_same_content_is_a_different_claim() -> None:
    check_supersession(side(), newer(content="The team uses Supabase"), JUL)


def test_refusal_message_names_the_reason() -> None:
    with pytest.raises(SupersessionRefused, match=r"\(already_superseded\)"):
        check_supersession(side(state=State.SUPERSEDED), newer(), JUL)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (State.CURRENT, State.SUPERSEDED),
        (State.CURRENT, State.ARCHIVED),
        (State.CURRENT, State.FORGOTTEN),
        (State.SUPERSEDED, State.ARCHIVED),
        (State.SUPERSEDED, State.FORGOTTEN),
        (State.ARCHIVED, State.FORGOTTEN),
    ],
)
def test_allowed_transitions(source: State, target: State) -> None:
    assert can_transition(source, target)
    require_transition(source, target)


def test_nothing_returns_to_current_and_forgotten_is_final() -> None:
    for source in State:
        assert not can_transition(source, State.CURRENT)
    assert ALLOWED_TRANSITIONS[State.FORGOTTEN] == frozenset()
    with pytest.raises(ValidationError):
        require_transition(State.ARCHIVED, State.SUPERSEDED)


def test_exactly_six_transitions_are_allowed() -> None:
    assert sum(len(targets) for targets in ALLOWED_TRANSITIONS.values()) == 6


def test_events_are_the_only_kind_not_revisable() -> None:
    assert [kind for kind in Kind if not kind.revisable] == [Kind.EVENT]
