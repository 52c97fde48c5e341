"""Read models folded from the log, the runner that keeps them current, and rebuild."""

from erstwhile.projections.base import REGISTRY_TABLE, Projection, ProjectionRunner
from erstwhile.projections.memories import MemoriesProjection, VersionsProjection
from erstwhile.projections.proposals import ProposalsProjection
from erstwhile.projections.reader import MemoryReader
from erstwhile.projections.search import SearchProjection


def core_projections(dialect: str) -> list[Projection]:
    """Return the projections every ledger keeps, in the order each event is applied.

    ``proposals`` reads ``memories`` and ``memory_versions``, so it comes after them.
    """
    return [MemoriesProjection(dialect), VersionsProjection(dialect), SearchProjection(dialect),
            ProposalsProjection(dialect)]  # fmt: skip


def projection_tables() -> frozenset[str]:
    """Every table name a ledger's projections take up, on either backend, with the
    registry of their versions: what a store without a log must not hold already."""
    return frozenset(
        {REGISTRY_TABLE}.union(
            *(p.names() for dialect in ("sqlite", "postgresql") for p in core_projections(dialect))
        )
    )


__all__ = [
    "MemoriesProjection",
    "MemoryReader",
    "Projection",
    "ProjectionRunner",
    "ProposalsProjection",
    "SearchProjection",
    "VersionsProjection",
    "core_projections",
]
