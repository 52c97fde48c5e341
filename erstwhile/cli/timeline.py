"""``erstwhile timeline``: the bi-temporal picture of a subject's memories.

Each version of a memory is a rectangle (``Ledger.timeline``): its valid window across,
the interval of recorded (transaction) time during which the ledger held it that way
down.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from erstwhile.cli.context import STDOUT, open_ledger, refuse_store_files, replacing, settings
from erstwhile.cli.output import console, dump, print_json, writing_stdout
from erstwhile.cli.picture import Axis, draw, svg_document


def timeline(
    ctx: typer.Context,
    subject: Annotated[
        str, typer.Argument(metavar="SUBJECT", help="Whose memories to draw.", show_default=False)
    ],
    attribute: Annotated[
        str | None,
        typer.Argument(metavar="ATTRIBUTE", help="Only this property.", show_default=False),
    ] = None,
    svg: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            dir_okay=False,
            allow_dash=True,
            help="Write the picture as SVG to FILE instead ('-': stdout).",
        ),
    ] = None,
) -> None:
    """Draw every version of SUBJECT's memories: valid time across, recorded time down.

    A forgotten memory's versions stop at its forget; a hard-forgotten one is not drawn.
    """
    to_stdout = svg is not None and str(svg) == STDOUT
    if to_stdout and settings(ctx).json:
        raise typer.BadParameter("--svg - writes the SVG to stdout: leave out --json")
    with open_ledger(ctx) as ledger:
        if svg is not None and not to_stdout:
            refuse_store_files(ledger, svg)
        rectangles = ledger.timeline(subject, attribute)
    title = f"Timeline of {subject} {attribute}" if attribute else f"Timeline of {subject}"
    axis = Axis.spanning(rectangles) if rectangles else None
    if to_stdout:
        with writing_stdout():
            sys.stdout.write(svg_document(title, rectangles, axis))
            sys.stdout.flush()
        return
    if svg is not None:
        with replacing(svg) as file:
            file.write(svg_document(title, rectangles, axis).encode("utf-8"))
    if settings(ctx).json:
        print_json(dump(rectangles))
    elif svg is not None:
        console.print(f"Wrote {len(rectangles)} versions to {svg}.", highlight=False, markup=False)
    else:
        console.print(draw(escape(title), rectangles, axis, console.width))
