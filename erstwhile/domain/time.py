"""Instants and half-open valid-time windows.

Every instant in erstwhile is timezone-aware UTC with microsecond precision. Stored
instants are integer microseconds since the Unix epoch, so range scans are plain
integer comparisons on both backends; an open end is stored as ``OPEN_END``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from erstwhile.domain.errors import ValidationError

OPEN_END = 2**63 - 1
"""The stored form of "no end": larger than every real instant."""

ONE_MICROSECOND = timedelta(microseconds=1)
LAST_INSTANT = datetime.max.replace(tzinfo=UTC)
"""The last instant the calendar has (9999-12-31, the usual "until further notice")."""
LAST_RECORDABLE = LAST_INSTANT - timedelta(seconds=1)
"""The latest instant an event may be recorded at: the calendar's last second is kept
for the writes after it (a log recorded at its very end could never grow again, not
even by the hard forget that erases a memory)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Instant = datetime | str


def read_iso(text: str) -> datetime:
    """Read ISO 8601 text as Python does, with what RFC 3339 adds: surrounding spaces
    and a lower-case ``z`` (Python's parser takes only ``Z``). ``ValueError`` when it is
    none, a NUL byte included (the parser stops reading at one)."""
    cleaned = text.strip()
    if "\x00" in cleaned:
        raise ValueError(text)
    if cleaned.endswith("z"):
        cleaned = cleaned[:-1] + "Z"
    return datetime.fromisoformat(cleaned)


def to_utc(value: Instant, field: str = "time") -> datetime:
    """Return ``value`` as an aware UTC datetime; refuse naive or unparsable input.

    Accepts a ``datetime`` or ISO 8601 text that carries an offset or ``Z``.
    """
    given = value
    if isinstance(value, str):
        try:
            parsed = read_iso(value)
        except ValueError:
            raise ValidationError(
                f"{field}: {value!r} is not an ISO 8601 instant (e.g. 2026-03-01T00:00:00Z)"
            ) from None
        value = parsed
    elif isinstance(value, date) and not isinstance(value, datetime):
        raise ValidationError(f"{field}: a date is not an instant; give a datetime")
    if not isinstance(value, datetime):
        raise ValidationError(f"{field}: expected a datetime or ISO 8601 text, got {value!r}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        shown = given if isinstance(given, str) else value.isoformat()
        raise ValidationError(
            f"{field}: {shown!r} is naive (no timezone); give one, e.g. "
            f"{value.isoformat()}Z or an offset such as +02:00"
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(
            f"{field}: {value.isoformat()} is outside the years 1 to 9999 in UTC"
        ) from None


def optional_utc(value: Instant | None, field: str) -> datetime | None:
    """Like :func:`to_utc`, letting ``None`` through."""
    return None if value is None else to_utc(value, field)


def to_micros(instant: datetime) -> int:
    """Return the stored integer form of an aware instant."""
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """Return the aware UTC instant for a stored integer."""
    return _EPOCH + timedelta(microseconds=micros)


def end_to_micros(instant: datetime | None) -> int:
    """Return the stored form of a window end, ``OPEN_END`` for ``None``."""
    return OPEN_END if instant is None else to_micros(instant)


def end_from_micros(micros: int) -> datetime | None:
    """Return a window end from its stored form."""
    return None if micros == OPEN_END else from_micros(micros)


@dataclass(frozen=True, slots=True)
class Window:
    """A half-open valid-time window ``[start, end)``; ``end=None`` never closes.

    Half-open is what makes a hand-over clean: when one memory ends at the instant
    the next begins, exactly one of them holds at that instant, and the two windows
    touch without overlapping.
    """

    start: datetime
    end: datetime | None = None

    def __post_init__(self) -> None:
        if self.end is not None and self.end <= self.start:
            raise ValidationError(
                f"valid_until ({self.end.isoformat()}) must be later than "
                f"valid_from ({self.start.isoformat()})"
            )

    @classmethod
    def opening(cls, start: datetime, end: datetime | None, start_is: str) -> Window:
        """Return the window, its refusal naming where ``start`` came from when it was
        no ``valid_from`` given (the message quoted one the caller never gave)."""
        try:
            return cls(start, end)
        except ValidationError:
            assert end is not None  # an open window is never refused
            raise ValidationError(
                f"valid_until ({end.isoformat()}) must be later than {start_is} "
                f"({start.isoformat()}), where the window starts when no valid_from is given"
            ) from None

    def contains(self, instant: datetime) -> bool:
        """Whether the claim holds at ``instant`` (start inclusive, end exclusive)."""
        return self.start <= instant and (self.end is None or instant < self.end)

    def overlaps(self, other: Window) -> bool:
        """Whether the windows share an instant; windows that only touch do not."""
        return _before(self.start, other.end) and _before(other.start, self.end)

    def closed_at(self, instant: datetime) -> Window:
        """Return this window ending at ``instant``."""
        return Window(self.start, instant)


def _before(instant: datetime, end: datetime | None) -> bool:
    return end is None or instant < end
