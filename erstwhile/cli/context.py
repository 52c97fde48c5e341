"""What every command shares: the global options, and the ledger they open."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import typer

from erstwhile.domain.errors import ErstwhileError, StoreUnavailable, ValidationError
from erstwhile.eventstore import URL_VARIABLE, missing_store, store_before, undo_creation
from erstwhile.eventstore.backend import StoreBefore
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
        for it, as if nothing had ever been remembered (and leave that store behind).
        ``StoreUnavailable`` says where it looked instead.
        """
        missing = None if create else missing_store(self.db)
        if missing is not None:
            raise StoreUnavailable(
                f"no store at {missing}: no ledger has been written there (name the store "
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
    ``import``). Should the command fail, or write nothing (an import of no events), into
    a store that held no ledger, what opening it created goes again: the SQLite file or
    the PostgreSQL schema, or the ledger's tables in a file or schema that held others
    (and the file's journal mode is set back). A refused first write leaves no empty
    store behind, which a later read would answer from as if nothing had been
    remembered. (Another process may have opened the new store meanwhile; it is left
    alone unless the log is still empty.)"""
    db = settings(ctx).db
    before = store_before(db)
    ledger = open_ledger(ctx, create=True)
    try:
        yield ledger
    except BaseException:
        _close_first(ledger, db, before)
        raise
    _close_first(ledger, db, before)


def _close_first(ledger: Ledger, db: str | None, before: StoreBefore) -> None:
    """Close a first write's ledger, taking away the store it created if its log is
    still empty (see :func:`first_write`)."""
    empty = not before.holds_log and _still_empty(ledger)
    ledger.close()
    if empty:
        with suppress(ErstwhileError):  # the command's own outcome is what to report
            undo_creation(db, before)


def _still_empty(ledger: Ledger) -> bool:
    """Whether the ledger's log holds no event (a store that cannot even say is kept)."""
    try:
        return ledger.head() == 0
    except ErstwhileError:
        return False


def refuse_store_files(ledger: Ledger, output: Path) -> None:
    """Refuse to write a command's output over one of the ledger's own files: opening
    it for writing would empty the store."""
    target = output.resolve()
    for own in ledger.log.backend.files():
        # The same path, or another name of the same file (a link).
        if target == own.resolve() or (own.exists() and output.exists() and output.samefile(own)):
            raise ValidationError(
                f"{output} is a file of this ledger's store; write to another file"
            )
