"""The backfill engine: the spec, the sparse (asset, partition) graph and its scheduling loop;
and what a code location declares for safe backfills: gates (`backfill_gate`, `Budget`,
`gate_checks`) and approval (`backfill_approval`). The commands are `backfill.commands`."""

from partition_assets.lazy_names import exported_lazily

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

# Each name is imported from its module when first read (lazy_names.py): a module below this
# package (the command line's flags read planning/spec.py) imports only what it needs.
_HOMES = {
    "partition_assets.backfill.dagster_ui.gate_asset_checks": ("gate_checks",),
    "partition_assets.backfill.planning.edges": ("Dependency",),
    "partition_assets.backfill.planning.gate_rules": (
        "Budget",
        "Gate",
        "backfill_gate",
    ),
    "partition_assets.backfill.planning.graph": (
        "AssetSlice",
        "BackfillGraph",
        "Node",
        "build_graph",
        "plan",
    ),
    "partition_assets.backfill.planning.instance_state": (
        "current_nodes",
        "graph_of",
    ),
    "partition_assets.backfill.planning.spec": (
        "BackfillSpec",
        "TimeRange",
    ),
    "partition_assets.backfill.running.coordinator": ("BackfillRun",),
    "partition_assets.backfill.running.local_workers": ("DagsterNodeRunner",),
    "partition_assets.backfill.running.loop": (
        "Launch",
        "execute",
    ),
    "partition_assets.backfill.running.scheduling": (
        "NodeResult",
        "NodeStatus",
        "RunUnit",
        "Schedule",
        "Throttle",
    ),
    "partition_assets.backfill.state.approval": ("backfill_approval",),
    "partition_assets.backfill.state.record": ("BackfillRecord",),
    "partition_assets.errors": ("BackfillPlanError",),
    "partition_assets.run_tags": ("BACKFILL_ID_TAG",),
}
__getattr__, __dir__ = exported_lazily(__name__, _HOMES)
