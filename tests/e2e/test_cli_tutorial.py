"""The command-line tutorial runs as written: every ``sh`` block, in order, in one shell
session in a fresh folder, with the installed ``erstwhile`` command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from erstwhile import Ledger

ROOT = Path(__file__).parent.parent.parent
TUTORIAL = ROOT / "docs" / "cli-tutorial.md"
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_the_cli_tutorial_runs(tmp_path: Path) -> None:
    blocks = BLOCK.findall(TUTORIAL.read_text())
    assert len(blocks) >= 5
    script = "set -euo pipefail\n" + "\n".join(blocks)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERSTWHILE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    for expected in ("AWS", "Supabase", "Berlin", "by confidence", "Planning meeting held",
                     "Postgres", "historical", "refused: Supabase already has a successor",
                     "refused: a superseded memory does not come back", "gone from every read",
                     "Hash chain intact"):  # fmt: skip
        assert expected in out, expected
    assert (tmp_path / "events.jsonl").stat().st_size > 0
    # Story 3: the proposal accepted, Berlin supersedes Lisbon at its start.
    with Ledger.open(tmp_path / "stories.db", namespace="home") as home:
        assert [m.value for m in home.facts("me", "city")] == ["Berlin"]
        assert [m.value for m in home.facts("me", "city", as_of="2026-03-01T00:00:00Z")] == [
            "Lisbon"
        ]
        assert home.proposals() == [] and home.conflicts() == []
