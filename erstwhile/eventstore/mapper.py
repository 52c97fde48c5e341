"""Turning domain events into stored bytes and back, on eventsourcing's Mapper.

Payloads are orjson bytes of the pydantic event. A payload written by an older schema
carries its ``class_version``; reading it runs the event class's ``upcast_vN_vN+1``
methods in order, the eventsourcing convention, so old logs keep reading.
"""

from __future__ import annotations

from typing import Any, cast

import orjson
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder, Transcoding
from eventsourcing.utils import get_topic, resolve_topic

from erstwhile.domain.events import LedgerEvent


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
        event = cast(LedgerEvent, domain_event)
        state = event.model_dump(mode="json", exclude={"originator_id", "originator_version"})
        if type(event).class_version > 1:
            state["class_version"] = type(event).class_version
        return StoredEvent(
            originator_id=event.originator_id,
            originator_version=event.originator_version,
            topic=get_topic(type(event)),
            state=self.transcoder.encode(state),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        cls = cast(type[LedgerEvent], resolve_topic(stored_event.topic))
        state: dict[str, Any] = self.transcoder.decode(stored_event.state)
        version = state.pop("class_version", 1)
        while version < cls.class_version:
            getattr(cls, f"upcast_v{version}_v{version + 1}")(state)
            version += 1
        state["originator_id"] = stored_event.originator_id
        state["originator_version"] = stored_event.originator_version
        return cls.model_validate(state)
