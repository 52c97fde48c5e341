"""Every input rule of the contract, refused with a clear message."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from erstwhile import ValidationError
from erstwhile.domain.memory import (
    MAX_CONTENT_BYTES,
    MAX_ENTITIES_BYTES,
    MAX_METADATA_BYTES,
    MAX_VALUE_BYTES,
    Kind,
    normalise_entities,
    parse_draft,
)


def nested(depth: int) -> Any:
    """A list nested ``depth`` levels deep."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


BAD_INPUTS: list[tuple[dict[str, Any], str]] = [
    ({"content": ""}, "content must not be empty"),
    ({"content": "   \n"}, "content must not be empty"),
    ({"content": "a\x00b"}, "NUL"),
    ({"content": "x" * (MAX_CONTENT_BYTES + 1)}, "64 KiB"),
    ({"content": "é" * (MAX_CONTENT_BYTES // 2 + 1)}, "64 KiB"),
    ({"content": "x", "kind": "rumour"}, "unknown kind 'rumour'"),
    ({"content": "x", "valid_from": datetime(2026, 3, 1)}, "naive"),
    ({"content": "x", "valid_until": "2026-03-01T00:00:00"}, "naive"),
    ({"content": "x", "occurred_at": "yesterday"}, "ISO 8601"),
    ({"content": "x", "valid_from": "2026-03-01T00:00:00Z\x00"}, "ISO 8601"),
    (
        {
            "content": "x",
            "valid_from": "2026-03-01T00:00:00Z",
            "valid_until": "2026-03-01T00:00:00Z",
        },
        "later than",
    ),
    (
        {
            "content": "x",
            "valid_from": "2026-03-02T00:00:00Z",
            "valid_until": "2026-03-01T00:00:00Z",
        },
        "later than",
    ),
    (
        {
            "content": "x",
            "occurred_at": "2026-03-02T00:00:00Z",
            "valid_until": "2026-03-01T00:00:00Z",
        },
        "later than",
    ),
    ({"content": "x", "kind": "event", "valid_until": "2026-03-01T00:00:00Z"}, "never closes"),
    ({"content": "x", "confidence": float("nan")}, "between 0 and 1"),
    ({"content": "x", "confidence": float("inf")}, "between 0 and 1"),
    ({"content": "x", "confidence": 1.5}, "between 0 and 1"),
    ({"content": "x", "confidence": -0.1}, "between 0 and 1"),
    ({"content": "x", "confidence": 10**400}, r"between 0 and 1, got 1000.*\(401 characters\)"),
    ({"content": "x", "confidence": -(10**309)}, "between 0 and 1"),
    ({"content": "x", "confidence": "high"}, "a float or an int"),
    ({"content": "x", "confidence": True}, "a float or an int"),
    ({"content": "x", "confidence": Decimal("0.5")}, r"a float or an int .* got Decimal\('0.5'\)"),
    ({"content": "x", "value": {1, 2}}, "not a JSON value"),
    ({"content": "x", "value": float("nan")}, "not a JSON number"),
    ({"content": "x", "value": {"a": object()}}, "not a JSON value"),
    ({"content": "x", "value": {1: "a"}}, "keys must be text"),
    ({"content": "x", "value": "a\x00"}, "NUL"),
    ({"content": "x", "metadata": {"blob": "x" * MAX_METADATA_BYTES}}, "16 KiB"),
    ({"content": "x", "value": "x" * (MAX_VALUE_BYTES - 1)}, "value is larger than"),
    ({"content": "x", "value": [f"w{n}" for n in range(20_000)]}, "value is larger than"),
    # Refused by size before the walk reaches what is not JSON (a million numbers were
    # walked and encoded to be refused), and by the exact size where characters alone
    # stay under the limit.
    ({"content": "x", "value": [0] * 1_000_000 + [object()]}, "value is larger than"),
    ({"content": "x", "metadata": {"blob": "x" * MAX_METADATA_BYTES, "at": object()}}, "16 KiB"),
    ({"content": "x", "value": "漢" * 30_000}, "value is larger than"),
    ({"content": "x", "entities": [f"e{n}" for n in range(4_000)]}, "entities take more"),
    ({"content": "x", "metadata": {"when": datetime(2026, 1, 1, tzinfo=UTC)}}, "JSON"),
    ({"content": "x", "metadata": ["not", "an", "object"]}, "metadata"),
    ({"content": "x", "subject": "a\x00"}, "NUL"),
    ({"content": "x", "subject": "  "}, "blank"),
    ({"content": "x", "entities": "Berlin"}, "list of names"),
    ({"content": "x", "entities": [3]}, "text"),
    ({"content": "x", "evidence": "https://example.org"}, "not one string"),
    ({"content": "x", "evidence": [""]}, "blank"),
    ({"content": "x", "entities": ["Berlin", " "]}, "entities must not be blank"),
    ({"content": "x", "colour": "red"}, "unknown argument"),
    # What the log's encoder or the stores cannot hold is refused up front.
    ({"content": "x", "value": 2**64}, "64 bits"),
    ({"content": "x", "value": [-(2**63) - 1]}, "64 bits"),
    ({"content": "x", "metadata": {"n": 2**64}}, "64 bits"),
    ({"content": "x", "value": nested(201)}, "at most 200 levels"),
    ({"content": "x", "metadata": {"deep": nested(200)}}, "at most 200 levels"),
    ({"content": "x", "value": "\ud800"}, "surrogate"),
    ({"content": "x", "metadata": {"\udfff": 1}}, "surrogate"),
    ({"content": "x\ud800"}, "surrogate"),
    ({"content": "x", "subject": "\ud800"}, "surrogate"),
    ({"content": "x", "entities": ["\ud800"]}, "surrogate"),
    ({"content": "x", "evidence": ["\ud800"]}, "surrogate"),
    ({"content": "x", "valid_from": "9999-12-31T23:00:00-05:00"}, "years 1 to 9999"),
    ({"content": "x", "occurred_at": "0001-01-01T00:00:00+01:00"}, "years 1 to 9999"),
    # Arguments of the wrong type, named (not a raw TypeError, nor silently converted).
    ({"content": b"The team uses Neon"}, "content: Input should be a valid string"),
    ({"content": "x", "subject": b"team"}, "subject: Input should be a valid string"),
    ({"content": "x", "extractor_id": b"model-1"}, "extractor_id: Input should be a valid string"),
    ({"content": "x", "entities": 5}, "entities must be a list of names, got int"),
    # Within 1,024 characters, but over what PostgreSQL's B-tree takes in an index row.
    ({"content": "x", "subject": "漢" * 300}, "subject is longer than 768 bytes"),
    ({"content": "x", "attribute": "é" * 400}, "attribute is longer than 768 bytes"),
    ({"content": "x", "entities": ["ok", "漢" * 5000]}, "an entity is longer than 768 bytes"),
    ({"content": "x", "entities": {"Berlin": 1}}, "entities must be a list of names, got dict"),
    ({"content": "x", "evidence": 5}, "evidence must be a list of ids or URIs, got int"),
    ({"content": "x", "evidence": [5]}, "evidence items must be ids or URIs"),
    (
        {"content": "x", "evidence": [f"https://example.org/{n}" + "x" * 990 for n in range(17)]},
        "evidence takes more than 16384 bytes",
    ),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_INPUTS)
def test_bad_input_is_refused_clearly(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message) as refused:
        parse_draft(arguments)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"confidence": 2}, "confidence must be between 0 and 1, got 2"),
        ({"evidence": [""]}, "evidence items must not be blank"),
        ({"metadata": 3}, "metadata: Input should be a valid dictionary"),
    ],
)
def test_a_message_naming_its_field_is_not_prefixed_with_it_again(
    arguments: dict[str, Any], message: str
) -> None:
    """``confidence: confidence must be between 0 and 1`` said the field twice."""
    with pytest.raises(ValidationError) as refused:
        parse_draft({"content": "x", **arguments})
    assert str(refused.value) == message


def test_defaults() -> None:
    draft = parse_draft({"content": "The sky is blue"})
    assert draft.kind is Kind.FACT
    assert draft.confidence == 1.0
    assert draft.valid_from is None and draft.valid_until is None


def test_entities_are_trimmed_case_folded_and_deduplicated() -> None:
    assert normalise_entities(["  Berlin ", "BERLIN", "New  York", "", "lisbon"]) == [
        "berlin",
        "new york",
        "lisbon",
    ]
    assert parse_draft({"content": "x", "entities": ["Ada ", "ada"]}).entities == ("ada",)


def test_window_start_defaults_to_occurred_at_then_to_recording() -> None:
    recorded = datetime(2026, 9, 1, tzinfo=UTC)
    occurred = parse_draft({"content": "x", "occurred_at": "2026-04-01T00:00:00Z"})
    assert occurred.window_from(recorded).start == datetime(2026, 4, 1, tzinfo=UTC)
    assert parse_draft({"content": "x"}).window_from(recorded).start == recorded


def test_valid_until_before_the_recording_instant_is_refused_when_start_defaults() -> None:
    """The refusal names where the window started: it said ``valid_from (...)``,
    quoting an instant the writer never gave."""
    draft = parse_draft({"content": "x", "valid_until": "2026-01-01T00:00:00Z"})
    with pytest.raises(ValidationError, match=r"later than the recording instant \(2026-09-01"):
        draft.window_from(datetime(2026, 9, 1, tzinfo=UTC))
    with pytest.raises(
        ValidationError, match=r"later than occurred_at \(2026-02-01.*no valid_from"
    ):
        parse_draft({"content": "x", "valid_until": "2026-01-01T00:00:00Z",
                     "occurred_at": "2026-02-01T00:00:00Z"})  # fmt: skip
    with pytest.raises(ValidationError, match=r"later than valid_from \(2026-03-01[^,]*\)$"):
        parse_draft({"content": "x", "valid_until": "2026-01-01T00:00:00Z",
                     "valid_from": "2026-03-01T00:00:00Z", "occurred_at": "2025-01-01T00:00:00Z"})  # fmt: skip


def test_json_values_of_every_shape_are_accepted() -> None:
    for value in ["AWS", 12, 12.5, True, None, [1, "a"], {"region": "eu", "n": [1]}]:
        assert parse_draft({"content": "x", "value": value}).value == value


def test_a_value_and_entities_at_their_limits_are_taken() -> None:
    """The limits count JSON bytes: a string's two quotes, a list's brackets and commas."""
    at_limit = parse_draft({"content": "x", "value": "x" * (MAX_VALUE_BYTES - 2)})
    assert len(at_limit.value) == MAX_VALUE_BYTES - 2
    names = [f"e{n:05}" for n in range(MAX_ENTITIES_BYTES // 9)]  # "e00000", is 9 bytes
    assert len(parse_draft({"content": "x", "entities": names}).entities) == len(names)
