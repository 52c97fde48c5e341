"""The timeline's axis, labels and two pictures, drawn from versions made by hand."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ElementTree
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from rich.console import Console

from erstwhile import Rectangle
from erstwhile.cli.output import show_instant
from erstwhile.cli.picture import Axis, draw, label_of, ruler, svg_document

SUPABASE = UUID("01a22a78-0000-7000-8000-000000000001")
AWS = UUID("01a22a78-0000-7000-8000-000000000002")
GCP = UUID("01a22a78-0000-7000-8000-000000000003")
OTHER = UUID("01a22a78-0000-7000-8000-000000000005")


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def version(memory_id: UUID, value: Any, start: str, recorded: int, **fields: Any) -> Rectangle:
    """A version of a claim about the team's database, recorded on day ``recorded`` of
    October."""
    claim: dict[str, Any] = {
        "memory_id": memory_id, "kind": "fact", "state": "current",
        "content": f"uses {value}", "value": value, "valid_from": day(start),
        "valid_until": None, "recorded_from": datetime(2026, 10, recorded, tzinfo=UTC),
        "recorded_until": None,
    }  # fmt: skip
    return Rectangle(**(claim | fields))


def the_move() -> list[Rectangle]:
    """Supabase, then AWS from July, then GCP from September, as ``Ledger.timeline``
    would return them."""
    return [
        version(SUPABASE, "Supabase", "2026-03-01", 1, recorded_until=day("2026-10-02")),
        version(SUPABASE, "Supabase", "2026-03-01", 2, state="superseded",
                valid_until=day("2026-07-01")),
        version(AWS, "AWS", "2026-07-01", 3, recorded_until=day("2026-10-04")),
        version(AWS, "AWS", "2026-07-01", 4, state="superseded", valid_until=day("2026-09-01")),
        version(GCP, "GCP", "2026-09-01", 5),
    ]  # fmt: skip


def test_the_label_is_the_value_else_the_content_on_one_short_line() -> None:
    assert label_of(version(SUPABASE, {"region": "eu"}, "2026-03-01", 1)) == '{"region":"eu"}'
    note = version(AWS, None, "2026-03-01", 1, content="a  long\nnote " + "x" * 60)
    label = label_of(note)
    assert label.startswith("a long note x") and len(label) == 40 and label.endswith("…")


def test_the_axis_spans_every_boundary_with_room_for_open_windows() -> None:
    found = the_move()
    axis = Axis.spanning(found)
    assert axis.start == day("2026-03-01") and axis.start + axis.length > day("2026-09-01")
    assert axis.marks == (day("2026-03-01"), day("2026-07-01"), day("2026-09-01"))
    gcp = found[-1]
    assert axis.cells(gcp, 40)[1] == 40  # open-ended: to the edge
    supabase = found[1]
    start, stop = axis.cells(supabase, 40)
    assert start == 0 and 0 < stop < 40
    assert axis.fraction(day("2020-01-01"), missing=0.5) == 0.0


def test_each_label_of_the_axis_starts_or_ends_at_its_own_tick() -> None:
    """A label that would run past the edge ends at its tick; one that fits neither way
    is left out (it was pushed left, over another tick, and read as that one's)."""
    early = datetime(2026, 3, 1, 0, 0, 0, 500_000, tzinfo=UTC)  # a label longer than 20
    close = [version(SUPABASE, "early", "2026-03-01", 1, valid_from=early),
             version(AWS, "later", "2026-03-01T04:30:00", 2)]  # fmt: skip
    for found in (the_move(), close):
        axis = Axis.spanning(found)
        for width in (12, 20, 30, 40, 80, 160):
            labels, ticks = ruler(axis, width).plain.split("\n")
            for mark in axis.marks:
                tick = min(round(axis.fraction(mark, missing=0.0) * width), width - 1)
                assert ticks[tick] == "╷"
                label = show_instant(mark)
                at = labels.find(label)
                if at >= 0:
                    assert tick in (at, at + len(label) - 1), (width, label)
                else:  # room for every label of the move there
                    assert width < 160 or found is close, label


def test_the_terminal_picture_shows_each_version_and_the_legend() -> None:
    found = the_move()
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(draw("Timeline of team", found, Axis.spanning(found), console.width))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert all(word in text for word in ("Supabase", "AWS", "GCP", "superseded", "█"))
    assert "2026-03-01" in text and "░ archived" in text  # the axis and the legend


def rendered_at(width: int, found: list[Rectangle]) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(draw("Timeline of team", found, Axis.spanning(found), console.width))
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_each_state_has_a_glyph_of_its_own_so_bars_read_without_colour() -> None:
    """Every bar was the same block, told apart by colour alone: piped, or on a
    terminal without colour, a superseded version looked current."""
    found = [*the_move(), version(OTHER, "Heroku", "2026-01-01", 6, state="archived",
                                  valid_until=day("2026-02-01"))]  # fmt: skip
    rows = {line.split("│")[3].strip(): line.split("│")[2] for line in
            rendered_at(160, found).splitlines() if line.count("│") == 5}  # fmt: skip
    assert set(rows["Supabase"].strip()) <= {"█", "▓"} and "▓" in rows["Supabase"]
    assert set(rows["GCP"].strip()) == {"█"} and set(rows["Heroku"].strip()) == {"░"}


def test_boundaries_the_axis_has_no_room_to_label_are_listed_under_it() -> None:
    """At 80 columns the axis is 20 wide: it labelled 2026-03-01 only, and the other
    ticks stood for instants the picture did not say."""
    text = rendered_at(80, the_move())
    assert "2026-07-01" not in text.split("valid time across")[0]
    assert "boundaries, left to right: 2026-03-01, 2026-07-01, 2026-09-01" in text
    assert "boundaries" not in rendered_at(200, the_move()[:3])  # both labels fit there


def test_a_terminal_too_narrow_for_the_table_shows_a_block_per_version() -> None:
    """At 40 columns rich squeezed the recorded and value columns to nothing."""
    text = rendered_at(40, the_move())
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 40
    for value in ("Supabase  current", "Supabase  superseded", "AWS  superseded", "GCP  current"):
        assert value in text, value
    assert "2026-10-01 → 2026-10-02" in text and "2026-10-05 → now" in text


def test_an_empty_picture_says_so() -> None:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(draw("Timeline of nobody", [], None, console.width))
    assert "no memories" in console.file.getvalue()  # type: ignore[attr-defined]
    ElementTree.fromstring(svg_document("Timeline of nobody", [], None))


def test_the_svg_is_well_formed_and_escapes_every_text() -> None:
    found = [*the_move(), version(OTHER, "<b>&\"'</b>\x01", "2026-04-01", 6, content="x")]
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


def test_a_window_ending_at_the_calendars_end_is_drawn_closed() -> None:
    """9999-12-31 is the usual "until further notice": the axis may reach past the last
    instant there is, and a window closed there stops short of the edge that only
    open windows reach (it was drawn to the edge, as an open one)."""
    forever = version(AWS, "active", "2026-01-01", 1, valid_until=day("9999-12-31"))
    open_ended = version(SUPABASE, "open", "2026-01-01", 2)
    last = version(SUPABASE, "last", "2026-01-01", 3, valid_until=datetime.max.replace(tzinfo=UTC))
    axis = Axis.spanning([forever, open_ended, last])
    assert axis.cells(open_ended, 40) == (0, 40)
    assert axis.cells(forever, 40) == axis.cells(last, 40) == (0, 36)
    console = Console(file=io.StringIO(), width=120)
    console.print(draw("acme", [forever, open_ended], axis, 120))
    assert "active" in console.file.getvalue()  # type: ignore[attr-defined]
    root = ElementTree.fromstring(svg_document("acme", [forever, open_ended], axis))
    widths = [float(r.get("width", 0)) for r in root.iter("{http://www.w3.org/2000/svg}rect")
              if r.find("{http://www.w3.org/2000/svg}title") is not None]  # fmt: skip
    assert widths[0] < widths[1]  # the closed window's bar is the shorter
