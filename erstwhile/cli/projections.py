"""``erstwhile projections``: the read models folded from the log, for operators."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from erstwhile.cli.context import open_ledger, settings
from erstwhile.cli.output import console, dump, errors, print_json, status_table
from erstwhile.cli.params import App, flag
from erstwhile.domain.views import ProjectionStatus
from erstwhile.projections.base import Progress as ProgressCallback

projections_app = App(
    help="Inspect, rebuild and follow the read models folded from the log.",
    no_args_is_help=True,
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
    """Rebuild projections from position 0 of the log, showing progress.

    NAME's readers are rebuilt with it (proposals, for memories or memory_versions)."""
    reached: dict[str, int] = {}
    # Opened without folding: a projection the rebuild is to repair (its tables or its
    # position changed by hand) may not take the log's next events.
    with open_ledger(ctx, sync_projections=False) as ledger, progress_bar(reached) as progress:
        names = ledger.rebuild(name, progress=progress)
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
    # Without folding first: the point is to see how far behind the projections are.
    with open_ledger(ctx, sync_projections=False) as ledger:
        statuses = ledger.projection_status()
    show_status(settings(ctx).json, statuses)


def show_status(as_json: bool, statuses: list[ProjectionStatus]) -> None:
    """Print each projection's position and lag behind the log's head."""
    if as_json:
        print_json(dump(statuses))
    else:
        console.print(status_table(statuses))


POLL_AT_MOST = 86_400
"""The longest wait ``projections run --poll`` takes (a day): a longer one, or one that
is no finite number, is a usage error, whether or not ``--once`` leaves it unused."""


@projections_app.command("run")
def run(
    ctx: typer.Context,
    poll: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            min=0.01,
            max=POLL_AT_MOST,
            help="Longest wait between looks for new events (PostgreSQL wakes on each commit).",
        ),
    ] = 0.5,
    once: Annotated[bool, flag("--once", "Catch up with the log once, then stop.")] = False,
) -> None:
    """Keep the projections current for writers that only append, until stopped.

    Writers opened with sync_projections=False leave folding to this follower; it applies
    new events as they are committed, until Ctrl-C or SIGTERM.
    """
    # A follower may start before the store's first write, as a server would.
    with open_ledger(ctx, sync_projections=False, create=True) as ledger:
        if once:
            ledger.runner.catch_up()
        else:
            with stop_on_signals() as stop:
                errors.print(
                    f"Following {ledger.url}; Ctrl-C stops.",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
                ledger.follow(stop=stop, poll=poll)
        statuses = ledger.projection_status()
    show_status(settings(ctx).json, statuses)


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """Yield an event that SIGINT or SIGTERM sets; restore the old handlers after."""
    stop = threading.Event()
    caught = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, lambda *_: stop.set()) for number in caught}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
