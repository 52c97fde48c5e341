"""docs/api.md is generated from the code and cannot drift from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def test_api_reference_matches_the_code() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "api_reference.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout


def test_every_public_ledger_method_is_documented() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    from erstwhile import Ledger

    for name in dir(Ledger):
        if not name.startswith("_") and callable(getattr(Ledger, name)):
            assert f"### `Ledger.{name}(" in text
