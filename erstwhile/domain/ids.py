"""Memory ids: UUIDs in the version 7 layout, so ids sort by creation time."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from erstwhile.domain.time import to_micros


def uuid7(instant: datetime, random_bytes: bytes) -> UUID:
    """Return a UUIDv7 for ``instant`` (milliseconds) with 10 bytes of caller randomness.

    The randomness is passed in so that this stays a pure function.
    """
    if len(random_bytes) < 10:
        raise ValueError("uuid7 needs 10 random bytes")
    millis = to_micros(instant) // 1000
    value = (millis & 0xFFFF_FFFF_FFFF) << 80
    rand = int.from_bytes(random_bytes[:10], "big")
    rand_a = (rand >> 62) & 0x0FFF
    rand_b = rand & 0x3FFF_FFFF_FFFF_FFFF
    value |= 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return UUID(int=value)
