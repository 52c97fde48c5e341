"""Instants and half-open windows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from erstwhile import ValidationError
from erstwhile.domain.time import (
    OPEN_END,
    Window,
    end_from_micros,
    end_to_micros,
    from_micros,
    to_micros,
    to_utc,
)

MAR = datetime(2026, 3, 1, tzinfo=UTC)
JUL = datetime(2026, 7, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)


def test_iso_text_with_z_or_offset_becomes_utc() -> None:
    assert to_utc("2026-03-01T00:00:00Z") == MAR
    assert to_utc("2026-03-01T02:00:00+02:00") == MAR
    assert to_utc("2026-03-01T02:00:00+02:00").tzinfo == UTC
    assert to_utc("2026-03-01t00:00:00z") == MAR  # RFC 3339 allows lower case


def test_aware_datetimes_are_converted_to_utc() -> None:
    paris = timezone(timedelta(hours=1))
    converted = to_utc(datetime(2026, 3, 1, 1, 0, tzinfo=paris))
    assert converted == MAR and converted.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 3, 1),
        "2026-03-01T00:00:00",
        "not a time",
        date(2026, 3, 1),
        17,
        None,
        "2026-03-01T00:00:00Z\x00",
        "2026-03-01T00:00:00+00:00\x00junk",
    ],
)
def test_naive_or_unparsable_instants_are_refused(value: object) -> None:
    with pytest.raises(ValidationError):
        to_utc(value)  # type: ignore[arg-type]


def test_naive_error_says_what_is_wrong() -> None:
    with pytest.raises(ValidationError, match="naive"):
        to_utc(datetime(2026, 3, 1), "valid_from")


def test_micros_round_trip_keeps_microseconds() -> None:
    instant = datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=UTC)
    assert from_micros(to_micros(instant)) == instant
    assert end_to_micros(None) == OPEN_END and end_from_micros(OPEN_END) is None


def test_window_is_half_open() -> None:
    window = Window(MAR, JUL)
    assert window.contains(MAR)
    assert window.contains(JUL - timedelta(microseconds=1))
    assert not window.contains(JUL)
    assert not window.contains(MAR - timedelta(microseconds=1))


def test_open_window_never_ends() -> None:
    assert Window(MAR).contains(datetime(9999, 1, 1, tzinfo=UTC))


def test_touching_windows_do_not_overlap() -> None:
    assert not Window(MAR, JUL).overlaps(Window(JUL, DEC))
    assert not Window(JUL, DEC).overlaps(Window(MAR, JUL))


def test_strictly_overlapping_windows_overlap() -> None:
    assert Window(MAR, JUL + timedelta(microseconds=1)).overlaps(Window(JUL, DEC))
    assert Window(MAR).overlaps(Window(JUL))
    assert Window(MAR, DEC).overlaps(Window(JUL, JUL + timedelta(days=1)))


@pytest.mark.parametrize("end", [MAR, MAR - timedelta(days=1)])
def test_window_must_end_after_it_starts(end: datetime) -> None:
    with pytest.raises(ValidationError, match="later than"):
        Window(MAR, end)


def test_closing_a_window() -> None:
    assert Window(MAR).closed_at(JUL) == Window(MAR, JUL)


def test_digits_below_the_microsecond_are_cut_not_rounded() -> None:
    """docs/decisions.md, "Finer than a microsecond is cut, not rounded"."""
    assert to_utc("2026-03-01T09:00:00.1234567Z") == to_utc("2026-03-01T09:00:00.123456Z")
    last = to_utc("2026-03-01T23:59:59.999999999+00:00")
    assert (last.day, last.microsecond) == (1, 999_999)
