"""End to end: the installed ``erstwhile`` command, run as a user runs it, on real files.

Each call is a fresh process (about a second: Python start-up and imports), so calls
that do not depend on each other run side by side, and the story is recorded once.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from erstwhile import Memory

ERSTWHILE = Path(sys.executable).parent / "erstwhile"
UNKNOWN_ID = "01a22a78-0000-7000-8000-000000000000"


@dataclass(frozen=True)
class Result:
    """What one run of the command left: exit code, stdout, stderr."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)


def run(cwd: Path, *args: str) -> Result:
    """Run ``erstwhile ARGS`` in ``cwd``, with no store named by the environment."""
    env = {k: v for k, v in os.environ.items() if k != "ERSTWHILE_URL"}
    env["COLUMNS"] = "200"  # wide tables: cells are not folded, so text can be searched
    done = subprocess.run(
        [str(ERSTWHILE), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    return Result(done.returncode, done.stdout, done.stderr)


def run_all(cwd: Path, *commands: list[str]) -> list[Result]:
    """Run independent commands side by side; return their results in order."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: run(cwd, *args), commands))


def failed_cleanly(result: Result, code: int) -> bool:
    """Whether the command exited with ``code`` after one line on stderr and no traceback."""
    lines = result.stderr.splitlines()
    return (
        result.code == code
        and len(lines) == 1
        and lines[0].startswith("error: ")
        and "Traceback" not in result.stderr
        and result.stdout == ""
    )


STORY_DB = ["--db", "story.db"]  # a bare SQLite path, relative to the working directory


@dataclass(frozen=True)
class Story:
    """The Supabase-to-AWS story, recorded once through the command line in ``story.db``."""

    cwd: Path
    supabase: dict[str, Any]
    aws: dict[str, Any]

    def run(self, *args: str) -> Result:
        return run(self.cwd, *STORY_DB, *args)

    def run_all(self, *commands: list[str]) -> list[Result]:
        """Run commands side by side on the story's store (unless one names its own --db)."""
        return run_all(self.cwd, *(c if c[0] == "--db" else STORY_DB + c for c in commands))


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    cwd = tmp_path_factory.mktemp("story")
    supabase = run(
        cwd, *STORY_DB, "--json", "remember", "The team uses Supabase", "--subject", "team",
        "--attribute", "database", "--value", "Supabase", "--valid-from", "2026-03-01",
        "--entity", "team", "--entity", "Supabase",
    ).json()  # fmt: skip
    aws = run(
        cwd, "--db", f"sqlite:///{cwd}/story.db", "--json", "revise", supabase["id"],
        "The team moved to AWS", "--value", "AWS", "--at", "2026-07-01",
    ).json()  # fmt: skip
    return Story(cwd, supabase, aws)


def values(memories: list[dict[str, Any]]) -> list[Any]:
    return [memory["value"] for memory in memories]


def test_the_story_answers_now_as_of_march_and_the_chain(story: Story) -> None:
    assert not (story.cwd / "erstwhile.db").exists()  # --db names the store
    assert story.aws["supersedes"] == [story.supabase["id"]]
    assert story.aws["subject"] == "team"  # copied from the older memory by revise
    assert story.aws["valid_from"] == "2026-07-01T00:00:00Z"
    now, march, chain, older, history, table = story.run_all(
        ["--json", "facts", "team", "database"],
        ["--json", "facts", "team", "database", "--as-of", "2026-03-15"],
        ["--db", f"sqlite:///{story.cwd}/story.db", "--json", "chain", story.aws["id"]],
        ["--json", "get", story.supabase["id"]],
        ["--json", "history", story.aws["id"]],
        ["facts", "team", "database"],
    )
    assert values(now.json()) == ["AWS"]
    assert values(march.json()) == ["Supabase"]
    assert values(chain.json()) == ["Supabase", "AWS"]
    assert set(older.json()) == set(Memory.model_fields)
    Memory.model_validate(older.json())  # the JSON is a whole Memory, values and all
    assert older.json()["superseded_by"] == story.aws["id"]
    assert older.json()["valid_until"] == "2026-07-01T00:00:00Z"
    assert history.json()["memory"]["id"] == story.aws["id"]
    assert [m["id"] for m in history.json()["supersedes"]] == [story.supabase["id"]]
    assert table.code == 0 and "The team moved to AWS" in table.stdout
    assert story.aws["id"] in table.stdout and "Supabase" not in table.stdout


def test_known_at_and_a_time_with_an_offset(story: Story) -> None:
    before_move = story.supabase["recorded_at"]
    then, handover, facts, search = story.run_all(
        ["--json", "get", story.supabase["id"], "--known-at", before_move],
        ["--json", "facts", "team", "--as-of", "2026-07-01T02:00:00+02:00"],
        ["facts", "team", "--as-of", "2026-03-15", "--known-at", before_move],
        ["search", "team database", "--known-at", before_move],
    )
    assert then.json()["state"] == "current" and then.json()["superseded_by"] is None
    assert values(handover.json()) == ["AWS"]  # half-open: the hand-over instant is AWS's
    # A table says which instants it answers for, the transaction time included.
    # To the microsecond: pasted back into --known-at, it is the same instant.
    instant = datetime.fromisoformat(before_move)
    fraction = f".{instant.microsecond:06d}" if instant.microsecond else ""
    shown = f"{instant:%Y-%m-%d %H:%M:%S}{fraction}Z"
    title = " ".join(facts.stdout.split())
    assert f"Facts about team as of 2026-03-15, as known at {shown}" in title
    assert f"Search 'team database' as known at {shown}" in " ".join(search.stdout.split())


def test_audit_log_lists_the_events_and_filters_them(story: Story) -> None:
    everything, one_memory, table = story.run_all(
        ["--json", "audit", "log"],
        ["--json", "audit", "log", "--memory", story.aws["id"]],
        ["audit", "log", "--after", "2"],
    )
    events = everything.json()
    assert [e["type"] for e in events] == ["Asserted", "Superseded", "Asserted"]
    assert {"position", "recorded_at", "type", "memory_id", "actor", "namespace", "data"} <= set(
        events[0]
    )
    assert [e["memory_id"] for e in one_memory.json()] == [story.aws["id"]]
    assert "The team moved to AWS" in table.stdout and "Supabase" not in table.stdout


REFUSED = {
    "unknown id": (["get", UNKNOWN_ID], 1),
    "bad window": (
        ["remember", "x", "--valid-from", "2026-05-01", "--valid-until", "2026-04-01"],
        1,
    ),
    "store folder missing": (["--db", "no/such/folder/ledger.db", "facts", "team"], 1),
    "unknown option": (["remember", "x", "--bogus"], 2),
    "unparsable time": (["facts", "team", "--as-of", "yesterday"], 2),
    "bad metadata": (["remember", "x", "--metadata", "[1, 2]"], 2),
    "time beyond the calendar in UTC": (["search", "--as-of", "0001-01-01T00:00:00+01:00"], 2),
    "position beyond 64 bits": (["remember", "x", "--observed-position", "9" * 20], 1),
    "nested integer beyond 64 bits": (
        ["remember", "x", "--value", '{"n": 123456789012345678901}'],
        2,
    ),
    "metadata integer beyond 64 bits": (["remember", "x", "--metadata", f'{{"n": {2**64}}}'], 2),
    "metadata key given twice": (["remember", "x", "--metadata", '{"a": 1, "a": 2}'], 2),
    "value key given twice": (["remember", "x", "--value", '[{"b": {"c": 1, "c": 2}}]'], 2),
    "log position beyond 64 bits": (["audit", "log", "--after", str(2**63)], 1),
}


def test_every_error_is_one_line_with_its_exit_code_and_appends_nothing(story: Story) -> None:
    before = len(story.run("--json", "audit", "log").json())
    refused_twice = ["revise", story.supabase["id"], "Back to Supabase", "--at", "2026-08-01"]
    elsewhere = ["--namespace", "other", "get", story.aws["id"]]
    cases = {
        **REFUSED,
        "other namespace": (elsewhere, 1),
        "refused supersession": (refused_twice, 1),
        "revision to a null value": (["revise", story.aws["id"], "No cloud", "--value", "null"], 2),
    }
    results = story.run_all(*(args for args, _ in cases.values()))
    for (name, (_, code)), result in zip(cases.items(), results, strict=True):
        assert failed_cleanly(result, code), (name, result)
    assert "already_superseded" in results[-2].stderr
    assert "remember --supersedes" in results[-1].stderr
    assert len(story.run("--json", "audit", "log").json()) == before


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_without_the_characters_gets_escapes_not_a_failed_write(
    tmp_path: Path, encoding: str
) -> None:
    """A write whose answer holds characters the terminal cannot show used to commit,
    then die with a traceback and exit 1 (so a retry wrote it twice); ``--json`` is
    UTF-8 whatever the terminal, as JSON is."""
    env = {k: v for k, v in os.environ.items() if k != "ERSTWHILE_URL"}
    env["PYTHONIOENCODING"] = encoding
    content = "Meeting in \u6771\u4eac \U0001f600"

    def erstwhile(*args: str) -> subprocess.CompletedProcess[bytes]:
        command = [str(ERSTWHILE), "--db", f"sqlite:///{tmp_path}/x.db", *args]
        return subprocess.run(command, env=env, capture_output=True, timeout=60)

    shown = erstwhile("remember", content, "--subject", "trip")
    assert shown.returncode == 0 and b"Traceback" not in shown.stderr
    assert b"\\u6771\\u4eac \\U0001f600" in shown.stdout
    listed = erstwhile("--json", "facts", "trip")
    assert listed.returncode == 0
    assert [m["content"] for m in json.loads(listed.stdout.decode("utf-8"))] == [content]
    missing = erstwhile("get", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 1 and b"Traceback" not in missing.stderr


def test_stored_control_characters_are_shown_never_sent_to_the_terminal(tmp_path: Path) -> None:
    """An escape sequence in a memory's text (content, subject, value, entity, actor)
    reaches the terminal as pictures of its characters, in every table and title: a
    memory's content must not recolour, clear or retitle the screen that reads it.
    ``--json`` keeps the text exactly as stored."""
    db = ["--db", f"sqlite:///{tmp_path}/x.db"]
    escape, clear = "\x1b[31mRED\x1b[0m \x1b]0;pwned\x07", "\x1b[2J"
    made = run(tmp_path, *db, "--json", "--actor", f"bot{clear}", "remember", f"evil {escape}",
               "--subject", f"team{clear}", "--value", "\x1b[41mV", "--entity", f"ent{clear}")  # fmt: skip
    memory_id = made.json()["id"]
    assert made.json()["content"] == f"evil {escape}"
    shown = run_all(tmp_path, [*db, "get", memory_id], [*db, "facts", f"team{clear}"],
                    [*db, "search", "evil"], [*db, "audit", "log"],
                    [*db, "timeline", f"team{clear}"], [*db, "conflicts"])  # fmt: skip
    for result in shown:
        assert result.code == 0, result
        assert "\x1b" not in result.stdout + result.stderr, result
    assert "evil \u241b[31mRED\u241b[0m \u241b]0;pwned" in shown[0].stdout
    assert "team\u241b[2J" in shown[4].stdout


def test_an_error_naming_what_the_user_gave_shows_its_control_characters(
    tmp_path: Path,
) -> None:
    """An error quoting a file name or a store path the user gave (a file that is not
    there, a store not made yet) printed its escape sequences raw to the terminal."""
    red = "\x1b[31mRED"
    run(tmp_path, "remember", "The team uses Supabase", "--subject", "x")
    failed = run_all(tmp_path, ["import", f"{red}.jsonl"], ["--db", f"{red}.db", "facts", "x"],
                     ["timeline", "x", "--svg", f"no-such-folder{red}/x.svg"])  # fmt: skip
    for result in failed:
        assert failed_cleanly(result, 1), result
        assert "\x1b" not in result.stderr and "\u241b[31mRED" in result.stderr, result


def test_every_field_option_reaches_the_memory(tmp_path: Path) -> None:
    full = run(
        tmp_path, "--json", "--namespace", "acme", "--actor", "planner-bot", "remember",
        "Standup moved to 10:00", "--kind", "decision", "--subject", "standup",
        "--attribute", "time", "--value", '"10:00"', "--entity", " Team ", "--entity", "team",
        "--valid-from", "2026-03-02T09:00:00+01:00", "--valid-until", "2026-12-31",
        "--occurred-at", "2026-03-01", "--confidence", "0.8", "--evidence", "slack://c/1",
        "--evidence", "https://wiki/x", "--extractor-id", "gpt-x", "--extracted-at", "now",
        "--metadata", '{"source": "chat"}', "--idempotency-key", "standup-1",
    ).json()  # fmt: skip
    assert full["namespace"] == "acme" and full["actor"] == "planner-bot"
    assert (full["kind"], full["subject"], full["attribute"], full["value"]) == (
        "decision", "standup", "time", "10:00",
    )  # fmt: skip
    assert full["entities"] == ["team"]
    assert full["valid_from"] == "2026-03-02T08:00:00Z"
    assert full["valid_until"] == "2026-12-31T00:00:00Z"
    assert full["occurred_at"] == "2026-03-01T00:00:00Z"
    assert full["confidence"] == 0.8
    assert full["evidence"] == ["slack://c/1", "https://wiki/x"]
    assert full["extractor_id"] == "gpt-x" and full["extracted_at"] is not None
    assert full["metadata"] == {"source": "chat"}


def test_archive_and_forget_and_json_values(tmp_path: Path) -> None:
    number, shape = run_all(
        tmp_path,
        ["--json", "remember", "The price is 12", "--subject", "price", "--value", "12"],
        ["--json", "remember", "A shape", "--subject", "shape", "--value", '{"a": 1}'],
    )
    assert (number.json()["value"], shape.json()["value"]) == (12, {"a": 1})
    first, second = number.json()["id"], shape.json()["id"]
    archived, forgotten = run_all(
        tmp_path,
        ["--json", "archive", first, "--reason", "stale"],
        ["--json", "forget", f" URN:UUID:{second.upper()}\n", "--reason", "asked to"],
    )  # an id in another of its spellings: the output gives it as the ledger writes it
    assert (tmp_path / "erstwhile.db").exists()  # no --db and no $ERSTWHILE_URL: ./erstwhile.db
    assert archived.json()["state"] == "archived" and archived.json()["id"] == first
    assert forgotten.json() == {"forgotten": second, "hard": False}
    gone, again = run_all(tmp_path, ["get", second], ["forget", second])
    assert failed_cleanly(gone, 1)
    assert again.code == 0 and again.stdout.startswith(f"Forgot {second}")


def test_a_soft_forget_of_an_erased_memory_says_it_is_erased(tmp_path: Path) -> None:
    (made,) = run_all(tmp_path, ["--json", "remember", "A secret", "--subject", "s"])
    memory_id = made.json()["id"]
    hard = run(tmp_path, "--json", "forget", memory_id, "--hard")
    soft, text = (
        run(tmp_path, *args) for args in (["--json", "forget", memory_id], ["forget", memory_id])
    )
    assert hard.json() == soft.json() == {"forgotten": memory_id, "hard": True}
    assert text.stdout.startswith(f"Forgot {memory_id} (hard: content erased).")
    log = run(tmp_path, "--json", "audit", "log", "--memory", memory_id)
    assert [e["type"] for e in log.json()] == ["Asserted", "Forgotten"]  # the no-ops append none


def test_purge_makes_old_soft_forgets_hard_for_a_schedule(tmp_path: Path) -> None:
    """`erstwhile purge` (for cron): soft forgets older than --grace days (30 unless
    told) become hard ones; a bad --grace is a usage error that changes nothing."""
    made = run_all(tmp_path, *(["--json", "remember", f"Secret {n}", "--subject", f"s{n}"]
                               for n in range(2)))  # fmt: skip
    forgotten, kept = (m.json()["id"] for m in made)
    run(tmp_path, "forget", forgotten)
    log = run(tmp_path, "--json", "audit", "log").json()
    bad = run_all(tmp_path, *(["purge", "--grace", g] for g in ("-1", "nan", "inf", "x")))
    assert all(failed_cleanly(b, 2) and "--grace" in b.stderr for b in bad), bad
    assert run(tmp_path, "--json", "audit", "log").json() == log
    young = run(tmp_path, "purge")  # a soft forget of today is not 30 days old
    assert (young.code, young.stdout) == (0, "Purged 0 soft forgets.\n")
    purged = run(tmp_path, "--json", "purge", "--grace", "0")
    assert purged.json() == {"purged": [forgotten]}
    erased = run(tmp_path, "--json", "audit", "log", "--memory", forgotten).json()
    assert erased[-1]["type"] == "Forgotten" and erased[-1]["data"]["hard"] is True
    assert erased[0]["data"] is None  # the content is gone
    assert run(tmp_path, "--json", "get", kept).json()["content"] == "Secret 1"


def test_projections_status_and_rebuild(story: Story) -> None:
    status, unknown = story.run_all(
        ["--json", "projections", "status"],
        ["projections", "rebuild", "no-such-projection"],
    )
    statuses = status.json()
    head = statuses[0]["head"]
    assert head >= 3 and {(s["position"], s["lag"]) for s in statuses} == {(head, 0)}
    assert failed_cleanly(unknown, 1)
    # One rebuild at a time: a rebuild starts its projections over from position 0.
    rebuilt = story.run("--json", "projections", "rebuild").json()
    assert rebuilt == {"rebuilt": [s["name"] for s in statuses], "position": head}
    # Those that read the one named are rebuilt with it, and said to be (only the one
    # named was, until 2026-12-05).
    named = [story.run("--json", "projections", "rebuild", name).json()["rebuilt"]
             for name in ("memories", "search")]  # fmt: skip
    assert named == [["memories", "proposals"], ["search"]]
    assert values(story.run("--json", "facts", "team", "database").json()) == ["AWS"]


def test_help_and_a_bare_group(tmp_path: Path) -> None:
    top, bare_group = run_all(tmp_path, ["--help"], ["audit"])
    assert top.code == 0 and "remember" in top.stdout and "projections" in top.stdout
    assert bare_group.code == 2 and "log" in bare_group.stdout
    assert "Traceback" not in bare_group.stderr and "error:" not in bare_group.stderr
    assert not (tmp_path / "erstwhile.db").exists()  # help opens no store


def test_demo_tells_the_story(tmp_path: Path) -> None:
    told = run(tmp_path, "demo", "--file", str(tmp_path / "demo.db"))
    assert told.code == 0, told.stderr
    now = told.stdout.split("What database does the team use now?")[1].split("As of")[0]
    march = told.stdout.split("As of 2026-03-15 (valid time)")[1].split("As of exactly")[0]
    assert "AWS" in now and "Supabase" not in now
    assert "Supabase" in march and "AWS" not in march
    assert (tmp_path / "demo.db").exists()
    as_json = run(tmp_path, "--json", "demo", "--file", str(tmp_path / "again.db")).json()
    assert as_json["file"] == str(tmp_path / "again.db") and as_json["namespace"] == "demo"
    answers = {name: values(as_json[name]) for name in ("now", "in_march", "at_handover",
                                                          "known_before_move", "chain")}  # fmt: skip
    assert answers == {"now": ["AWS"], "in_march": ["Supabase"], "at_handover": ["AWS"],
                       "known_before_move": ["Supabase"], "chain": ["Supabase", "AWS"]}  # fmt: skip


def test_demo_refuses_options_it_would_ignore(tmp_path: Path) -> None:
    """``demo`` writes a fresh file of its own: a store, namespace or actor named before
    it, or a URL given as its file, is refused, and no file is written anywhere."""
    refused = run_all(
        tmp_path,
        ["--db", str(tmp_path / "mine.db"), "demo"],
        ["--namespace", "team", "--actor", "ada", "demo", "--file", "d.db"],
        ["demo", "--file", f"sqlite:///{tmp_path / 'd.db'}"],
        ["demo", "--file", "postgresql://postgres@127.0.0.1:5432/test"],
    )
    assert all(failed_cleanly(r, 2) for r in refused), [r.stderr for r in refused]
    assert "'--db'" in refused[0].stderr and "'--namespace' / '--actor'" in refused[1].stderr
    assert all("not as a URL" in r.stderr for r in refused[2:])
    assert list(tmp_path.iterdir()) == []
    # A file whose name has a colon is a path like any other.
    assert run(tmp_path, "demo", "--file", "./sqlite:d.db").code == 0
    assert (tmp_path / "sqlite:d.db").exists()


def test_demo_prints_its_explore_hint_on_one_line(tmp_path: Path) -> None:
    """The hint is a command to copy: it stays one line in a narrow terminal, and a
    path with a space is quoted."""
    env = {k: v for k, v in os.environ.items() if k != "ERSTWHILE_URL"}
    done = subprocess.run([str(ERSTWHILE), "demo", "--file", "my demo.db"], cwd=tmp_path,
                          env={**env, "COLUMNS": "40"}, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    hint = [line for line in done.stdout.splitlines() if line.startswith("Explore it:")]
    assert hint == ["Explore it: erstwhile --db 'sqlite:///my demo.db' --namespace demo ..."]


@pytest.mark.postgres
def test_the_story_on_postgresql(postgres_database: str, tmp_path: Path) -> None:
    db = ["--db", f"{postgres_database}?schema=cli_{secrets.token_hex(6)}"]
    old = run(tmp_path, *db, "--json", "remember", "The team uses Supabase",
              "--subject", "team", "--attribute", "database", "--value", "Supabase",
              "--valid-from", "2026-03-01").json()  # fmt: skip
    new = run(tmp_path, *db, "--json", "revise", old["id"], "The team moved to AWS",
              "--value", "AWS", "--at", "2026-07-01").json()  # fmt: skip
    now, march, refused = run_all(
        tmp_path,
        [*db, "--json", "facts", "team", "database"],
        [*db, "--json", "facts", "team", "database", "--as-of", "2026-03-15"],
        [*db, "revise", old["id"], "Again", "--at", "2026-08-01"],
    )
    assert values(now.json()) == ["AWS"] and now.json()[0]["supersedes"] == [old["id"]]
    assert values(march.json()) == ["Supabase"] and new["supersedes"] == [old["id"]]
    assert failed_cleanly(refused, 1)
    assert not (tmp_path / "erstwhile.db").exists()
