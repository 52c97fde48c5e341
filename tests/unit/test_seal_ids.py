"""A seal is bound to its memory's id: the bytes of that id, read the short way from
its stored text, are the bytes ``UUID`` reads."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erstwhile.eventstore.keys import uuid_bytes

SPELLINGS = (
    str,
    lambda u: str(u).upper(),
    lambda u: u.hex,
    lambda u: "{" + str(u) + "}",
    lambda u: u.urn,
)


@given(st.uuids(), st.sampled_from(SPELLINGS))
def test_every_spelling_uuid_reads_gives_its_bytes(memory_id: UUID, spell: object) -> None:
    text = spell(memory_id)  # type: ignore[operator]
    assert uuid_bytes(text) == UUID(text).bytes == memory_id.bytes


def test_a_uuid_gives_its_own_bytes() -> None:
    memory_id = UUID("01a22a78-0000-7000-8000-000000000001")
    assert uuid_bytes(memory_id) == memory_id.bytes


CANONICAL = "01a22a78-0000-7000-8000-000000000001"


@pytest.mark.parametrize(
    "text",
    [
        "01a22a78-0000-7000-8000-00000000000 ",  # int() reads a trailing space: UUID does
        "{01a22a78000070008000000000000001}",
    ],
)
def test_odd_spellings_uuid_accepts_give_its_bytes(text: str) -> None:
    assert uuid_bytes(text) == UUID(text).bytes


@pytest.mark.parametrize(
    "text",
    [
        "", "not an id", "01a22a78-0000-7000-8000-00000000001", "01a22a78" * 5, "zz" * 16,
        # Whitespace that bytes.fromhex would skip, and UUID refuses:
        " " + CANONICAL, CANONICAL + " ", CANONICAL.replace("-", " ", 1),
        CANONICAL[:8] + "\n" + CANONICAL[9:], "01a22a78 0000 7000 8000 000000000001",
    ],
)  # fmt: skip
def test_text_that_is_no_uuid_is_refused_as_uuid_refuses_it(text: str) -> None:
    with pytest.raises(ValueError):
        UUID(text)
    with pytest.raises(ValueError):
        uuid_bytes(text)
