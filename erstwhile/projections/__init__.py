"""Read models folded from the log, the runner that keeps them current, and rebuild."""

from erstwhile.projections.base import Projection, ProjectionRunner
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
