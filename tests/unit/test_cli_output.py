"""How the command line shows things that are not memories."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest
from rich.console import Console

from erstwhile import Ledger, NotFound, StoreUnavailable
from erstwhile.cli import output
from erstwhile.cli.app import error_message, fail
from erstwhile.cli.output import conflict_table, event_table, proposal_table, show_value
from erstwhile.cli.params import parse_time
from erstwhile.domain.views import LoggedEvent, Proposal
from erstwhile.ledger.core import mask_password


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:///team.db", "sqlite:///team.db"),
        ("postgresql://postgres@db:5432/x?schema=a", "postgresql://postgres@db:5432/x?schema=a"),
        ("postgresql://app:s%40cret@db:5432/x?schema=a", "postgresql://app:***@db:5432/x?schema=a"),
        ("postgresql://:pw@db/x", "postgresql://:***@db/x"),
        ("postgresql://app@db/x?schema=a&password=s3cret&sslmode=require",
         "postgresql://app@db/x?schema=a&password=***&sslmode=require"),
        ("postgresql://db/x?sslpassword=k&application_name=password",
         "postgresql://db/x?sslpassword=***&application_name=password"),
        ("postgresql://db/x?schema=a&pass%77ord=s3cret", "postgresql://db/x?schema=a&pass%77ord=***"),
        ("postgresql://db/x?%70assword=s3cret&passwordless=1",
         "postgresql://db/x?%70assword=***&passwordless=1"),
    ],
)  # fmt: skip
def test_a_store_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert mask_password(url) == shown


def rendered(table: object, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


EVENTS = [
    LoggedEvent(position=n, recorded_at=datetime(2026, 12, 1, 18, 15, n, tzinfo=UTC),
                type="Asserted", memory_id=UUID(int=n), actor="planner-bot", namespace="acme",
                data={"content": f"The team uses database number {n}"})
    for n in (1, 2)
]  # fmt: skip
PROPOSALS = [Proposal(id=UUID(int=7), older_id=UUID(int=8), newer_id=UUID(int=9), confidence=0.5)]


@pytest.mark.parametrize("width", [40, 60, 80])
def test_a_narrow_terminal_shows_every_column_and_whole_ids(width: int) -> None:
    """Where the columns cannot all fit, each row becomes a block of lines: no column
    is squeezed away and no id is broken across lines (so it can be copied)."""
    for table, headers, ids in [
        (event_table(EVENTS), ["recorded at", "actor", "memory / detail"], [UUID(int=1), UUID(int=2)]),
        (proposal_table(PROPOSALS), ["proposal", "newer", "older", "confidence"],
         [UUID(int=7), UUID(int=8), UUID(int=9)]),
    ]:  # fmt: skip
        text = rendered(table, width)
        assert all(header in text for header in headers), text
        assert all(str(i) in text for i in ids), text
        assert "planner-bot" in text or "0.50" in text
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width


def test_a_wide_terminal_keeps_the_table() -> None:
    text = rendered(event_table(EVENTS), 200)
    assert "┃ #" in text and "2026-12-01 18:15:01Z" in text and "planner-bot" in text


@pytest.mark.parametrize(("confidences", "stars"), [((0.9, 0.6), 1), ((0.7, 0.7), 2)])
def test_a_conflict_stars_each_member_as_confident_as_the_highest(
    tmp_path: Path, confidences: tuple[float, float], stars: int
) -> None:
    with Ledger.open(tmp_path / "c.db") as ledger:
        for value, confidence in zip(("Postgres", "MySQL"), confidences, strict=True):
            ledger.remember(f"orion uses {value}", subject="orion", attribute="database",
                            value=value, confidence=confidence)  # fmt: skip
        (conflict,) = ledger.conflicts()
    shown = rendered(conflict_table(conflict), 120)
    assert shown.count("★") == stars + 1  # and the caption's


@pytest.mark.parametrize(
    ("confidences", "starts", "trusted"),
    [
        ((0.9, 0.6), ("2026-01-01", "2026-02-01"), "Postgres"),  # by confidence
        ((0.7, 0.7), ("2026-01-01", "2026-02-01"), "MySQL"),  # by recency
        ((0.7, 0.7), ("2026-01-01", "2026-01-01"), None),  # unresolved
    ],
)
def test_a_conflict_ticks_the_member_its_resolution_recommends(
    tmp_path: Path, confidences: tuple[float, float], starts: tuple[str, str], trusted: str | None
) -> None:
    """Two members tied for the highest confidence are both starred; the tick says
    which one the resolution names (none when it is unresolved)."""
    with Ledger.open(tmp_path / "c.db") as ledger:
        for value, confidence, start in zip(("Postgres", "MySQL"), confidences, starts,
                                            strict=True):  # fmt: skip
            ledger.remember(f"orion uses {value}", subject="orion", attribute="database",
                            value=value, confidence=confidence,
                            valid_from=f"{start}T00:00:00Z")  # fmt: skip
        (conflict,) = ledger.conflicts()
    shown = rendered(conflict_table(conflict), 120)
    ticked = [line for line in shown.splitlines() if "✓" in line and "trust" not in line]
    if trusted is None:
        assert ticked == [] and "✓" not in shown
    else:
        assert len(ticked) == 1 and f"{trusted} ✓" in ticked[0], shown
        assert "✓ the claim to trust" in shown


@pytest.mark.parametrize(
    ("instant", "shown"),
    [
        (datetime(2026, 3, 1, tzinfo=UTC), "2026-03-01"),
        (datetime(2026, 3, 1, 9, 30, tzinfo=UTC), "2026-03-01 09:30:00Z"),
        (datetime(2026, 12, 2, 7, 39, 34, 535288, tzinfo=UTC), "2026-12-02 07:39:34.535288Z"),
        (datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=UTC), "2026-06-30 23:59:59.999999Z"),
        (datetime(1, 1, 1, 0, 0, 1, tzinfo=UTC), "0001-01-01 00:00:01Z"),
    ],
)
def test_an_instant_is_shown_to_the_microsecond_it_has(instant: datetime, shown: str) -> None:
    """What a table shows, copied into --known-at, is the instant itself: three events
    recorded within one second are three instants, not one."""
    assert output.show_instant(instant) == shown
    assert parse_time(shown) == instant


def test_an_error_shows_its_notes_on_its_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A note on an error says what else went wrong, or what to do next (forget again
    after a hard forget whose commit went unheard): the command line prints it too."""

    lost = StoreUnavailable("server closed the connection unexpectedly")
    lost.add_note("the hard forget of memory x may have committed")
    assert error_message(lost) == (
        "server closed the connection unexpectedly; the hard forget of memory x may have committed"
    )
    assert error_message(NotFound("no memory y")) == "no memory y"
    with pytest.raises(SystemExit) as exited:
        fail(error_message(lost), 1)
    assert exited.value.code == 1
    assert capsys.readouterr().err.splitlines() == [f"error: {error_message(lost)}"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, ""),
        ("Supabase", "Supabase"),
        ("two words", "two words"),
        (0, "0"),
        ("0", '"0"'),
        ("null", '"null"'),
        ("", '""'),
        (" ", '" "'),
        ("[1]", '"[1]"'),
        ("2.1", '"2.1"'),
        ({"region": "eu"}, '{"region":"eu"}'),
        (True, "true"),
    ],
)
def test_a_value_is_shown_so_that_no_two_values_look_alike(value: object, shown: str) -> None:
    """Text is shown as it is unless it would read as another value or as none: the
    text ``null`` and no value, or ``"0"`` and ``0``, looked alike in tables."""
    assert show_value(value) == shown
