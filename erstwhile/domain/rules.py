"""The rules of a memory's life: which state changes are allowed, and when one memory
may supersede another. Each refusal carries the machine-readable reason of the contract.
"""

from __future__ import annotations

from datetime import datetime

from erstwhile.domain.errors import SupersessionRefused, ValidationError
from erstwhile.domain.memory import Claim, Kind, State
from erstwhile.domain.time import Window

ALLOWED_TRANSITIONS: dict[State, frozenset[State]] = {
    State.CURRENT: frozenset({State.SUPERSEDED, State.ARCHIVED, State.FORGOTTEN}),
    State.SUPERSEDED: frozenset({State.ARCHIVED, State.FORGOTTEN}),
    State.ARCHIVED: frozenset({State.FORGOTTEN}),
    State.FORGOTTEN: frozenset(),
}


def can_transition(source: State, target: State) -> bool:
    """Whether a memory in ``source`` may move to ``target``; nothing returns to current."""
    return target in ALLOWED_TRANSITIONS[source]


def require_transition(source: State, target: State) -> None:
    """Refuse a state change the life cycle does not allow."""
    if not can_transition(source, target):
        raise ValidationError(f"a {source} memory cannot become {target}")


class Side:
    """What the supersession rules need to know of one memory."""

    __slots__ = ("claim", "id", "kind", "state", "window")

    def __init__(self, id: object, kind: Kind, state: State, window: Window, claim: Claim):
        self.id = id
        self.kind = kind
        self.state = state
        self.window = window
        self.claim = claim


def check_supersession(older: Side, newer: Side, at: datetime) -> None:
    """Refuse ``newer`` superseding ``older`` at ``at`` unless every invariant holds.

    Checked in a fixed order so that the reason given is the most fundamental one.
    """
    if older.id == newer.id:
        raise SupersessionRefused("self", f"memory {older.id} cannot supersede itself")
    if Kind.EVENT in (older.kind, newer.kind):
        raise SupersessionRefused(
            "event_kind", "events record what happened: they never supersede or get superseded"
        )
    if older.state is State.SUPERSEDED:
        raise SupersessionRefused(
            "already_superseded", f"memory {older.id} already has a successor"
        )
    for side in (older, newer):
        if side.state is not State.CURRENT:
            raise SupersessionRefused("not_current", f"memory {side.id} is {side.state}")
    if older.kind is not newer.kind:
        raise SupersessionRefused(
            "kind_mismatch", f"a {newer.kind} cannot supersede a {older.kind}"
        )
    if at <= older.window.start:
        raise SupersessionRefused(
            "empty_window",
            f"superseding at {at.isoformat()} would leave memory {older.id} an empty window "
            f"(it opens at {older.window.start.isoformat()})",
        )
    if older.window.end is not None and older.window.end <= at:
        raise SupersessionRefused(
            "no_overlap",
            f"memory {older.id} stopped holding at {older.window.end.isoformat()}, "
            + (
                "the instant its successor would start (windows are half-open)"
                if older.window.end == at
                else f"before {at.isoformat()}"
            ),
        )
    if older.claim == newer.claim:
        raise SupersessionRefused(
            "identical_claim", f"the same claim as memory {older.id} corroborates it"
        )
