"""The ``erstwhile`` command line.

Each command parses its options, calls one ledger method and formats the answer.
Errors print one line on stderr: exit 1 for user errors (and files that cannot be read or
written), 2 for usage, 3 for conflicts.
"""

from __future__ import annotations

import io
import os
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from typer.exceptions import TyperException

from erstwhile.cli import reads, recall, timeline, transfer, writes
from erstwhile.cli.audit import audit_app
from erstwhile.cli.context import Settings, settings
from erstwhile.cli.demo import DemoAnswers, tell_story
from erstwhile.cli.output import (
    STDOUT_NAME,
    ReaderGone,
    console,
    dump,
    memory_table,
    print_json,
    printable,
    whole_stdout,
    writing_stdout,
)
from erstwhile.cli.params import INVOCATION_NOW, TIME_HELP, App, flag
from erstwhile.cli.projections import projections_app
from erstwhile.domain.errors import ConcurrencyConflict, ErstwhileError
from erstwhile.ledger import Ledger

app = App(
    help=f"erstwhile: a bi-temporal, event-sourced memory ledger.\n\n{TIME_HELP}",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for command in (
    *writes.COMMANDS,
    *reads.COMMANDS,
    *recall.COMMANDS,
    timeline.timeline,
    *transfer.COMMANDS,
):
    app.command()(command)
app.command("import")(transfer.import_)
app.add_typer(recall.proposals_app, name="proposals")
app.add_typer(audit_app, name="audit")
app.add_typer(projections_app, name="projections")


@app.callback()
def options(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help="Store URL or SQLite path (default: $ERSTWHILE_URL, else ./erstwhile.db). "
            "Only remember, import and projections run create a store (a SQLite file, a "
            "PostgreSQL schema's tables).",
        ),
    ] = None,
    namespace: Annotated[
        str, typer.Option(metavar="NS", help="Namespace to read and write.")
    ] = "default",
    actor: Annotated[
        str | None, typer.Option(metavar="NAME", help="Who is writing (default: OS user).")
    ] = None,
    json: Annotated[bool, flag("--json", "Print JSON instead of tables.")] = False,
) -> None:
    """erstwhile: a bi-temporal, event-sourced memory ledger."""
    ctx.obj = Settings(db=db, namespace=namespace, actor=actor, json=json)
    INVOCATION_NOW.set(datetime.now(UTC))


def error_message(error: ErstwhileError) -> str:
    """Return the error's message followed by its notes (what else went wrong
    meanwhile, or what the user may need to do), all on one line."""
    return "; ".join([str(error), *getattr(error, "__notes__", ())])


def exit_code(error: ErstwhileError) -> int:
    """Map an error to the command's exit status: 3 for conflicts, 1 for the rest."""
    return 3 if isinstance(error, ConcurrencyConflict) else 1


@app.command()
def demo(
    ctx: typer.Context,
    file: Annotated[
        str | None,
        typer.Option(
            metavar="PATH", help="SQLite file to write the story to: a path, not yet existing."
        ),
    ] = None,
) -> None:
    """Tell the Supabase-to-AWS story against a fresh SQLite file and print the answers.

    The story gets a store of its own, in namespace 'demo': --db, --namespace and
    --actor are refused here (give the file with --file). Without --file, the file is
    made in a new folder under the system's temporary directory and left there for
    other commands to read: the last line says how.
    """
    refuse_store_options(ctx)
    if file is not None and "://" in file:
        raise typer.BadParameter(
            "give the demo's file as a path (demo.db), not as a URL", param_hint="'--file'"
        )
    path = Path(file) if file else Path(tempfile.mkdtemp(prefix="erstwhile-demo-")) / "demo.db"
    if path.exists():
        raise ErstwhileError(f"{path} already exists; the demo needs a fresh file")
    with Ledger.open(f"sqlite:///{path}", namespace="demo", actor="demo") as ledger:
        answers = tell_story(ledger)
    if settings(ctx).json:
        print_json({"file": str(path), "namespace": "demo", **{
            name: dump(getattr(answers, name)) for name in DEMO_QUESTIONS
        }})  # fmt: skip
    else:
        show_demo(answers, path)


def refuse_store_options(ctx: typer.Context) -> None:
    """Refuse ``--db``, ``--namespace`` and ``--actor`` before ``demo``: it writes a
    fresh file of its own (``--file``), in namespace ``demo``, and would otherwise leave a
    store the user named untouched without a word."""
    given = [f"--{name}" for name in ("db", "namespace", "actor") if _typed_before(ctx, name)]
    if given:
        raise typer.BadParameter(
            "not for demo: it writes a fresh SQLite file of its own, in namespace 'demo' "
            "(choose the file with demo --file PATH)",
            param_hint=" / ".join(f"'{option}'" for option in given),
        )


def _typed_before(ctx: typer.Context, name: str) -> bool:
    """Tell whether the option ``name`` of the command above ``ctx``'s (``erstwhile``
    itself) was given on the command line."""
    source = ctx.parent.get_parameter_source(name) if ctx.parent is not None else None
    return source is not None and source.name == "COMMANDLINE"


DEMO_QUESTIONS = ("now", "in_march", "at_handover", "known_before_move", "chain")
"""The demo's answers, by the names ``--json`` gives them."""


def show_demo(answers: DemoAnswers, path: Path) -> None:
    """Print the demo's answers."""
    console.print(f"Recorded the story in [bold]{escape(str(path))}[/bold] (namespace 'demo').\n")
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
    # One line however narrow the terminal, so it can be copied whole.
    explore = f"erstwhile --db {shlex.quote(f'sqlite:///{path}')} --namespace demo ..."
    console.print(f"Explore it: {explore}", markup=False, soft_wrap=True)


def main() -> None:
    """Run the command line, turning erstwhile's errors into one line and an exit code."""
    speak_any_terminal()
    whole_stdout()
    try:
        result = app(standalone_mode=False)
        if sys.stdout is not None:  # None: run with stdout closed (`>&-`)
            with writing_stdout():
                sys.stdout.flush()  # what is left, while its failure still has a message
    except ErstwhileError as error:
        fail(error_message(error), exit_code(error))
    except typer.Abort:
        fail("aborted", 1)
    except TyperException as error:
        fail(usage_message(error), int(getattr(error, "exit_code", 2)))
    except (BrokenPipeError, ReaderGone):
        # The reader went away (e.g. `| head`): stop quietly, as other Unix tools do,
        # with the status of a program stopped by SIGPIPE, not 1 (refused: a write that
        # was stored would be retried); point stdout at /dev/null so the interpreter's
        # final flush cannot fail again.
        drop_pending_output()
        sys.exit(BROKEN_PIPE_EXIT)
    except OSError as error:  # stdout, or a file named on the command line (export, --svg)
        if error.filename == STDOUT_NAME:  # full: what it still holds would fail again at exit
            drop_pending_output()
        fail(f"{error.filename}: {error.strerror}" if error.filename else str(error), 1)
    sys.exit(result if isinstance(result, int) else 0)


def drop_pending_output() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what it still
    holds cannot fail again (a traceback and exit 120)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


BROKEN_PIPE_EXIT = 128 + 13
"""The exit status after the output's reader went away: a shell's for SIGPIPE (13)."""
GLOBAL_OPTIONS = ("--db", "--namespace", "--actor", "--json")
"""The options of ``erstwhile`` itself (see :func:`options`): they go before the command."""


def usage_message(error: TyperException) -> str:
    """The message of a usage error; for a global option given after the command
    (``erstwhile facts team --json``), where it goes instead."""
    option = getattr(error, "option_name", None)
    unknown_here = hasattr(error, "possibilities")  # no such option (not one left bare)
    if option in GLOBAL_OPTIONS and unknown_here:
        return (
            f"{option} is an option of erstwhile itself: give it before the command "
            f"(erstwhile {option} ... COMMAND ...)"
        )
    return error.format_message()


def speak_any_terminal() -> None:
    """Show a character the terminal's encoding lacks (a Latin-1 or ASCII locale) as its
    escape (``\\u6771``), not fail on it: the command may already have written, and an
    exit 1 then would tell the user to retry a write that was stored."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def fail(message: str, code: int) -> None:
    """Print one line on stderr and exit with ``code``.

    An empty message means the help was already shown (a group run without a command).
    """
    if message.strip():
        # Plain text, not rich: rich would wrap a long message onto several lines. Its
        # control characters are shown, not obeyed, as the console shows them: a file
        # name or a URL the user gave may hold an escape sequence.
        print(f"error: {printable(' '.join(message.split()))}", file=sys.stderr)
    sys.exit(code)
