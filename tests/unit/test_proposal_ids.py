"""A proposal's id is the UUIDv5 of its pair; folds compute its text the short way."""

from __future__ import annotations

from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from erstwhile.domain.events import proposal_id, proposal_key


@given(st.uuids(), st.uuids())
def test_the_short_way_gives_the_text_of_the_uuid5(older: UUID, newer: UUID) -> None:
    assert proposal_key(str(older), str(newer)) == str(proposal_id(older, newer))


def test_a_known_pair_keeps_its_id() -> None:
    """Stored proposals and ``ProposalRejected`` events name pairs by this id: it must
    never change."""
    older = UUID("01a22a78-0000-7000-8000-000000000001")
    newer = UUID("01a22a78-0000-7000-8000-000000000002")
    expected = "334b1919-3686-5aa5-bcc9-17fe5ef1384b"
    assert str(proposal_id(older, newer)) == proposal_key(str(older), str(newer)) == expected
    assert UUID(expected).version == 5 and UUID(expected).variant == "specified in RFC 4122"
