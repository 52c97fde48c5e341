"""A one-statement read must name the projections' tables in the order a rebuild's swap
locks them (see ``lock_order_kept``): the check reads it from each statement's text."""

from __future__ import annotations

import pytest

from erstwhile.eventstore.backend import lock_order_kept


@pytest.mark.parametrize(
    ("statement", "kept"),
    [
        ("SELECT * FROM memories m JOIN proposals p ON p.older_id = m.id", True),
        ("SELECT * FROM proposals p JOIN memories m ON p.older_id = m.id", False),
        ("SELECT * FROM erstwhile_events e JOIN memories m ON m.position = e.position", True),
        ("select * from memory_versions where memory_id in (select id from memories)", False),
        ("SELECT * FROM memories WHERE id IN (SELECT memory_id FROM memory_versions)", True),
    ],
)
def test_the_lock_order_is_read_from_the_tables_each_statement_first_names(
    statement: str, kept: bool
) -> None:
    assert lock_order_kept(statement, ("memories", "memory_versions", "proposals")) is kept
