"""docs/cli.md is what scripts/cli_reference.py renders from the commands' help now."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_up_to_date() -> None:
    rendered = load_script().render()
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == rendered, "docs/cli.md is stale: run python scripts/cli_reference.py"


def test_the_reference_is_the_same_whatever_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script()
    monkeypatch.setenv("COLUMNS", "40")
    narrow = script.render()
    monkeypatch.setenv("COLUMNS", "200")
    assert script.render() == narrow
