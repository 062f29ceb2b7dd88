"""The backfill engine: the spec, the sparse (asset, partition) graph and its scheduling loop."""

from partition_assets.backfill.planning.edges import Dependency
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph, Node, build_graph, plan
from partition_assets.backfill.planning.instance_state import current_nodes, graph_of
from partition_assets.backfill.planning.spec import BackfillSpec, TimeRange
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.running.local_workers import DagsterNodeRunner
from partition_assets.backfill.running.loop import Launch, execute
from partition_assets.backfill.running.scheduling import NodeResult, NodeStatus, RunUnit, Schedule, Throttle
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.errors import BackfillPlanError
from partition_assets.run_tags import BACKFILL_ID_TAG

__all__ = [
    "BACKFILL_ID_TAG",
    "AssetSlice",
    "BackfillGraph",
    "BackfillPlanError",
    "BackfillRecord",
    "BackfillRun",
    "BackfillSpec",
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
    "build_graph",
    "current_nodes",
    "execute",
    "graph_of",
    "plan",
]
