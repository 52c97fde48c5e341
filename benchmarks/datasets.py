"""Deterministic benchmark data: short, realistic claims about many subjects.

A data set of ``n`` memories has ``n // VERSIONS`` subjects, each with one structured
attribute that is revised ``VERSIONS - 1`` times: version ``k`` opens ``k`` quarters after
:data:`VALID_BASE` and supersedes version ``k - 1``. Every choice comes from a
:class:`random.Random` seeded from the data set's seed, so two runs write the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

T = TypeVar("T")
VERSIONS = 5
SEED = 20260901
VALID_BASE = datetime(2021, 1, 1, tzinfo=UTC)
QUARTER = timedelta(days=90)

CODENAMES = (  # noqa: SIM905 - a word list reads best as text
    "atlas orion nimbus falcon juniper cobalt ember harbor quartz sierra tundra willow "
    "zephyr aurora beacon cedar delta echo fjord glacier helix iris jasper kestrel lumen "
    "meridian nova onyx pioneer quill raven sable tempest umber vega wren yarrow"
).split()
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "database": ("Postgres", "MySQL", "Supabase", "SQLite", "DynamoDB", "MongoDB", "Redis"),
    "cloud": ("AWS", "GCP", "Azure", "Hetzner", "DigitalOcean", "on-premises racks"),
    "owner": ("Alice", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ines"),
    "deadline": ("Friday", "Monday", "end of March", "mid July", "the September release"),
    "language": ("Python", "Go", "Rust", "TypeScript", "Kotlin", "Elixir"),
    "office": ("Lisbon", "Berlin", "Nairobi", "Toronto", "Osaka", "Madrid", "Krakow"),
    "status": ("on track", "blocked", "at risk", "paused", "shipped"),
}
TEMPLATES = (
    "The {subject} team set its {attribute} to {value} {reason}",
    "{subject} now uses {value} as its {attribute} {reason}",
    "We agreed that the {attribute} for {subject} is {value} {reason}",
    "{person} confirmed {subject} moved its {attribute} to {value} {reason}",
    "Decision: {subject} switches {attribute} to {value} {reason}",
    "Heads up, the {subject} {attribute} changed to {value} {reason}",
)
REASONS = (
    "after the outage",
    "for the Q3 launch",
    "following the security review",
    "to cut hosting costs",
    "per the planning meeting",
    "because the old setup kept failing",
    "as the customer asked",
    "until further notice",
    "to unblock the mobile app",
    "after a long design discussion",
)
QUESTIONS = (
    "what {attribute} does the {codename} team use",
    "who decided the {attribute} of {codename}",
    "which {attribute} did we pick after the outage",
    "{codename} {attribute} change",
    "why did the {attribute} move for the launch",
)


@dataclass(frozen=True)
class Claim:
    """One version of one subject's attribute, ready to be remembered."""

    subject: str
    attribute: str
    value: str
    content: str
    valid_from: datetime
    version: int

    def arguments(self, entities: bool = False) -> dict[str, Any]:
        """Return the keyword arguments of ``remember`` for this claim; with ``entities``,
        the subject is named as an entity too (the other way the ledger matches claims)."""
        found: dict[str, Any] = {
            "content": self.content,
            "subject": self.subject,
            "attribute": self.attribute,
            "value": self.value,
            "valid_from": self.valid_from,
        }
        if entities:
            found["entities"] = [self.subject]
        return found


def subject_name(index: int) -> str:
    """Return the name of subject ``index``: a codename and a number, e.g. ``orion-17``."""
    return f"{CODENAMES[index % len(CODENAMES)]}-{index}"


def attribute_of(index: int) -> str:
    """Return the attribute subject ``index`` is about."""
    names = list(ATTRIBUTES)
    return names[(index * 7 + index // len(names)) % len(names)]


def valid_from(version: int) -> datetime:
    """Return the instant version ``version`` of every subject opens."""
    return VALID_BASE + version * QUARTER


def claim(index: int, version: int, seed: int = SEED) -> Claim:
    """Return version ``version`` of subject ``index``; consecutive values always differ."""
    rng = random.Random(f"{seed}:{index}:{version}")
    attribute = attribute_of(index)
    values = ATTRIBUTES[attribute]
    value = values[(index + version) % len(values)]
    content = rng.choice(TEMPLATES).format(
        subject=subject_name(index),
        attribute=attribute,
        value=value,
        reason=rng.choice(REASONS),
        person=rng.choice(ATTRIBUTES["owner"]),
    )
    return Claim(subject_name(index), attribute, value, content, valid_from(version), version)


def subject_count(memories: int) -> int:
    """Return how many subjects a data set of ``memories`` memories has (at least one)."""
    return max(1, memories // VERSIONS)


def round_claims(memories: int, version: int, seed: int = SEED) -> Iterator[Claim]:
    """Yield version ``version`` of every subject of a data set, in subject order."""
    for index in range(subject_count(memories)):
        yield claim(index, version, seed)


def questions(count: int, seed: int = SEED) -> list[str]:
    """Return ``count`` plain-words search queries about the data set's subjects."""
    rng = random.Random(f"{seed}:questions")
    return [
        rng.choice(QUESTIONS).format(
            attribute=rng.choice(list(ATTRIBUTES)), codename=rng.choice(CODENAMES)
        )
        for _ in range(count)
    ]


@dataclass(frozen=True)
class PointQuery:
    """A ``facts`` lookup: which subject, which valid instant, and the version expected."""

    index: int
    version: int
    as_of: datetime


def point_queries(memories: int, count: int, seed: int = SEED) -> list[PointQuery]:
    """Return ``count`` as-of lookups spread over the subjects and their versions.

    Each instant falls inside one version's window, a month after it opens.
    """
    rng = random.Random(f"{seed}:points:{memories}")
    subjects = subject_count(memories)
    found = []
    for _ in range(count):
        index, version = rng.randrange(subjects), rng.randrange(VERSIONS)
        found.append(PointQuery(index, version, valid_from(version) + timedelta(days=30)))
    return found


def chunks(items: list[T], size: int) -> Iterator[list[T]]:
    """Yield consecutive slices of ``items`` of at most ``size`` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
