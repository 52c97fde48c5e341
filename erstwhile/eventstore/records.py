"""What the log stores around each event, and the hash that chains the events together."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

import orjson

from erstwhile.domain.time import LAST_INSTANT, from_micros, to_micros

EVENT_COLUMNS = (
    "position, originator_id, originator_version, topic, schema_version, state, "
    "recorded_at, actor, namespace, hash"
)
"""The events table's columns, in the order :meth:`RecordedEvent.as_row` gives values."""

EARLIEST_MICROS = to_micros(datetime.min.replace(tzinfo=UTC))
LATEST_MICROS = to_micros(LAST_INSTANT)
"""The stored instants a ``datetime`` can hold."""

GENESIS_HASH = bytes(32)
"""The "previous hash" of the first event in a log."""


class RecordedEvent:
    """One stored event with everything the store put around its payload.

    Its fields are the stored forms (the recorded instant in microseconds, the memory id
    as text), which are what the hash chain and the folds use. The instant as a
    ``datetime`` and the id as a ``UUID`` are derived on first use, or handed over by
    the writer that has them: a rebuild reads every record and most are never asked for
    either (parsing both took a third of building a record from its row).

    A record is never changed once shared (an append sets a new record's ``hash`` once,
    while stamping it, before anything else holds it), but it is not a frozen
    dataclass: building one through ``object.__setattr__``, as a frozen dataclass does,
    cost another fifth of reading it. Records compare and hash by their stored forms.
    """

    __slots__ = (
        "_memory_id",
        "_recorded_at",
        "actor",
        "hash",
        "memory_key",
        "namespace",
        "payload",
        "position",
        "recorded_micros",
        "schema_version",
        "topic",
        "version",
    )

    def __init__(
        self,
        position: int,
        recorded_micros: int,
        memory_key: str,
        version: int,
        topic: str,
        schema_version: int,
        actor: str,
        namespace: str,
        payload: bytes,
        hash: bytes,
        *,
        memory_id: UUID | None = None,
        recorded_at: datetime | None = None,
    ) -> None:
        self.position = position
        self.recorded_micros = recorded_micros
        """``recorded_at`` in its stored integer form."""
        self.memory_key = memory_key
        """The memory id as text, as stored and as SQL wants it."""
        self.version = version
        self.topic = topic
        self.schema_version = schema_version
        self.actor = actor
        self.namespace = namespace
        self.payload = payload
        self.hash = hash
        self._memory_id = memory_id
        self._recorded_at = recorded_at

    @property
    def memory_id(self) -> UUID:
        """The id of the memory the event belongs to."""
        if self._memory_id is None:
            self._memory_id = UUID(self.memory_key)
        return self._memory_id

    @property
    def recorded_at(self) -> datetime:
        """When the log recorded the event (aware, UTC)."""
        if self._recorded_at is None:
            self._recorded_at = from_micros(self.recorded_micros)
        return self._recorded_at

    def _stored(self) -> tuple[Any, ...]:
        return (
            self.position, self.recorded_micros, self.memory_key, self.version, self.topic,
            self.schema_version, self.actor, self.namespace, self.payload, self.hash,
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordedEvent):
            return NotImplemented
        return self._stored() == other._stored()

    def __hash__(self) -> int:
        return hash(self._stored())

    def __repr__(self) -> str:
        # The stored forms only: a repr must not fail on a row it is asked to show.
        return (
            f"RecordedEvent(position={self.position}, recorded_micros={self.recorded_micros!r}, "
            f"memory_key={self.memory_key!r}, version={self.version}, topic={self.topic!r}, "
            f"schema_version={self.schema_version}, actor={self.actor!r}, "
            f"namespace={self.namespace!r}, payload={self.payload!r}, hash={self.hash!r})"
        )

    @property
    def memory_ref(self) -> UUID | str:
        """The memory id as parsed already, else its text (for a reader, such as
        pydantic, that parses it faster than ``UUID`` does)."""
        return self._memory_id if self._memory_id is not None else self.memory_key

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
        backend's id is parsed or printed twice."""
        micros, stored_id = row["recorded_at"], row["originator_id"]
        # Checked here, though parsed only when asked for: SQLite keeps any type in any
        # column, and a fold uses the number as it is.
        if type(micros) is not int:
            raise TypeError(f"recorded_at is {micros!r}, not an integer")
        if not EARLIEST_MICROS <= micros <= LATEST_MICROS:
            raise ValueError(f"recorded_at is {micros}, outside the years 1 to 9999")
        text = stored_id if type(stored_id) is str else str(stored_id)
        memory_id = stored_id if type(stored_id) is UUID else None
        return cls(
            row["position"], micros, text, row["originator_version"], row["topic"],
            row["schema_version"], row["actor"], row["namespace"], _as_bytes(row["state"]),
            _as_bytes(row["hash"]), memory_id=memory_id,
        )  # fmt: skip


def _as_bytes(value: Any) -> bytes:
    """Stored payloads and hashes are bytes; a row changed behind the ledger's back may
    hold text instead, which must still be read (and then fail verification)."""
    if type(value) is bytes:
        return value
    return value.encode() if isinstance(value, str) else bytes(value)


def chain_hash(previous: bytes, event: RecordedEvent) -> bytes:
    """Return the SHA-256 linking ``event`` to the event before it.

    It covers the previous hash, the event's own position, recorded_at, type, memory id,
    version, actor and namespace, and its payload bytes exactly as stored; never the
    event's own ``hash``, so a stored event is checked as it was read.
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
