"""How answers are shown: rich tables for people, the models' JSON with ``--json``.

JSON is written as UTF-8 bytes, not through rich: rich would wrap long lines and colour
the text.
"""

from __future__ import annotations

import errno
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, time
from typing import IO, Any, cast

import orjson
from pydantic import BaseModel
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from erstwhile.domain.memory import Memory
from erstwhile.domain.views import Conflict, Hit, LoggedEvent, ProjectionStatus, Proposal

ID_WIDTH = 36
"""The width of a memory id: columns that show one never fold it."""

UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but newline and tab: stored text holding them (an escape sequence
in a memory's content, say) would otherwise reach the terminal as commands to it.
(rich strips only a few: BEL, backspace, VT, FF and CR, and passes ESC through.)"""


def printable(text: str) -> str:
    """``text`` with each control character but newline and tab shown as its Unicode
    picture (ESC as ``␛``, DEL as ``␡``), or ``�`` for the C1 controls, which have none."""
    return UNPRINTABLE.sub(_picture, text)


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else "\ufffd"


class ReaderGone(Exception):
    """Whoever read the command's stdout went away (``erstwhile search x | head -1``).

    Raised in place of ``BrokenPipeError``, which click answers with exit 1 before
    :func:`erstwhile.cli.app.main` sees it: main ends the command as a program stopped
    by SIGPIPE is, since 1 says the command was refused."""


STDOUT_NAME = "standard output"
"""How an error writing to stdout names it (its ``filename``)."""


def named(error: OSError, name: str) -> OSError:
    """Return ``error`` again, naming ``name``: what the user gave (stdout, the file
    asked for), not what it was written through (a temporary file beside it)."""
    return OSError(error.errno, error.strerror, name)


class WholeWrites(io.RawIOBase):
    """A file descriptor's writes, each whole or failing, its errors naming the stream.

    A write that the descriptor takes only in part (a pipe whose reader went away, a
    full disk, a file size limit) returns how much it took instead of raising. Unbuffered
    (``python -u``, ``PYTHONUNBUFFERED``, as services often run), the text layer over
    stdout dropped that count: a command printing a long answer to ``| head`` or onto a
    full disk stopped part-way and exited 0. Here the rest is written again, so that the
    descriptor's error is raised."""

    def __init__(self, raw: io.RawIOBase, shown_as: str) -> None:
        super().__init__()
        self.raw = raw
        self.shown_as = shown_as

    @property
    def name(self) -> Any:
        return getattr(self.raw, "name", self.shown_as)

    @property
    def mode(self) -> str:
        return "wb"

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            try:
                taken = self.raw.write(view[done:])
            except BrokenPipeError:
                raise
            except OSError as error:  # the disk full, a file size limit: name the stream
                raise named(error, self.shown_as) from None
            if taken is None:  # a non-blocking descriptor that would block
                raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), self.shown_as)
            if taken == 0:
                raise OSError(errno.EIO, "the output took no more bytes", self.shown_as)
            done += taken
        return done

    def close(self) -> None:
        """Leave the descriptor open: the interpreter's own stream owns it."""
        super().close()


def whole_stdout() -> None:
    """Make every write to stdout whole or failing, naming it (see :class:`WholeWrites`),
    keeping its encoding, error handler, buffering and line buffering."""
    stdout = sys.stdout
    if not isinstance(stdout, io.TextIOWrapper):
        return  # none (stdout closed), or already replaced (a test runner capturing it)
    buffer = stdout.buffer
    if isinstance(buffer, io.BufferedWriter):
        whole = WholeWrites(buffer.raw, STDOUT_NAME)
        binary: io.RawIOBase | io.BufferedWriter = io.BufferedWriter(whole)
    elif isinstance(buffer, io.FileIO):  # unbuffered
        binary = WholeWrites(buffer, STDOUT_NAME)
    else:
        return
    stdout.flush()
    sys.stdout = io.TextIOWrapper(
        cast(IO[bytes], binary),
        encoding=stdout.encoding,
        errors=stdout.errors,
        line_buffering=stdout.line_buffering,
        write_through=stdout.write_through,
    )


@contextmanager
def writing_stdout() -> Iterator[None]:
    """Turn a ``BrokenPipeError`` of the writes to stdout inside into :class:`ReaderGone`."""
    try:
        yield
    except BrokenPipeError:
        raise ReaderGone from None


class PrintableConsole(Console):
    """A console that shows stored text, never obeys it: every segment it renders has
    its control characters replaced by :func:`printable`. (rich's own styling travels
    beside the text, as each segment's style, and is left alone.) Applied here, once,
    it covers every table, title and message, wherever their text came from."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and UNPRINTABLE.search(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment

    def on_broken_pipe(self) -> None:
        """Leave a reader gone away to :func:`erstwhile.cli.app.main` (rich's own exits
        1, a refused command's status, though a write may have been stored)."""
        self.quiet = True
        raise ReaderGone


console = PrintableConsole()
errors = PrintableConsole(stderr=True)


class FittedTable(Table):
    """A table that never squeezes a column to nothing: where the terminal is narrower
    than its columns' narrowest widths (long words, ids that never fold), each row is
    shown as a block of ``column  value`` lines instead, so nothing is cut off."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.__rich_measure__(console, options).minimum <= options.max_width:
            yield from super().__rich_console__(console, options)
            return
        if self.title:
            yield Text.from_markup(str(self.title), style="table.title")
        headers = [str(column.header) for column in self.columns]
        cells = [list(column.cells) for column in self.columns]
        # Below an id's width beside the longest header, each value goes under its header.
        stacked = options.max_width < max(map(len, headers)) + 2 + ID_WIDTH
        for row in range(self.row_count):
            yield block_of(console, options, headers, [c[row] for c in cells], stacked)
            yield Text("")
        if self.caption:
            yield Text.from_markup(str(self.caption), style="table.caption")


def block_of(
    console: Console,
    options: ConsoleOptions,
    headers: list[str],
    values: list[RenderableType],
    stacked: bool,
) -> Segments:
    """Return one row of a table as a block of ``header  value`` lines (``stacked``: each
    value on the lines under its header, indented).

    The lines are laid out here rather than as a grid of their own per row: a grid
    measures and renders every cell through rich's table layout, which made the audit
    log of 5,000 events take 13 s to show in a terminal 80 columns wide (now 3.7 s)."""
    label = 0 if stacked else max(map(len, headers)) + 2
    indent = Segment(" " * (2 if stacked else label))
    bold = console.get_style("bold")
    within = options.update(width=max(options.max_width - len(indent.text), 1), highlight=False)
    segments: list[Segment] = []
    for header, value in zip(headers, values, strict=True):
        if stacked:
            segments += [Segment(header, bold), Segment.line()]
        for number, line in enumerate(console.render_lines(value, within, pad=False)):
            if number == 0 and not stacked:
                segments += [Segment(header, bold), Segment(" " * (label - len(header)))]
            else:
                segments.append(indent)
            segments += [*line, Segment.line()]
    return Segments(segments)


def print_json(payload: Any, *, stderr: bool = False) -> None:
    """Print JSON, indented, on stdout (or on stderr)."""
    stream = sys.stderr if stderr else sys.stdout
    # UTF-8 whatever the terminal's encoding (JSON is UTF-8), after any text before it.
    with writing_stdout():
        stream.flush()
        stream.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n")
        stream.buffer.flush()


def dump(models: BaseModel | Sequence[BaseModel]) -> Any:
    """Return the JSON form of a model, or a list of them."""
    if isinstance(models, BaseModel):
        return models.model_dump(mode="json")
    return [model.model_dump(mode="json") for model in models]


def show_when(as_of: datetime | None, known_at: datetime | None) -> str:
    """The part of a title saying which instants an answer is about (empty for now, as
    known now), so a table read later says what it answered."""
    parts = []
    if as_of is not None:
        parts.append(f"as of {show_instant(as_of)}")
    if known_at is not None:
        parts.append(f"as known at {show_instant(known_at)}")
    return (" " + ", ".join(parts)) if parts else ""


def show_instant(instant: datetime | None) -> str:
    """Format an instant compactly: the date alone at midnight UTC, else date and time,
    to the microsecond when it has one, so that an instant copied from a table (into
    ``--known-at``, say) is the instant shown, not the second it falls in."""
    if instant is None:
        return "…"
    day = f"{instant.year:04d}-{instant.month:02d}-{instant.day:02d}"
    if instant.time() == time(0):
        return day
    fraction = f".{instant.microsecond:06d}" if instant.microsecond else ""
    return f"{day} {instant:%H:%M:%S}{fraction}Z"


def show_value(value: Any) -> str:
    """Format a claim's value: text as it is, anything else as JSON.

    Text that would read as another value (``"0"``, ``"null"``, ``"[1]"``) or as none (a
    blank one) is shown as JSON too, quoted: shown as it is, the text ``null`` and no
    value, or ``"0"`` and ``0``, looked alike (``--json`` always told them apart)."""
    if value is None:
        return ""
    if isinstance(value, str) and not _reads_as_another_value(value):
        return value
    return orjson.dumps(value).decode()


def _reads_as_another_value(text: str) -> bool:
    """Tell whether ``text``, shown as it is, would read as another value or as none."""
    if not text.strip():
        return True
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def show_window(memory: Memory) -> str:
    """Format a memory's half-open valid window."""
    return f"[{show_instant(memory.valid_from)}, {show_instant(memory.valid_until)})"


def memory_table(title: str, memories: Sequence[Memory], *, ids: bool = False) -> Table:
    """Return a table of memories: content (with its id below), value, valid window, state.

    Narrow terminals fold long cells onto more lines rather than cut them.
    """
    table = FittedTable(title=title, title_justify="left")
    table.add_column("content", overflow="fold", width=ID_WIDTH if ids else None)
    for column in ("value", "valid window", "state"):
        table.add_column(column, overflow="fold")
    for memory in memories:
        content = Text(memory.content)
        if ids:
            content.append(f"\n{memory.id}", style="dim")
        cells = [show_value(memory.value), show_window(memory), memory.state]
        table.add_row(content, *(Text(str(cell)) for cell in cells))
    return table


def hit_table(title: str, hits: Sequence[Hit]) -> Table:
    """Return a table of search hits: tier, score, then the memory as in a listing."""
    table = FittedTable(title=escape(title), title_justify="left")
    table.add_column("tier", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("content", overflow="fold", width=ID_WIDTH)
    for column in ("value", "valid window", "state"):
        table.add_column(column, overflow="fold")
    for hit in hits:
        memory = hit.memory
        content = Text(memory.content)
        content.append(f"\n{memory.id}", style="dim")
        cells = [show_value(memory.value), show_window(memory), memory.state]
        table.add_row(hit.tier, f"{hit.score:.3f}", content, *(Text(str(c)) for c in cells))
    table.caption = None if hits else "no matches"
    return table


def proposal_table(proposals: Sequence[Proposal]) -> Table:
    """Return a table of open proposals: which newer memory would supersede which older."""
    table = FittedTable(title="Open proposals: newer would supersede older", title_justify="left")
    table.add_column("proposal", overflow="fold", width=ID_WIDTH)
    for column in ("newer", "older"):
        table.add_column(column, no_wrap=True, min_width=ID_WIDTH)
    table.add_column("confidence", justify="right")
    for proposal in proposals:
        ids = (proposal.id, proposal.newer_id, proposal.older_id)
        table.add_row(*(str(i) for i in ids), f"{proposal.confidence:.2f}")
    table.caption = None if proposals else "none"
    return table


def conflict_table(conflict: Conflict) -> Table:
    """Return one contradiction: its members, the highest-confidence ones starred (every
    member as confident as the highest, when several are) and the one the resolution
    recommends ticked (none when it is unresolved)."""
    title = (
        f"{conflict.subject} {conflict.attribute}: {len(conflict.members)} claims disagree "
        f"(resolution: {conflict.resolution.replace('_', ' ')})"
    )
    trusted = recommended(conflict)
    caption = "★ highest confidence" + ("" if trusted is None else ", ✓ the claim to trust")
    table = FittedTable(title=escape(title), title_justify="left", caption=caption)
    table.add_column("content", overflow="fold", width=ID_WIDTH)
    for column in ("value", "valid window", "confidence"):
        table.add_column(column, overflow="fold")
    highest = conflict.highest_confidence.confidence
    for memory in conflict.members:
        content = Text(memory.content)
        content.append(f"\n{memory.id}", style="dim")
        star = " ★" if memory.confidence == highest else ""
        tick = " ✓" if trusted is not None and memory.id == trusted.id else ""
        cells = [
            f"{show_value(memory.value)}{tick}",
            show_window(memory),
            f"{memory.confidence:.2f}{star}",
        ]
        table.add_row(content, *(Text(cell) for cell in cells))
    return table


def recommended(conflict: Conflict) -> Memory | None:
    """The member the resolution recommends: the most confident one (``by_confidence``),
    the one whose window opens last (``by_recency``), or none (``unresolved``)."""
    if conflict.resolution == "by_confidence":
        return conflict.highest_confidence
    if conflict.resolution == "by_recency":
        return max(conflict.members, key=lambda memory: memory.valid_from)
    return None


def memory_listing(title: str, memories: Sequence[Memory]) -> Table:
    """Return a table of memories with their ids, saying so when there are none."""
    table = memory_table(escape(title), memories, ids=True)
    table.caption = None if memories else "none"
    return table


def show_field(value: Any) -> str:
    """Format one field of a memory for the detail view."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict):
        return orjson.dumps(value).decode() if value else ""
    return str(value)


def memory_detail(title: str, memory: Memory) -> Table:
    """Return one memory as a two-column table: every field and its value."""
    table = FittedTable(title=escape(title), title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for name in Memory.model_fields:
        raw = getattr(memory, name)
        text = show_value(raw) if name == "value" else show_field(raw)
        table.add_row(name, Text(text))
    return table


def event_table(events: Sequence[LoggedEvent]) -> Table:
    """Return a table of logged events: position, when, type, actor, memory and gist."""
    table = FittedTable(title="Audit log", title_justify="left")
    for column in ("#", "recorded at", "type", "actor"):
        table.add_column(column, overflow="fold", no_wrap=column in ("#", "type"))
    table.add_column("memory / detail", overflow="fold", width=ID_WIDTH)
    for event in events:
        detail = Text(str(event.memory_id), style="dim")
        detail.append(f"\n{summarise(event)}", style="")
        table.add_row(
            str(event.position),
            show_instant(event.recorded_at),
            event.type,
            Text(event.actor),
            detail,
        )
    table.caption = None if events else "no events"
    return table


def status_table(statuses: Sequence[ProjectionStatus]) -> Table:
    """Return a table of each projection's tracked position and how far it lags the log."""
    head = max((status.head for status in statuses), default=0)
    table = FittedTable(title=f"Projections (log head: {head})", title_justify="left")
    for column in ("projection", "version", "position", "behind"):
        table.add_column(column)
    for status in statuses:
        table.add_row(status.name, str(status.version), str(status.position), str(status.lag))
    return table


def summarise(event: LoggedEvent) -> str:
    """Return the gist of an event's payload, for one table cell."""
    data = event.data
    if data is None:
        return "(content erased)"
    if "content" in data:
        return str(data["content"])
    if "older_id" in data and "newer_id" in data:
        return f"proposal rejected: {data['newer_id']} over {data['older_id']}"
    if "newer_id" in data:
        return f"by {data['newer_id']} at {data.get('at')}"
    if data.get("reason"):
        return f"reason: {data['reason']}"
    return ", ".join(f"{key}={value}" for key, value in data.items() if value not in (None, []))


def show_memory(as_json: bool, title: str, memory: Memory) -> None:
    """Show one memory: its detail table, or its JSON object."""
    if as_json:
        print_json(dump(memory))
    else:
        console.print(memory_detail(title, memory))


def show_memories(as_json: bool, title: str, memories: Sequence[Memory]) -> None:
    """Show a list of memories: a table with ids, or a JSON list."""
    if as_json:
        print_json(dump(memories))
    else:
        console.print(memory_listing(title, memories))
