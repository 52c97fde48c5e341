"""What the log stores around each event, and the hash that chains the events together."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import orjson

from erstwhile.domain.time import from_micros, to_micros

EVENT_COLUMNS = (
    "position, originator_id, originator_version, topic, schema_version, state, "
    "recorded_at, actor, namespace, hash"
)
"""The events table's columns, in the order :meth:`RecordedEvent.as_row` gives values."""

GENESIS_HASH = bytes(32)
"""The "previous hash" of the first event in a log."""


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One stored event with everything the store put around its payload."""

    position: int
    recorded_at: datetime
    memory_id: UUID
    version: int
    topic: str
    schema_version: int
    actor: str
    namespace: str
    payload: bytes
    hash: bytes
    memory_key: str = field(default="", compare=False, repr=False)
    """The memory id as text, as SQL wants it (derived once, not at every use)."""
    recorded_micros: int = field(default=-1, compare=False, repr=False)
    """``recorded_at`` in its stored integer form (derived once, not at every use)."""

    def __post_init__(self) -> None:
        if not self.memory_key:
            object.__setattr__(self, "memory_key", str(self.memory_id))
        if self.recorded_micros < 0:
            object.__setattr__(self, "recorded_micros", to_micros(self.recorded_at))

    def with_hash(self, digest: bytes) -> RecordedEvent:
        """Return this event carrying ``digest`` as its hash (three times cheaper than
        ``dataclasses.replace``, and the derived fields are handed over, not derived again)."""
        return RecordedEvent(
            self.position, self.recorded_at, self.memory_id, self.version, self.topic,
            self.schema_version, self.actor, self.namespace, self.payload, digest,
            self.memory_key, self.recorded_micros,
        )  # fmt: skip

    @property
    def type(self) -> str:
        """The event's type name, e.g. ``Asserted``."""
        return self.topic.rsplit(":", 1)[-1].rsplit(".", 1)[-1]

    def as_row(self, memory_id: Any) -> tuple[Any, ...]:
        """The values of an insert into the events table, in ``EVENT_COLUMNS`` order;
        ``memory_id`` is the id as the backend stores it (text or uuid)."""
        return (
            self.position, memory_id, self.version, self.topic, self.schema_version,
            self.payload, self.recorded_micros, self.actor, self.namespace, self.hash,
        )  # fmt: skip

    @classmethod
    def from_row(cls, row: Any) -> RecordedEvent:
        """Build from a row of the events table (both backends name columns alike).

        The memory id's text is the id as stored (SQLite keeps text, PostgreSQL a
        ``uuid``, spelled out once): the hash chain covers it as stored, so an id
        rewritten to another spelling of the same UUID fails verification, and neither
        backend's id is parsed or printed twice (1% of a rebuild's instructions)."""
        micros, stored_id = row["recorded_at"], row["originator_id"]
        text = stored_id if type(stored_id) is str else str(stored_id)
        return cls(
            position=row["position"],
            recorded_at=from_micros(micros),
            memory_id=stored_id if type(stored_id) is UUID else UUID(text),
            version=row["originator_version"],
            topic=row["topic"],
            schema_version=row["schema_version"],
            actor=row["actor"],
            namespace=row["namespace"],
            payload=_as_bytes(row["state"]),
            hash=_as_bytes(row["hash"]),
            memory_key=text,
            recorded_micros=micros,
        )


def _as_bytes(value: Any) -> bytes:
    """Stored payloads and hashes are bytes; a row changed behind the ledger's back may
    hold text instead, which must still be read (and then fail verification)."""
    if type(value) is bytes:
        return value
    return value.encode() if isinstance(value, str) else bytes(value)


def chain_hash(previous: bytes, event: RecordedEvent) -> bytes:
    """Return the SHA-256 linking ``event`` to the event before it.

    It covers the previous hash, the event's own position, recorded_at, type, memory id,
    version, actor and namespace, and its payload bytes exactly as stored.
    """
    header = orjson.dumps(
        [
            event.position,
            event.recorded_micros,
            event.topic,
            event.schema_version,
            event.memory_key,
            event.version,
            event.actor,
            event.namespace,
        ]
    )
    digest = hashlib.sha256(previous)
    digest.update(len(header).to_bytes(4, "big"))
    digest.update(header)
    digest.update(event.payload)
    return digest.digest()


class IdempotencyClaim(NamedTuple):
    """A write's idempotency key, the fingerprint of its payload and the memory it made."""

    namespace: str
    key: str
    fingerprint: str
    memory_id: UUID


class LogTip(NamedTuple):
    """The last stored event's position, instant and hash (or the genesis values)."""

    position: int
    recorded_at: int | None
    hash: bytes
