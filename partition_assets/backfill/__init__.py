"""The backfill engine: the spec, the sparse (asset, partition) graph and its scheduling loop;
and what a code location declares for safe backfills: gates (`backfill_gate`, `Budget`,
`gate_checks`) and approval (`backfill_approval`). The commands are `backfill.commands`."""

from partition_assets.backfill.dagster_ui.gate_asset_checks import gate_checks
from partition_assets.backfill.planning.edges import Dependency
from partition_assets.backfill.planning.gate_rules import Budget, Gate, backfill_gate
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph, Node, build_graph, plan
from partition_assets.backfill.planning.instance_state import current_nodes, graph_of
from partition_assets.backfill.planning.spec import BackfillSpec, TimeRange
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.running.local_workers import DagsterNodeRunner
from partition_assets.backfill.running.loop import Launch, execute
from partition_assets.backfill.running.scheduling import NodeResult, NodeStatus, RunUnit, Schedule, Throttle
from partition_assets.backfill.state.approval import backfill_approval
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
    "Budget",
    "DagsterNodeRunner",
    "Dependency",
    "Gate",
    "Launch",
    "Node",
    "NodeResult",
    "NodeStatus",
    "RunUnit",
    "Schedule",
    "Throttle",
    "TimeRange",
    "backfill_approval",
    "backfill_gate",
    "build_graph",
    "current_nodes",
    "execute",
    "gate_checks",
    "graph_of",
    "plan",
]
