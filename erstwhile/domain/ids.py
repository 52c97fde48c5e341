"""Memory ids: UUIDs in the version 7 layout, so ids sort by creation time."""

from __future__ import annotations

import os
import re
import threading
from datetime import datetime
from uuid import UUID

from erstwhile.domain.time import to_micros

ID_TEXT = re.compile(
    r"(?:urn:uuid:)?(\{)?([0-9a-f]{8}(-?)[0-9a-f]{4}\3[0-9a-f]{4}\3[0-9a-f]{4}\3[0-9a-f]{12})"
    r"(?(1)\})",
    re.IGNORECASE | re.ASCII,
)
"""An id as text: 32 ASCII hex digits, with the four dashes or none, optionally in
braces or after ``urn:uuid:`` (in any case)."""

UUID_VERSION = 7
"""The version every memory id has (RFC 9562's UUIDv7)."""
RANDOM_BITS = 74
"""A UUIDv7's bits besides its 48-bit millisecond, version and variant: ``rand_a`` (12)
and ``rand_b`` (62)."""


def parse_id(text: str) -> UUID | None:
    """Return the id ``text`` spells (surrounding whitespace aside), or ``None``.

    Stricter than ``UUID(text)``, which drops ``urn:``, ``uuid:``, braces and dashes
    wherever they stand and reads the rest with ``int(..., 16)``: that takes other
    scripts' digits, underscores and padding, so " 1a2..." named the id "01a2..."."""
    found = ID_TEXT.fullmatch(text.strip())
    return UUID(found.group(2)) if found else None


def uuid7(instant: datetime, random_bytes: bytes) -> UUID:
    """Return a UUIDv7 for ``instant`` (milliseconds) with 10 bytes of caller randomness.

    The randomness is passed in so that this stays a pure function.
    """
    if len(random_bytes) < 10:
        raise ValueError("uuid7 needs 10 random bytes")
    return _layout(_millis(instant), int.from_bytes(random_bytes[:10], "big") >> 6)


class IdSequence:
    """Issues UUIDv7s that never go backwards, however the clock moves.

    A UUIDv7 made from the clock alone sorts by creation time only to the millisecond
    and only while the clock moves forward: ids made in the same millisecond (a batch)
    sort at random, and after the clock steps back a later memory sorts first. As RFC
    9562 allows (section 6.2, "monotonic random"), an id that would not sort after the
    last one issued is that one's millisecond with its random part increased instead,
    so ids follow the order this process made them in. (Processes each keep their own
    order; between hosts, ids follow their clocks.)
    """

    def __init__(self) -> None:
        self._last = (0, -1)
        self._lock = threading.Lock()

    def issue(self, instant: datetime, count: int) -> list[UUID]:
        """Return ``count`` new ids for memories made at ``instant``, in increasing order."""
        millis = _millis(instant)
        issued = []
        with self._lock:
            last_millis, last_random = self._last
            for _ in range(count):
                random = int.from_bytes(os.urandom(10), "big") >> 6
                if (millis, random) <= (last_millis, last_random):
                    # Increase by a random step (up to 2**32), as the RFC suggests, so the
                    # next id is not one guess away; past the last value, the next millisecond.
                    step = 1 + (random & 0xFFFF_FFFF)
                    millis, random = last_millis, last_random + step
                    if random >= 1 << RANDOM_BITS:
                        millis, random = last_millis + 1, random & ((1 << 32) - 1)
                issued.append(_layout(millis, random))
                last_millis, last_random = millis, random
            self._last = (last_millis, last_random)
        return issued


def _millis(instant: datetime) -> int:
    """The instant's Unix milliseconds as a UUIDv7 holds them: 48 bits, none before 1970
    (an instant before the epoch has the epoch's, rather than wrapping round to the
    largest)."""
    return min(max(to_micros(instant) // 1000, 0), (1 << 48) - 1)


def _layout(millis: int, random: int) -> UUID:
    """Lay out a UUIDv7: 48 bits of milliseconds, the version, 12 random bits, the
    variant, 62 random bits."""
    rand_a, rand_b = random >> 62, random & ((1 << 62) - 1)
    return UUID(int=millis << 80 | UUID_VERSION << 76 | rand_a << 64 | 0b10 << 62 | rand_b)


MEMORY_IDS = IdSequence()
"""The ids of every memory this process asserts, whichever ledger it opened."""
