"""What every command shares: the global options, and the ledger they open."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import typer

from erstwhile.cli.output import ReaderGone, named
from erstwhile.domain.errors import StoreUnavailable, ValidationError
from erstwhile.eventstore import URL_VARIABLE, missing_store, real_path
from erstwhile.ledger import Ledger


@dataclass(frozen=True)
class Settings:
    """The global options, kept in ``ctx.obj`` for every command below the app."""

    db: str | None = None
    namespace: str = "default"
    actor: str | None = None
    json: bool = False

    def open(self, *, sync_projections: bool = True, create: bool = False) -> Ledger:
        """Open the ledger these options name (a URL, a bare SQLite path, or the default).

        ``sync_projections=False`` opens it to append only, for a projection follower.
        Only with ``create`` may a store that is not there be made (a SQLite file, or the
        tables of a PostgreSQL schema): a read of a mistyped ``--db`` or schema, or run in
        another folder than the store's, would otherwise answer from an empty store made
        for it, as if nothing had ever been remembered (and leave that store behind). A
        store whose log holds no event is refused alike (another program's database, or
        what a refused first write left): ``StoreUnavailable`` says where it looked.
        """
        missing = None if create else missing_store(self.db)
        if missing is not None:
            raise StoreUnavailable(
                f"no store at {missing}: no events have been written there (name the store "
                f"with --db or ${URL_VARIABLE}; `erstwhile remember` or `import` creates one)"
            )
        return Ledger.open(
            self.db,
            namespace=self.namespace,
            actor=self.actor,
            sync_projections=sync_projections,
        )


def settings(ctx: typer.Context) -> Settings:
    """Return the global options of this invocation (defaults when run without the app)."""
    found = ctx.find_object(Settings)
    return found if found is not None else Settings()


def open_ledger(
    ctx: typer.Context, *, sync_projections: bool = True, create: bool = False
) -> Ledger:
    """Open the ledger the global options name; use it in a ``with`` block. Only a
    command that can be a store's first write passes ``create`` (see :meth:`Settings.open`)."""
    return settings(ctx).open(sync_projections=sync_projections, create=create)


@contextmanager
def first_write(ctx: typer.Context) -> Iterator[Ledger]:
    """Open the ledger for a command that may be its store's first write (``remember``,
    ``import``), creating the store if need be (``remember`` checks its input before:
    bad input makes no store). Should the command be refused once the store is open
    (an id a new store cannot know, a file that is no export), the store it created
    stays, empty: another process may have opened it meanwhile and written
    to it, or be about to (removing a SQLite file another connection has open loses
    what that connection writes next, while it is told its write was stored). Reads
    refuse a store whose log holds no event all the same (see :meth:`Settings.open`)."""
    ledger = open_ledger(ctx, create=True)
    try:
        yield ledger
    finally:
        ledger.close()


def refuse_store_files(ledger: Ledger, output: Path) -> None:
    """Refuse to write a command's output over one of the ledger's own files: opening
    it for writing would empty the store."""
    target = real_path(output)
    for own in ledger.log.backend.files():
        # The same path, or another name of the same file (a link).
        if target == real_path(own) or (own.exists() and output.exists() and output.samefile(own)):
            raise ValidationError(
                f"{output} is a file of this ledger's store; write to another file"
            )


STDOUT = "-"
"""The name of standard output where a command takes a file to write (``--output -``)."""


@contextmanager
def replacing(output: Path) -> Iterator[IO[bytes]]:
    """Open ``output`` to be written whole.

    A file (or a new one) is written beside it under a temporary name and renamed over
    it once complete, so an export cut short (Ctrl-C, a failure half-way) leaves the file
    as it was, never a shorter log, which would import as a valid one. The file keeps
    its mode (a new one gets the umask's), and a link is followed to the file it names.
    Anything else (``/dev/stdout``, a pipe, a process substitution) is written as it is,
    and so is a file whose folder takes no new file."""
    target, temporary = real_path(output), None
    if not output.exists() or output.is_file():  # stat follows links, as open() does
        try:
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        except PermissionError:  # a folder that takes no new file: write the file itself
            pass
        except OSError as error:  # named as the file asked for, not the temporary one
            raise named(error, str(output)) from None
    if temporary is None:
        try:
            with output.open("wb") as file:
                yield file
        except BrokenPipeError:  # a pipe whose reader went away, as stdout's would
            raise ReaderGone from None
        except OSError as error:  # a full device, say: named as the file asked for
            if error.errno and error.filename is None:
                raise named(error, str(output)) from None
            raise
        return
    try:
        with os.fdopen(handle, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, target.stat().st_mode if target.exists() else _created_mode())
        os.replace(temporary, target)
    except BaseException as error:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        if isinstance(error, OSError) and error.errno and error.filename in (temporary, None):
            raise named(error, str(output)) from None
        raise


def _created_mode() -> int:
    """Return the mode a new file gets under this process's umask (read by setting it)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
