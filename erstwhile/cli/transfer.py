"""Commands that move a ledger between stores: export and import, as JSON Lines."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from erstwhile.cli.context import (
    STDOUT,
    first_write,
    open_ledger,
    refuse_store_files,
    replacing,
    settings,
)
from erstwhile.cli.output import console, errors, print_json, writing_stdout
from erstwhile.cli.params import flag
from erstwhile.ledger.audit import EventCount


def export(
    ctx: typer.Context,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            metavar="FILE",
            dir_okay=False,
            writable=True,
            allow_dash=True,
            help="Write to FILE, replacing it once the export is complete ('-': stdout, "
            "the default).",
        ),
    ] = None,
    all_namespaces: Annotated[
        bool, flag("--all-namespaces", "Every namespace, not only --namespace.")
    ] = False,
) -> None:
    """Export the log as JSON Lines, one event a line, to restore with `import`.

    Content is in plain text, except where a hard forget erased it.
    """
    with open_ledger(ctx) as ledger:
        if output is None or str(output) == STDOUT:
            with writing_stdout():
                ledger.export(sys.stdout.buffer, all_namespaces=all_namespaces)
                sys.stdout.flush()
            return
        refuse_store_files(ledger, output)
        with replacing(output) as file, counter("Exporting", None) as progress:
            written = ledger.export(file, all_namespaces=all_namespaces, progress=progress)
    # Written to a device or a pipe (/dev/stdout, say), the export may be what stdout
    # carries: the summary goes to stderr then, not into the middle of the lines.
    beside = not output.is_file()
    if settings(ctx).json:
        print_json({"exported": written, "output": str(output)}, stderr=beside)
    else:
        (errors if beside else console).print(
            f"Exported {written} events to {output}.", highlight=False, markup=False
        )


def import_(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            dir_okay=False,
            allow_dash=True,
            help="JSON Lines written by `export` ('-' reads stdin).",
            show_default=False,
        ),
    ],
) -> None:
    """Import exported events into an empty store: same ids, positions, times and actors."""
    stdin = str(file) == "-"
    total = count_lines(file) if errors.is_terminal and not stdin else None
    # The file opens first: a missing file must not leave a new, empty store behind.
    with (
        sys.stdin.buffer if stdin else file.open("rb") as lines,
        first_write(ctx) as ledger,
        counter("Importing", total) as progress,
    ):
        imported = ledger.import_events(lines, progress=progress)
        url = ledger.url
    if settings(ctx).json:
        print_json({"imported": imported, "db": url})
    else:
        console.print(f"Imported {imported} events into {url}.", highlight=False, markup=False)


def count_lines(path: Path) -> int:
    """Count a file's lines, for the progress bar's total."""
    with path.open("rb") as file:
        return sum(1 for _ in file)


@contextmanager
def counter(verb: str, total: int | None) -> Iterator[EventCount]:
    """Yield a callback that shows events handled so far on stderr, if it is a terminal."""
    columns = (SpinnerColumn(), TextColumn(verb), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=errors, transient=True, disable=not errors.is_terminal) as bar:
        task = bar.add_task(verb, total=total)

        def advance(done: int) -> None:
            bar.update(task, completed=done)

        yield advance


COMMANDS = (export,)
