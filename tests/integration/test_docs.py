"""Docs are tests: every Python block in README.md and docs/ runs, in a fresh folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(document: Path) -> list[str]:
    return BLOCK.findall(document.read_text())


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_python_block_runs(
    document: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ERSTWHILE_URL", raising=False)
    monkeypatch.delenv("ERSTWHILE_MASTER_KEY", raising=False)
    for number, block in enumerate(python_blocks(document), start=1):
        try:
            exec(compile(block, f"{document.name}#block{number}", "exec"), {})
        except Exception as error:  # pragma: no cover - the message is the point
            raise AssertionError(f"{document.name} block {number} failed: {error!r}") from error
    assert os.getcwd() == str(tmp_path)


def test_the_docs_have_python_examples() -> None:
    assert sum(len(python_blocks(d)) for d in DOCUMENTS) >= 7
