"""Read models folded from the log, the runner that keeps them current, and rebuild."""

from erstwhile.projections.base import Projection, ProjectionRunner
from erstwhile.projections.memories import MemoriesProjection, VersionsProjection
from erstwhile.projections.reader import MemoryReader


def core_projections() -> list[Projection]:
    """Return the projections every ledger keeps."""
    return [MemoriesProjection(), VersionsProjection()]


__all__ = [
    "MemoriesProjection",
    "MemoryReader",
    "Projection",
    "ProjectionRunner",
    "VersionsProjection",
    "core_projections",
]
