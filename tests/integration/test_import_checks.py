"""An import refuses a log the ledger's commands could never have written, naming the
line, and leaves the store as it was: empty, ready for the corrected file (SPEC
sections 4 and 8), on both backends."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import orjson
import pytest

from erstwhile import ErstwhileError, Ledger, ValidationError
from erstwhile.domain.events import proposal_id
from erstwhile.domain.ids import MEMORY_IDS
from tests.conftest import ManualClock, event_count

MAR, JUL, AUG = "2026-03-01T00:00:00Z", "2026-07-01T00:00:00Z", "2026-08-01T00:00:00Z"
GHOST = str(uuid4())

Line = dict[str, Any]


@dataclass
class Export:
    """The lines of an export of every namespace, and the ids of the story's memories."""

    lines: list[Line]
    ids: dict[str, str]

    def encoded(self) -> list[bytes]:
        return [orjson.dumps(line) for line in self.lines]

    def at(self, type_: str, name: str) -> int:
        """The index of the first line of ``type_`` about the memory called ``name``."""
        memory_id = self.ids[name]
        return next(
            i for i, line in enumerate(self.lines)
            if line["type"] == type_ and (line["memory_id"] == memory_id
                                          or line["data"].get("newer_id") == memory_id)
        )  # fmt: skip

    def line(self, type_: str, name: str) -> Line:
        return self.lines[self.at(type_, name)]


def write_story(folder: Path) -> Export:
    """Every kind of event the commands write: revise, accept, reject, a consolidation
    under timestamp_wins, a batch superseding its own item, archive, soft and hard
    forgets (a soft one made hard), idempotency keys, an event, two namespaces."""
    clock = ManualClock()
    url = f"sqlite:///{folder}/source.db"
    with Ledger.open(url, namespace="acme", actor="a", clock=clock) as ledger:
        team = {"subject": "team", "attribute": "database"}
        supabase = ledger.remember("The team uses Supabase", value="Supabase", valid_from=MAR,
                                   **team)  # fmt: skip
        aws = ledger.revise(supabase.id, "The team moved to AWS", value="AWS", at=JUL)
        ledger.remember("The team uses Neon", value="Neon", valid_from=AUG, **team)
        (rejected,) = ledger.proposals()
        ledger.reject(rejected.id, "not sure yet")
        city = {"kind": "preference", "subject": "me", "attribute": "city"}
        lisbon = ledger.remember("I live in Lisbon", value="Lisbon", valid_from=MAR, **city)
        berlin = ledger.remember("I moved to Berlin", value="Berlin", valid_from=JUL, **city)
        (accepted,) = ledger.proposals()
        ledger.accept(accepted.id)
        car = {"subject": "car", "attribute": "make"}
        ford, tesla = ledger.remember_many([
            {"content": "We drive a Ford", "value": "Ford", "valid_from": MAR, **car},
            {"content": "We drive a Tesla", "value": "Tesla", "valid_from": JUL,
             "policy": "timestamp_wins", **car},
        ])  # fmt: skip
        desk = {"subject": "desk", "attribute": "colour"}
        oak = ledger.remember("The desk is oak", value="oak", valid_from=MAR, **desk)
        pine = ledger.remember("The desk is pine", value="pine", valid_from=MAR, **desk)
        white = ledger.remember("The desk is white", value="white", valid_from=JUL,
                                policy="timestamp_wins", **desk)  # fmt: skip
        assert set(white.supersedes) == {oak.id, pine.id}
        note = ledger.remember("Retro notes", kind="note", subject="team")
        ledger.archive(note.id)
        meeting = ledger.remember("Standup held", kind="event", subject="team", valid_from=MAR)
        typo = ledger.remember("A typo", subject="team", idempotency_key="k1")
        ledger.forget(typo.id)
        clock.advance(days=40)
        ledger.purge()
        secret = ledger.remember("Ada's passport is XK-991", subject="ada")
        ledger.forget(secret.id, hard=True)
        plan = ledger.remember("The old plan", subject="plan", valid_from=MAR)
        ledger.forget(plan.id)
        with Ledger.open(url, namespace="other", actor="b", clock=clock) as other:
            elsewhere = other.remember("Not acme's", subject="team", attribute="database")
            other.archive(elsewhere.id)
        buffer = io.BytesIO()
        ledger.export(buffer, all_namespaces=True)
    memories = {"supabase": supabase, "aws": aws, "lisbon": lisbon, "berlin": berlin,
                "ford": ford, "tesla": tesla, "oak": oak, "pine": pine, "white": white,
                "note": note, "meeting": meeting, "typo": typo, "secret": secret,
                "plan": plan, "elsewhere": elsewhere}  # fmt: skip
    ids = {name: str(memory.id) for name, memory in memories.items()}
    ids |= {"rejected": str(rejected.id), "accepted": str(accepted.id)}
    return Export([orjson.loads(line) for line in buffer.getvalue().splitlines()], ids)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Export:
    return write_story(tmp_path_factory.mktemp("story"))


def restamped(lines: list[Line]) -> list[Line]:
    """The lines with positions and instants in order again after lines were moved."""
    start = datetime.fromisoformat(lines[0]["recorded_at"])
    return [
        line | {"position": n, "recorded_at": (start + timedelta(seconds=n)).isoformat()}
        for n, line in enumerate(lines, start=1)
    ]


def appended(export: Export, *lines: Line) -> list[Line]:
    """The export with ``lines`` after its end, in the log's order."""
    return restamped([*export.lines, *lines])


def event(type_: str, memory_id: str, version: int, namespace: str = "acme", **data: Any) -> Line:
    return {"position": 0, "recorded_at": "", "type": type_, "schema_version": 1,
            "memory_id": memory_id, "version": version, "actor": "a", "namespace": namespace,
            "data": data}  # fmt: skip


def superseded(memory_id: str, version: int, newer_id: str, at: str = AUG, **data: Any) -> Line:
    return event("Superseded", memory_id, version, newer_id=newer_id, at=at,
                 proposal_id=data.pop("proposal_id", None), **data)  # fmt: skip


def edited(export: Export, type_: str, name: str, change: Callable[[Line], None]) -> list[Line]:
    lines = copy.deepcopy(export.lines)
    change(lines[export.at(type_, name)])
    return lines


def moved(export: Export, index: int, to: int) -> list[Line]:
    lines = copy.deepcopy(export.lines)
    lines.insert(to, lines.pop(index))
    return restamped(lines)


def fresh_claim(export: Export, **data: Any) -> Line:
    """A new memory's Asserted, otherwise like the Supabase one."""
    line = copy.deepcopy(export.line("Asserted", "supabase"))
    line["memory_id"] = str(MEMORY_IDS.issue(datetime.now(UTC), 1)[0])
    line["data"].update(data)
    return line


Case = Callable[[Export], tuple[list[Line], int, str]]
"""A broken export: its lines, the line the import must name, and what it must say."""

END = -1
"""The line number of a line appended after the export's last."""

CASES: dict[str, Case] = {
    "Superseded of a memory never asserted": lambda s: (
        appended(s, superseded(GHOST, 2, s.ids["aws"])), END, "no earlier line asserts"),
    "Archived of a memory never asserted": lambda s: (
        appended(s, event("Archived", GHOST, 2, reason=None)), END, "no earlier line asserts"),
    "Forgotten of a memory never asserted": lambda s: (
        appended(s, event("Forgotten", GHOST, 1, hard=True, reason=None)), END,
        "no earlier line asserts"),
    "an event after a hard forget": lambda s: (
        appended(s, event("Archived", s.ids["secret"], 3, reason=None)), END, "for good"),
    "a soft forget after a hard one": lambda s: (
        appended(s, event("Forgotten", s.ids["typo"], 4, hard=False, reason=None)), END,
        "for good"),
    "a soft forget repeated": lambda s: (
        appended(s, event("Forgotten", s.ids["plan"], 3, hard=False, reason=None)), END,
        "forgotten already"),
    "a supersession of a forgotten memory": lambda s: (
        appended(s, superseded(s.ids["plan"], 3, s.ids["aws"])), END, "only a current one"),
    "a supersession by a memory never asserted": lambda s: (
        appended(s, superseded(s.ids["white"], 2, GHOST, at="2026-09-01T00:00:00Z")), END,
        "which no line asserts"),
    "an id asserted twice": lambda s: (
        appended(s, s.line("Asserted", "meeting")), END, "asserted again"),
    "a memory id that is no UUIDv7": lambda s: (
        appended(s, fresh_claim(s) | {"memory_id": GHOST}), END, "is not a UUIDv7"),
    "an event of a type there is not": lambda s: (
        appended(s, event("Revised", s.ids["aws"], 2, reason=None)), END,
        "type 'Revised' is no event type"),
    "a memory's Superseded before its Asserted": lambda s: (
        moved(s, s.at("Superseded", "supabase"), 0), 1, "no earlier line asserts"),
    "positions out of order": lambda s: (
        [*s.lines[:1], s.lines[2], s.lines[1], *s.lines[3:]], 3, "does not come after"),
    "a position past the log's range": lambda s: (
        [*s.lines[:-1], s.lines[-1] | {"position": 2**62 + 1}], END, "not a log position"),
    "a position that leaves no room for later writes": lambda s: (
        [*s.lines[:-1], s.lines[-1] | {"position": 2**62 - 1}], END, "leaves no room"),
    "an instant that leaves no room for a later write": lambda s: (
        [*s.lines[:-1], s.lines[-1] | {"recorded_at": "9999-12-31T23:59:59.999999+00:00"}], END,
        "leaves no instant"),
    "instants out of order": lambda s: (
        [s.lines[0], s.lines[1] | {"recorded_at": s.lines[0]["recorded_at"]}, *s.lines[2:]], 2,
        "not later than"),
    "a version skipped": lambda s: (
        appended(s, event("Archived", s.ids["aws"], 3, reason=None)), END, "whose next is 2"),
    "archived twice": lambda s: (
        appended(s, event("Archived", s.ids["note"], 3, reason=None)), END,
        "cannot be archived"),
    "superseded twice": lambda s: (
        appended(s, superseded(s.ids["supabase"], 3, s.ids["berlin"], at="2026-06-01T00:00:00Z")),
        END, "only a current one"),
    "superseded by itself": lambda s: (
        appended(s, superseded(s.ids["aws"], 2, s.ids["aws"])), END, "supersedes itself"),
    "superseded before its window opens": lambda s: (
        appended(s, superseded(s.ids["white"], 2, s.ids["aws"], at="2026-01-01T00:00:00Z")), END,
        "outside its window"),
    "an event superseded": lambda s: (
        appended(s, superseded(s.ids["meeting"], 2, s.ids["aws"])), END, "events are never"),
    "a newer memory whose supersedes leaves the older out": lambda s: (
        edited(s, "Asserted", "tesla", lambda line: line["data"].update(supersedes=[])),
        s.at("Asserted", "tesla") + 1, "does not list it"),
    "a newer memory opening elsewhere than the supersession": lambda s: (
        edited(s, "Asserted", "aws", lambda line: line["data"].update(valid_from=AUG)),
        s.at("Asserted", "aws") + 1, "not at the instant"),
    "a newer memory of another kind": lambda s: (
        edited(s, "Asserted", "aws", lambda line: line["data"].update(kind="decision")),
        s.at("Asserted", "aws") + 1, "in place of a fact"),
    "a newer memory with the older one's claim": lambda s: (
        edited(s, "Asserted", "aws", lambda line: line["data"].update(
            content="The team uses Supabase ", value="Supabase", attribute="Database")),
        s.at("Asserted", "aws") + 1, "replaces a claim by the same claim"),
    "a newer memory with the older one's claim, in the first versions' order": lambda s: (
        moved(Export(edited(s, "Asserted", "aws", lambda line: line["data"].update(
            content="The team uses Supabase", value="Supabase")), s.ids),
            s.at("Asserted", "aws"), s.at("Asserted", "aws") - 1),
        s.at("Asserted", "aws") + 1, "replaces a claim by the same claim"),
    "a newer memory in another namespace": lambda s: (
        edited(s, "Asserted", "aws", lambda line: line.update(namespace="other")),
        s.at("Asserted", "aws") + 1, "crosses from namespace"),
    "supersedes naming a memory never superseded by it": lambda s: (
        appended(s, fresh_claim(s, supersedes=[s.ids["white"]])), END,
        "no line supersedes"),
    "a memory moving to another namespace": lambda s: (
        appended(s, event("Archived", s.ids["aws"], 2, namespace="other", reason=None)), END,
        "belongs to namespace 'acme'"),
    "an accepted proposal that is not the pair's": lambda s: (
        edited(s, "Superseded", "lisbon",
               lambda line: line["data"].update(proposal_id=s.ids["rejected"])),
        s.at("Superseded", "lisbon") + 1, "is not the one of"),
    "an accepted proposal whose newer memory was archived before": lambda s: (
        restamped([*s.lines[:s.at("Superseded", "lisbon")],
                   event("Archived", s.ids["berlin"], 2, reason=None),
                   *s.lines[s.at("Superseded", "lisbon"):]]),
        s.at("Superseded", "lisbon") + 2, "accept takes a current one"),
    "a supersession of an asserted memory naming no proposal": lambda s: (
        edited(s, "Superseded", "lisbon", lambda line: line["data"].update(proposal_id=None)),
        s.at("Superseded", "lisbon") + 1, "no proposal is accepted"),
    "a proposal rejected after it was accepted": lambda s: (
        appended(s, event("ProposalRejected", s.ids["accepted"], 1, older_id=s.ids["lisbon"],
                          newer_id=s.ids["berlin"], reason=None)),
        END, "was accepted before"),
    "a proposal rejected twice": lambda s: (
        appended(s, s.line("ProposalRejected", "rejected")), END, "was rejected before"),
    "a proposal of memories never asserted": lambda s: (
        appended(s, event("ProposalRejected", str(proposal_id(UUID(GHOST), UUID(s.ids["aws"]))),
                          1, older_id=GHOST, newer_id=s.ids["aws"], reason=None)),
        END, "no earlier line asserts"),
    "an observed position at or past the memory's own": lambda s: (
        appended(s, fresh_claim(s, observed_position=s.lines[-1]["position"] + 1)), END,
        "observed_position .* is not before the memory's own position"),
    "supersedes naming one memory twice": lambda s: (
        edited(s, "Asserted", "aws",
               lambda line: line["data"].update(supersedes=line["data"]["supersedes"] * 2)),
        s.at("Asserted", "aws") + 1, "supersedes names memory .* twice"),
    "a fingerprint that is not text": lambda s: (
        edited(s, "Asserted", "typo", lambda line: line.update(fingerprint=5)),
        s.at("Asserted", "typo") + 1, "fingerprint must be text, got 5"),
    "a schema version that is no version": lambda s: (
        edited(s, "Asserted", "supabase", lambda line: line.update(schema_version="2")),
        s.at("Asserted", "supabase") + 1, "schema_version must be an integer from 1"),
    "an idempotency key longer than remember takes": lambda s: (
        appended(s, fresh_claim(s, idempotency_key="é" * 513)), END,
        "idempotency_key is longer than 1024 bytes"),
    "an idempotency key used twice": lambda s: (
        appended(s, fresh_claim(s, idempotency_key="k1")), END, "used again"),
    "a claim erased but never forgotten for good": lambda s: (
        appended(s, fresh_claim(s) | {"data": {
            k: v for k, v in s.line("Asserted", "supabase")["data"].items()
            if k not in ("content", "value", "entities", "evidence", "metadata")
        } | {"erased": True}}), END, "no line forgets it"),
    "a naive instant in a claim": lambda s: (
        appended(s, fresh_claim(s, valid_from="2026-03-01T00:00:00")), END, "naive"),
    "a window that ends before it opens": lambda s: (
        appended(s, fresh_claim(s, valid_until="2026-01-01T00:00:00Z")), END,
        "must be later than"),
    "a claim remember refuses": lambda s: (
        appended(s, fresh_claim(s, confidence=7)), END, "confidence"),
    "data as pairs, not an object": lambda s: (
        appended(s, fresh_claim(s) | {"data": list(fresh_claim(s)["data"].items())}), END,
        "data must be a JSON object"),
    "a reason longer than the commands take": lambda s: (
        appended(s, event("Archived", s.ids["aws"], 2, reason="r" * 4097)), END,
        "reason is longer than 4096 characters"),
    "a reason holding a NUL": lambda s: (
        appended(s, event("Forgotten", s.ids["aws"], 2, hard=False, reason="a\x00b")), END,
        "reason"),
    "a blank entity": lambda s: (
        appended(s, fresh_claim(s, entities=["", "atlas"])), END, "entities must not be blank"),
    "a confidence written as text": lambda s: (
        appended(s, fresh_claim(s, confidence="0.5")), END, "confidence must be a float or an int"),
    "a confidence written as true": lambda s: (
        appended(s, fresh_claim(s, confidence=True)), END, "confidence must be a float or an int"),
    "an empty actor": lambda s: (
        [s.lines[0] | {"actor": " "}, *s.lines[1:]], 1, "actor"),
}  # fmt: skip


def store_state(ledger: Ledger) -> dict[str, Any]:
    """What a ledger holds: its log, the projections' answers, the keys and claims."""
    with ledger.log.backend.read() as sql:
        sql.execute("SELECT count(*) AS n FROM erstwhile_idempotency")
        claims = sql.fetchone()["n"]
    return {
        "events": event_count(ledger),
        "head": ledger.head(),
        "log": [e.model_dump() for e in ledger.events()],
        "facts": [ledger.facts(s) for s in ("team", "me", "car", "desk")],
        "search": ledger.search(""),
        "proposals": ledger.proposals(),
        "conflicts": ledger.conflicts(),
        "claims": claims,
        "verify": ledger.verify(),
    }


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_an_impossible_log_is_refused_naming_its_line(
    story: Export, store_url: str, clock: ManualClock, case: str
) -> None:
    lines, number, message = CASES[case](story)
    number = len(lines) if number == END else number
    with Ledger.open(store_url, namespace="acme", actor="importer", clock=clock) as target:
        before = store_state(target)
        with pytest.raises(ValidationError, match=message) as refused:
            target.import_events(orjson.dumps(line) for line in lines)
        assert str(refused.value).startswith(f"import line {number}: ")
        assert "\n" not in str(refused.value)
        assert store_state(target) == before
        # Nothing was left behind: the export as written imports into the same store.
        assert target.import_events(story.encoded()) == len(story.lines)
        assert target.verify().ok and target.head() == story.lines[-1]["position"]


def test_the_first_versions_order_imports_and_its_links_are_still_checked(
    story: Export, store_url: str, clock: ManualClock
) -> None:
    """The first versions wrote a new memory's Asserted before the Superseded events it
    caused: such a log imports as it is, and a link that no Superseded closes is
    refused once the log ends, naming the Asserted's line."""
    aws = story.at("Asserted", "aws")
    first_order = moved(story, aws, aws - 1)
    loose = restamped([line for line in first_order if line["type"] != "Superseded"
                       or line["memory_id"] != story.ids["supabase"]])  # fmt: skip
    with Ledger.open(store_url, namespace="acme", actor="importer", clock=clock) as target:
        before = store_state(target)
        with pytest.raises(ValidationError, match=f"import line {aws}: .* no line supersedes"):
            target.import_events(orjson.dumps(line) for line in loose)
        assert store_state(target) == before
        imported = target.import_events(orjson.dumps(line) for line in first_order)
        assert imported == len(story.lines)
        assert [m.value for m in target.chain(story.ids["aws"])] == ["Supabase", "AWS"]


def test_bad_lines_arguments_are_refused_clearly(store_url: str) -> None:
    with Ledger.open(store_url, namespace="acme", actor="importer") as target:
        for lines, message in ((5, "iterable"), (b"{}", "iterable"), ([5], "import line 1")):
            with pytest.raises(ValidationError, match=message) as refused:
                target.import_events(lines)  # type: ignore[arg-type]
            assert isinstance(refused.value, ErstwhileError)
        assert target.head() == 0


def test_an_import_that_finds_the_store_filled_under_its_lock_is_refused(
    story: Export, store_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two imports that both found the store empty before they began: the second to take
    the write lock finds the first's events there and is refused, writing nothing, even
    where its lines would come after them (the emptiness seen before the lock is made to
    lie here, as a race would leave it)."""
    first = datetime.fromisoformat(story.lines[0]["recorded_at"])
    earlier = fresh_claim(story) | {
        "position": 1,
        "recorded_at": (first - timedelta(days=1)).isoformat(),
    }
    after_it = [line | {"position": line["position"] + 1} for line in story.lines]
    with Ledger.open(store_url, namespace="acme", actor="importer", clock=clock) as target:
        target.import_events([orjson.dumps(earlier)])
        before = store_state(target)
        monkeypatch.setattr(type(target), "head", lambda self: 0)
        with pytest.raises(ValidationError, match=r"import needs an empty store; .* reaches "
                           r"position 1"):  # fmt: skip
            target.import_events(orjson.dumps(line) for line in after_it)
        monkeypatch.undo()
        assert store_state(target) == before
