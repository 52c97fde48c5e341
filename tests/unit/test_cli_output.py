"""How the command line shows things that are not memories."""

from __future__ import annotations

import pytest

from erstwhile.cli.output import show_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:///team.db", "sqlite:///team.db"),
        ("postgresql://postgres@db:5432/x?schema=a", "postgresql://postgres@db:5432/x?schema=a"),
        ("postgresql://app:s%40cret@db:5432/x?schema=a", "postgresql://app:***@db:5432/x?schema=a"),
        ("postgresql://:pw@db/x", "postgresql://:***@db/x"),
    ],
)
def test_a_store_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert show_url(url) == shown
