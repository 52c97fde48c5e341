"""How the command line reads times, values and metadata, and maps errors to exit codes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import typer

from erstwhile import (
    ConcurrencyConflict,
    IdempotencyMismatch,
    Kind,
    NotFound,
    StoreUnavailable,
    SupersessionRefused,
    ValidationError,
)
from erstwhile.cli.app import exit_code
from erstwhile.cli.params import given, parse_kind, parse_metadata, parse_time, parse_value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-15", datetime(2026, 3, 15, tzinfo=UTC)),
        ("2026-03-15T10:30:00Z", datetime(2026, 3, 15, 10, 30, tzinfo=UTC)),
        ("2026-03-15t10:30:00z", datetime(2026, 3, 15, 10, 30, tzinfo=UTC)),
        ("2026-03-15T10:30:00+02:00", datetime(2026, 3, 15, 8, 30, tzinfo=UTC)),
        (" 2026-03-15T10:30:00.000123-05:00 ", datetime(2026, 3, 15, 15, 30, 0, 123, tzinfo=UTC)),
    ],
)
def test_times_are_read_as_aware_utc(text: str, expected: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected and parsed.tzinfo is UTC


@pytest.mark.parametrize("text", ["now", "NOW", " now "])
def test_now_is_the_current_instant(text: str) -> None:
    assert abs(parse_time(text) - datetime.now(UTC)) < timedelta(seconds=5)


@pytest.mark.parametrize(
    "text",
    ["yesterday", "", "2026-02-30", "2026-03-15T10:30:00", "15/03/2026", "2026-3-5", "20260315"],
)
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="is not a time"):
        parse_time(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("AWS", "AWS"),
        ("12", 12),
        ("1.5", 1.5),
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", [1, 2]),
        ("true", True),
        ('"12"', "12"),
        ("null", None),
        ("NaN", "NaN"),
        ("{not json", "{not json"),
        ("", ""),
    ],
)
def test_a_value_is_json_or_else_text(text: str, expected: object) -> None:
    assert parse_value(text) == expected


def test_an_integer_json_cannot_keep_is_refused_not_rounded() -> None:
    assert parse_value(str(2**64 - 1)) == 2**64 - 1 and parse_value(str(-(2**63))) == -(2**63)
    for text in [str(2**64), "123456789012345678901234567890", str(-(2**63) - 1)]:
        with pytest.raises(typer.BadParameter, match="64 bits"):
            parse_value(text)
    assert parse_value('"123456789012345678901234567890"') == "123456789012345678901234567890"


@pytest.mark.parametrize(
    "text",
    ['{"order_id": 123456789012345678901}', f"[{2**64}, 1]", f'{{"a": [{{"b": {-(2**63) - 1}}}]}}'],
)
def test_an_integer_json_cannot_keep_is_refused_wherever_it_nests(text: str) -> None:
    """orjson reads such an integer as a float: it was stored rounded, without a word."""
    with pytest.raises(typer.BadParameter, match="64 bits"):
        parse_value(text)
    with pytest.raises(typer.BadParameter, match="64 bits"):
        parse_metadata(f'{{"n": {text}}}')
    assert parse_value(f'{{"n": {2**64 - 1}}}') == {"n": 2**64 - 1}


@pytest.mark.parametrize("text", ["1e999", "[1, -1e400]", '{"a": {"b": 1e999}}'])
def test_a_number_no_double_holds_is_refused_not_kept_as_text(text: str) -> None:
    """It is JSON, so it is not the text it spells; nor can the log keep it."""
    with pytest.raises(typer.BadParameter, match="beyond what a JSON number can hold"):
        parse_value(text)
    with pytest.raises(typer.BadParameter, match="beyond what a JSON number can hold"):
        parse_metadata(f'{{"n": {text}}}')
    assert parse_value("1e308") == 1e308 and parse_value("about 1e999") == "about 1e999"
    for text in ("1e999 bottles", "[1e999", "1e999x", "[NaN, 1e999]"):  # not JSON: text
        assert parse_value(text) == text
    huge = "1" + "0" * 5000  # past Python's own limit on the digits of an integer
    for given_text in (huge, f"[{huge}]"):
        with pytest.raises(typer.BadParameter, match=r"10000000000000000000\.\.\.0+ is beyond"):
            parse_value(given_text)
    for depth in (990, 1100):
        with pytest.raises(typer.BadParameter, match="nested too deeply"):
            parse_value("[" * depth + "1e999" + "]" * depth)
        with pytest.raises(typer.BadParameter, match="nested too deeply"):
            parse_value("[" * depth + "1" + "]" * depth)


def test_json_nested_past_the_parsers_depth_is_a_usage_error() -> None:
    with pytest.raises(typer.BadParameter, match="nested too deeply"):
        parse_value("[" * 1000 + "]" * 1000)


def test_a_key_given_twice_in_a_json_object_is_a_usage_error_not_the_last_one_kept() -> None:
    """orjson keeps the last of two values of one key; the other was dropped unsaid."""
    with pytest.raises(typer.BadParameter, match="the key 'a' is given twice"):
        parse_metadata('{"a": 1, "a": 2}')
    with pytest.raises(typer.BadParameter, match="the key 'c' is given twice"):
        parse_value('{"b": [{"c": 1, "d": 2, "c": 1}]}')
    assert parse_value('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]  # one key per object


def test_metadata_must_be_a_json_object() -> None:
    assert parse_metadata('{"source": "chat", "n": [1]}') == {"source": "chat", "n": [1]}
    for text in ["[1]", "12", '"x"', "{source: chat}", ""]:
        with pytest.raises(typer.BadParameter, match="not a JSON object"):
            parse_metadata(text)


def test_given_keeps_only_the_options_the_user_gave() -> None:
    kept = given(kind=None, value=0, confidence=0.0, entities=[], evidence=["e"], subject="")
    assert kept == {"value": 0, "confidence": 0.0, "evidence": ["e"], "subject": ""}
    # An empty JSON list or object is a value the user gave, unlike an unused repeatable.
    assert given(value=[], metadata={}, supersedes=()) == {"value": [], "metadata": {}}


def test_conflicts_exit_3_and_other_errors_exit_1() -> None:
    assert exit_code(ConcurrencyConflict("raced")) == 3
    for error in (
        NotFound("x"),
        ValidationError("x"),
        SupersessionRefused("self", "x"),
        IdempotencyMismatch("x"),
        StoreUnavailable("x"),
    ):
        assert exit_code(error) == 1


def test_kinds_are_read_case_insensitively_and_unknown_ones_are_usage_errors() -> None:
    assert parse_kind(" Decision ") is Kind.DECISION
    with pytest.raises(typer.BadParameter, match="'rumour' is not a kind; use one of fact, "):
        parse_kind("rumour")
