"""Every command of the command line explains itself and is in the CLI reference."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main
from typer.testing import CliRunner

from erstwhile.cli.app import app
from erstwhile.domain.memory import MemoryDraft

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands(command: Any, path: str = "erstwhile") -> Iterator[tuple[str, Any]]:
    """Yield every command below the app with its full name, groups included."""
    for name, child in getattr(command, "commands", {}).items():
        yield f"{path} {name}", child
        yield from commands(child, f"{path} {name}")


def commands_by_name() -> dict[str, Any]:
    """Every command of the app by its full name, e.g. ``erstwhile audit log``."""
    return dict(commands(typer.main.get_command(app)))


def test_the_tree_has_at_least_the_commands_of_this_version() -> None:
    names = set(commands_by_name())
    expected = {"remember", "revise", "archive", "forget", "get", "history", "chain", "facts"}
    expected |= {"audit", "audit log", "projections", "projections rebuild"}
    expected |= {"projections status", "demo"}
    expected |= {"search", "conflicts", "proposals", "proposals accept", "proposals reject"}
    expected |= {"audit verify", "audit replay", "projections run", "timeline"}
    expected |= {"export", "import"}
    assert {f"erstwhile {name}" for name in expected} <= names


def test_every_command_and_parameter_has_help() -> None:
    for name, command in commands_by_name().items():
        assert (command.help or "").strip(), f"{name} has no help text"
        for param in command.params:
            assert (getattr(param, "help", None) or "").strip(), f"{name} {param.name}: no help"


def test_no_help_shows_a_type_for_a_flag() -> None:
    """A flag takes no value, so its help shows no type: typer's would be ``<bool>``, as
    if ``--json true`` were wanted. The built-in ``--help`` of every command and group
    included."""
    runner = CliRunner()
    for name in ["erstwhile", *commands_by_name()]:
        shown = runner.invoke(app, [*name.split()[1:], "--help"])
        assert shown.exit_code == 0, f"{name}: {shown.output}"
        assert "--help" in shown.output and "<bool>" not in shown.output, name


def test_every_command_is_documented_in_the_reference() -> None:
    reference = REFERENCE.read_text(encoding="utf-8")
    for name, command in commands_by_name().items():
        assert f"## `{name}`" in reference, f"{name} is missing from docs/cli.md"
        assert " ".join(command.help.split()) in " ".join(reference.split())


def test_remember_offers_every_field_of_a_claim() -> None:
    remember = commands_by_name()["erstwhile remember"]
    assert set(MemoryDraft.model_fields) <= {param.name for param in remember.params}


def test_remember_offers_the_write_options_beyond_the_claim() -> None:
    remember = commands_by_name()["erstwhile remember"]
    options = {"supersedes", "idempotency_key", "policy", "observed_position"}
    assert options <= {param.name for param in remember.params}
