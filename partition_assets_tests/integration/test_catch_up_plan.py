"""`backfill plan --catch-up` costs only the nodes that would run (commands/launching.py
`plan_backfill`): its ETA, critical path and per-asset runs leave out the current nodes that
catch-up skips, on a real instance where the first days of both assets are materialized."""

import dagster as dg

from partition_assets.backfill.commands import plan_backfill
from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.cli.rendering import render_plan
from partition_assets_tests.support.locations.catch_up_defs import MODULE

ARRIVALS, DOUBLED = dg.AssetKey("arrivals"), dg.AssetKey("arrivals_doubled")


def test_a_catch_up_plan_counts_runs_and_eta_of_the_missing_nodes_only(instance):
    for asset in ("arrivals", "arrivals_doubled"):
        for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
            instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition=day))
    spec = BackfillSpec(
        module=MODULE, selection="group:arrivals", start="2024-01-01", end="2024-01-05", catch_up=True, max_parallel=1
    )

    plan = plan_backfill(spec, instance)

    assert plan.current_nodes == 6 and plan.graph.node_count() == 10
    assert {key: (runs.partitions, runs.runs) for key, runs in plan.asset_runs.items()} == {
        ARRIVALS: (2, 2),
        DOUBLED: (2, 2),
    }
    assert plan.critical_path == (Node(ARRIVALS, "2024-01-04"), Node(DOUBLED, "2024-01-04"))
    assert set(plan.seconds_per_node.values()) == {1.0}  # no duration recorded: 1 s a node
    assert plan.eta_seconds == 4.0  # the 4 nodes that run, one slot at a time
    shown = render_plan(plan)
    assert "no policy: 2 runs (one per partition)" in shown and "ETA with 1 slots: 4.0 s" in shown
