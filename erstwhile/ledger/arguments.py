"""The arguments of the public methods, checked in one place.

A value of the wrong type, or out of range, is refused with ``ValidationError`` naming
the argument, before anything is read or written, instead of surfacing later as a raw
``TypeError`` or ``AttributeError`` (or, for a truthy string given as a flag, as the
opposite of what was meant). Instants are checked by ``erstwhile.domain.time``, a
claim's fields by ``MemoryDraft``; what is left lives here. Each check is a few type
tests: nothing a hot read would notice.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from erstwhile.domain.errors import NotFound, ValidationError, brief
from erstwhile.domain.ids import parse_id
from erstwhile.domain.memory import check_text

MAX_SECONDS = int(threading.TIMEOUT_MAX)
"""The longest duration a wait takes (about 292 years): the longest Python's threads can
wait, and far below where a whole number of seconds stops converting to a float."""
MAX_NAME_CHARS = 200
MAX_TEXT_CHARS = 4096


def _kind_of(value: object) -> str:
    return type(value).__name__


def as_id(value: object, what: str = "memory_id", noun: str = "memory") -> UUID:
    """Return a memory (or proposal) id given as a UUID or its text. Text that is no
    UUID names nothing: ``NotFound``; a value of another type is ``ValidationError``."""
    if isinstance(value, UUID):
        # A subclass as a plain UUID: drivers adapt the type itself, not its subclasses.
        return value if type(value) is UUID else UUID(int=value.int)
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a {noun} id (a UUID or its text), got "
                              f"{_kind_of(value)} {value!r}")  # fmt: skip
    parsed = parse_id(value)
    if parsed is None:
        raise NotFound(f"{what} {value!r} is not a {noun} id")
    return parsed


def check_name(value: object, what: str) -> str:
    """Return a namespace or actor name, trimmed: non-empty text without NUL bytes, at
    most :data:`MAX_NAME_CHARS` characters once trimmed. Not otherwise normalised: a
    name is an identifier, compared as written, so the memories a store holds under a
    name stay reachable under it (see decisions.md)."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be text, not {type(value).__name__}")
    check_text(value, what)
    name = value.strip()
    if not name:
        raise ValidationError(f"{what} must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise ValidationError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    return name


def optional_text(value: object, what: str) -> str | None:
    """Return free text (a reason), or None: at most :data:`MAX_TEXT_CHARS` characters,
    without NUL bytes."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be text, not {type(value).__name__}")
    if len(value) > MAX_TEXT_CHARS:
        raise ValidationError(f"{what} is longer than {MAX_TEXT_CHARS} characters")
    check_text(value, what)
    return value


def label_argument(value: object, field: str, required: bool = False) -> None:
    """Refuse a subject, attribute, entity or actor to look up that is not plain
    non-empty text (``None`` passes unless ``required``)."""
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(
            f"{field} must be non-empty text" + ("" if required else " when given")
        )
    check_text(value, field)


def names(given: object, field: str) -> list[Any] | None:
    """A filter's names as a list (any iterable but text), or None when not given."""
    if given is None:
        return None
    if isinstance(given, str | bytes) or not isinstance(given, Iterable):
        raise ValidationError(f"{field} must be a list of names, got {given!r}")
    return list(given)


def flag(value: object, what: str) -> bool:
    """Refuse anything but ``True`` or ``False``: ``hard="no"`` would otherwise erase."""
    if not isinstance(value, bool):
        raise ValidationError(f"{what} must be True or False, got {_kind_of(value)} {value!r}")
    return value


def callback(value: object, what: str) -> None:
    """Refuse a callback (``progress``, ``clock``) that is neither None nor callable."""
    if value is not None and not callable(value):
        raise ValidationError(f"{what} must be callable (or None), got {_kind_of(value)}")


def seconds(value: object, what: str, *, positive: bool = False) -> float:
    """Return a duration in seconds: a finite number, at least 0 (above 0 if
    ``positive``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{what} must be a number of seconds, got {value!r}")
    bound = "above 0" if positive else "0 or more"
    if (
        (isinstance(value, float) and not math.isfinite(value))
        or value < 0
        or (positive and value == 0)
    ):
        raise ValidationError(
            f"{what} must be a finite number of seconds, {bound}; got {brief(value)}"
        )
    if value > MAX_SECONDS:
        raise ValidationError(f"{what} must be at most {MAX_SECONDS:,} seconds; got {brief(value)}")
    return float(value)


def store_url(url: object) -> None:
    """Refuse a store URL that is neither None, text nor a path."""
    if url is not None and not isinstance(url, str | os.PathLike):
        raise ValidationError(
            f"url must be a store URL (text) or a path, got {_kind_of(url)} {url!r}"
        )


def binary_output(out: object) -> None:
    """Refuse an export target that cannot take bytes (a text file, say) before the
    first line is written to it."""
    write = getattr(out, "write", None)
    if not callable(write):
        raise ValidationError(f"out must be a binary file open for writing, got {_kind_of(out)}")
    try:
        write(b"")
    except TypeError:
        raise ValidationError(
            "out must be a binary file open for writing (open it with 'wb'; "
            "for stdout, sys.stdout.buffer)"
        ) from None
    except ValueError as error:  # closed
        raise ValidationError(f"out cannot be written to: {error}") from None


def stop_event(value: object) -> None:
    """Refuse a ``stop`` that is neither None nor an event (``is_set`` and ``wait``)."""
    if value is not None and not all(
        callable(getattr(value, method, None)) for method in ("is_set", "wait")
    ):
        raise ValidationError(f"stop must be a threading.Event (or None), got {_kind_of(value)}")
