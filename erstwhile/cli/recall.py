"""Commands that find and curate memories: search, conflicts, proposals."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from erstwhile.cli.context import open_ledger, settings
from erstwhile.cli.output import (
    conflict_table,
    console,
    dump,
    hit_table,
    print_json,
    proposal_table,
    show_memory,
    show_when,
)
from erstwhile.cli.params import (
    App,
    AttributeOpt,
    KnownAtOpt,
    SubjectOpt,
    flag,
    parse_kind,
    time_option,
)
from erstwhile.domain.ids import parse_id
from erstwhile.domain.memory import Kind


def search(
    ctx: typer.Context,
    query: Annotated[
        str,
        typer.Argument(
            metavar="QUERY", help="Words to look for (default: match any).", show_default=False
        ),
    ] = "",
    as_of: Annotated[
        datetime | None, time_option("What was true at this valid time (default: now)")
    ] = None,
    known_at: KnownAtOpt = None,
    history: Annotated[
        bool,
        flag(
            "--history",
            "Also find the memories not true then (superseded, archived, windows ended or "
            "not yet begun; never forgotten ones), a tier below.",
        ),
    ] = False,
    kinds: Annotated[
        list[Kind] | None,
        typer.Option(
            "--kind", parser=parse_kind, metavar="KIND", help="Only this kind (repeatable)."
        ),
    ] = None,
    subject: SubjectOpt = None,
    attribute: AttributeOpt = None,
    entities: Annotated[
        list[str] | None,
        typer.Option("--entity", metavar="NAME", help="Only memories naming it (repeatable)."),
    ] = None,
    limit: Annotated[int, typer.Option(metavar="N", min=1, max=1000, help="At most N hits.")] = 10,
) -> None:
    """Search memories by their words: what is true now (or --as-of, as known at --known-at).

    With --history, every other memory not forgotten follows them, a tier below (tier
    "historical": superseded, archived, or not true then, its window ended or not yet begun).
    """
    with open_ledger(ctx) as ledger:
        hits = ledger.search(
            query,
            as_of=as_of,
            known_at=known_at,
            include_history=history,
            kinds=kinds or None,
            subject=subject,
            attribute=attribute,
            entities=entities or None,
            limit=limit,
        )
    if settings(ctx).json:
        print_json(dump(hits))
    else:
        when = show_when(as_of, known_at)
        console.print(hit_table(f"Search {query!r}{when}" if query else f"Search{when}", hits))


def conflicts(
    ctx: typer.Context,
    subject: Annotated[
        str | None,
        typer.Argument(
            metavar="SUBJECT", help="Only conflicts about this subject.", show_default=False
        ),
    ] = None,
) -> None:
    """Show live memories that contradict each other, and which one to trust."""
    with open_ledger(ctx) as ledger:
        found = ledger.conflicts(subject)
    if settings(ctx).json:
        print_json(dump(found))
        return
    if not found:
        console.print("No conflicts" + (f" about {subject!r}." if subject else "."), markup=False)
    for conflict in found:
        console.print(conflict_table(conflict))


proposals_app = App(invoke_without_command=True, subcommand_metavar="[COMMAND ARGS...]")
ProposalId = Annotated[
    str, typer.Argument(metavar="ID", help="The proposal's id.", show_default=False)
]


@proposals_app.callback()
def proposals(ctx: typer.Context) -> None:
    """List the supersessions the ledger proposes; accept or reject one by its id."""
    if ctx.invoked_subcommand is not None:
        return
    with open_ledger(ctx) as ledger:
        found = ledger.proposals()
    if settings(ctx).json:
        print_json(dump(found))
    else:
        console.print(proposal_table(found))


@proposals_app.command("accept")
def accept(ctx: typer.Context, proposal_id: ProposalId) -> None:
    """Accept a proposal: its newer memory supersedes the older one at its start."""
    with open_ledger(ctx) as ledger:
        newer = ledger.accept(proposal_id)
    show_memory(settings(ctx).json, "Accepted: the newer memory", newer)


@proposals_app.command("reject")
def reject(
    ctx: typer.Context,
    proposal_id: ProposalId,
    reason: Annotated[
        str | None, typer.Option(metavar="TEXT", help="Why, for the audit log.")
    ] = None,
) -> None:
    """Reject a proposal for good: the pair is never proposed again."""
    with open_ledger(ctx) as ledger:
        ledger.reject(proposal_id, reason)
    rejected = str(parse_id(proposal_id))  # the ledger accepted it, so it parses
    if settings(ctx).json:
        print_json({"rejected": rejected})
    else:
        console.print(f"Rejected proposal {rejected}.")


COMMANDS = (search, conflicts)
