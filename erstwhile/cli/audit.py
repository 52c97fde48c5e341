"""``erstwhile audit``: read the log itself, as an auditor does."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from erstwhile.cli.context import open_ledger, settings
from erstwhile.cli.output import console, dump, event_table, print_json
from erstwhile.cli.params import time_option

audit_app = typer.Typer(
    help="Read the append-only log: who wrote what, and when.", no_args_is_help=True
)


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
