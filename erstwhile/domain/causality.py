"""Vector clocks: did one write know about another?

Each memory carries the clock its writer had: its own count of writes, and for every
other actor the count of that actor's writes at or before the log position the writer
said it had read. ``b`` was written knowing ``a`` when ``b``'s clock has caught up with
``a``'s for every actor ``a`` counts.
"""

from __future__ import annotations

from collections.abc import Mapping


def clock_dominates(later: Mapping[str, int], earlier: Mapping[str, int]) -> bool:
    """Whether ``later >= earlier`` for every actor (missing entries count as zero)."""
    return all(later.get(actor, 0) >= count for actor, count in earlier.items())
