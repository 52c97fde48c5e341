"""The ``erstwhile`` command line.

Each command parses its options, calls one ledger method and formats the answer.
Errors print one line on stderr: exit 1 for user errors, 2 for usage, 3 for conflicts.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.exceptions import TyperException

from erstwhile.cli.demo import DemoAnswers, tell_story
from erstwhile.domain.errors import ConcurrencyConflict, ErstwhileError
from erstwhile.domain.memory import Memory
from erstwhile.ledger import Ledger

app = typer.Typer(
    help="erstwhile: a bi-temporal, event-sourced memory ledger.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
errors = Console(stderr=True)


@app.callback()
def options(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db", help="Store URL or SQLite path (default: $ERSTWHILE_URL, else ./erstwhile.db)."
        ),
    ] = None,
    namespace: Annotated[str, typer.Option(help="Namespace to read and write.")] = "default",
    actor: Annotated[str | None, typer.Option(help="Who is writing (default: OS user).")] = None,
    json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """erstwhile: a bi-temporal, event-sourced memory ledger."""
    ctx.obj = {"db": db, "namespace": namespace, "actor": actor, "json": json}


def exit_code(error: ErstwhileError) -> int:
    """Map an error to the command's exit status: 3 for conflicts, 1 for the rest."""
    return 3 if isinstance(error, ConcurrencyConflict) else 1


@app.command()
def demo(
    file: Annotated[
        Path | None,
        typer.Option(help="SQLite file to write the story to (must not exist yet)."),
    ] = None,
) -> None:
    """Tell the Supabase-to-AWS story against a fresh SQLite file and print the answers."""
    path = file or Path(tempfile.mkdtemp(prefix="erstwhile-demo-")) / "demo.db"
    if path.exists():
        raise ErstwhileError(f"{path} already exists; the demo needs a fresh file")
    with Ledger.open(f"sqlite:///{path}", namespace="demo", actor="demo") as ledger:
        answers = tell_story(ledger)
    show_demo(answers, path)


def show_instant(instant: datetime | None) -> str:
    """Format an instant compactly: the date alone at midnight UTC, else date and time."""
    if instant is None:
        return "…"
    if instant.time() == time(0):
        return instant.strftime("%Y-%m-%d")
    return instant.strftime("%Y-%m-%d %H:%M:%SZ")


def memory_table(title: str, memories: list[Memory]) -> Table:
    """Return a table of memories: content, value, valid window, state."""
    table = Table(title=title, title_justify="left")
    for column in ("content", "value", "valid window", "state"):
        table.add_column(column)
    for memory in memories:
        window = f"[{show_instant(memory.valid_from)}, {show_instant(memory.valid_until)})"
        table.add_row(memory.content, str(memory.value), window, memory.state.value)
    return table


def show_demo(answers: DemoAnswers, path: Path) -> None:
    """Print the demo's answers."""
    console.print(f"Recorded the story in [bold]{path}[/bold] (namespace 'demo').\n")
    console.print(memory_table("What database does the team use now?", answers.now))
    console.print(memory_table("As of 2026-03-15 (valid time)", answers.in_march))
    console.print(memory_table("As of exactly 2026-07-01, the hand-over", answers.at_handover))
    console.print(
        memory_table(
            "On 2026-07-01, as the ledger knew it before the move was recorded",
            answers.known_before_move,
        )
    )
    console.print(memory_table("The chain, oldest first", answers.chain))
    console.print(
        f"\n{answers.aws.content!r} supersedes {answers.aws.supersedes[0]}; "
        f"{answers.supabase.content!r} is superseded by {answers.aws.id}."
    )
    console.print(f"Explore it: erstwhile --db sqlite:///{path} --namespace demo ...")


def main() -> None:
    """Run the command line, turning erstwhile's errors into one line and an exit code."""
    try:
        result = app(standalone_mode=False)
    except ErstwhileError as error:
        fail(str(error), exit_code(error))
    except typer.Abort:
        fail("aborted", 1)
    except TyperException as error:
        formatter = getattr(error, "format_message", None)
        message = formatter() if callable(formatter) else str(error)
        fail(message, int(getattr(error, "exit_code", 2)))
    sys.exit(result if isinstance(result, int) else 0)


def fail(message: str, code: int) -> None:
    """Print one line on stderr and exit with ``code``."""
    errors.print(f"error: {' '.join(message.split())}", highlight=False, markup=False)
    sys.exit(code)
