"""The backfill engine: the sparse (asset, partition) graph and its scheduling loop."""

from partition_assets.backfill.coordinator import graph_of, materialized, run_backfill, time_range
from partition_assets.backfill.engine import NodeResult, NodeStatus, Throttle, execute
from partition_assets.backfill.graph import (
    AssetSlice,
    BackfillGraph,
    BackfillPlanError,
    Dependency,
    Node,
    TimeRange,
    plan,
)
from partition_assets.backfill.runner import DagsterNodeRunner
from partition_assets.backfill.state import BACKFILL_ID_TAG, BackfillRecord

__all__ = [
    "BACKFILL_ID_TAG",
    "AssetSlice",
    "BackfillGraph",
    "BackfillRecord",
    "BackfillPlanError",
    "DagsterNodeRunner",
    "Dependency",
    "Node",
    "NodeResult",
    "NodeStatus",
    "Throttle",
    "TimeRange",
    "execute",
    "graph_of",
    "materialized",
    "plan",
    "run_backfill",
    "time_range",
]
