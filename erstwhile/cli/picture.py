"""How a timeline is drawn: blocks in the terminal with rich, or an SVG document.

Both pictures share one valid-time axis across and one row per version down, oldest
recorded first. A bar that reaches the right edge is open-ended.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from erstwhile.cli.output import show_instant, show_value

if TYPE_CHECKING:
    from erstwhile.domain.views import Rectangle

STYLES = {
    "current": "green",
    "superseded": "yellow",
    "archived": "blue",
}
GLYPHS = {
    "current": "█",
    "superseded": "▓",
    "archived": "░",
}
"""Each state's glyph in the terminal's bars: the states tell apart without colour."""
COLOURS = {
    "current": "#2e7d32",
    "superseded": "#f9a825",
    "archived": "#1565c0",
}


@dataclass(frozen=True)
class Axis:
    """The common valid-time axis: ``start`` at the left edge, ``length`` of valid time
    across.

    ``marks`` are the window boundaries the versions have, in order.
    """

    start: datetime
    length: timedelta
    """A ninth more than the boundaries span, so that only open windows reach the right
    edge. A length, not an end: where the last boundary is near the calendar's end
    (9999-12-31, the usual "until further notice"), the edge lies past the last instant
    a datetime holds, and a window closed there stops short of it all the same (until
    2026-12-05 the edge was put at that last instant, and such a window was drawn as
    open)."""
    marks: tuple[datetime, ...]

    @classmethod
    def spanning(cls, rectangles: Sequence[Rectangle]) -> Axis:
        """Span every known boundary, with room on the right so open windows stand out."""
        marks = sorted({t for r in rectangles for t in (r.valid_from, r.valid_until) if t})
        low, high = (marks[0], marks[-1]) if marks else (rectangles[0].recorded_from,) * 2
        span = max(high - low, timedelta(days=1))
        return cls(low, span + span / 8, tuple(marks))

    def fraction(self, instant: datetime | None, *, missing: float) -> float:
        """Where ``instant`` falls, from 0 (left) to 1 (right); ``missing`` when None."""
        if instant is None:
            return missing
        return min(1.0, max(0.0, (instant - self.start) / self.length))

    def cells(self, rectangle: Rectangle, width: int) -> tuple[int, int]:
        """Return the half-open range of ``width`` cells a version's window covers."""
        left = self.fraction(rectangle.valid_from, missing=0.0)
        right = self.fraction(rectangle.valid_until, missing=1.0)
        start = min(round(left * width), width - 1)
        return start, max(round(right * width), start + 1)


def label_of(rectangle: Rectangle) -> str:
    """Name a version's claim in one short line: its value if it has one, else its
    content."""
    text = show_value(rectangle.value) or rectangle.content
    line = " ".join(text.split())
    return line if len(line) <= 40 else line[:39] + "…"


def draw(title: str, rectangles: Sequence[Rectangle], axis: Axis | None, width: int) -> Picture:
    """Return the terminal picture: one row per version, its bar on the common axis."""
    return Picture(title, tuple(rectangles), axis, width)


@dataclass(frozen=True)
class Picture:
    """The timeline in the terminal: a table of the versions, each bar on the common
    axis; where the terminal is too narrow for the table (whose other columns rich
    would squeeze to nothing), one block of lines per version under an axis as wide as
    the terminal."""

    title: str
    rectangles: tuple[Rectangle, ...]
    axis: Axis | None
    width: int

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        bar_width = max(20, min(60, self.width - 100))
        table = self.table(bar_width)
        fits = table.__rich_measure__(console, options).minimum <= options.max_width
        if self.axis is None or fits:
            yield table
            yield legend(self.axis, bar_width)
            return
        yield Text.from_markup(self.title, style="table.title")
        bar_width = max(options.max_width - 2, 10)
        yield Padding(ruler(self.axis, bar_width), (0, 0, 0, 2))
        for rectangle in self.rectangles:
            line = Text("  ").append_text(Text(label_of(rectangle)))
            line.append("  ").append(rectangle.state, style=STYLES[rectangle.state])
            yield Text(recorded(rectangle))
            yield Text("  ").append_text(bar(rectangle, self.axis, bar_width))
            yield line
        yield legend(self.axis, bar_width)

    def table(self, bar_width: int) -> Table:
        """Return the versions as a table, bars ``bar_width`` wide."""
        table = Table(title=self.title, title_justify="left")
        table.add_column("recorded (from → until)", overflow="fold")
        table.add_column(ruler(self.axis, bar_width) if self.axis else "valid time", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_column("state", no_wrap=True)
        for rectangle in self.rectangles:
            assert self.axis is not None  # there is an axis whenever there are versions
            table.add_row(
                recorded(rectangle),
                bar(rectangle, self.axis, bar_width),
                Text(label_of(rectangle)),
                Text(rectangle.state, style=STYLES[rectangle.state]),
            )
        table.caption = None if self.rectangles else "no memories"
        return table


def recorded(rectangle: Rectangle) -> str:
    """Format the recorded interval of a version."""
    until = rectangle.recorded_until
    return f"{show_instant(rectangle.recorded_from)} → {show_instant(until) if until else 'now'}"


def bar(rectangle: Rectangle, axis: Axis, width: int) -> Text:
    """Return a version's bar: its state's glyph over its valid window, blank elsewhere
    (each state has a glyph of its own, so the bars read without colour too)."""
    start, stop = axis.cells(rectangle, width)
    text = Text(" " * start)
    text.append(GLYPHS[rectangle.state] * (stop - start), style=STYLES[rectangle.state])
    text.append(" " * (width - stop))
    return text


def labelled(axis: Axis, width: int) -> list[tuple[datetime, int, int | None]]:
    """Place the axis's boundaries on ``width`` cells: each with its tick's column and
    the column its label starts at, or None where the label fits nowhere.

    A label starts at its tick or, where it would run past the edge, ends at it: one
    pushed further left (as until 2026-12-04) stood over another tick, the label of an
    instant it was not."""
    placed: list[tuple[datetime, int, int | None]] = []
    free = 0
    for mark in axis.marks:
        column = min(round(axis.fraction(mark, missing=0.0) * width), width - 1)
        label = show_instant(mark)
        at = column if column + len(label) <= width else column - len(label) + 1
        placed.append((mark, column, at if at >= free else None))
        if at >= free:
            free = at + len(label) + 1
    return placed


def ruler(axis: Axis, width: int) -> Text:
    """Return the axis header: boundary labels where they fit, a tick under each (see
    :func:`labelled`)."""
    labels, ticks = [" "] * width, [" "] * width
    for mark, column, at in labelled(axis, width):
        ticks[column] = "╷"
        if at is not None:
            label = show_instant(mark)
            labels[at : at + len(label)] = label
    return Text("".join(labels).rstrip() + "\n" + "".join(ticks))


def legend(axis: Axis | None = None, width: int = 0) -> Text:
    """Return the key of the glyphs and colours, and how to read the picture; with the
    ``axis`` drawn ``width`` wide, every boundary in order too, when it had no room to
    label them all."""
    text = Text("valid time across, recorded time down; a bar reaching the edge is open.\n")
    for name, style in STYLES.items():
        text.append(GLYPHS[name], style=style)
        text.append(f" {name}  ")
    if axis is not None and any(at is None for _, _, at in labelled(axis, width)):
        ticks = ", ".join(show_instant(mark) for mark in axis.marks)
        text.append(f"\n╷ boundaries, left to right: {ticks}")
    return text


ROW, TOP, LEFT, CHART, RIGHT = 26, 72, 320, 440, 260
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(text: str) -> str:
    """Return text safe inside an XML element or attribute: entities for & < > " ',
    and without the control characters XML 1.0 cannot hold at all."""
    return escape(_NOT_XML.sub("\ufffd", text))


def svg_document(title: str, rectangles: Sequence[Rectangle], axis: Axis | None) -> str:
    """Return the picture as a standalone SVG document; every text is XML-escaped."""
    width = LEFT + CHART + RIGHT
    height = TOP + ROW * max(len(rectangles), 1) + 56
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{xml_text(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="22" font-size="16" font-weight="bold">{xml_text(title)}</text>',
        f'<text x="10" y="{TOP - 8}" fill="#555">recorded (from → until) ↓</text>',
        *(svg_marks(axis, height) if axis else []),
    ]
    for row, rectangle in enumerate(rectangles):
        assert axis is not None  # there is an axis whenever there are versions
        parts += svg_row(rectangle, axis, TOP + row * ROW)
    if not rectangles:
        parts.append(f'<text x="{LEFT}" y="{TOP + 17}" fill="#555">no memories</text>')
    parts += svg_legend(height - 24)
    return "\n".join([*parts, "</svg>", ""])


def svg_marks(axis: Axis, height: int) -> list[str]:
    """Return a dashed line at each window boundary, labelled where labels fit."""
    parts = [f'<text x="{LEFT}" y="42" fill="#555">valid time →</text>']
    free = 0.0
    for mark in axis.marks:
        x = LEFT + axis.fraction(mark, missing=0.0) * CHART
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{height - 44}" '
            'stroke="#ccc" stroke-dasharray="3,3"/>'
        )
        label = show_instant(mark)
        if x >= free:
            parts.append(f'<text x="{x:.1f}" y="{TOP - 8}" fill="#555">{xml_text(label)}</text>')
            free = x + 7 * len(label)
    return parts


def svg_row(rectangle: Rectangle, axis: Axis, y: int) -> list[str]:
    """Return one version: its recorded interval, its bar and its label."""
    left = LEFT + axis.fraction(rectangle.valid_from, missing=0.0) * CHART
    right = LEFT + axis.fraction(rectangle.valid_until, missing=1.0) * CHART
    colour = COLOURS[rectangle.state]
    tip = f"{rectangle.memory_id}: {label_of(rectangle)} ({rectangle.state})"
    return [
        f'<text x="10" y="{y + 17}">{xml_text(recorded(rectangle))}</text>',
        f'<rect x="{left:.1f}" y="{y + 4}" width="{max(right - left, 2):.1f}" '
        f'height="{ROW - 8}" rx="3" fill="{colour}">'
        f"<title>{xml_text(tip)}</title></rect>",
        f'<text x="{LEFT + CHART + 10}" y="{y + 17}">'
        f"{xml_text(label_of(rectangle))} — {xml_text(rectangle.state)}</text>",
    ]


def svg_legend(y: int) -> list[str]:
    """Return the key of the colours along the bottom."""
    parts = []
    for index, (name, colour) in enumerate(COLOURS.items()):
        x = 10 + index * 110
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{x + 18}" y="{y + 11}">{name}</text>')
    return parts
