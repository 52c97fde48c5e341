"""Planning a batch of writes into events, without any store."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from erstwhile import NotFound, SupersessionRefused, ValidationError
from erstwhile.domain.events import Asserted, Superseded
from erstwhile.domain.ids import IdSequence, uuid7
from erstwhile.domain.memory import Kind, State, claim_of
from erstwhile.domain.time import Window, to_micros
from erstwhile.domain.writes import Existing, WritePlan, fingerprint, plan_writes

RECORDED = datetime(2026, 9, 1, tzinfo=UTC)
MAR = datetime(2026, 3, 1, tzinfo=UTC)
JUL = datetime(2026, 7, 1, tzinfo=UTC)


def existing(version: int = 1) -> Existing:
    return Existing(
        uuid4(), Kind.FACT, State.CURRENT, Window(MAR), claim_of("t", "a", 1, "one"), version, 1
    )


def test_a_supersession_asserts_then_closes_the_older_at_the_newer_start() -> None:
    older = existing(version=3)
    plan = WritePlan.parse(
        {"content": "two", "value": 2, "valid_from": JUL, "supersedes": [older.id]}
    )
    new_id = uuid4()
    events = plan_writes([plan], [new_id], {older.id: older}, RECORDED)
    assert [type(e) for e in events] == [Superseded, Asserted]
    superseded, asserted = events
    assert isinstance(asserted, Asserted) and isinstance(superseded, Superseded)
    assert asserted.valid_from == JUL and asserted.supersedes == (older.id,)
    assert superseded.originator_id == older.id and superseded.originator_version == 4
    assert superseded.newer_id == new_id and superseded.at == JUL


def test_default_start_is_the_recording_instant() -> None:
    plan = WritePlan.parse({"content": "x"})
    (asserted,) = plan_writes([plan], [uuid4()], {}, RECORDED)
    assert isinstance(asserted, Asserted) and asserted.valid_from == RECORDED


def test_one_batch_cannot_supersede_the_same_memory_twice() -> None:
    older = existing()
    plans = [
        WritePlan.parse({"content": f"v{n}", "value": n + 10, "supersedes": [older.id]})
        for n in range(2)
    ]
    with pytest.raises(SupersessionRefused) as refused:
        plan_writes(plans, [uuid4(), uuid4()], {older.id: older}, RECORDED)
    assert refused.value.reason == "already_superseded"


def test_fingerprint_is_stable_and_payload_sensitive() -> None:
    first = WritePlan.parse({"content": "x", "idempotency_key": "k1"})
    again = WritePlan.parse({"content": "x", "idempotency_key": "k2"})
    other = WritePlan.parse({"content": "y", "idempotency_key": "k1"})
    assert first.fingerprint == again.fingerprint != other.fingerprint


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"content": "x", "policy": "last_one_wins"}, ValidationError),
        ({"content": "x", "idempotency_key": ""}, ValidationError),
        ({"content": "x", "idempotency_key": 7}, ValidationError),
        ({"content": "x", "observed_position": -1}, ValidationError),
        ({"content": "x", "observed_position": "3"}, ValidationError),
        ({"content": "x", "supersedes": ["not-a-uuid"]}, NotFound),
    ],
)
def test_control_arguments_are_checked(
    arguments: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        WritePlan.parse(arguments)


def test_uuid7_layout_and_order() -> None:
    earlier = uuid7(MAR, bytes(10))
    later = uuid7(JUL, bytes(10))
    assert earlier.version == 7 and earlier.variant == "specified in RFC 4122"
    assert earlier < later


def test_ids_never_go_backwards_whatever_the_clock_does() -> None:
    """Ids issued in one millisecond, after the clock stepped back, or before 1970 (which
    a UUIDv7 cannot hold) still sort in the order they were issued."""
    sequence = IdSequence()
    issued = sequence.issue(JUL, 500)  # one millisecond
    issued += sequence.issue(MAR, 3)  # the clock stepped back
    issued += sequence.issue(datetime(1969, 12, 31, 23, 59, tzinfo=UTC), 2)
    issued += sequence.issue(datetime(1970, 1, 1, 0, 1, tzinfo=UTC), 2)
    assert issued == sorted(issued) and len(set(issued)) == len(issued)
    assert {i.version for i in issued} == {7}
    assert {i.variant for i in issued} == {"specified in RFC 4122"}
    assert (
        sequence.issue(datetime(2030, 1, 1, tzinfo=UTC), 1)[0].int >> 80
        == to_micros(datetime(2030, 1, 1, tzinfo=UTC)) // 1000
    )  # the clock moved past the last one: its own millisecond again


def test_a_whole_number_is_one_payload_to_the_fingerprint_however_spelled() -> None:
    """JSON does not tell ``12`` from ``12.0``: a retry that went through JSON matches
    its first call. A claim digested before the two spellings were made one (its
    fingerprint spelled as given) still matches a retry spelled the same way."""

    def plan(value: object, metadata: object = None) -> WritePlan:
        return WritePlan.parse({"content": "price", "value": value, "metadata": metadata,
                                "idempotency_key": "k"})  # fmt: skip

    first = plan(12.0, {"n": [1.0, 2.5]})
    assert first.fingerprint == plan(12, {"n": [1, 2.5]}).fingerprint
    assert first.fingerprint != plan(12.5, {"n": [1, 2.5]}).fingerprint
    assert first.fingerprint != plan(12, {"n": [1, 2.25]}).fingerprint
    earlier = fingerprint(first.draft, (), "propose", whole_numbers=False)
    assert earlier != first.fingerprint and first.earlier_fingerprint == earlier
    assert first.matches(earlier) and first.matches(first.fingerprint)
    assert not plan(13.0, {"n": [1.0, 2.5]}).matches(earlier)
    assert plan("12").earlier_fingerprint == "" and not plan("12").matches("")
