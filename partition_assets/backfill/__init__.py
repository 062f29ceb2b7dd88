"""The backfill engine: the sparse (asset, partition) graph, and (next) its scheduler."""

from partition_assets.backfill.graph import (
    AssetSlice,
    BackfillGraph,
    BackfillPlanError,
    Dependency,
    Node,
    TimeRange,
    plan,
)

__all__ = ["AssetSlice", "BackfillGraph", "BackfillPlanError", "Dependency", "Node", "TimeRange", "plan"]
