"""The impact of a backfill: assets outside its selection that read what it rewrites."""

import dagster as dg

from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.lineage import impact
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.cli.main import main
from partition_assets_tests.support.locations import engine_defs

ASSET_GRAPH = engine_defs.defs.resolve_asset_graph()


def planned(selection: str, start: str, end: str, downstream: bool = False):
    spec = BackfillSpec(
        module="partition_assets_tests.support.locations.engine_defs",
        selection=selection,
        start=start,
        end=end,
        downstream=downstream,
    )
    return plan(ASSET_GRAPH, spec)


def later_days(first: str) -> int:
    keys = engine_defs.DAYS.get_partition_keys()
    return len(keys) - keys.index(first)


def test_impact_follows_lineage_through_assets_outside_the_selection():
    graph = planned("key:clean", "2024-01-10", "2024-01-10")
    assert impact(ASSET_GRAPH, graph) == {
        dg.AssetKey("rolling"): 3,  # a 3-day window reads the day in its 3 latest partitions
        dg.AssetKey("total"): later_days("2024-01-10"),  # reads its previous day: every later day
        dg.AssetKey("ledger"): later_days("2024-01-10"),
        dg.AssetKey("month"): 1,
    }


def test_impact_leaves_out_what_the_backfill_rewrites_itself():
    upstream = planned("key:raw", "2024-01-10", "2024-01-11")
    assert impact(ASSET_GRAPH, upstream) == {
        dg.AssetKey("clean"): 2,
        dg.AssetKey("rolling"): 4,
        dg.AssetKey("total"): later_days("2024-01-10"),
        dg.AssetKey("ledger"): later_days("2024-01-10"),
        dg.AssetKey("month"): 1,
        dg.AssetKey("flaky"): 2,
        dg.AssetKey("after_flaky"): 3,
    }
    cascade = planned("key:raw", "2024-01-10", "2024-01-11", downstream=True)
    assert impact(ASSET_GRAPH, cascade) == {}
    leaf = planned("key:wide", "2024-01-10", "2024-01-11")
    assert impact(ASSET_GRAPH, leaf) == {}


def test_plan_prints_the_impact(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    target = ["-m", "partition_assets_tests.support.locations.engine_defs"]
    window = ["--start", "2024-01-10", "--end", "2024-01-10"]
    assert main(["backfill", "plan", *target, "--select", "key:clean or key:total or key:ledger", *window]) == 0
    assert "impact: 2 assets outside the selection read rewritten partitions" in capsys.readouterr().out
    assert main(["backfill", "plan", *target, "--select", "key:rolling", *window]) == 0
    assert "impact: no asset outside the selection reads a rewritten partition" in capsys.readouterr().out
    assert main(["backfill", "plan", *target, "--select", "key:clean", *window, "--downstream"]) == 0
    assert "impact: no asset outside" in capsys.readouterr().out
    assert main(["backfill", "plan", *target, "--select", "key:flaky", *window]) == 0
    assert "impact: 1 asset outside the selection reads rewritten partitions (partitions affected" in (
        capsys.readouterr().out
    )
