"""Memories: their kinds, states, the validated input a write starts from, and the model
every read returns.

The input rules of the contract (sizes, NUL bytes, JSON values, confidence, kinds,
windows) live here, in one place, so every front end refuses the same things.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any, cast
from uuid import UUID

import orjson
import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from erstwhile.domain.errors import ValidationError, brief
from erstwhile.domain.time import Window, optional_utc

MAX_CONTENT_BYTES = 64 * 1024
MAX_METADATA_BYTES = 16 * 1024
MAX_VALUE_BYTES = 64 * 1024
MAX_ENTITIES_BYTES = 16 * 1024
"""A value and the list of entities, as JSON. Besides keeping a row's size bounded, the
two limits and content's bound the full-text document made of them (with the labels:
at most about 150 KiB), which PostgreSQL's ``tsvector`` refuses past 1 MiB: a write
over it failed there, and one appended without folding left a log no fold could pass."""
MAX_EVIDENCE_BYTES = 16 * 1024
"""The list of evidence, as JSON: a row's size bounded, as for entities."""
MAX_LABEL_CHARS = 1024
MAX_LABEL_KEY_BYTES = 768
"""A label's comparison form, in UTF-8: indexes hold it beside a namespace and another
label, and PostgreSQL's B-tree refuses an index row over 2,704 bytes (1,024 characters
of CJK text are 3,072 bytes)."""
DEFAULT_NAMESPACE = "default"


class Kind(StrEnum):
    """What sort of claim a memory makes; fixes its contract when it is asserted."""

    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    EVENT = "event"
    COMMITMENT = "commitment"
    BLOCKER = "blocker"
    NOTE = "note"

    @property
    def revisable(self) -> bool:
        """Events record what happened; they are never superseded nor supersede."""
        return self is not Kind.EVENT


class State(StrEnum):
    """Where a memory stands in its life; nothing ever returns to ``current``."""

    CURRENT = "current"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"
    FORGOTTEN = "forgotten"


@lru_cache(maxsize=1 << 16)
def normalise_label(text: str) -> str:
    """Return the comparison form of a subject, attribute or entity: trimmed, case-folded
    and composed (NFC), so ``Müller`` is one subject whether its ``ü`` was typed as one
    character or as ``u`` and a combining diaeresis (as search reads words).

    Decomposed before case-folding (Unicode's canonical caseless match): a mark that
    folds into a letter (U+0345, the iota subscript, folds to U+03B9) then stays where
    composition would have put it, so every canonically equal spelling gives one label.

    Cached: a write and its fold normalise the same few labels several times each.
    """
    folded = unicodedata.normalize("NFD", " ".join(text.split())).casefold()
    return unicodedata.normalize("NFC", folded)


def _fits_an_index(label: str, what: str) -> None:
    """Refuse a label whose comparison form is over :data:`MAX_LABEL_KEY_BYTES`."""
    if len(normalise_label(label).encode("utf-8")) > MAX_LABEL_KEY_BYTES:
        raise ValueError(
            f"{what} is longer than {MAX_LABEL_KEY_BYTES} bytes in UTF-8 once normalised"
        )


def normalise_entities(entities: Iterable[str]) -> list[str]:
    """Normalise entity names, dropping blanks and repeats while keeping their order."""
    seen: dict[str, None] = {}
    for entity in entities:
        if not isinstance(entity, str):
            raise ValueError(f"entities must be text, got {entity!r}")
        name = normalise_label(entity)
        if name:
            seen.setdefault(name, None)
    return list(seen)


JSON_INTEGERS = range(-(2**63), 2**64)
"""The integers a JSON value may hold: what the log's encoder (orjson) writes exactly."""

LONG_DIGITS = re.compile(r"\d{19}")
LONG_DIGITS_BYTES = re.compile(rb"\d{19}")
"""Nineteen digits in a row: the shortest run that can spell an integer outside
:data:`JSON_INTEGERS` (-2**63 has 19 digits)."""


def exact_json(text: str | bytes) -> Any:
    """Parse JSON as the log does (orjson), refusing with ``ValidationError`` an integer
    it cannot keep exactly: orjson reads one beyond 64 bits as a float, rounding it
    silently. Only text holding a run of 19 digits can hold one, so only such text is
    checked (``orjson.JSONDecodeError`` for text that is not JSON)."""
    parsed = orjson.loads(text)
    long_digits = LONG_DIGITS_BYTES if isinstance(text, bytes) else LONG_DIGITS
    if long_digits.search(text):  # type: ignore[arg-type]
        check_integers(text)
    return parsed


def check_integers(text: str | bytes) -> None:
    """Refuse JSON text holding an integer beyond 64 bits, or nested deeper than Python's
    own parser goes (far deeper than any value the ledger takes, ``JSON_DEPTH``), with
    ``ValidationError``. The standard library's parser reads every integer as written."""
    try:
        json.loads(text, parse_int=_exact_integer)
    except RecursionError:
        raise ValidationError("the JSON is nested too deeply") from None


def brief_number(digits: str) -> str:
    """A number as written, shortened for a message past 40 characters."""
    return digits if len(digits) <= 40 else f"{digits[:20]}...{digits[-10:]}"


def _exact_integer(digits: str) -> int:
    # Over 21 digits never fits (and Python refuses to read over 4,300 of them).
    if len(digits) > 21 or int(digits) not in JSON_INTEGERS:
        raise ValidationError(f"{brief_number(digits)} does not fit in 64 bits")
    return int(digits)


LOG_POSITIONS = range(0, 2**62)
"""Every log position there can be: the stores keep them as signed 64-bit integers, and
the queries that turn an instant into a position use 2**62 for "no such event"."""
LAST_IMPORTABLE_POSITION = LOG_POSITIONS[-1] - 2**20
"""The last position an imported event may take: the log keeps room after it to grow by
(the hard forget that erases a memory needs a position too), as an imported instant
leaves the calendar's last second."""


def check_text(text: str, field: str) -> None:
    """Refuse text the stores cannot keep: NUL bytes, and lone surrogates (halves of a
    UTF-16 pair, which have no UTF-8 form)."""
    if "\x00" in text:
        raise ValidationError(f"{field} must not contain NUL bytes")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"{field} must be valid Unicode text (it holds a lone surrogate)"
        ) from None


MAX_IDEMPOTENCY_KEY_BYTES = 1024
"""An idempotency key's limit in UTF-8 bytes: it is half of a primary key (with the
namespace) on both backends, and PostgreSQL's B-tree refuses an index row over 2,704
bytes, with its own message, as a failure of the store."""


def check_idempotency_key(key: Any) -> str:
    """Return ``key`` if it is an idempotency key both stores can keep."""
    if not isinstance(key, str) or not key.strip():
        raise ValidationError("idempotency_key must be non-empty text")
    check_text(key, "idempotency_key")
    if len(key.encode("utf-8")) > MAX_IDEMPOTENCY_KEY_BYTES:
        raise ValidationError(
            f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_BYTES} bytes in UTF-8"
        )
    return key


def check_position(value: Any, field: str) -> int:
    """Return ``value`` if it is a log position (an integer >= 0 in the stores' range)."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in LOG_POSITIONS:
        raise ValidationError(
            f"{field} must be a log position (an integer from 0 to {LOG_POSITIONS[-1]:,}), "
            f"got {brief(value)}"
        )
    return value


JSON_DEPTH = 200
"""How deep a value or metadata may nest lists and objects: an export line wraps the
value in two more levels, and orjson (which writes the log and the exports) refuses
JSON nested deeper than 255."""


def check_json(value: Any, field: str, depth: int = 1) -> None:
    """Refuse anything that is not plain JSON (dicts with text keys, lists, scalars),
    or that nests deeper than :data:`JSON_DEPTH` (``value`` being at ``depth``)."""
    if depth > JSON_DEPTH:
        raise ValueError(f"{field} must be JSON nested at most {JSON_DEPTH} levels deep")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        check_text(value, field)
        return
    if isinstance(value, int):
        if value not in JSON_INTEGERS:
            raise ValueError(f"{field} must be JSON: {value} does not fit in 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{field} must be JSON: {value!r} is not a JSON number")
        return
    if isinstance(value, list | tuple):
        for item in value:
            check_json(item, field, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{field} must be JSON: object keys must be text, got {key!r}")
            check_json(key, field)
            check_json(item, field, depth + 1)
        return
    raise ValueError(f"{field} must be JSON: {type(value).__name__} is not a JSON value")


def refuse_surely_larger(value: Any, limit: int, refusal: str) -> None:
    """Refuse ``value`` (``ValueError(refusal)``) where its JSON surely takes more than
    ``limit`` bytes, before anything walks it whole or encodes it: a value of ten
    megabytes, or a list of a million numbers, was checked item by item and encoded to
    be refused (0.7 to 0.9 s and 266 MB for the list).

    What is counted is a lower bound of the encoded size (a string at least its
    characters and two quotes, a list its brackets and commas, an object its braces,
    colons and commas, anything else a byte), read level by level and given up as soon
    as it passes ``limit``; below ``JSON_DEPTH`` levels it looks no deeper (too deep a
    value is refused by :func:`check_json`). The exact size is measured after the
    checks, as it was."""
    level: list[Any] = [value]
    size = 0
    for _ in range(JSON_DEPTH):
        below: list[Any] = []
        for item in level:
            if isinstance(item, str):
                size += len(item) + 2
            elif isinstance(item, list | tuple):
                size += len(item) + 1
                if size <= limit:
                    below.extend(item)
            elif isinstance(item, dict):
                size += 2 * len(item) + 1
                if size <= limit:
                    below.extend(item)  # the keys
                    below.extend(item.values())
            else:
                size += 1
            if size > limit:
                raise ValueError(refusal)
        if not below:
            return
        level = below


def _plain(text: str | None, field: str) -> str | None:
    if text is not None:
        check_text(text, field)
    return text


Claim = tuple[str | None, str | None, str, str]


def as_read_back(value: Any, encoded: bytes) -> Any:
    """A JSON value as the ledger will read it back: a list or object is rebuilt from its
    JSON (``encoded``), so a tuple in it is a list in the memory a write returns, as in
    every later read; a scalar reads back as it is."""
    return orjson.loads(encoded) if isinstance(value, list | tuple | dict) else value


def canonical_json(value: Any) -> str:
    """Return a JSON value in one canonical spelling, for comparing values: keys sorted,
    and a whole number one spelling whether written ``1`` or ``1.0`` (JSON does not
    tell them apart)."""
    if value is None or type(value) in PLAIN_SCALARS:
        return orjson.dumps(value).decode()  # nothing to sort or respell
    return orjson.dumps(whole_numbers_as_integers(value), option=orjson.OPT_SORT_KEYS).decode()


PLAIN_SCALARS = frozenset({str, int, bool})
"""JSON values spelled one way already (a float may be a whole number: ``1.0`` is ``1``)."""


def whole_numbers_as_integers(value: Any) -> Any:
    """``value`` with every whole float (``1.0``) spelled as the integer it is (``1``)."""
    if isinstance(value, float) and value.is_integer() and int(value) in JSON_INTEGERS:
        return int(value)
    if isinstance(value, list | tuple):
        return [whole_numbers_as_integers(item) for item in value]
    if isinstance(value, dict):
        return {key: whole_numbers_as_integers(item) for key, item in value.items()}
    return value


def claim_of(subject: str | None, attribute: str | None, value: Any, content: str) -> Claim:
    """Return what makes two claims identical: subject, attribute, value and content.

    Labels compare normalised, values as canonical JSON, content without outer spaces.
    """
    return (
        normalise_label(subject) if subject else None,
        normalise_label(attribute) if attribute else None,
        canonical_json(value),
        content.strip(),
    )


class MemoryDraft(BaseModel):
    """A validated claim about to be asserted; ``valid_from=None`` means "when recorded"."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    content: str = Field(strict=True)
    kind: Kind = Kind.FACT
    subject: str | None = Field(default=None, strict=True)
    attribute: str | None = Field(default=None, strict=True)
    value: Any = None
    entities: tuple[str, ...] = ()
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    occurred_at: datetime | None = None
    confidence: float = 1.0
    evidence: tuple[str, ...] = ()
    extractor_id: str | None = Field(default=None, strict=True)
    extracted_at: datetime | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("content must not be empty")
        _plain(content, "content")
        if len(content.encode("utf-8")) > MAX_CONTENT_BYTES:
            raise ValueError(f"content is larger than {MAX_CONTENT_BYTES} bytes (64 KiB)")
        return content

    @field_validator("subject", "attribute", "extractor_id")
    @classmethod
    def _label(cls, text: str | None, info: pydantic.ValidationInfo) -> str | None:
        _plain(text, str(info.field_name))
        if text is not None:
            text = text.strip()
            if not text:
                raise ValueError(f"{info.field_name} must not be blank (leave it out instead)")
            if len(text) > MAX_LABEL_CHARS:
                raise ValueError(f"{info.field_name} is longer than {MAX_LABEL_CHARS} characters")
            if info.field_name != "extractor_id":
                _fits_an_index(text, str(info.field_name))
        return text

    @field_validator("entities", mode="before")
    @classmethod
    def _entities(cls, entities: Any) -> tuple[str, ...]:
        listed = _listed(entities, "entities", "names")
        if any(isinstance(name, str) and not name.strip() for name in listed):
            raise ValueError("entities must not be blank")  # as subjects and evidence
        names = normalise_entities(listed)
        for name in names:
            _plain(name, "entities")
            _fits_an_index(name, "an entity")
        if names and len(orjson.dumps(names)) > MAX_ENTITIES_BYTES:
            raise ValueError(f"entities take more than {MAX_ENTITIES_BYTES} bytes as JSON (16 KiB)")
        return tuple(names)

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence(cls, evidence: Any) -> tuple[str, ...]:
        listed = _listed(evidence, "evidence", "ids or URIs")
        for item in listed:
            if not isinstance(item, str | UUID):
                raise ValueError(f"evidence items must be ids or URIs (text), got {item!r}")
        items = tuple(str(item) for item in listed)
        for item in items:
            _plain(item, "evidence")
            if not item.strip():
                raise ValueError("evidence items must not be blank")
        # Unbounded, a million-character list was a store failure (SQLite: "string or
        # blob too big"; PostgreSQL: the server closed the connection), or 300 MB stored.
        if items and len(orjson.dumps(items)) > MAX_EVIDENCE_BYTES:
            raise ValueError(
                f"evidence takes more than {MAX_EVIDENCE_BYTES} bytes as JSON (16 KiB)"
            )
        return items

    @field_validator("valid_from", "valid_until", "occurred_at", "extracted_at", mode="before")
    @classmethod
    def _instant(cls, value: Any, info: pydantic.ValidationInfo) -> datetime | None:
        return optional_utc(value, str(info.field_name))

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, confidence: Any) -> float:
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            raise ValueError(
                f"confidence must be a float or an int between 0 and 1, got {brief(confidence)}"
            )
        # An int is compared as it is: a huge one does not convert to a float.
        if (isinstance(confidence, float) and not math.isfinite(confidence)) or not (
            0 <= confidence <= 1
        ):
            raise ValueError(f"confidence must be between 0 and 1, got {brief(confidence)}")
        return float(confidence) + 0.0  # -0.0 is 0.0, as SQLite stores it

    @field_validator("value")
    @classmethod
    def _value(cls, value: Any) -> Any:
        refusal = f"value is larger than {MAX_VALUE_BYTES} bytes as JSON (64 KiB)"
        refuse_surely_larger(value, MAX_VALUE_BYTES, refusal)
        check_json(value, "value")
        if value is None:
            return None
        encoded = orjson.dumps(value)
        if len(encoded) > MAX_VALUE_BYTES:
            raise ValueError(refusal)
        return as_read_back(value, encoded)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, metadata: dict[str, Any] | None) -> dict[str, Any] | None:
        if metadata is None:
            return None
        refusal = f"metadata is larger than {MAX_METADATA_BYTES} bytes (16 KiB)"
        refuse_surely_larger(metadata, MAX_METADATA_BYTES, refusal)
        check_json(metadata, "metadata")
        encoded = orjson.dumps(metadata)
        if len(encoded) > MAX_METADATA_BYTES:
            raise ValueError(refusal)
        return cast(dict[str, Any], as_read_back(metadata, encoded))

    @model_validator(mode="after")
    def _window_and_kind(self) -> MemoryDraft:
        if self.kind is Kind.EVENT and self.valid_until is not None:
            raise ValueError("an event's window never closes: leave valid_until out")
        if self.valid_from is not None or self.occurred_at is not None:
            self.window_from(None)
        return self

    def window_from(self, recorded_at: datetime | None) -> Window:
        """Return the valid window, opening at ``recorded_at`` when no start was given."""
        if self.valid_from is not None:
            return Window(self.valid_from, self.valid_until)
        if self.occurred_at is not None:
            return Window.opening(self.occurred_at, self.valid_until, "occurred_at")
        assert recorded_at is not None  # asked without one only where a start was given
        return Window.opening(recorded_at, self.valid_until, "the recording instant")

    def claim(self) -> Claim:
        """Return what makes two claims identical (see :func:`claim_of`)."""
        return claim_of(self.subject, self.attribute, self.value, self.content)


def _listed(given: Any, field: str, what: str) -> list[Any]:
    """A list field's items (any iterable but text; None for none)."""
    if given is None:
        return []
    if isinstance(given, str | bytes):
        raise ValueError(f"{field} must be a list of {what}, not one string")
    if not isinstance(given, Iterable) or isinstance(given, Mapping):
        raise ValueError(f"{field} must be a list of {what}, got {type(given).__name__}")
    return list(given)


def parse_draft(arguments: dict[str, Any]) -> MemoryDraft:
    """Validate the arguments of a write, turning pydantic's report into one clear line."""
    try:
        return MemoryDraft.model_validate(arguments)
    except ValidationError:
        raise
    except pydantic.ValidationError as error:
        raise ValidationError(describe(error)) from None


def describe(error: pydantic.ValidationError) -> str:
    """Return the first problem of a pydantic error as ``field: message``."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ").removeprefix(f"{field}: ")
    if first["type"] == "enum":
        message = f"unknown {field} {first['input']!r}; expected one of " + ", ".join(Kind)
    if first["type"] == "extra_forbidden":
        message = "unknown argument"
    # A message that names its field already ("confidence must be ...") is not
    # prefixed with it again.
    return f"{field}: {message}" if field and not message.startswith(f"{field} ") else message


class Memory(BaseModel):
    """One memory as the ledger knows it: the claim, its windows, its provenance, its links."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    namespace: str
    kind: Kind
    content: str
    subject: str | None = None
    attribute: str | None = None
    value: Any = None
    entities: list[str] = Field(default_factory=list)
    valid_from: datetime
    valid_until: datetime | None = None
    occurred_at: datetime | None = None
    confidence: float = 1.0
    evidence: list[str] = Field(default_factory=list)
    extractor_id: str | None = None
    extracted_at: datetime | None = None
    actor: str
    metadata: dict[str, Any] | None = None
    state: State
    recorded_at: datetime
    position: int
    supersedes: list[UUID] = Field(default_factory=list)
    superseded_by: UUID | None = None
    vector_clock: dict[str, int] = Field(default_factory=dict)
    forgotten_at: datetime | None = None

    def __hash__(self) -> int:
        """Hash by id, so memories go in sets and key dicts: pydantic's frozen hash
        covers every field, and the lists and dicts among them cannot be hashed. Equal
        memories share their id; two reads of one memory that differ (its state before
        and after an archive) are unequal and both stay in a set."""
        return hash(self.id)

    @property
    def window(self) -> Window:
        """The valid-time window of this memory."""
        return Window(self.valid_from, self.valid_until)

    def claim(self) -> Claim:
        """Return what makes two claims identical (see :func:`claim_of`)."""
        return claim_of(self.subject, self.attribute, self.value, self.content)
