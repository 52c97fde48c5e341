"""End to end: search, curation, audit, transfer, the follower and the timeline.

The same harness as test_cli.py: each call is a fresh ``erstwhile`` process (about a
second), and calls that do not depend on each other run side by side. The stores these
commands read are arranged in-process with the library, whose writes test_cli.py
already drives through the command line; what each test checks runs as a user runs it.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import signal
import sqlite3
import subprocess
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from erstwhile import Conflict, Hit, Ledger, Memory, Proposal, StoreUnavailable
from tests.e2e.test_cli import ERSTWHILE, UNKNOWN_ID, Result, failed_cleanly, run, run_all

DB = ["--db", "move.db"]
OCTOBER = ["--as-of", "2026-10-01"]  # after the last move, whatever the wall clock says


def values(memories: list[dict[str, Any]]) -> list[Any]:
    return [memory["value"] for memory in memories]


@dataclass(frozen=True)
class Move:
    """Supabase, then AWS from July, then GCP from September; and Oracle, tried in May
    and forgotten. Recorded once in ``move.db``."""

    cwd: Path
    supabase: Memory
    aws: Memory
    gcp: Memory

    def run_all(self, *commands: list[str]) -> list[Result]:
        """Run commands side by side on ``move.db`` (unless one names its own --db)."""
        return run_all(self.cwd, *(c if c[0] == "--db" else DB + c for c in commands))


@pytest.fixture(scope="module")
def move(tmp_path_factory: pytest.TempPathFactory) -> Move:
    cwd = tmp_path_factory.mktemp("move")
    claim = {"subject": "team", "attribute": "database"}
    with Ledger.open(cwd / "move.db", actor="tester") as ledger:
        supabase = ledger.remember(
            "The team uses Supabase", value="Supabase", valid_from="2026-03-01T00:00:00Z", **claim
        )
        oracle = ledger.remember(
            "The team tried Oracle", kind="decision", value="Oracle",
            valid_from="2026-05-01T00:00:00Z", valid_until="2026-06-01T00:00:00Z", **claim,
        )  # fmt: skip
        aws = ledger.revise(
            supabase.id, "The team moved to AWS", value="AWS", at="2026-07-01T00:00:00Z"
        )
        ledger.forget(oracle.id)
        gcp = ledger.revise(aws.id, "The team moved to GCP", value="GCP", at="2026-09-01T00:00:00Z")
    return Move(cwd, supabase, aws, gcp)


def test_search_finds_what_is_true_and_with_history_the_rest_a_tier_below(move: Move) -> None:
    history, table = move.run_all(
        ["--json", "search", "--subject", "team", "--attribute", "database", "--history", *OCTOBER],
        ["search", "GCP", "--subject", "team", "--kind", "fact", "--limit", "5", *OCTOBER],
    )  # fmt: skip
    assert all(set(hit) == {"memory", "score", "tier"} for hit in history.json())
    hits = [Hit.model_validate(hit) for hit in history.json()]
    assert (hits[0].memory.value, hits[0].tier) == ("GCP", "current")
    assert {(h.memory.value, h.tier) for h in hits[1:]} == {
        ("AWS", "historical"),
        ("Supabase", "historical"),
    }
    assert "Oracle" not in history.stdout  # forgotten: not even history
    assert table.code == 0 and str(move.gcp.id) in table.stdout
    assert "historical" not in table.stdout and "Supabase" not in table.stdout


def test_audit_verify_passes_and_names_the_first_broken_link(move: Move) -> None:
    with (
        sqlite3.connect(move.cwd / "move.db") as source,
        sqlite3.connect(move.cwd / "tampered.db") as copy,
    ):
        source.backup(copy)
        copy.execute("DROP TRIGGER erstwhile_events_no_update")
        copy.execute("UPDATE erstwhile_events SET actor = 'mallory' WHERE position = 2")
        source.backup(moved := sqlite3.connect(move.cwd / "moved.db"))
        moved.execute("DROP TRIGGER erstwhile_events_no_update")
        # Moved past the projections' position and typed wrong: it cannot be folded.
        moved.execute("UPDATE erstwhile_events SET position = 90, recorded_at = 'x' "
                      "WHERE position = 3")  # fmt: skip
        moved.commit()
        moved.close()
    intact, broken, unfoldable = move.run_all(
        ["audit", "verify"], ["--db", "tampered.db", "--json", "audit", "verify"],
        ["--db", "moved.db", "audit", "verify"],
    )  # fmt: skip
    assert intact.code == 0 and "intact: 7 events checked" in intact.stdout
    # With --json the report still reaches stdout, for a script to read the break from.
    assert broken.code == 1 and "Traceback" not in broken.stderr
    assert broken.stderr.startswith("error: log broken at position 2: its stored hash is not")
    assert len(broken.stderr.splitlines()) == 1
    report = json.loads(broken.stdout)
    assert report["ok"] is False and report["first_break"] == 2 and report["checked"] == 2
    assert report["reason"].startswith("its stored hash is not")
    assert failed_cleanly(unfoldable, 1)
    assert unfoldable.stderr.startswith("error: log broken at position 4: its")


def test_audit_commands_on_a_corrupt_payload_fail_cleanly_and_change_nothing(
    move: Move,
) -> None:
    """A payload changed outside the ledger (not JSON, or JSON missing every field):
    audit log, export, rebuild and replay each exit 1 with one line naming the event,
    and the store keeps its events and answers."""
    commands = {
        "log": ["audit", "log"],
        "export": ["export"],
        "rebuild": ["projections", "rebuild"],
        "replay": ["audit", "replay", "--known-at", "2030-01-01", "--subject", "team"],
    }
    asked = ["--json", "facts", "team", *OCTOBER]
    runs = []
    for payload in ("x'00ff'", "'{}'"):
        for name, command in commands.items():
            db = f"corrupt-{name}-{len(runs)}.db"
            with sqlite3.connect(move.cwd / "move.db") as source:
                source.backup(copy := sqlite3.connect(move.cwd / db))
            copy.execute("DROP TRIGGER erstwhile_events_no_update")
            copy.execute(f"UPDATE erstwhile_events SET state = {payload} WHERE position = 1")
            copy.commit()
            copy.close()
            runs.append((db, ["--db", db, *command]))
    failed = move.run_all(*(command for _, command in runs))
    for (db, _), result in zip(runs, failed, strict=True):
        assert failed_cleanly(result, 1), (db, result)
        assert result.stderr.startswith(
            f"error: the event at position 1 (memory {move.supabase.id}) cannot be read: "
        ), (db, result.stderr)
        assert "audit verify" in result.stderr
        with sqlite3.connect(move.cwd / db) as store:
            assert store.execute("SELECT count(*) FROM erstwhile_events").fetchone() == (7,)
    answered = move.run_all(asked, *(["--db", db, *asked] for db, _ in runs))
    assert values(answered[0].json()) == ["GCP"]
    assert all(after.json() == answered[0].json() for after in answered[1:])


def test_an_export_that_fails_half_way_leaves_its_file_as_it_was(move: Move) -> None:
    """The export's last event cannot be read: the lines before it were written, but
    a file cut short would import as a valid shorter log, so the file is replaced only
    once the export is complete, and nothing of the attempt is left beside it."""
    with sqlite3.connect(move.cwd / "move.db") as source:
        source.backup(copy := sqlite3.connect(move.cwd / "cut.db"))
        last = copy.execute("SELECT max(position) FROM erstwhile_events").fetchone()[0]
    copy.execute("DROP TRIGGER erstwhile_events_no_update")
    copy.execute(f"UPDATE erstwhile_events SET state = x'00ff' WHERE position = {last}")
    copy.commit()
    copy.close()
    folder = move.cwd / "exports"
    folder.mkdir()
    (folder / "out.jsonl").write_text("the export before\n")
    (failed,) = run_all(move.cwd, ["--db", "cut.db", "export", "--output", "exports/out.jsonl"])
    assert failed_cleanly(failed, 1) and f"position {last}" in failed.stderr, failed
    assert [f.name for f in folder.iterdir()] == ["out.jsonl"]
    assert (folder / "out.jsonl").read_text() == "the export before\n"


def test_an_export_that_cannot_be_written_names_the_file_asked_for(move: Move) -> None:
    """The export is written beside its file under a temporary name: a failure named
    that hidden file (``/proc/.x.jsonl.jkb43y9p``), which the user never gave."""
    failed = run(move.cwd, *DB, "export", "--output", "/proc/x.jsonl")
    assert failed_cleanly(failed, 1), failed
    assert failed.stderr == "error: /proc/x.jsonl: No such file or directory\n"


def test_a_dash_writes_the_export_and_the_svg_to_stdout(move: Move) -> None:
    """``-`` is stdout; and a path that is no file (``/dev/stdout``, a pipe) is written
    as it is, not replaced by a file written beside it."""
    plain, dashed, svg, both, device = move.run_all(
        ["export"], ["export", "--output", "-"], ["timeline", "team", "--svg", "-"],
        ["--json", "timeline", "team", "--svg", "-"], ["export", "--output", "/dev/stdout"],
    )  # fmt: skip
    assert dashed.code == 0 and dashed.stdout == plain.stdout and plain.stdout.count("\n") == 7
    # The summary goes to stderr then, not into the lines.
    assert device.code == 0 and device.stdout == plain.stdout, device
    assert device.stderr == "Exported 7 events to /dev/stdout.\n"
    assert svg.code == 0 and svg.stdout.startswith("<?xml") and "</svg>" in svg.stdout
    assert failed_cleanly(both, 2) and "leave out --json" in both.stderr
    assert not (move.cwd / "-").exists()


def test_audit_replay_answers_as_the_ledger_stood_then(move: Move) -> None:
    before_gcp = move.aws.recorded_at.isoformat()
    replayed, table = move.run_all(
        ["--json", "audit", "replay", "--known-at", before_gcp, "--subject", "team",
         "--attribute", "database", *OCTOBER],
        ["audit", "replay", "--known-at", before_gcp, "--subject", "team", "--as-of", "2026-03-15"],
    )  # fmt: skip
    assert values(replayed.json()) == ["AWS"]  # GCP was not known yet
    assert table.code == 0 and "Supabase" in table.stdout and "replayed" in table.stdout
    assert table.stderr == ""  # the spinner shows on terminals only


def test_export_then_import_gives_the_same_answers(move: Move) -> None:
    exported, to_stdout = move.run_all(
        ["--json", "export", "--output", "move.jsonl"], ["export", "--all-namespaces"]
    )
    assert exported.json() == {"exported": 7, "output": "move.jsonl"}
    lines = (move.cwd / "move.jsonl").read_text().splitlines()
    assert to_stdout.stdout.splitlines() == lines
    assert [json.loads(line)["type"] for line in lines].count("Asserted") == 4
    imported = run(move.cwd, "--db", "copy.db", "--json", "import", "move.jsonl")
    assert imported.json()["imported"] == 7
    known = move.aws.recorded_at.isoformat()
    questions = {
        ("team", "database", "2026-10-01", None): ["team", "database", *OCTOBER],
        ("team", None, "2026-03-15", None): ["team", "--as-of", "2026-03-15"],
        ("team", None, "2026-10-01", known): ["team", *OCTOBER, "--known-at", known],
    }
    *copied, twice, missing = move.run_all(
        *(["--db", "copy.db", "--json", "facts", *args] for args in questions.values()),
        ["--db", "copy.db", "import", "move.jsonl"],
        ["--db", "fresh.db", "import", "no-such-file.jsonl"],
    )
    with Ledger.open(move.cwd / "move.db") as original:
        answers = [
            [m.model_dump(mode="json") for m in original.facts(
                subject, attribute, as_of=f"{as_of}T00:00:00Z", known_at=known_at)]
            for subject, attribute, as_of, known_at in questions
        ]  # fmt: skip
    assert [a.json() for a in copied] == answers
    assert [values(a.json()) for a in copied] == [["GCP"], ["Supabase"], ["AWS"]]
    assert failed_cleanly(twice, 1) and "empty store" in twice.stderr
    assert failed_cleanly(missing, 1) and not (move.cwd / "fresh.db").exists()


def test_import_refuses_an_impossible_log_naming_the_line(move: Move) -> None:
    """An event for a memory the file never asserted: exit 1, one line naming it, and
    the store as it was (empty: the file itself imports into it afterwards)."""
    run(move.cwd, *DB, "export", "--output", "whole.jsonl")
    lines = (move.cwd / "whole.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    later = datetime.fromisoformat(last["recorded_at"]) + timedelta(seconds=1)
    ghost = last | {"position": last["position"] + 1, "recorded_at": later.isoformat(),
                    "type": "Archived", "schema_version": 1, "version": 2, "memory_id": UNKNOWN_ID,
                    "data": {"reason": None}}  # fmt: skip
    (move.cwd / "ghost.jsonl").write_text("\n".join([*lines, json.dumps(ghost)]) + "\n")
    refused = run(move.cwd, "--db", "ghost.db", "import", "ghost.jsonl")
    assert failed_cleanly(refused, 1)
    assert refused.stderr.startswith(f"error: import line {len(lines) + 1}: Archived names memory")
    with Ledger.open(move.cwd / "ghost.db") as target:
        assert target.head() == 0 and list(target.events()) == [] and target.search("") == []
    imported = run(move.cwd, "--db", "ghost.db", "--json", "import", "whole.jsonl")
    assert imported.json()["imported"] == len(lines)


def test_output_is_never_written_over_the_store_itself(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "own.db") as ledger:
        ledger.remember("The team uses Supabase", subject="team")
    db = ["--db", "own.db"]
    (tmp_path / "linked.db").hardlink_to(tmp_path / "own.db")
    exported, drawn, on_wal, linked = run_all(
        tmp_path,
        [*db, "export", "--output", "own.db"],
        [*db, "timeline", "team", "--svg", "./own.db"],
        [*db, "export", "--output", "own.db-wal"],
        [*db, "export", "--output", "linked.db"],
    )
    for result in (exported, drawn, on_wal, linked):
        assert failed_cleanly(result, 1) and "a file of this ledger's store" in result.stderr
    with Ledger.open(tmp_path / "own.db") as ledger:
        assert ledger.head() == 1 and ledger.verify().ok


def test_a_loop_of_links_is_named_in_one_line(tmp_path: Path) -> None:
    """A path whose links lead round in a loop (Python 3.11's pathlib raises
    RuntimeError there, which reached the user as a traceback)."""
    with Ledger.open(tmp_path / "own.db") as ledger:
        ledger.remember("The team uses Supabase", subject="team")
    (tmp_path / "l2").symlink_to("l1")
    (tmp_path / "l1").symlink_to("l2")
    db = ["--db", "own.db"]
    results = run_all(
        tmp_path,
        ["--db", "l1", "remember", "The office is in Lisbon"],
        ["--db", "l1", "projections", "run", "--once"],
        ["demo", "--file", "l1"],
        [*db, "export", "--output", "l1"],
        [*db, "timeline", "team", "--svg", "l1"],
    )
    for result in results:
        assert failed_cleanly(result, 1), result
        assert "l1" in result.stderr and "Too many levels of symbolic links" in result.stderr
    with Ledger.open(tmp_path / "own.db") as ledger:
        assert ledger.head() == 1 and ledger.verify().ok


@pytest.mark.postgres
def test_only_a_first_write_creates_a_postgresql_store(tmp_path: Path, postgres_url: str) -> None:
    """On PostgreSQL too, a read of a schema that holds no ledger (a mistyped
    ``?schema=``) says so, and creates neither the schema nor its tables."""
    reads = [["facts", "team"], ["search", "coffee"], ["audit", "log"],
             ["projections", "status"]]  # fmt: skip
    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    for result in run_all(tmp_path, *(["--db", postgres_url, *read] for read in reads)):
        assert failed_cleanly(result, 1), result
        assert f"(schema {schema}): no events have been written there" in result.stderr
    with psycopg.connect(postgres_url.split("?")[0]) as admin:
        found = admin.execute("SELECT count(*) FROM information_schema.schemata "
                              "WHERE schema_name = %s", (schema,)).fetchone()  # fmt: skip
    assert found == (0,)
    assert run(tmp_path, "--db", postgres_url, "remember", "The team uses Supabase").code == 0
    listed = run(tmp_path, "--db", postgres_url, "search", "Supabase")
    assert listed.code == 0 and "The team uses Supabase" in listed.stdout


def test_only_a_first_write_creates_a_store_file(tmp_path: Path) -> None:
    """A read of a store that is not there (a mistyped --db, another folder) says so and
    leaves no file behind; remember and import create the store."""
    reads = [
        ["facts", "team"], ["search", "coffee"], ["get", UNKNOWN_ID], ["timeline", "team"],
        ["conflicts"], ["proposals"], ["audit", "log"], ["audit", "verify"],
        ["projections", "status"], ["projections", "rebuild"], ["archive", UNKNOWN_ID],
        ["export", "--output", "out.jsonl"],
    ]  # fmt: skip
    named = [(["--db", "typo.db"], "typo.db"), ([], "erstwhile.db"),
             (["--db", f"sqlite:///{tmp_path}/typo.db"], f"{tmp_path}/typo.db")]  # fmt: skip
    for db, path in named:
        for result in run_all(tmp_path, *([*db, *read] for read in reads)):
            assert failed_cleanly(result, 1), result
            assert f"no store at {path}:" in result.stderr
        assert list(tmp_path.iterdir()) == []
    # Bad input to remember is refused before a store is made for it.
    bad = run_all(tmp_path, ["--db", "typo.db", "remember", ""],
                  ["--db", "typo.db", "remember", "x", "--confidence", "7"],
                  ["--db", "typo.db", "remember", "x", "--valid-from", "2026-03-02",
                   "--valid-until", "2026-03-01"],
                  ["--db", "typo.db", "remember", "x", "--valid-until", "2020-01-01"])  # fmt: skip
    assert all(failed_cleanly(result, 1) for result in bad), bad
    assert "content must not be empty" in bad[0].stderr
    assert "confidence must be between 0 and 1" in bad[1].stderr
    assert "valid_until (2020-01-01T00:00:00+00:00) must be later than" in bad[3].stderr
    assert list(tmp_path.iterdir()) == []
    # A first write refused once the store is open (an id it cannot know, a file that is
    # no export) leaves its empty store (another process may be using it), which reads
    # refuse.
    (tmp_path / "garbage.jsonl").write_text("garbage\n")
    refused = run_all(tmp_path, ["--db", "typo2.db", "remember", "x", "--supersedes", UNKNOWN_ID],
                      ["--db", "typo3.db", "import", "garbage.jsonl"])  # fmt: skip
    assert [r.code for r in refused] == [1, 1], refused
    for db in ("typo2.db", "typo3.db"):
        read = run(tmp_path, "--db", db, "facts", "team")
        assert failed_cleanly(read, 1) and f"no store at {db}: no events" in read.stderr
    (tmp_path / "garbage.jsonl").unlink()
    made = run(tmp_path, "--db", "typo.db", "remember", "The team uses Supabase")
    assert made.code == 0
    again = run(tmp_path, "--db", "typo.db", "remember", "")  # a store with a log stays
    assert again.code == 1 and (tmp_path / "typo.db").exists()
    found = run(tmp_path, "--db", "typo.db", "--json", "search", "Supabase")
    assert [h["memory"]["content"] for h in found.json()] == ["The team uses Supabase"]
    exported = run(tmp_path, "--db", "typo.db", "export", "--output", "out.jsonl")
    assert exported.code == 0
    imported = run(tmp_path, "--db", "copy.db", "import", "out.jsonl")
    assert imported.code == 0 and (tmp_path / "copy.db").exists()


def test_a_store_without_events_is_no_store_to_read(tmp_path: Path) -> None:
    """A SQLite file without an event of a ledger (another program's database, an empty
    file, the empty ledger a refused first write into such a file left, or an import of
    nothing) is no store to a read: it says so, and adds nothing to the file."""
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
        connection.execute("INSERT INTO t VALUES (1)")
    (tmp_path / "empty.db").touch()
    (tmp_path / "nothing.jsonl").touch()

    def state() -> list[Any]:
        with sqlite3.connect(other) as connection:
            return [connection.execute("SELECT name FROM sqlite_master").fetchall(),
                    connection.execute("PRAGMA journal_mode").fetchone(),
                    connection.execute("SELECT x FROM t").fetchall()]  # fmt: skip

    before = state()
    read, read_empty = run_all(tmp_path, ["--db", "other.db", "facts", "team"],
                               ["--db", "empty.db", "search", "coffee"])  # fmt: skip
    assert failed_cleanly(read, 1) and "no store at other.db: no events" in read.stderr
    assert failed_cleanly(read_empty, 1) and "no store at empty.db: no events" in read_empty.stderr
    assert state() == before and (tmp_path / "empty.db").stat().st_size == 0
    with sqlite3.connect(tmp_path / "wal.db") as connection:  # in WAL mode, no WAL now
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE t (x)")
    connection.close()
    read_wal = run(tmp_path, "--db", "wal.db", "facts", "team")
    assert failed_cleanly(read_wal, 1) and "no store at wal.db: no events" in read_wal.stderr
    assert sorted(p.name for p in tmp_path.glob("wal.db*")) == ["wal.db"]  # nothing beside
    # A name SQLite would read as a URI of its own is the file of that name.
    assert run(tmp_path, "--db", "file:z.db", "remember", "zed", "--subject", "z").code == 0
    assert (tmp_path / "file:z.db").exists() and not (tmp_path / "z.db").exists()
    assert run(tmp_path, "--db", "file:z.db", "facts", "z").code == 0
    nobody = run(tmp_path, "--db", "~nosuchuser-erstwhile/x.db", "facts", "team")
    assert failed_cleanly(nobody, 1) and "cannot open" in nobody.stderr
    assert run(tmp_path, "--db", "./~notes.db", "remember", "tilde").code == 0
    assert (tmp_path / "~notes.db").exists()  # ./~x is a file here, not a home
    # Through a link, while another process holds the store open (its events still in
    # the WAL, which SQLite keeps beside the file the link names).
    (tmp_path / "real").mkdir()
    (tmp_path / "link.db").symlink_to(tmp_path / "real" / "held.db")
    with Ledger.open(tmp_path / "link.db") as held:
        held.remember("held open", subject="held")
        assert (tmp_path / "real" / "held.db-wal").exists()
        through_link = run(tmp_path, "--db", "link.db", "--json", "facts", "held")
        assert through_link.code == 0 and through_link.json()[0]["content"] == "held open"
    refused = run(tmp_path, "--db", "other.db", "remember", "")
    imported = run(tmp_path, "--db", "fresh.db", "import", "nothing.jsonl")
    assert failed_cleanly(refused, 1) and imported.code == 0
    for db in ("other.db", "fresh.db"):
        after = run(tmp_path, "--db", db, "facts", "team")
        assert failed_cleanly(after, 1) and f"no store at {db}: no events" in after.stderr
    with sqlite3.connect(other) as connection:
        assert connection.execute("SELECT x FROM t").fetchall() == [(1,)]
    assert run(tmp_path, "--db", "other.db", "remember", "The team uses Supabase").code == 0
    found = run(tmp_path, "--db", "other.db", "--json", "search", "Supabase")
    assert [h["memory"]["content"] for h in found.json()] == ["The team uses Supabase"]


def test_a_read_of_a_url_no_store_can_be_at_says_why(tmp_path: Path) -> None:
    """Before looking for a store, a read checks that the URL can name one."""
    scheme, parameters = run_all(tmp_path, ["--db", "mysql://u@h/db", "facts", "team"],
                                 ["--db", "sqlite:///x.db?mode=ro", "facts", "team"])  # fmt: skip
    assert failed_cleanly(scheme, 1) and "unknown store URL scheme 'mysql'" in scheme.stderr
    assert failed_cleanly(parameters, 1) and "takes no parameters" in parameters.stderr


@pytest.mark.postgres
def test_a_refused_first_write_leaves_no_postgresql_store_to_read(
    tmp_path: Path, postgres_url: str
) -> None:
    """A refused first write into a schema leaves the ledger's empty tables (dropping
    nothing another process may be using), and reads refuse them as no store; another
    program's table in the schema is untouched."""
    schema = parse_qs(urlsplit(postgres_url).query)["schema"][0]
    server = postgres_url.split("?")[0]
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'CREATE TABLE "{schema}".t (x int)')
        admin.execute(f'INSERT INTO "{schema}".t VALUES (1)')
    (tmp_path / "garbage.jsonl").write_text("garbage\n")
    refused = run_all(tmp_path, ["--db", postgres_url, "remember", ""],
                      ["--db", postgres_url, "import", "garbage.jsonl"])  # fmt: skip
    assert all(failed_cleanly(result, 1) for result in refused), refused
    read = run(tmp_path, "--db", postgres_url, "facts", "team")
    assert failed_cleanly(read, 1) and "no events have been written there" in read.stderr
    with psycopg.connect(server) as admin:
        assert admin.execute(f'SELECT x FROM "{schema}".t').fetchall() == [(1,)]
    assert run(tmp_path, "--db", postgres_url, "remember", "The team uses Supabase").code == 0
    assert run(tmp_path, "--db", postgres_url, "facts", "team").code == 0


def test_known_at_now_is_what_the_ledger_knows_now(tmp_path: Path) -> None:
    """A log recorded ahead of this host's clock (another host's, or a clock set back):
    --known-at now answers as the ledger knows now, as no --known-at does, not as of the
    clock's reading, before the log's own events."""
    ahead = datetime(2030, 1, 1, tzinfo=UTC)
    with Ledger.open(tmp_path / "x.db", clock=lambda: ahead) as ledger:
        made = ledger.remember("team uses Supabase", subject="team", valid_from="2026-03-01T00:00Z")
    db = ["--db", "x.db", "--json"]
    facts, found, got, plain = run_all(
        tmp_path,
        [*db, "facts", "team", "--known-at", "now"],
        [*db, "search", "Supabase", "--known-at", "NOW"],
        [*db, "get", str(made.id), "--known-at", " now "],
        [*db, "facts", "team"],
    )
    assert [m["id"] for m in facts.json()] == [str(made.id)] == [m["id"] for m in plain.json()]
    assert [h["memory"]["id"] for h in found.json()] == [str(made.id)]
    assert got.json()["id"] == str(made.id)
    replayed = run(tmp_path, *db, "audit", "replay", "--known-at", "now", "--subject", "team")
    assert [m["id"] for m in replayed.json()] == [str(made.id)]
    shown = run(
        tmp_path, "--db", "x.db", "audit", "replay", "--known-at", "now", "--subject", "team"
    )
    assert shown.code == 0 and "replayed as known at 2030-01-01" in shown.stdout


def test_brackets_in_user_text_are_printed_as_written(tmp_path: Path) -> None:
    """Human output goes through rich, which reads ``[...]`` as markup: user text must
    not be taken for it (an unknown closing tag was a traceback)."""
    subject = "docs [/srv/docs]"
    with Ledger.open(tmp_path / "marks.db") as ledger:
        ledger.remember("Docs live in /srv/docs", subject=subject, attribute="location")
        ledger.remember("x", subject="[bold]")
    db = ["--db", "marks.db"]
    drawn, none, bold, exported = run_all(
        tmp_path,
        [*db, "timeline", subject],
        [*db, "conflicts", subject],
        [*db, "timeline", "[bold]"],
        [*db, "export", "--output", "out[bold].jsonl"],
    )
    assert drawn.code == 0 and f"Timeline of {subject}" in drawn.stdout
    assert none.code == 0 and f"No conflicts about {subject!r}." in none.stdout
    assert bold.code == 0 and "Timeline of [bold]" in bold.stdout
    assert exported.code == 0 and "out[bold].jsonl" in exported.stdout
    assert (tmp_path / "out[bold].jsonl").exists()


def test_timeline_draws_every_version_and_writes_svg(move: Move) -> None:
    drawn, as_json = move.run_all(
        ["timeline", "team"], ["--json", "timeline", "team", "database", "--svg", "move.svg"]
    )
    assert drawn.code == 0, drawn.stderr
    assert all(word in drawn.stdout for word in ("Supabase", "AWS", "GCP", "Oracle"))
    assert "forgotten" not in drawn.stdout and "superseded" in drawn.stdout
    rectangles = as_json.json()
    assert [r["recorded_from"] for r in rectangles] == sorted(
        r["recorded_from"] for r in rectangles
    )
    assert [(r["value"], r["state"]) for r in rectangles] == [
        ("Supabase", "current"),
        ("Oracle", "current"),
        ("Supabase", "superseded"),
        ("AWS", "current"),
        ("AWS", "superseded"),
        ("GCP", "current"),
    ]
    root = ElementTree.parse(move.cwd / "move.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {"".join(node.itertext()) for node in root.iter()}
    assert {"Supabase — superseded", "GCP — current", "Oracle — current"} <= texts
    oracle = next(r for r in rectangles if r["value"] == "Oracle")
    assert oracle["recorded_until"] is not None  # known until it was forgotten


def test_projections_run_once_and_until_stopped(move: Move) -> None:
    follower = subprocess.Popen(
        [str(ERSTWHILE), *DB, "--json", "projections", "run", "--poll", "0.05"],
        cwd=move.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert follower.stderr is not None
    assert follower.stderr.readline().startswith("Following")  # its signal handlers are set
    (once,) = move.run_all(["--json", "projections", "run", "--once"])
    follower.send_signal(signal.SIGTERM)
    stdout, stderr = follower.communicate(timeout=30)
    assert follower.returncode == 0, stderr
    for statuses in (once.json(), json.loads(stdout)):
        assert {(s["position"], s["lag"]) for s in statuses} == {(statuses[0]["head"], 0)}


def test_a_follower_told_to_stop_stops_after_the_batch_it_is_folding(tmp_path: Path) -> None:
    """SIGTERM set the follower's stop, which it looked at only once its whole backlog
    was folded: 19 s for 12,000 events of a hundred subjects (4,000 here). It stops after the batch
    under way (each commits on its own), and a follower started later goes on."""
    with Ledger.open(tmp_path / "erstwhile.db", sync_projections=False) as writer:
        for start in range(0, 4_000, 2_000):
            writer.remember_many([{"content": f"reading {n}", "subject": f"sensor{n % 100}",
                                   "attribute": "temperature", "value": n}
                                  for n in range(start, start + 2_000)])  # fmt: skip
    follower = subprocess.Popen(
        [str(ERSTWHILE), "--json", "projections", "run"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert follower.stderr is not None
    assert follower.stderr.readline().startswith("Following")  # its signal handlers are set
    follower.send_signal(signal.SIGTERM)
    stdout, stderr = follower.communicate(timeout=60)
    assert follower.returncode == 0, stderr
    assert max(status["lag"] for status in json.loads(stdout)) > 0  # the backlog is left
    (once,) = run_all(tmp_path, ["--json", "projections", "run", "--once"])
    assert {(s["position"], s["lag"]) for s in once.json()} == {(4_000, 0)}


def test_projections_rebuild_repairs_a_projection_whose_position_was_lost(
    tmp_path: Path,
) -> None:
    """The search projection's tracking row deleted by hand: every opening folds the log
    into it again from 0 and clashes with its rows, and the rebuild that would repair
    it opened the store the same way, so it failed too."""
    with Ledger.open(tmp_path / "erstwhile.db") as ledger:
        ledger.remember("The team uses Supabase", subject="team", attribute="database")
        before = [hit.memory.id for hit in ledger.search("Supabase")]
    with sqlite3.connect(tmp_path / "erstwhile.db") as db:
        db.execute("DELETE FROM tracking WHERE application_name = 'search'")
    broken = run(tmp_path, "search", "Supabase")
    assert failed_cleanly(broken, 1) and "erstwhile projections rebuild" in broken.stderr
    rebuilt = run(tmp_path, "projections", "rebuild")
    assert rebuilt.code == 0, rebuilt.stderr
    with Ledger.open(tmp_path / "erstwhile.db") as ledger:
        assert [hit.memory.id for hit in ledger.search("Supabase")] == before
        assert {status.lag for status in ledger.projection_status()} == {0}


def test_a_directory_named_as_the_store_is_refused_in_one_line(tmp_path: Path) -> None:
    """`--db /` printed a traceback for a read (the root has no name to put -wal after);
    another directory said only that SQLite was "unable to open database file"."""
    for db in ("/", str(tmp_path), "."):
        for command in (["facts", "team"], ["remember", "x"]):
            result = run(tmp_path, "--db", db, *command)
            assert failed_cleanly(result, 1) and "is a directory" in result.stderr, result
    assert list(tmp_path.iterdir()) == []


def test_a_follower_whose_store_file_is_deleted_says_so(tmp_path: Path) -> None:
    """Its connections went on reading the deleted file, its lag 0, while a writer made
    a new store at the same path that nothing folded."""
    with Ledger.open(tmp_path / "erstwhile.db") as ledger:
        ledger.remember("The team uses Supabase", subject="team")
    follower = subprocess.Popen(
        [str(ERSTWHILE), "projections", "run", "--poll", "0.05"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert follower.stderr is not None
    assert follower.stderr.readline().startswith("Following")
    for file in tmp_path.glob("erstwhile.db*"):
        file.unlink()
    try:
        _, said = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert follower.returncode == 1
    assert said.startswith("error: erstwhile.db was deleted or replaced while it was followed")


def test_a_follower_whose_store_is_deleted_before_it_starts_following_says_so(
    tmp_path: Path,
) -> None:
    """The command says it follows before the follower starts: a file deleted then,
    before the follower held it open, failed with "unable to open database file"."""
    store = tmp_path / "erstwhile.db"
    with Ledger.open(store) as ledger:
        ledger.remember("The team uses Supabase", subject="team")
    with Ledger.open(store, sync_projections=False) as follower:
        for file in tmp_path.glob("erstwhile.db*"):
            file.unlink()
        with pytest.raises(StoreUnavailable, match="was deleted or replaced while it was"):
            follower.follow(poll=0.05)


def test_a_poll_no_follower_can_wait_is_a_usage_error(move: Move) -> None:
    """``--poll inf`` was taken with ``--once`` (which does not poll), and refused only
    once the follower had started without it."""
    results = move.run_all(*(["projections", "run", *once, "--poll", value]
                             for value in ("inf", "nan", "86401", "0") for once in ([], ["--once"])))  # fmt: skip
    for result in results:
        assert failed_cleanly(result, 2) and "--poll" in result.stderr, result


def run_reader_gone(cwd: Path, *args: str) -> tuple[int, str]:
    """Run ``erstwhile ARGS`` with a stdout whose reader went away before it wrote (a
    pipe whose read end is closed): the exit status and what it said on stderr."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([str(ERSTWHILE), *args], cwd=cwd, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60)  # fmt: skip
    finally:
        os.close(write)
    return done.returncode, done.stderr


def test_a_command_whose_reader_went_away_ends_as_sigpipe_ends_one(tmp_path: Path) -> None:
    """``erstwhile remember x | true``: the memory is stored, so the exit is not 1 (a
    refused command's, which says to try again) but 141, as for a program stopped by
    SIGPIPE, and nothing is said on stderr; reads end the same way."""
    commands = [["remember", "The team uses Supabase", "--subject", "team"],
                ["--json", "remember", "The office is in Lisbon"], ["facts", "team"],
                ["--json", "facts", "team"], ["audit", "log"], ["export"],
                ["timeline", "team", "--svg", "-"], ["search", "Supabase"]]  # fmt: skip
    for command in commands:
        assert run_reader_gone(tmp_path, *command) == (141, ""), command
    with Ledger.open(tmp_path / "erstwhile.db") as ledger:
        assert [e.type for e in ledger.events()] == ["Asserted", "Asserted"]


@pytest.fixture
def long_log(tmp_path: Path) -> Path:
    """A store whose log, as JSON, is far longer than a pipe holds (64 KiB)."""
    with Ledger.open(tmp_path / "erstwhile.db") as ledger:
        ledger.remember_many([{"content": f"note {n} on topic one", "subject": f"s{n}"}
                              for n in range(2_000)])  # fmt: skip
    return tmp_path


LONG_OUTPUTS = [["--json", "audit", "log"], ["audit", "log", "--until", "600"],
                ["search", "topic", "--limit", "1000"], ["--json", "search", "topic", "--limit",
                                                         "1000"]]  # fmt: skip


def output_buffering(unbuffered: bool) -> dict[str, str]:
    """The environment of a command whose stdout is unbuffered (as services often run
    Python) or buffered."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**environment, "PYTHONUNBUFFERED": "1"} if unbuffered else environment


@pytest.mark.parametrize("unbuffered", [True, False])
def test_a_reader_gone_part_way_through_a_long_output_ends_it_as_sigpipe_does(
    long_log: Path, unbuffered: bool
) -> None:
    """Unbuffered, the pipe took the first 64 KiB of one large write, and the rest was
    dropped: the command exited 0 as if its reader had read it all."""
    for command in LONG_OUTPUTS:
        process = subprocess.Popen([str(ERSTWHILE), *command], cwd=long_log,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=output_buffering(unbuffered))  # fmt: skip
        assert process.stdout is not None and process.stdout.read(20)
        process.stdout.close()  # `| head -c 20`
        _, said = process.communicate(timeout=60)
        assert (process.returncode, said) == (141, b""), command


def test_a_command_run_with_stdout_closed_still_does_its_work(tmp_path: Path) -> None:
    """`erstwhile remember x >&-`: there is no stdout at all (Python's is None); the
    memory is stored and the command succeeds, as it did before its output was made
    whole (which flushed a stdout that was not there: exit 1, a stored write said to
    be refused)."""
    for command in (["remember", "The team uses Supabase", "--subject", "team"],
                    ["facts", "team"]):  # fmt: skip
        done = subprocess.run([str(ERSTWHILE), *command], cwd=tmp_path, stderr=subprocess.PIPE,
                              text=True, timeout=60, preexec_fn=lambda: os.close(1))  # fmt: skip
        assert (done.returncode, done.stderr) == (0, ""), command
    with Ledger.open(tmp_path / "erstwhile.db") as ledger:
        assert [m.content for m in ledger.facts("team")] == ["The team uses Supabase"]


@pytest.mark.parametrize("unbuffered", [True, False])
def test_an_output_the_file_cannot_hold_is_an_error(long_log: Path, unbuffered: bool) -> None:
    """Unbuffered, a full disk or a file size limit took part of the output and the
    command exited 0: a script took a cut-off JSON answer for a whole one. Buffered, a
    full disk failed twice, the second time at the interpreter's exit (exit 120 and a
    traceback)."""

    def at_most_100_kib() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100 * 1024, resource.RLIM_INFINITY))

    for command in LONG_OUTPUTS:
        with (long_log / "out.json").open("wb") as out:
            done = subprocess.run([str(ERSTWHILE), *command], cwd=long_log, stdout=out,
                                  stderr=subprocess.PIPE, text=True, timeout=60,
                                  preexec_fn=at_most_100_kib,
                                  env=output_buffering(unbuffered))  # fmt: skip
        assert done.returncode == 1, command
        assert done.stderr == "error: standard output: File too large\n", command
    with open("/dev/full", "wb") as full:
        done = subprocess.run([str(ERSTWHILE), "--json", "facts", "s1"], cwd=long_log,
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
                              env=output_buffering(unbuffered))  # fmt: skip
    assert (done.returncode, done.stderr) == (
        1,
        "error: standard output: No space left on device\n",
    )


DEVICE_OUTPUTS = [["export", "--output"], ["timeline", "s1", "--svg"]]
"""Commands writing a file named on the command line."""


def test_a_file_output_that_is_a_pipe_or_a_device_fails_as_stdout_does(long_log: Path) -> None:
    """A named output that is no regular file (`--output /dev/stdout | head`, a FIFO, a
    process substitution) is written as it is: its reader going away exited 1 with
    nothing said (click's own answer to the broken pipe), and a full device was not
    named (`error: [Errno 28] No space left on device`)."""
    for command in DEVICE_OUTPUTS:
        assert run_reader_gone(long_log, *command, "/dev/stdout") == (141, ""), command
        done = subprocess.run([str(ERSTWHILE), *command, "/dev/full"], cwd=long_log,
                              stderr=subprocess.PIPE, text=True, timeout=60)  # fmt: skip
        assert (done.returncode, done.stderr) == (
            1,
            "error: /dev/full: No space left on device\n",
        ), command


@dataclass(frozen=True)
class Offices:
    """Two subjects whose newer claim clears the bar: two open proposals."""

    cwd: Path
    paris: Memory
    berlin: Memory
    supabase: Memory
    aws: Memory


@pytest.fixture
def offices(tmp_path: Path) -> Offices:
    city = {"subject": "office", "attribute": "city"}
    database = {"subject": "team", "attribute": "database"}
    with Ledger.open(tmp_path / "erstwhile.db", actor="tester") as ledger:
        return Offices(
            tmp_path,
            ledger.remember(
                "Office in Paris", value="Paris", valid_from="2026-01-01T00:00:00Z", **city
            ),
            ledger.remember(
                "Office in Berlin", value="Berlin", valid_from="2026-06-01T00:00:00Z", **city
            ),
            ledger.remember(
                "Uses Supabase", value="Supabase", valid_from="2026-03-01T00:00:00Z", **database
            ),
            ledger.remember("Uses AWS", value="AWS", valid_from="2026-07-01T00:00:00Z", **database),
        )


def test_conflicts_and_proposals_accept_and_reject(offices: Offices) -> None:
    listed, conflicts, table = run_all(
        offices.cwd, ["--json", "proposals"], ["--json", "conflicts", "team"], ["proposals"]
    )
    proposals = {p.newer_id: p for p in (Proposal.model_validate(p) for p in listed.json())}
    assert set(proposals) == {offices.berlin.id, offices.aws.id}
    assert all(str(p.id) in table.stdout for p in proposals.values())
    (team,) = (Conflict.model_validate(c) for c in conflicts.json())
    assert {m.value for m in team.members} == {"Supabase", "AWS"}
    to_aws, to_berlin = proposals[offices.aws.id].id, proposals[offices.berlin.id].id
    accepted, rejected = run_all(
        offices.cwd,
        ["--json", "proposals", "accept", str(to_aws)],
        ["--json", "proposals", "reject", f"URN:UUID:{to_berlin}".upper(), "--reason", "both"],
    )  # an id in another of its spellings: the output gives it as the ledger writes it
    assert accepted.json()["id"] == str(offices.aws.id)
    assert accepted.json()["supersedes"] == [str(offices.supabase.id)]
    assert rejected.json() == {"rejected": str(to_berlin)}
    left, still, late = run_all(
        offices.cwd,
        ["--json", "proposals"],
        ["conflicts"],
        ["proposals", "reject", str(to_aws)],
    )
    assert left.json() == []
    assert "office city" in still.stdout and "team" not in still.stdout  # rejected != resolved
    assert failed_cleanly(late, 1) and "already accepted" in late.stderr


def test_remember_with_a_policy_and_an_observed_position(tmp_path: Path) -> None:
    car = ["--json", "remember", "--subject", "car", "--attribute", "make"]
    ford, bogus = run_all(
        tmp_path,
        [*car, "We drive a Ford", "--value", "Ford", "--valid-from", "2026-01-01"],
        [*car, "x", "--policy", "bogus"],
    )
    tesla = run(
        tmp_path, *car, "We drive a Tesla", "--value", "Tesla", "--valid-from", "2026-05-01",
        "--policy", "timestamp_wins", "--observed-position", "1",
    )  # fmt: skip
    assert tesla.json()["supersedes"] == [ford.json()["id"]]
    assert failed_cleanly(bogus, 2)


def test_a_global_option_after_the_command_says_where_it_goes(tmp_path: Path) -> None:
    """``erstwhile facts team --json`` is a usage error (the option is erstwhile's own):
    it says to give the option before the command, not which of the command's own
    options it might have meant."""
    late_json, late_db, unknown, bare_db = run_all(
        tmp_path, ["facts", "team", "--json"], ["facts", "team", "--db", "x.db"],
        ["facts", "team", "--bogus"], ["--db"],
    )  # fmt: skip
    for result, option in ((late_json, "--json"), (late_db, "--db")):
        assert failed_cleanly(result, 2)
        assert f"error: {option} is an option of erstwhile itself: give it before" in result.stderr
    assert failed_cleanly(unknown, 2) and "No such option: --bogus" in unknown.stderr
    # Given before the command but without its value, it is that which is wrong.
    assert failed_cleanly(bare_db, 2) and "'--db' requires an argument" in bare_db.stderr
    assert list(tmp_path.iterdir()) == []


def test_values_the_log_cannot_keep_are_usage_errors_that_change_nothing(tmp_path: Path) -> None:
    """A number no double holds, JSON nested past any parser's depth, a blank entity
    and an unknown policy: each a one-line refusal, and the log is as it was."""
    assert run(tmp_path, "remember", "The team uses Supabase").code == 0
    before = run(tmp_path, "export").stdout
    deep = "[" * 1100 + "1" + "]" * 1100
    refused = run_all(tmp_path, ["remember", "x", "--value", "1e999"],
                      ["remember", "x", "--value", deep],
                      ["remember", "x", "--metadata", '{"n": -1e400}'],
                      ["remember", "x", "--policy", "sometimes"])  # fmt: skip
    assert all(failed_cleanly(result, 2) for result in refused), refused
    blank = run(tmp_path, "remember", "x", "--entity", " ")
    assert failed_cleanly(blank, 1) and "entities must not be blank" in blank.stderr
    assert run(tmp_path, "export").stdout == before


def test_every_now_of_one_command_is_one_instant(tmp_path: Path) -> None:
    """``now`` is read once per command: a revise at now opening now agrees with
    itself, and a memory's window, occurrence and extraction given as now coincide.
    (A policy, like a kind, is read whatever its case.)"""
    made = run(tmp_path, "--json", "remember", "w", "--valid-from", "now",
               "--occurred-at", "NOW", "--extracted-at", "now").json()  # fmt: skip
    assert made["valid_from"] == made["occurred_at"] == made["extracted_at"]
    older = run(tmp_path, "--json", "remember", "v", "--subject", "s", "--attribute", "a").json()
    revised = run(tmp_path, "--json", "revise", older["id"], "next", "--at", "now",
                  "--valid-from", "now")  # fmt: skip
    assert revised.code == 0 and revised.json()["supersedes"] == [older["id"]]
    upper = run(tmp_path, "--json", "remember", "u", "--policy", "TIMESTAMP_WINS")
    assert upper.code == 0


@pytest.mark.postgres
def test_export_from_sqlite_import_into_postgresql(move: Move, postgres_database: str) -> None:
    db = ["--db", f"{postgres_database}?schema=cli_{secrets.token_hex(6)}"]
    exported = run(move.cwd, "--json", *DB, "export", "--output", "to-pg.jsonl")
    assert exported.json()["exported"] == 7
    imported = run(move.cwd, *db, "--json", "import", "to-pg.jsonl")
    assert imported.json()["imported"] == 7 and imported.json()["db"].startswith("postgresql")
    answer, verified = run_all(
        move.cwd, [*db, "--json", "facts", "team", *OCTOBER], [*db, "--json", "audit", "verify"]
    )
    with Ledger.open(move.cwd / "move.db") as original:
        expected = original.facts("team", as_of="2026-10-01T00:00:00Z")
    assert answer.json() == [m.model_dump(mode="json") for m in expected]
    assert verified.json()["ok"] is True


def test_projections_status_shows_the_lag_without_folding(tmp_path: Path) -> None:
    """A follower's lag is what an operator checks: the status command reads it and
    leaves it, instead of folding the log itself first."""
    with Ledger.open(f"sqlite:///{tmp_path}/lag.db", sync_projections=False) as writer:
        for n in range(3):
            writer.remember(f"note {n}")
    for _ in range(2):
        statuses = run(tmp_path, "--db", "lag.db", "--json", "projections", "status").json()
        assert {(s["position"], s["head"], s["lag"]) for s in statuses} == {(0, 3, 3)}
    table = run(tmp_path, "--db", "lag.db", "projections", "status").stdout
    assert "log head: 3" in table and "memories" in table


def test_an_empty_json_list_is_a_value(tmp_path: Path) -> None:
    """`--value '[]'` says the value is an empty list: it is stored, and on revise it
    replaces the older memory's value instead of the older one being copied."""
    db = ["--db", "v.db", "--json"]
    nuts = run(tmp_path, *db, "remember", "Bob is allergic to nuts", "--subject", "bob",
               "--attribute", "allergies", "--value", '["nuts"]', "--valid-from", "2026-01-01")  # fmt: skip
    none = run(tmp_path, *db, "revise", nuts.json()["id"], "Bob has no allergies now",
               "--value", "[]", "--at", "2026-02-01")  # fmt: skip
    empty = run(tmp_path, *db, "remember", "Alice has no allergies", "--subject", "alice",
                "--attribute", "allergies", "--value", "{}")  # fmt: skip
    assert (none.json()["value"], empty.json()["value"]) == ([], {})
