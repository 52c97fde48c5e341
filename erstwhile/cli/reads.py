"""Commands that read memories: get, history, chain, facts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from erstwhile.cli.context import open_ledger, settings
from erstwhile.cli.output import (
    console,
    dump,
    memory_listing,
    print_json,
    show_memories,
    show_memory,
    show_when,
)
from erstwhile.cli.params import KnownAtOpt, MemoryId, time_option
from erstwhile.domain.views import History


def get(ctx: typer.Context, memory_id: MemoryId, known_at: KnownAtOpt = None) -> None:
    """Show one memory with every field (as the ledger knew it at --known-at)."""
    with open_ledger(ctx) as ledger:
        memory = ledger.get(memory_id, known_at=known_at)
    show_memory(settings(ctx).json, "Memory", memory)


def history(ctx: typer.Context, memory_id: MemoryId) -> None:
    """Show a memory with what superseded it and what it superseded (one level each way)."""
    with open_ledger(ctx) as ledger:
        found = ledger.history(memory_id)
    if settings(ctx).json:
        print_json(dump(found))
    else:
        show_history(found)


def show_history(found: History) -> None:
    """Print a history as three small tables."""
    console.print(memory_listing("Memory", [found.memory]))
    after = [found.superseded_by] if found.superseded_by else []
    console.print(memory_listing("Superseded by", after))
    console.print(memory_listing("Supersedes", found.supersedes))


def chain(ctx: typer.Context, memory_id: MemoryId) -> None:
    """Show the whole lineage of a memory through supersession, oldest first."""
    with open_ledger(ctx) as ledger:
        lineage = ledger.chain(memory_id)
    show_memories(settings(ctx).json, "Chain, oldest first", lineage)


def facts(
    ctx: typer.Context,
    subject: Annotated[
        str, typer.Argument(metavar="SUBJECT", help="What the facts are about.", show_default=False)
    ],
    attribute: Annotated[
        str | None,
        typer.Argument(metavar="ATTRIBUTE", help="Only this property.", show_default=False),
    ] = None,
    as_of: Annotated[
        datetime | None, time_option("What was true at this valid time (default: now)")
    ] = None,
    known_at: KnownAtOpt = None,
) -> None:
    """Show what is true about SUBJECT now, or --as-of a valid time, as known at --known-at."""
    with open_ledger(ctx) as ledger:
        found = ledger.facts(subject, attribute, as_of=as_of, known_at=known_at)
    about = f"{subject} {attribute}" if attribute else subject
    when = show_when(as_of, known_at)
    show_memories(settings(ctx).json, f"Facts about {about}{when}", found)


COMMANDS = (get, history, chain, facts)
