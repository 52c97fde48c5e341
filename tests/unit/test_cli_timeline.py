"""The timeline's fold from logged events to versions, its axis, and its two pictures."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ElementTree
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from rich.console import Console

from erstwhile.cli.picture import Axis, draw, svg_document
from erstwhile.cli.timeline import Rectangle, about, timeline_of, versions
from erstwhile.domain.views import LoggedEvent

SUPABASE = UUID("01a22a78-0000-7000-8000-000000000001")
AWS = UUID("01a22a78-0000-7000-8000-000000000002")
GCP = UUID("01a22a78-0000-7000-8000-000000000003")
SECRET = UUID("01a22a78-0000-7000-8000-000000000004")
OTHER = UUID("01a22a78-0000-7000-8000-000000000005")
PROPOSAL = UUID("6f1b3f0e-5c1d-5a8e-9a57-2f4c1e0b7d21")


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class Log:
    """Logged events written by hand, one recorded day apart."""

    def __init__(self) -> None:
        self.events: list[LoggedEvent] = []

    def add(self, type_: str, memory_id: UUID, data: dict[str, Any] | None) -> LoggedEvent:
        position = len(self.events) + 1
        event = LoggedEvent(
            position=position,
            recorded_at=datetime(2026, 10, position, tzinfo=UTC),
            type=type_,
            memory_id=memory_id,
            actor="tester",
            namespace="default",
            data=data,
        )
        self.events.append(event)
        return event

    def asserted(self, memory_id: UUID, value: Any, start: str, **data: Any) -> LoggedEvent:
        claim = {"content": f"uses {value}", "subject": "team", "attribute": "database"}
        fields = claim | {"value": value, "valid_from": f"{start}T00:00:00Z"} | data
        return self.add("Asserted", memory_id, {"valid_until": None, "supersedes": []} | fields)

    def superseded(self, older: UUID, newer: UUID, at: str) -> LoggedEvent:
        return self.add("Superseded", older, {"newer_id": str(newer), "at": f"{at}T00:00:00Z"})


def the_move() -> Log:
    """Supabase, then AWS from July, then GCP from September."""
    log = Log()
    log.asserted(SUPABASE, "Supabase", "2026-03-01")
    log.superseded(SUPABASE, AWS, "2026-07-01")  # the ledger logs this first, then the newer
    log.asserted(AWS, "AWS", "2026-07-01", supersedes=[str(SUPABASE)])
    log.superseded(AWS, GCP, "2026-09-01")
    log.asserted(GCP, "GCP", "2026-09-01", supersedes=[str(AWS)])
    return log


def test_an_assertion_is_one_open_version() -> None:
    log = Log()
    event = log.asserted(SUPABASE, "Supabase", "2026-03-01", valid_until="2026-12-01T00:00:00Z")
    (only,) = versions(log.events)
    assert only == Rectangle(
        memory_id=SUPABASE,
        label="Supabase",
        state="current",
        erased=False,
        valid_from=day("2026-03-01"),
        valid_until=day("2026-12-01"),
        recorded_from=event.recorded_at,
        recorded_until=None,
    )


def test_a_supersession_closes_the_version_and_opens_a_shorter_one() -> None:
    log = the_move()
    first, second = versions(e for e in log.events if e.memory_id == SUPABASE)
    assert (first.state, first.valid_until) == ("current", None)
    assert first.recorded_until == second.recorded_from == log.events[1].recorded_at
    assert (second.state, second.valid_until, second.recorded_until) == (
        "superseded",
        day("2026-07-01"),
        None,
    )
    assert second.valid_from == first.valid_from


def test_archive_and_forget_change_the_state_not_the_window() -> None:
    log = Log()
    log.asserted(SUPABASE, "Supabase", "2026-03-01")
    log.add("Archived", SUPABASE, {"reason": "stale"})
    log.add("Forgotten", SUPABASE, {"hard": False, "reason": None})
    found = versions(log.events)
    assert [r.state for r in found] == ["current", "archived", "forgotten"]
    assert {(r.valid_from, r.valid_until, r.label) for r in found} == {
        (day("2026-03-01"), None, "Supabase")
    }
    assert [r.recorded_until is None for r in found] == [False, False, True]


def test_a_change_nobody_can_see_makes_no_new_version() -> None:
    log = Log()
    log.asserted(SUPABASE, "Supabase", "2026-03-01")
    log.add("Forgotten", SUPABASE, {"hard": False, "reason": None})
    log.add("Forgotten", SUPABASE, {"hard": True, "reason": None})  # soft made hard
    assert [r.state for r in versions(log.events)] == ["current", "forgotten"]


def test_the_label_is_the_value_else_the_content_on_one_short_line() -> None:
    log = Log()
    log.asserted(SUPABASE, {"region": "eu"}, "2026-03-01")
    log.asserted(AWS, None, "2026-03-01", content="a  long\nnote " + "x" * 60)
    assert versions(log.events[:1])[0].label == '{"region":"eu"}'
    label = versions(log.events[1:])[0].label
    assert label.startswith("a long note x") and len(label) == 40 and label.endswith("…")


def test_the_timeline_gathers_the_chain_in_recorded_order() -> None:
    found = timeline_of(the_move().events, "Team", "DATABASE")  # labels compare normalised
    assert [(r.label, r.state) for r in found] == [
        ("Supabase", "current"),
        ("Supabase", "superseded"),
        ("AWS", "current"),
        ("AWS", "superseded"),
        ("GCP", "current"),
    ]
    assert [r.recorded_from for r in found] == sorted(r.recorded_from for r in found)


def test_other_subjects_attributes_and_proposals_are_left_out() -> None:
    log = the_move()
    log.asserted(OTHER, "Paris", "2026-01-01", subject="office", attribute="city")
    log.asserted(SECRET, "blue", "2026-01-01", attribute="colour")
    log.add("ProposalRejected", PROPOSAL, {"older_id": str(AWS), "newer_id": str(OTHER)})
    assert set(about(log.events, "team", "database")) == {SUPABASE, AWS, GCP}
    assert set(about(log.events, "team")) == {SUPABASE, AWS, GCP, SECRET}
    assert timeline_of(log.events, "nobody") == []


def test_an_erased_memory_is_kept_through_its_links_and_placed_where_it_took_over() -> None:
    log = the_move()
    log.superseded(GCP, SECRET, "2026-10-15")
    log.add("Asserted", SECRET, None)  # hard-forgotten: the claim reads as None
    log.add("Forgotten", SECRET, {"hard": True, "reason": None})
    log.add("Asserted", OTHER, None)  # erased and linked to nothing: about nothing we know
    secret = [r for r in timeline_of(log.events, "team") if r.memory_id == SECRET]
    assert [(r.label, r.state, r.erased) for r in secret] == [
        ("(erased)", "current", True),
        ("(erased)", "forgotten", True),
    ]
    assert {(r.valid_from, r.valid_until) for r in secret} == {(day("2026-10-15"), None)}
    assert OTHER not in about(log.events, "team")


def test_an_erased_memory_nobody_superseded_has_no_known_start() -> None:
    log = Log()
    log.add("Asserted", SECRET, None)
    (only,) = versions(log.events)
    assert (only.valid_from, only.valid_until, only.erased) == (None, None, True)
    axis = Axis.spanning([only])
    assert axis.cells(only, 10) == (0, 10)  # drawn across: its window is unknown


def test_the_axis_spans_every_boundary_with_room_for_open_windows() -> None:
    found = timeline_of(the_move().events, "team")
    axis = Axis.spanning(found)
    assert axis.start == day("2026-03-01") and axis.end > day("2026-09-01")
    assert axis.marks == (day("2026-03-01"), day("2026-07-01"), day("2026-09-01"))
    gcp = found[-1]
    assert axis.cells(gcp, 40)[1] == 40  # open-ended: to the edge
    supabase = found[1]
    start, stop = axis.cells(supabase, 40)
    assert start == 0 and 0 < stop < 40
    assert axis.fraction(day("2020-01-01"), missing=0.5) == 0.0


def test_the_terminal_picture_shows_each_version_and_the_legend() -> None:
    found = timeline_of(the_move().events, "team")
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(draw("Timeline of team", found, Axis.spanning(found), console.width))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert all(word in text for word in ("Supabase", "AWS", "GCP", "superseded", "█"))
    assert "2026-03-01" in text and "░ erased" in text  # the axis and the legend


def test_an_empty_picture_says_so() -> None:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(draw("Timeline of nobody", [], None, console.width))
    assert "no memories" in console.file.getvalue()  # type: ignore[attr-defined]
    ElementTree.fromstring(svg_document("Timeline of nobody", [], None))


def test_the_svg_is_well_formed_and_escapes_every_text() -> None:
    log = the_move()
    log.asserted(OTHER, "<b>&\"'</b>\x01", "2026-04-01", content="x")
    found = timeline_of(log.events, "team")
    document = svg_document('Timeline of <team> & "co"', found, Axis.spanning(found))
    root = ElementTree.fromstring(document.encode())
    namespace = "{http://www.w3.org/2000/svg}"
    texts = ["".join(node.itertext()) for node in root.iter(f"{namespace}text")]
    assert any("<b>&\"'</b>\ufffd" in text for text in texts)
    assert root.find(f"{namespace}title").text == 'Timeline of <team> & "co"'  # type: ignore[union-attr]
    bars = [
        node for node in root.iter(f"{namespace}rect") if node.find(f"{namespace}title") is not None
    ]
    assert len(bars) == len(found)
