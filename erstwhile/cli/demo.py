"""The story ``erstwhile demo`` tells: Supabase in March, AWS from July."""

from __future__ import annotations

from dataclasses import dataclass

from erstwhile.domain.memory import Memory
from erstwhile.ledger import Ledger


@dataclass(frozen=True)
class DemoAnswers:
    """What the demo asks the ledger, and what it answered."""

    supabase: Memory
    aws: Memory
    now: list[Memory]
    in_march: list[Memory]
    at_handover: list[Memory]
    known_before_move: list[Memory]
    chain: list[Memory]


def tell_story(ledger: Ledger) -> DemoAnswers:
    """Record the move from Supabase to AWS and ask the three questions of time."""
    supabase = ledger.remember(
        "The team uses Supabase",
        subject="team",
        attribute="database",
        value="Supabase",
        valid_from="2026-03-01T00:00:00Z",
        entities=["team", "Supabase"],
    )
    aws = ledger.revise(
        supabase.id,
        "The team moved to AWS",
        value="AWS",
        at="2026-07-01T00:00:00Z",
        entities=["team", "AWS"],
    )
    return DemoAnswers(
        supabase=supabase,
        aws=aws,
        now=ledger.facts("team", "database"),
        in_march=ledger.facts("team", "database", as_of="2026-03-15T00:00:00Z"),
        at_handover=ledger.facts("team", "database", as_of="2026-07-01T00:00:00Z"),
        known_before_move=ledger.facts(
            "team", "database", as_of=aws.valid_from, known_at=supabase.recorded_at
        ),
        chain=ledger.chain(aws.id),
    )
