"""``erstwhile audit``: read the log itself, as an auditor does."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from erstwhile.cli.context import open_ledger, settings
from erstwhile.cli.output import (
    console,
    dump,
    event_table,
    print_json,
    show_instant,
    show_memories,
)
from erstwhile.cli.params import App, parse_known_at, time_option
from erstwhile.cli.projections import progress_bar
from erstwhile.domain.errors import ErstwhileError

audit_app = App(help="Read the append-only log: who wrote what, and when.", no_args_is_help=True)


@audit_app.command("log")
def log(
    ctx: typer.Context,
    after: Annotated[
        int | None, typer.Option(metavar="N", help="Only events after log position N.")
    ] = None,
    until: Annotated[
        int | None, typer.Option(metavar="N", help="Only events up to log position N (included).")
    ] = None,
    since: Annotated[datetime | None, time_option("Only events recorded at or after")] = None,
    before: Annotated[datetime | None, time_option("Only events recorded before")] = None,
    memory: Annotated[
        str | None, typer.Option("--memory", metavar="ID", help="Only this memory's events.")
    ] = None,
    by_actor: Annotated[
        str | None, typer.Option("--by-actor", metavar="NAME", help="Only events this actor wrote.")
    ] = None,
) -> None:
    """List the stored events of this namespace in log order."""
    with open_ledger(ctx) as ledger:
        events = list(
            ledger.events(
                after=after,
                until=until,
                since=since,
                before=before,
                memory_id=memory,
                actor=by_actor,
            )
        )
    if settings(ctx).json:
        print_json(dump(events))
    else:
        console.print(event_table(events))


@audit_app.command("verify")
def verify(ctx: typer.Context) -> None:
    """Check the log: its hash chain, its memories' keys, its tail; fail at the first break.

    With --json the report (ok, checked, first_break, reason) is printed either way.
    """
    # Without folding first: a tampered log may not fold, and must still be checked.
    with open_ledger(ctx, sync_projections=False) as ledger:
        report = ledger.verify()
    if settings(ctx).json:
        # The report either way, so a script reads where the chain broke from stdout
        # (the exit code and stderr still say that it did).
        print_json(dump(report))
    elif report.ok:
        console.print(f"Hash chain intact: {report.checked} events checked.")
    if not report.ok:
        raise ErstwhileError(f"log broken at position {report.first_break}: {report.reason}")


@audit_app.command("replay")
def replay(
    ctx: typer.Context,
    subject: Annotated[
        str, typer.Option(metavar="TEXT", help="Whose facts to show.", show_default=False)
    ],
    known_at: Annotated[
        datetime | None,
        time_option(
            "Rebuild the ledger as it stood at this instant (default and 'now': as it stands)",
            parse_known_at,
        ),
    ] = None,
    attribute: Annotated[
        str | None, typer.Option(metavar="TEXT", help="Only this property.")
    ] = None,
    as_of: Annotated[
        datetime | None, time_option("What was true at this valid time (default: --known-at)")
    ] = None,
) -> None:
    """Replay the log up to --known-at into a scratch store and show --subject's facts there.

    Unlike `facts --known-at`, which reads the projections, this rebuilds them from the log.
    """
    with open_ledger(ctx) as ledger:
        with progress_bar({}) as progress:
            past = ledger.replay(known_at=known_at, progress=progress)
        with past:
            found = past.facts(subject, attribute, as_of=as_of)
    about = f"{subject} {attribute}" if attribute else subject
    when = f" as of {show_instant(as_of)}" if as_of else ""
    title = f"Facts about {about}{when}, replayed as known at {show_instant(past.now())}"
    show_memories(settings(ctx).json, title, found)
