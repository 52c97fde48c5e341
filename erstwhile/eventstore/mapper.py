"""Turning domain events into stored bytes and back, on eventsourcing's Mapper.

Payloads are orjson bytes of the pydantic event. A payload written by an older schema
carries its ``class_version``; reading it runs the event class's ``upcast_vN_vN+1``
methods in order, the eventsourcing convention, so old logs keep reading.
"""

from __future__ import annotations

from typing import Any, cast
from uuid import UUID

import orjson
import pydantic
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder, Transcoding
from eventsourcing.utils import TopicError, get_topic

from erstwhile.domain.errors import StoreUnavailable
from erstwhile.domain.events import LEDGER_EVENTS, LedgerEvent
from erstwhile.eventstore.keys import SENSITIVE_FIELDS, seal, unseal

DECODE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, TopicError, StoreUnavailable)
"""What :meth:`PydanticMapper.decode` raises on a payload the ledger never wrote: not
JSON (orjson's error is a ValueError), not an object, fields missing or of the wrong
type (pydantic's is one too), an unknown topic, a seal that does not open."""


EVENT_CLASSES: dict[str, type[LedgerEvent]] = {get_topic(cls): cls for cls in LEDGER_EVENTS}
"""The event classes by topic: a stored topic names one of these or none (resolving it
as eventsourcing does would import whatever module a changed row names)."""


class OrjsonTranscoder(Transcoder):
    """Encode plain JSON with orjson; pydantic has already made values plain."""

    def encode(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        return orjson.loads(data)

    def register(self, transcoding: Transcoding) -> None:
        raise TypeError("erstwhile events are pydantic models; no transcodings to register")


class PydanticMapper(Mapper[Any]):
    """Map pydantic events to stored events, upcasting old payloads on the way back."""

    def __init__(self) -> None:
        super().__init__(transcoder=OrjsonTranscoder())

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        return self.encode(cast(LedgerEvent, domain_event), key=None)

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        return self.decode(stored_event, key=None)

    def encode(self, event: LedgerEvent, key: bytes | None) -> StoredEvent:
        """Serialise an event; with a key, seal its sensitive fields under it."""
        state = event.model_dump(
            mode="json", exclude={"originator_id", "originator_version", "erased"}
        )
        if key is not None:
            state = seal(state, event.originator_id, key)
        if type(event).class_version > 1:
            state["class_version"] = type(event).class_version
        return StoredEvent(
            originator_id=event.originator_id,
            originator_version=event.originator_version,
            topic=get_topic(type(event)),
            state=self.transcoder.encode(state),
        )

    def encode_erased(self, event: LedgerEvent) -> StoredEvent:
        """Serialise an event whose sealed content is gone: its seal is empty for good."""
        stored = self.encode(event, key=None)
        state = self.transcoder.decode(stored.state)
        for name in SENSITIVE_FIELDS:
            state.pop(name, None)
        state["sealed"] = None
        return StoredEvent(
            stored.originator_id, stored.originator_version, stored.topic,
            self.transcoder.encode(state),
        )  # fmt: skip

    def decode(self, stored_event: StoredEvent, key: bytes | None) -> LedgerEvent:
        """Rebuild an event: open its seal (or mark it erased), then upcast it."""
        return self.decode_stored(
            stored_event.originator_id, stored_event.originator_version, stored_event.topic,
            stored_event.state, key,
        )  # fmt: skip

    def decode_stored(
        self,
        originator_id: UUID | str,
        version: int,
        topic: str,
        payload: bytes,
        key: bytes | None,
    ) -> LedgerEvent:
        """:meth:`decode` from a stored event's parts (a log read decodes thousands of
        rows: building a ``StoredEvent`` for each cost a tenth of its decoding)."""
        cls = EVENT_CLASSES.get(topic)
        if cls is None:  # looked up, never imported: a topic is data from the store
            raise TopicError(f"no erstwhile event has the topic {topic!r}")
        state: dict[str, Any] = self.transcoder.decode(payload)
        if "sealed" in state:
            state = unseal(state, originator_id, key)
        schema = state.pop("class_version", 1)
        while schema < cls.class_version:
            getattr(cls, f"upcast_v{schema}_v{schema + 1}")(state)
            schema += 1
        state["originator_id"] = originator_id
        state["originator_version"] = version
        event: LedgerEvent = cls.model_validate(state)
        return event


def why_undecodable(error: Exception) -> str:
    """Say in a few words why a stored event did not decode (one of :data:`DECODE_ERRORS`)."""
    if isinstance(error, orjson.JSONDecodeError):
        return "its payload is not JSON"
    if isinstance(error, TopicError):
        return "its topic names no event type"
    if isinstance(error, StoreUnavailable):
        return "its sealed content does not decrypt"
    if isinstance(error, pydantic.ValidationError):
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "payload"
        return f"its payload does not fit its type ({field}: {first['msg']})"
    return "it is not an event the ledger writes"
