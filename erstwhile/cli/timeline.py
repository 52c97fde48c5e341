"""``erstwhile timeline``: the bi-temporal picture of a subject's memories.

Each version of a memory is a rectangle: its valid window across, the interval of
recorded (transaction) time during which the ledger held it that way down. The versions
are folded from the log here, in the command line, from the public ``Ledger.events``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated
from uuid import UUID

import typer
from pydantic import BaseModel, ConfigDict

from erstwhile.cli.context import open_ledger, settings
from erstwhile.cli.output import console, dump, print_json, show_value
from erstwhile.cli.picture import Axis, draw, svg_document
from erstwhile.domain.memory import normalise_label
from erstwhile.domain.views import LoggedEvent

ERASED = "(erased)"
MEMORY_EVENTS = ("Asserted", "Superseded", "Archived", "Forgotten")
STATE_AFTER = {"Superseded": "superseded", "Archived": "archived", "Forgotten": "forgotten"}


class Rectangle(BaseModel):
    """One version of a memory: valid ``[valid_from, valid_until)`` as recorded during
    ``[recorded_from, recorded_until)``; None ends are open. A hard-forgotten memory's
    claim is erased: its label is ``(erased)`` and its start unknown (None)."""

    model_config = ConfigDict(frozen=True)

    memory_id: UUID
    label: str
    state: str
    erased: bool
    valid_from: datetime | None
    valid_until: datetime | None
    recorded_from: datetime
    recorded_until: datetime | None = None


def versions(events: Iterable[LoggedEvent], start: datetime | None = None) -> list[Rectangle]:
    """Fold one memory's events, in log order, into its versions over recorded time.

    Each event that changes what is shown (window, state) closes the open version and
    opens the next; the last version stays open. ``start`` stands for the valid start of
    an erased claim when it is known from elsewhere (see :func:`erased_starts`).
    """
    shown: list[Rectangle] = []
    current: Rectangle | None = None
    for event in events:
        if event.type not in MEMORY_EVENTS or (current is None and event.type != "Asserted"):
            continue
        following = next_version(current, event, start)
        if (
            current is not None
            and following.model_copy(update={"recorded_from": current.recorded_from}) == current
        ):
            continue  # nothing visible changed (e.g. a soft forget made hard)
        if current is not None and current.recorded_from < event.recorded_at:
            shown.append(current.model_copy(update={"recorded_until": event.recorded_at}))
        current = following
    return [*shown, current] if current is not None else shown


def next_version(
    before: Rectangle | None, event: LoggedEvent, start: datetime | None = None
) -> Rectangle:
    """Return the version a memory has from ``event`` on."""
    if event.type == "Asserted":
        data = event.data
        return Rectangle(
            memory_id=event.memory_id,
            label=ERASED if data is None else label_of(data),
            state="current",
            erased=data is None,
            valid_from=start if data is None else data["valid_from"],
            valid_until=None if data is None else data["valid_until"],
            recorded_from=event.recorded_at,
        )
    if before is None:
        raise ValueError(f"{event.type} of memory {event.memory_id} before its assertion")
    update: dict[str, object] = {"state": STATE_AFTER[event.type]}
    if event.type == "Superseded" and event.data is not None:
        update["valid_until"] = datetime.fromisoformat(str(event.data["at"]))
    return before.model_copy(update=update | {"recorded_from": event.recorded_at})


def label_of(data: dict[str, object]) -> str:
    """Name a claim in one short line: its value if it has one, else its content."""
    text = show_value(data.get("value")) or str(data.get("content", ""))
    line = " ".join(text.split())
    return line if len(line) <= 40 else line[:39] + "…"


def about(
    events: Iterable[LoggedEvent], subject: str, attribute: str | None = None
) -> dict[UUID, list[LoggedEvent]]:
    """Group the events of the memories about ``subject`` (and ``attribute``) by memory.

    A hard-forgotten memory has no subject left to match: it is kept when supersession
    links it to a memory that matches.
    """
    by_memory: dict[UUID, list[LoggedEvent]] = {}
    links: list[tuple[UUID, UUID]] = []
    matching: set[UUID] = set()
    for event in events:
        if event.type not in MEMORY_EVENTS:
            continue
        by_memory.setdefault(event.memory_id, []).append(event)
        links += [(event.memory_id, other) for other in linked_ids(event)]
        if event.type == "Asserted" and matches(event.data, subject, attribute):
            matching.add(event.memory_id)
    erased = {i for i, found in by_memory.items() if found[0].data is None}
    matching |= reachable(matching, links, erased)
    return {i: found for i, found in by_memory.items() if i in matching}


def linked_ids(event: LoggedEvent) -> list[UUID]:
    """The memories an event links its own memory to through supersession."""
    data = event.data or {}
    if event.type == "Superseded":
        return [UUID(str(data["newer_id"]))]
    if event.type == "Asserted":
        return [UUID(str(i)) for i in data.get("supersedes", ())]
    return []


def matches(data: dict[str, object] | None, subject: str, attribute: str | None) -> bool:
    """Whether an assertion is about ``subject`` (and ``attribute``), compared normalised;
    an erased one (``None``) is about nothing that can be told."""
    if data is None:
        return False

    def same(label: object, wanted: str) -> bool:
        return isinstance(label, str) and normalise_label(label) == normalise_label(wanted)

    return same(data.get("subject"), subject) and (
        attribute is None or same(data.get("attribute"), attribute)
    )


def reachable(start: set[UUID], links: Sequence[tuple[UUID, UUID]], via: set[UUID]) -> set[UUID]:
    """Return the members of ``via`` linked to ``start``, directly or through each other."""
    found: set[UUID] = set()
    frontier = set(start)
    while frontier:
        fresh = {b for a, b in links if a in frontier} | {a for a, b in links if b in frontier}
        fresh = (fresh & via) - found
        found |= fresh
        frontier = fresh
    return found


def erased_starts(events: Iterable[LoggedEvent]) -> dict[UUID, datetime]:
    """Return when each superseding memory took over: a memory supersedes another at its
    own valid start, so this is that start, still known once its claim is erased."""
    return {
        UUID(str(e.data["newer_id"])): datetime.fromisoformat(str(e.data["at"]))
        for e in events
        if e.type == "Superseded" and e.data is not None
    }


def timeline_of(
    events: Iterable[LoggedEvent], subject: str, attribute: str | None = None
) -> list[Rectangle]:
    """Return every version of the memories about ``subject``, in recorded order."""
    events = list(events)
    starts = erased_starts(events)
    rectangles = [
        rectangle
        for memory_id, found in about(events, subject, attribute).items()
        for rectangle in versions(found, starts.get(memory_id))
    ]
    return sorted(rectangles, key=lambda r: (r.recorded_from, r.memory_id))


def timeline(
    ctx: typer.Context,
    subject: Annotated[
        str, typer.Argument(metavar="SUBJECT", help="Whose memories to draw.", show_default=False)
    ],
    attribute: Annotated[
        str | None,
        typer.Argument(metavar="ATTRIBUTE", help="Only this property.", show_default=False),
    ] = None,
    svg: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", dir_okay=False, help="Write the picture as SVG to FILE instead."
        ),
    ] = None,
) -> None:
    """Draw every version of SUBJECT's memories: valid time across, recorded time down.

    Forgotten memories are drawn too. One forgotten with --hard shows as (erased); as its
    subject was erased with it, it is found only through its supersession links.
    """
    with open_ledger(ctx) as ledger:
        rectangles = timeline_of(ledger.events(), subject, attribute)
    title = f"Timeline of {subject} {attribute}" if attribute else f"Timeline of {subject}"
    axis = Axis.spanning(rectangles) if rectangles else None
    if svg is not None:
        svg.write_text(svg_document(title, rectangles, axis), encoding="utf-8")
    if settings(ctx).json:
        print_json(dump(rectangles))
    elif svg is not None:
        console.print(f"Wrote {len(rectangles)} versions to {svg}.", highlight=False)
    else:
        console.print(draw(title, rectangles, axis, console.width))
