"""Contradiction sets: which live claims the ledger reports together as one conflict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from erstwhile.domain.bar import ClaimView, conflict_sets, contradicts
from erstwhile.domain.memory import Kind, State
from erstwhile.domain.time import Window

MAR = datetime(2026, 3, 1, tzinfo=UTC)


def view(
    position: int,
    key: tuple[str, str] | None,
    value: str | None,
    start: int = 0,
    end: int | None = None,
    kind: Kind = Kind.FACT,
) -> ClaimView:
    """A live claim asserted at ``position``, valid from day ``start`` to day ``end``."""
    subject, attribute = key if key is not None else (None, None)
    return ClaimView(
        id=UUID(int=position), kind=kind, state=State.CURRENT, subject_key=subject,
        attribute_key=attribute, entities=frozenset(),
        window=Window(MAR + timedelta(days=start),
                      None if end is None else MAR + timedelta(days=end)),
        value_json=None if value is None else f'"{value}"', content=f"claim {position}",
        confidence=1.0, position=position,
    )  # fmt: skip


def every_pair(claims: list[ClaimView]) -> list[list[ClaimView]]:
    """The sets as the definition gives them: compare every pair, then walk the graph of
    contradictions from each claim in turn (no union-find, no grouping by key)."""
    linked = {c.id: [d for d in claims if d is not c and contradicts(c, d)] for c in claims}
    seen: set[UUID] = set()
    sets = []
    for claim in claims:
        if claim.id in seen or not linked[claim.id]:
            continue
        seen.add(claim.id)
        group, todo = [], [claim]
        while todo:
            current = todo.pop()
            group.append(current)
            for other in linked[current.id]:
                if other.id not in seen:
                    seen.add(other.id)
                    todo.append(other)
        sets.append(sorted(group, key=lambda c: c.position))
    return sets


def test_sets_join_through_a_shared_member_and_stay_apart_per_key() -> None:
    db, owner = ("team", "db"), ("team", "owner")
    claims = [
        view(1, db, "MySQL", 0, 10),
        view(2, db, "Postgres", 5, 20),  # overlaps 1 and 3: joins them
        view(3, db, "SQLite", 15),
        view(4, owner, "MySQL", 0),  # the same value under another key: no conflict
        view(5, owner, "ana", 0),
        view(6, None, "MySQL", 0),  # no key: never part of a conflict
        view(7, db, "MySQL", 30, kind=Kind.EVENT),  # events never conflict
    ]
    sets = conflict_sets(claims)
    assert [[c.position for c in s] for s in sets] == [[1, 2, 3], [4, 5]]


keys = st.sampled_from([("a", "x"), ("a", "y"), ("b", "x"), None])
claims_strategy = st.lists(
    st.tuples(keys, st.sampled_from(["1", "2", "3", None]), st.integers(0, 6),
              st.integers(1, 6), st.booleans()),
    max_size=24,
).map(lambda drawn: [
    view(position, key, value, start, None if open_end else start + length)
    for position, (key, value, start, length, open_end) in enumerate(drawn, start=1)
])  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(claims_strategy)
def test_comparing_within_each_key_finds_the_sets_every_pair_finds(
    claims: list[ClaimView],
) -> None:
    assert conflict_sets(claims) == every_pair(claims)
