"""The backfill engine: the sparse (asset, partition) graph and its scheduling loop."""

from partition_assets.backfill.coordinator import (
    current_nodes,
    graph_of,
    run_backfill,
    time_range,
)
from partition_assets.backfill.engine import Launch, execute
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
from partition_assets.backfill.scheduling import NodeResult, NodeStatus, RunUnit, Schedule, Throttle
from partition_assets.backfill.state import BackfillRecord
from partition_assets.backfill.tags import BACKFILL_ID_TAG

__all__ = [
    "BACKFILL_ID_TAG",
    "AssetSlice",
    "BackfillGraph",
    "BackfillPlanError",
    "BackfillRecord",
    "DagsterNodeRunner",
    "Dependency",
    "Launch",
    "Node",
    "NodeResult",
    "NodeStatus",
    "RunUnit",
    "Schedule",
    "Throttle",
    "TimeRange",
    "current_nodes",
    "execute",
    "graph_of",
    "plan",
    "run_backfill",
    "time_range",
]
