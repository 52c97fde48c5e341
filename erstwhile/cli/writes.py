"""Commands that append to the log: remember, revise, archive, forget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

from erstwhile.cli.context import first_write, open_ledger, settings
from erstwhile.cli.output import console, print_json, show_memory
from erstwhile.cli.params import (
    AttributeOpt,
    ConfidenceOpt,
    EntityOpt,
    EvidenceOpt,
    ExtractedAtOpt,
    ExtractorOpt,
    IdempotencyOpt,
    KindOpt,
    MemoryId,
    MetadataOpt,
    OccurredAtOpt,
    RevisedKindOpt,
    RevisedValidFromOpt,
    RevisedValueOpt,
    SubjectOpt,
    ValidFromOpt,
    ValidUntilOpt,
    ValueOpt,
    flag,
    given,
    parse_policy,
    time_option,
)
from erstwhile.domain.ids import parse_id
from erstwhile.domain.time import Window
from erstwhile.domain.writes import WritePlan
from erstwhile.ledger import Ledger, Policy
from erstwhile.ledger.writes import DEFAULT_GRACE

Content = Annotated[
    str, typer.Argument(metavar="CONTENT", help="The claim in words.", show_default=False)
]
ReasonOpt = Annotated[str | None, typer.Option(metavar="TEXT", help="Why, for the audit log.")]


def remember(
    ctx: typer.Context,
    content: Content,
    kind: KindOpt = None,
    subject: SubjectOpt = None,
    attribute: AttributeOpt = None,
    value: ValueOpt = None,
    entities: EntityOpt = None,
    valid_from: ValidFromOpt = None,
    valid_until: ValidUntilOpt = None,
    occurred_at: OccurredAtOpt = None,
    confidence: ConfidenceOpt = None,
    evidence: EvidenceOpt = None,
    extractor_id: ExtractorOpt = None,
    extracted_at: ExtractedAtOpt = None,
    metadata: MetadataOpt = None,
    supersedes: Annotated[
        list[str] | None,
        typer.Option(metavar="ID", help="A memory the new one replaces at its start (repeatable)."),
    ] = None,
    idempotency_key: IdempotencyOpt = None,
    policy: Annotated[
        Policy | None,
        typer.Option(
            metavar="POLICY",
            parser=parse_policy,
            help="propose (default): suggest supersessions for review; timestamp_wins: "
            "supersede every older claim that clears the bar.",
        ),
    ] = None,
    observed_position: Annotated[
        int | None,
        typer.Option(metavar="N", help="The log position the writer had read up to (causality)."),
    ] = None,
) -> None:
    """Remember a claim: assert a new memory, optionally superseding others."""
    fields = given(**locals())  # each option is named as the ledger's argument it feeds
    del fields["ctx"], fields["content"]
    # Input the ledger would refuse is refused before a store is made for it, a window
    # that opens when recorded (no start given) and ends before now included: the store
    # records at the clock or later.
    WritePlan.parse({"content": content, **fields})
    if "valid_until" in fields and not fields.keys() & {"valid_from", "occurred_at"}:
        Window.opening(datetime.now(UTC), fields["valid_until"], "the recording instant")
    with first_write(ctx) as ledger:
        memory = ledger.remember(content, **fields)
    show_memory(settings(ctx).json, "Remembered", memory)


def revise(
    ctx: typer.Context,
    older_id: Annotated[
        str,
        typer.Argument(metavar="OLDER_ID", help="The memory to supersede.", show_default=False),
    ],
    content: Content,
    at: Annotated[
        datetime | None, time_option("When the new claim takes over (default: its start, else now)")
    ] = None,
    kind: RevisedKindOpt = None,
    subject: SubjectOpt = None,
    attribute: AttributeOpt = None,
    value: RevisedValueOpt = None,
    entities: EntityOpt = None,
    valid_from: RevisedValidFromOpt = None,
    valid_until: ValidUntilOpt = None,
    occurred_at: OccurredAtOpt = None,
    confidence: ConfidenceOpt = None,
    evidence: EvidenceOpt = None,
    extractor_id: ExtractorOpt = None,
    extracted_at: ExtractedAtOpt = None,
    metadata: MetadataOpt = None,
    idempotency_key: IdempotencyOpt = None,
) -> None:
    """Revise a memory: a new claim supersedes OLDER_ID at --at.

    Kind, subject, attribute, value and entities not given are copied from the older memory.
    """
    fields: dict[str, Any] = given(**locals())  # only the options given: the rest is copied
    del fields["ctx"], fields["older_id"], fields["content"]
    with open_ledger(ctx) as ledger:
        memory = ledger.revise(older_id, content, **fields)
    show_memory(settings(ctx).json, "Revised", memory)


def archive(ctx: typer.Context, memory_id: MemoryId, reason: ReasonOpt = None) -> None:
    """Archive a memory: retire it from what is true now, leaving its window as it is."""
    with open_ledger(ctx) as ledger:
        memory = ledger.archive(memory_id, reason=reason)
    show_memory(settings(ctx).json, "Archived", memory)


def forget(
    ctx: typer.Context,
    memory_id: MemoryId,
    hard: Annotated[bool, flag("--hard", "Erase the content for good (crypto-shredding).")] = False,
    reason: ReasonOpt = None,
) -> None:
    """Forget a memory: it leaves every read at once; the log keeps the proof."""
    with open_ledger(ctx) as ledger:
        ledger.forget(memory_id, hard=hard, reason=reason)
        erased = hard or _erased(ledger, memory_id)
    forgotten = str(parse_id(memory_id))  # the ledger accepted it, so it parses
    if settings(ctx).json:
        print_json({"forgotten": forgotten, "hard": erased})
    else:
        console.print(f"Forgot {forgotten}" + (" (hard: content erased)." if erased else "."))


GRACE_AT_MOST = 365_000
"""The longest grace ``purge --grace`` takes, in days (a thousand years)."""


def purge(
    ctx: typer.Context,
    grace: Annotated[
        float,
        typer.Option(
            metavar="DAYS",
            min=0,
            max=GRACE_AT_MOST,
            help="Only soft forgets at least DAYS old (0: every one).",
        ),
    ] = DEFAULT_GRACE.days,
) -> None:
    """Purge: make soft forgets at least --grace days old hard ones (content erased).

    Meant for a schedule (cron, a service timer); each memory erased gets a hard
    Forgotten event of its own.
    """
    with open_ledger(ctx) as ledger:
        erased = [str(memory_id) for memory_id in ledger.purge(grace=timedelta(days=grace))]
    if settings(ctx).json:
        print_json({"purged": erased})
    else:
        forgets = "soft forget" if len(erased) == 1 else "soft forgets"
        listed = f": {', '.join(erased)}." if erased else "."
        console.print(f"Purged {len(erased)} {forgets}{listed}")


def _erased(ledger: Ledger, memory_id: str) -> bool:
    """Say whether the memory was hard-forgotten before: a soft forget of it is a no-op,
    and the output says what the memory is, not what was asked."""
    return any(
        event.type == "Forgotten" and (event.data or {}).get("hard") is True
        for event in ledger.events(memory_id=memory_id)
    )


COMMANDS = (remember, revise, archive, forget, purge)
