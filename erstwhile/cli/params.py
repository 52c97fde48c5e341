"""How the command line reads times and JSON, and the options several commands share.

The library takes aware instants and ISO 8601 text with an offset; people also type a
bare date or ``now``, so the command line turns those into instants before calling it.
A value that does not parse is a usage error (exit 2), reported before the ledger opens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, date, datetime
from typing import Annotated, Any, get_args

import orjson
import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandFunctionType

from erstwhile.domain import memory
from erstwhile.domain.errors import ValidationError
from erstwhile.domain.memory import Kind
from erstwhile.domain.time import read_iso
from erstwhile.ledger.core import Policy

_BARE_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
TIME_HELP = "TIME is ISO 8601 with an offset or Z, a bare date (midnight UTC), or 'now'."


def parse_time(text: str) -> datetime:
    """Read an instant: ISO 8601 with an offset or ``Z`` (or ``z``), a bare date (midnight
    UTC), or now (:func:`invocation_now`)."""
    cleaned = text.strip()
    if cleaned.lower() == "now":
        return invocation_now()
    try:
        if _BARE_DATE.fullmatch(cleaned):
            return datetime.combine(date.fromisoformat(cleaned), datetime.min.time(), UTC)
        parsed = read_iso(cleaned)
    except ValueError:
        parsed = None
    if parsed is None or parsed.utcoffset() is None:
        raise typer.BadParameter(
            f"{text!r} is not a time: give ISO 8601 with an offset or Z "
            "(2026-03-01T09:30:00Z), a date (2026-03-01) or 'now'"
        )
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise typer.BadParameter(f"{text!r} is outside the years 1 to 9999 in UTC") from None


def invocation_now() -> datetime:
    """This command's "now", read from the clock once, as the command starts
    (:data:`INVOCATION_NOW`): every TIME given as ``now`` in one command is one instant
    (``revise --at now --valid-from now`` agrees with itself)."""
    return INVOCATION_NOW.get() or datetime.now(UTC)


INVOCATION_NOW: ContextVar[datetime | None] = ContextVar("erstwhile_now", default=None)
"""Set by the app's callback, before a command's options are read."""


def parse_value(text: str) -> Any:
    """Read a claim's value: JSON if the text is JSON, else the text itself."""
    try:
        return exact_json(text)
    except orjson.JSONDecodeError:
        return text


def parse_revised_value(text: str) -> Any:
    """Read a revision's value (see :func:`parse_value`), refusing JSON ``null``: revise
    copies the older memory's value when none is given, and null would be taken as
    none given, so the revision would silently keep the old value."""
    value = parse_value(text)
    if value is None:
        raise typer.BadParameter(
            "null would keep the older memory's value (revise copies what is not given); "
            "to supersede it with a claim that has no value, use remember --supersedes"
        )
    return value


def parse_metadata(text: str) -> dict[str, Any]:
    """Read metadata: it must be a JSON object."""
    try:
        parsed = exact_json(text)
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise typer.BadParameter(f'{text!r} is not a JSON object (e.g. \'{{"source": "chat"}}\')')
    return parsed


def exact_json(text: str) -> Any:
    """Parse JSON with orjson, as the ledger stores it, an integer beyond 64 bits (which
    orjson would round into a float) or nesting too deep anywhere in it being a usage
    error (see :func:`erstwhile.domain.memory.check_integers`)."""
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        if "depth limit exceeded" in str(error):  # orjson's own limit, 1,024 levels
            raise typer.BadParameter("the JSON is nested too deeply") from None
        if "infinity when parsed as double" in str(error) and _is_json(text):
            number = re.match(r"-?[\d.eE+-]+", text[error.pos :])
            shown = memory.brief_number(number.group()) if number else "a number"
            raise typer.BadParameter(
                f"{shown} is beyond what a JSON number can hold (a double); quote it to "
                "keep it as text"
            ) from None
        raise
    try:
        memory.check_integers(text)  # all of them: the text is short, and a usage error
    except ValidationError as error:
        hint = "; quote it to keep it as text" if "64 bits" in str(error) else ""
        raise typer.BadParameter(f"{error}{hint}") from None
    json.loads(text, object_pairs_hook=_keys_once)
    return parsed


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members, refusing a key given twice (orjson keeps the last value
    and drops the other without a word)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise typer.BadParameter(f"the key {key!r} is given twice in one JSON object")
        seen[key] = value
    return seen


def _is_json(text: str) -> bool:
    """Whether ``text`` is JSON by its grammar (the standard library's parser reads a
    number too large for a double as infinity, where orjson stops; it also reads
    ``NaN`` and ``Infinity``, which JSON has not)."""
    try:  # (integers read as floats: a JSON integer of any length is JSON)
        json.loads(text, parse_constant=_not_json, parse_int=float)
    except ValueError:
        return False
    except RecursionError:
        raise typer.BadParameter("the JSON is nested too deeply") from None
    return True


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def parse_kind(text: str) -> Kind:
    """Read a memory kind, case-insensitively."""
    try:
        return Kind(text.strip().lower())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a kind; use one of {', '.join(Kind)}") from None


def parse_policy(text: str) -> str:
    """Read a ``remember`` policy, case-insensitively."""
    policy = text.strip().lower()
    if policy not in POLICIES:
        raise typer.BadParameter(f"{text!r} is not a policy; use one of {', '.join(POLICIES)}")
    return policy


POLICIES: tuple[str, ...] = get_args(Policy)


REPEATABLE = frozenset({"entities", "evidence", "supersedes"})
"""The options that may be given several times: typer hands them over as an empty list
when they are not given at all."""


def given(**options: Any) -> dict[str, Any]:
    """Keep the options the user gave: drop those left unset (None, or an empty list for
    a repeatable option; ``--value '[]'`` is a value)."""
    return {
        name: value
        for name, value in options.items()
        if value is not None and not (name in REPEATABLE and value in ([], ()))
    }


class _TypelessHelp:
    """A command or group whose ``--help`` shows no type: typer's own help option would
    show ``<bool>`` there, as if the flag took a value (see :func:`flag`)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class Command(_TypelessHelp, TyperCommand):
    """A command of the ``erstwhile`` command line (see :class:`_TypelessHelp`)."""


class Group(_TypelessHelp, TyperGroup):
    """A group of commands of the ``erstwhile`` command line (see :class:`_TypelessHelp`)."""


class App(typer.Typer):
    """A typer app whose group and commands are :class:`Group` and :class:`Command`
    unless told otherwise, so every command of the command line gets their help."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("cls", Group)
        super().__init__(**options)

    def command(
        self, *args: Any, **options: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        options.setdefault("cls", Command)
        return super().command(*args, **options)


def flag(name: str, help: str) -> Any:
    """Return a typer option that takes no value. Its help shows no type: typer's would
    be ``<bool>``, which reads as if the flag took one (``--hard true``)."""
    return typer.Option(name, metavar="", help=help)


def time_option(help: str, parser: Any = parse_time) -> Any:
    """Return a typer option that reads a TIME (with :func:`parse_time`, unless told)."""
    return typer.Option(parser=parser, metavar="TIME", help=f"{help}.")


# The claim's fields, shared by `remember` and `revise`.
def kind_option(default: str) -> Any:
    """Return a typer option that reads a KIND, its help naming ``default``."""
    return typer.Option(
        parser=parse_kind,
        metavar="KIND",
        help="What sort of claim: " + ", ".join(Kind) + f" (default: {default}).",
    )


KindOpt = Annotated[Kind | None, kind_option("fact")]
RevisedKindOpt = Annotated[Kind | None, kind_option("the older memory's")]
SubjectOpt = Annotated[
    str | None, typer.Option(metavar="TEXT", help="What the claim is about, e.g. team.")
]
AttributeOpt = Annotated[
    str | None, typer.Option(metavar="TEXT", help="Which property of the subject, e.g. database.")
]
ValueOpt = Annotated[
    Any,
    typer.Option(
        parser=parse_value, metavar="JSON", help="The value: JSON, or else taken as plain text."
    ),
]
RevisedValueOpt = Annotated[
    Any,
    typer.Option(
        parser=parse_revised_value,
        metavar="JSON",
        help="The value: JSON, or else taken as plain text (default: the older memory's).",
    ),
]
EntityOpt = Annotated[
    list[str] | None,
    typer.Option("--entity", metavar="NAME", help="An entity the claim names (repeatable)."),
]
ValidFromOpt = Annotated[
    datetime | None,
    time_option("When the claim starts to hold (default: --occurred-at, else when recorded)"),
]
RevisedValidFromOpt = Annotated[
    datetime | None,
    time_option(
        "When the new claim starts to hold (default: --at, else --occurred-at, else when recorded)"
    ),
]
ValidUntilOpt = Annotated[
    datetime | None, time_option("When the claim stops holding (default: open-ended)")
]
OccurredAtOpt = Annotated[datetime | None, time_option("When the content happened")]
ConfidenceOpt = Annotated[
    float | None, typer.Option(metavar="0..1", help="How sure the writer is (default: 1.0).")
]
EvidenceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--evidence", metavar="REF", help="A source memory id or URI behind it (repeatable)."
    ),
]
ExtractorOpt = Annotated[
    str | None, typer.Option(metavar="TEXT", help="Which extractor or model produced the claim.")
]
ExtractedAtOpt = Annotated[datetime | None, time_option("When the extractor produced it")]
MetadataOpt = Annotated[
    dict[str, Any] | None,
    typer.Option(parser=parse_metadata, metavar="JSON", help="Free metadata: a JSON object."),
]
IdempotencyOpt = Annotated[
    str | None,
    typer.Option(
        metavar="KEY",
        help=(
            "Retrying with the same key returns the first result (unless forgotten since). "
            "A retry must repeat the request: a TIME given as 'now' is read again, so give "
            "no TIME as 'now' (leave the option out to take its default)."
        ),
    ),
]
MemoryId = Annotated[str, typer.Argument(metavar="ID", help="The memory's id.", show_default=False)]


def parse_known_at(text: str) -> datetime | None:
    """Read a transaction time: as :func:`parse_time`, but ``now`` is what the ledger
    knows now, its latest (None), not the clock's reading: a log whose recorded
    instants run ahead of this host's clock (another host's, or a clock set back) was
    read as known before its own events."""
    return None if text.strip().lower() == "now" else parse_time(text)


KnownAtOpt = Annotated[
    datetime | None,
    time_option("Answer as the ledger knew it then (default and 'now': latest)", parse_known_at),
]
