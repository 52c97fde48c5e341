"""``erstwhile projections``: the read models folded from the log, for operators."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from erstwhile.cli.context import open_ledger, settings
from erstwhile.cli.output import console, errors, print_json, status_table
from erstwhile.projections.base import Progress as ProgressCallback

projections_app = typer.Typer(
    help="Inspect and rebuild the read models folded from the log.", no_args_is_help=True
)


@projections_app.command("rebuild")
def rebuild(
    ctx: typer.Context,
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME", help="Only this projection (default: all).", show_default=False
        ),
    ] = None,
) -> None:
    """Rebuild projections from position 0 of the log, showing progress."""
    reached: dict[str, int] = {}
    with open_ledger(ctx) as ledger, progress_bar(reached) as progress:
        ledger.rebuild(name, progress=progress)
        names = [p.name for p in ledger.runner.projections if name in (None, p.name)]
    position = max(reached.values(), default=0)
    if settings(ctx).json:
        print_json({"rebuilt": names, "position": position})
    else:
        console.print(f"Rebuilt {', '.join(names)} up to log position {position}.")


@contextmanager
def progress_bar(reached: dict[str, int]) -> Iterator[ProgressCallback]:
    """Yield a rebuild callback that draws one bar per projection on stderr.

    It also records in ``reached`` the position each projection got to.
    """
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    shown = errors.is_terminal
    with Progress(*columns, console=errors, transient=True, disable=not shown) as bars:
        tasks: dict[str, TaskID] = {}

        def advance(projection: str, position: int, head: int) -> None:
            reached[projection] = position
            if projection not in tasks:
                tasks[projection] = bars.add_task(projection, total=head)
            bars.update(tasks[projection], completed=position, total=head)

        yield advance


@projections_app.command("status")
def status(ctx: typer.Context) -> None:
    """Show how far each projection has folded the log, and the log's head."""
    with open_ledger(ctx) as ledger:
        positions = ledger.runner.positions()
        head = ledger.head()
    if settings(ctx).json:
        print_json({"head": head, "projections": positions})
    else:
        console.print(status_table(head, positions))
