"""Audit: prove the log is intact, replay it as it stood at a past instant, and move it
between stores as JSON Lines."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import orjson
import pydantic

from erstwhile.domain.errors import StoreUnavailable, ValidationError, brief
from erstwhile.domain.events import LEDGER_EVENTS, Asserted, LedgerEvent
from erstwhile.domain.lifecycle import DRAFT_FIELDS, LogCheck
from erstwhile.domain.memory import Memory, exact_json, parse_draft
from erstwhile.domain.time import LAST_INSTANT, Instant, to_utc
from erstwhile.domain.views import VerifyReport
from erstwhile.eventstore import EventFilter, EventLog, open_backend, translated_errors
from erstwhile.eventstore.log import Restored
from erstwhile.ledger.arguments import binary_output, callback, check_name, flag, optional_text
from erstwhile.ledger.core import LedgerCore
from erstwhile.ledger.curation import Curation
from erstwhile.ledger.reads import Queries, event_data
from erstwhile.projections.base import Progress

EVENT_TYPES: dict[str, type[LedgerEvent]] = {cls.__name__: cls for cls in LEDGER_EVENTS}
IMPORT_BATCH = 1000
EventCount = Callable[[int], None]
"""Called with the number of events handled so far, for progress bars."""


class BrokenLog(StoreUnavailable):
    """The log does not verify: a stored event's hash does not match, a memory's key
    is gone without a hard forget, or events are missing from its end (see
    :meth:`Audit.verify`). Trying again changes nothing."""


def refuse_a_broken_log(report: VerifyReport, command: str, because: str) -> None:
    """Raise :class:`BrokenLog` naming ``command`` and why it refuses, if ``report``
    found a break."""
    if not report.ok:
        raise BrokenLog(
            f"the log is broken at position {report.first_break} ({report.reason}; verify "
            f"says so): {command} refused, {because}"
        )


class Audit(LedgerCore):
    """verify, replay, export, import_events."""

    _keys_prove_forgets = True
    """Whether a memory's missing key must be explained by a hard ``Forgotten`` in the
    log (see :meth:`verify`)."""

    def verify(self) -> VerifyReport:
        """Recompute the hash chain over the whole log and report the first break: a
        stored hash that does not match, a memory whose key is gone without a hard
        forget, or a log shorter than the projections say it was (a chain cannot prove
        its own tail, but the projections remember how far they applied it).

        ``StoreUnavailable`` when ``$ERSTWHILE_MASTER_KEY`` unwraps none of the wrapped
        keys: it is not the store's (without one, wrapped keys are checked for presence)."""
        checked, first_break, reason = self.log.verify(keys=self._keys_prove_forgets)
        if first_break is None:
            with translated_errors(), self.log.backend.read() as sql:
                cut = self.runner.log_cut(sql)
            if cut is not None:
                first_break, reason = cut.head + 1, str(cut)
        return VerifyReport(ok=first_break is None, checked=checked, first_break=first_break,
                            reason=reason)  # fmt: skip

    def _refuse_a_broken_log(self, command: str, because: str) -> None:
        """Raise :class:`BrokenLog` if the log does not verify; an event at the break
        that cannot be read at all is named as the reads name it (why it cannot)."""
        report = self.verify()
        if not report.ok and report.first_break is not None:
            at = EventFilter(after=report.first_break - 1, until=report.first_break)
            for _ in self.log.events(at):
                pass
        refuse_a_broken_log(report, command, because)

    def _refuse_a_broken_prefix(self, copied: int) -> None:
        """Refuse a replay whose prefix (up to position ``copied``) does not verify: a
        break within it (a changed event, a key gone without a hard forget), or events
        cut from the log's end when the prefix reaches it. A replay's answers are for
        audits that do not trust the projections; a break after the prefix leaves them
        as they are."""
        report = self.verify()
        if report.ok or report.first_break is None:
            return
        head = self.head()
        cut = report.first_break > head and copied >= head
        if report.first_break <= copied or cut:
            refuse_a_broken_log(
                report,
                "replay",
                "since its answers would come from a log changed behind the ledger",
            )

    def replay(
        self, known_at: Instant | None = None, progress: Progress | None = None
    ) -> ReplayLedger:
        """Rebuild every projection from the log as it stood at ``known_at`` into a scratch
        store, and return a read-only ledger over it (close it when done); ``None``: as
        the ledger knows it now (the clock, but never behind the log). ``progress``
        is called as ``rebuild`` calls it, while the projections are folded.

        Refused (``StoreUnavailable``) when that prefix of the log does not verify (an
        event changed, a key gone without a hard forget, or, for a prefix reaching the
        log's end, events cut from it): its answers would come from a log changed
        behind the ledger's back."""
        instant = None if known_at is None else to_utc(known_at, "known_at")
        callback(progress, "progress")
        if instant is None:
            with translated_errors(), self.log.backend.read() as sql:
                instant = self._present(sql)
        folder = Path(tempfile.mkdtemp(prefix="erstwhile-replay-"))
        try:
            scratch = EventLog(open_backend(f"sqlite:///{folder}/replay.db"), self.log.keyring)
            # As known at the calendar's last instant: the whole log.
            before = None if instant == LAST_INSTANT else instant + _TICK
            copy_log(self.log, scratch, EventFilter(before=before))
            self._refuse_a_broken_prefix(scratch.head())
            replayed = ReplayLedger(scratch, namespace=self.namespace, actor=self.actor,
                                    clock=lambda: instant, folder=folder)  # fmt: skip
            replayed.runner.setup()
            # Folded as a rebuild folds (the live search index filled once, the indexes
            # only reads use created last), not caught up into the tables just created.
            replayed.runner.rebuild(progress=progress)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return replayed

    def export(self, out: IO[bytes], *, all_namespaces: bool = False,
               progress: EventCount | None = None) -> int:  # fmt: skip
        """Write this namespace's events (or every namespace's) as JSON Lines, content in
        plain text except where it was erased; return how many were written.

        Refused (``StoreUnavailable``, nothing written) when the log does not verify: an import
        chains the events it restores anew, so the copy of a log changed behind the
        ledger's back would verify. ``progress``, when given, is called with the number
        of events written so far (``progress(1000)``), for a progress bar."""
        binary_output(out)
        flag(all_namespaces, "all_namespaces")
        callback(progress, "progress")
        self._refuse_a_broken_log("export", "since an import of it would chain it anew and verify")
        selection = EventFilter(namespace=None if all_namespaces else self.namespace)
        fingerprints = self.log.fingerprints(selection.namespace)
        written = 0
        for record, event in self.log.events(selection):
            data = event_data(event)
            if isinstance(event, Asserted) and event.erased:
                data = {k: v for k, v in data.items() if k not in _SEALED} | {"erased": True}
            line = {
                "position": record.position, "recorded_at": record.recorded_at,
                "type": record.type, "schema_version": record.schema_version,
                "memory_id": record.memory_id, "version": record.version,
                "actor": record.actor, "namespace": record.namespace, "data": data,
            }  # fmt: skip
            if isinstance(event, Asserted) and event.idempotency_key is not None:
                if record.memory_key not in fingerprints and not event.erased:
                    # Written after the export began (a claim commits with its event):
                    # read them again, at most once per page of newer events.
                    fingerprints = self.log.fingerprints(selection.namespace)
                line["fingerprint"] = fingerprints.get(record.memory_key)
            out.write(orjson.dumps(line) + b"\n")
            written += 1
            if progress is not None:
                progress(written)
        return written

    def import_events(
        self, lines: Iterable[bytes | str], progress: EventCount | None = None
    ) -> int:
        """Restore exported events into this empty store: same ids, positions, instants,
        actors and windows. Refused (nothing written) when the store already has events,
        when any line is not an exported event, or when the lines make a log the
        commands could never have written (an event for a memory no earlier line
        asserts, or after its hard forget; a broken supersession link; events out of
        order): the error names the line, and the whole import is one transaction.
        ``progress``, when given, is called with the number of events restored so far."""
        lines = _lines(lines)
        callback(progress, "progress")
        if self.head() != 0:
            raise ValidationError(
                f"import needs an empty store; this one already holds events (its log "
                f"reaches position {self.head()})"
            )
        restored = self.log.restore(_batches(_parse(lines), IMPORT_BATCH), progress)
        self.runner.catch_up()
        return restored


class ReplayLedger(Queries, Curation, Audit):
    """A read-only ledger over a scratch store, with the same queries as a ledger (the
    audit ones too: ``verify`` checks the copied prefix's chain, ``export`` writes the
    log as it stood, ``replay`` goes further back); closing it deletes the store. Its
    export is for reading: a memory hard-forgotten after the replay's instant comes in it
    erased without its forget, so ``import_events`` refuses it (export the live ledger to
    move a store)."""

    _keys_prove_forgets = False
    """A replay holds the keys that exist now: a memory hard-forgotten after its instant
    has lost its key, while the prefix holds no ``Forgotten``."""

    def __init__(self, log: EventLog, *, folder: Path, **options: Any) -> None:
        super().__init__(log, **options)
        self.folder = folder
        # The scratch store holds the prefix's ciphertext and today's keys: a replay
        # never closed must not outlive its process (nor its last reference) on disk,
        # or a memory hard-forgotten later stays readable there.
        self._delete = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)

    def close(self) -> None:
        """Release the scratch store and delete it."""
        super().close()
        self._delete()

    def accept(self, proposal_id: UUID | str) -> Memory:
        """Refused: a replay is read-only."""
        raise _read_only("accept")

    def reject(self, proposal_id: UUID | str, reason: str | None = None) -> None:
        """Refused: a replay is read-only."""
        raise _read_only("reject")

    def remember(self, *args: Any, **kwargs: Any) -> Memory:
        """Refused: a replay is read-only."""
        raise _read_only("remember")

    def remember_many(self, *args: Any, **kwargs: Any) -> list[Memory]:
        """Refused: a replay is read-only."""
        raise _read_only("remember_many")

    def revise(self, *args: Any, **kwargs: Any) -> Memory:
        """Refused: a replay is read-only."""
        raise _read_only("revise")

    def archive(self, *args: Any, **kwargs: Any) -> Memory:
        """Refused: a replay is read-only."""
        raise _read_only("archive")

    def forget(self, *args: Any, **kwargs: Any) -> None:
        """Refused: a replay is read-only."""
        raise _read_only("forget")

    def import_events(self, *args: Any, **kwargs: Any) -> int:
        """Refused: a replay is read-only."""
        raise _read_only("import_events")


def _read_only(command: str) -> ValidationError:
    return ValidationError(f"a replay is read-only: {command} on the live ledger instead")


def copy_log(source: EventLog, target: EventLog, selection: EventFilter) -> None:
    """Copy stored events verbatim (hashes and ciphertext included) with their keys,
    each key with its memory's first event (a memory's later events may come in a later
    batch, and its key is copied once)."""
    for batch in _batches((r for r, _ in source.events(selection)), IMPORT_BATCH):
        with translated_errors(), source.backend.read() as sql:
            keys = source.keyring.fetch(sql, [r.memory_id for r in batch if r.version == 1])
        with translated_errors(), target.backend.write() as sql:
            target.backend.insert_events(sql, batch)
            namespaces = {r.memory_id: r.namespace for r in batch}
            target.keyring.store(sql, ((i, namespaces[i], k) for i, k in keys.items()))


_SEALED = ("content", "value", "entities", "evidence", "metadata")
_TICK = to_utc("1970-01-01T00:00:00.000001Z") - to_utc("1970-01-01T00:00:00Z")


def _parse(lines: Iterable[bytes | str]) -> Iterator[Restored]:
    """Read the lines into events to restore, each checked against the log before it
    (see :class:`LogCheck`); the last is yielded only once the whole log checks out."""
    check = LogCheck()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = exact_json(line)
            entry = _restored(raw)
        except KeyError as error:
            raise ValidationError(
                f"import line {number}: not an exported event (no field {error.args[0]!r})"
            ) from None
        except (orjson.JSONDecodeError, TypeError, ValueError, ValidationError,
                pydantic.ValidationError) as error:  # fmt: skip
            first = str(error).splitlines()[0]
            raise ValidationError(
                f"import line {number}: not an exported event ({first})"
            ) from None
        try:
            _as_the_commands_take_it(raw["data"], type(entry.event))
        except ValidationError as error:
            raise ValidationError(f"import line {number}: {error}") from None
        check.follow(number, entry.position, entry.recorded_at, entry.namespace, entry.event)
        yield entry
    check.finish()


def _as_the_commands_take_it(data: dict[str, Any], kind: type[LedgerEvent]) -> None:
    """Refuse a line's data that a command would refuse as it stands: the event's model
    reads JSON leniently (``"0.5"`` as a confidence of 0.5, ``true`` as 1.0, a blank
    entity dropped), so a claim is checked as written, as ``remember`` checks its
    arguments, and so is a reason, as ``archive``, ``forget`` and ``reject`` check it."""
    if kind is Asserted and not data.get("erased"):
        parse_draft({name: data[name] for name in DRAFT_FIELDS if name in data})
    if "reason" in data:
        optional_text(data["reason"], "reason")


def _lines(lines: Iterable[bytes | str]) -> Iterator[bytes | str]:
    """The lines, refusing at once an argument that is not a collection of lines, and
    as it comes a line that is neither bytes nor text."""
    if isinstance(lines, str | bytes) or not isinstance(lines, Iterable):
        raise ValidationError(
            f"lines must be an iterable of exported lines (bytes or text), got "
            f"{type(lines).__name__}"
        )
    return _typed_lines(lines)


def _typed_lines(lines: Iterable[bytes | str]) -> Iterator[bytes | str]:
    for number, line in enumerate(lines, start=1):
        if not isinstance(line, str | bytes | bytearray | memoryview):
            raise ValidationError(
                f"import line {number}: expected bytes or text, got {type(line).__name__}"
            )
        yield line


def _restored(line: dict[str, Any]) -> Restored:
    kind = line["type"]
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"type {brief(kind)} is no event type ({', '.join(EVENT_TYPES)})")
    if not isinstance(line["data"], dict):
        raise ValueError(f"data must be a JSON object, got {brief(line['data'])}")
    version = line["version"]
    if isinstance(version, bool) or not isinstance(version, int):
        # pydantic would take ``true`` for 1, and ``1.0`` too.
        raise ValueError(f"version must be an integer, got {brief(version)}")
    data = dict(line["data"])
    if cls is Asserted and data.get("erased"):
        data.update(content="", value=None, entities=[], evidence=[], metadata=None)
    event = cls.model_validate(
        data | {"originator_id": line["memory_id"], "originator_version": version}
    )
    fingerprint = line.get("fingerprint")
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise ValueError(f"fingerprint must be text, got {brief(fingerprint)}")
    position = line["position"]
    if isinstance(position, bool) or not isinstance(position, int):
        raise ValueError(f"position must be an integer, got {brief(position)}")
    # The stored event's own schema, for the record: its data comes decoded, upcast.
    schema = line.get("schema_version", 1)
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise ValueError(f"schema_version must be an integer from 1, got {brief(schema)}")
    if schema > cls.class_version:  # a later erstwhile's: its data may mean what this cannot
        raise ValueError(
            f"schema_version {schema} of {kind} is newer than this erstwhile reads "
            f"({cls.class_version}): import with the version that exported it"
        )
    return Restored(
        position=position, recorded_at=to_utc(line["recorded_at"], "recorded_at"),
        actor=_name(line["actor"], "actor"), namespace=_name(line["namespace"], "namespace"),
        event=event,
        fingerprint=fingerprint,
    )  # fmt: skip


def _name(value: Any, what: str) -> str:
    """An actor or namespace as the source wrote it, if a ledger could have written it."""
    check_name(value, what)
    return str(value)


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
