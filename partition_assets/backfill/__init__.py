"""The backfill engine: the sparse (asset, partition) graph and its scheduling loop."""

from partition_assets.backfill.coordinator import (
    current_nodes,
    graph_of,
    run_backfill,
    time_range,
)
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
    "current_nodes",
    "execute",
    "graph_of",
    "plan",
    "run_backfill",
    "time_range",
]
