"""The gaps the catch-up sensor leaves out (automation/catch_up.py), evaluated as Dagster
evaluates it (`build_sensor_context` on a real instance): partitions reading a parent
partition that does not exist (the engine refuses to plan them, so a sensor launching them
would launch a refused backfill at every tick), and partitions whose latest run yielded no
output (run again, they would skip again). A backfill run by hand with --catch-up plans the
skipped ones again, as Dagster's "materialize missing" does."""

import dagster as dg
import pytest

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.instance_state import current_nodes
from partition_assets.backfill.planning.run_config import COORDINATOR_OP
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets_tests.conformance.compare import on_the_engine
from partition_assets_tests.support.locations import catch_up_defs
from partition_assets_tests.support.locations.catch_up_defs import MODULE

ASSET_GRAPH = catch_up_defs.defs.resolve_asset_graph()
DAYS_BEFORE_MARCH = catch_up_defs.DAYS.get_partition_keys_in_range(dg.PartitionKeyRange("2024-01-01", "2024-02-29"))


def evaluate(sensor_name: str, instance: dg.DagsterInstance):
    sensor = catch_up_defs.defs.resolve_sensor_def(sensor_name)
    return sensor(dg.build_sensor_context(instance=instance, definitions=catch_up_defs.defs))


def test_the_sensor_launches_only_gaps_whose_parents_exist_and_names_the_others(instance):
    request = evaluate("months", instance)
    config = request.run_config["ops"][COORDINATOR_OP]["config"]
    spec = BackfillSpec(module=MODULE, **config)
    planned = plan(ASSET_GRAPH, spec, dynamic_partitions_store=instance)  # refused when a parent is missing

    assert (config["start"][:10], config["end"][:10]) == ("2024-01-01", "2024-02-29")
    assert {node.partition for node in planned.nodes() if node.asset == dg.AssetKey("monthly_totals")} == {
        "2024-01-01",
        "2024-02-01",
    }
    for day in DAYS_BEFORE_MARCH:
        instance.report_runless_asset_event(dg.AssetMaterialization("daily_share", partition=day))
    instance.report_runless_asset_event(dg.AssetMaterialization("monthly_totals", partition="2024-01-01"))
    skipped = evaluate("months", instance)

    assert isinstance(skipped, dg.SkipReason), skipped
    assert skipped.skip_message == (
        "no gaps to fill in group:months (left out: 9 reading parent partitions that do not exist (the engine "
        "refuses them): daily_share 2024-03-01, daily_share 2024-03-02, daily_share 2024-03-03, "
        "daily_share 2024-03-04, daily_share 2024-03-05, ...)"
    )


@pytest.mark.filterwarnings("ignore::dagster.PreviewWarning")
def test_partitions_a_backfill_skipped_are_left_out_by_the_sensor_and_planned_by_a_catch_up_by_hand(home):
    code, output = on_the_engine(MODULE, "group:arrivals", "2024-01-01", "2024-01-04")
    assert code == 0, output
    skipped_nodes = {
        Node(dg.AssetKey(asset), day)
        for asset in ("arrivals", "arrivals_doubled")
        for day in ("2024-01-02", "2024-01-04")
    }

    with dg.DagsterInstance.get() as instance:
        tick = evaluate("arrivals", instance)
        by_hand = plan(
            ASSET_GRAPH,
            BackfillSpec(
                module=MODULE, selection="group:arrivals", start="2024-01-01", end="2024-01-04", catch_up=True
            ),
        )
        missing = {  # what Dagster's "materialize missing" picks: the partitions not materialized
            Node(key, day)
            for key in (dg.AssetKey("arrivals"), dg.AssetKey("arrivals_doubled"))
            for day, status in (
                instance.get_status_by_partition(key, [n.partition for n in by_hand.nodes()], catch_up_defs.FIRST_DAYS)
                or {}
            ).items()
            if status != dg.AssetPartitionStatus.MATERIALIZED
        }
        to_run = set(by_hand.nodes()) - current_nodes(by_hand, instance)

    assert isinstance(tick, dg.SkipReason), tick
    assert tick.skip_message == (
        "no gaps to fill in group:arrivals (left out: 4 whose latest run yielded no output (run again, they would "
        "skip again): arrivals 2024-01-02, arrivals 2024-01-04, arrivals_doubled 2024-01-02, "
        "arrivals_doubled 2024-01-04)"
    )
    assert to_run == missing == skipped_nodes
