"""Webserver launches, as Dagster's GraphQL mutation `launchPartitionBackfill` builds them
(from the dialog's partition names, or from ranges per asset), adopted by the engine with
exactly their target (backfill/dagster_ui/adoption.py): a static x daily asset's, and days
with the weeks they touch; and refused, when the deployment requires approval, where
Dagster's daemon would run them."""

import time

import dagster as dg
import pytest
from dagster._core.definitions.selector import PartitionRangeSelector, PartitionsByAssetSelector, PartitionsSelector

from partition_assets.backfill.dagster_ui.adoption import adopted_plan, hand_back
from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.dagster_instance.daemon_filter import DAGSTER, ENGINE_TAG, SPARSE
from partition_assets.dagster_internals import BulkActionStatus, PartitionBackfill
from partition_assets.errors import ApprovalError
from partition_assets_tests.support.instances import add_to_config
from partition_assets_tests.support.ui_backfills import dialog_backfill

DAYS = dg.DailyPartitionsDefinition("2024-01-01")
REGIONS = dg.StaticPartitionsDefinition(["apac", "eu", "us"])


@dg.asset(partitions_def=DAYS)
def orders() -> None: ...


@dg.asset(partitions_def=dg.MultiPartitionsDefinition({"ds": DAYS, "region": REGIONS}), deps=[orders])
def orders_by_region() -> None: ...


@dg.asset(partitions_def=dg.WeeklyPartitionsDefinition("2024-01-01"), deps=[orders])
def weekly_orders() -> None: ...


defs = dg.Definitions(assets=[orders, orders_by_region, weekly_orders])
# This module, as an engine code location (`engine_modules`).
MODULE = __name__
LAUNCHED = [f"2024-01-0{day}|{region}" for day in (2, 3) for region in ("eu", "us")]


def from_partition_names(instance: dg.DagsterInstance) -> PartitionBackfill:
    """The dialog's `partitionNames` with an asset selection."""
    return dialog_backfill("names", defs.resolve_asset_graph(), LAUNCHED, [orders_by_region.key], instance)


def from_ranges(instance: dg.DagsterInstance, keys: dict[dg.AssetKey, list[str]] | None = None) -> PartitionBackfill:
    """`partitionsByAssets`: one single-key range per partition key of each asset (default:
    the launched keys of orders_by_region)."""
    selectors = [
        PartitionsByAssetSelector(
            asset_key=asset, partitions=PartitionsSelector(ranges=[PartitionRangeSelector(k, k) for k in asset_keys])
        )
        for asset, asset_keys in (keys or {orders_by_region.key: LAUNCHED}).items()
    ]
    return PartitionBackfill.from_partitions_by_assets(
        backfill_id="ranges",
        asset_graph=defs.resolve_asset_graph(),
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        partitions_by_assets=selectors,
        title=None,
        description=None,
        run_config=None,
    )


@pytest.mark.parametrize("launch", [from_partition_names, from_ranges])
def test_a_ui_launch_of_a_multi_partitioned_asset_is_adopted_with_exactly_its_target(launch):
    with dg.instance_for_test() as instance:
        spec, graph = adopted_plan(launch(instance), [MODULE], instance)
    assert (spec.start, spec.end) == ("2024-01-02T00:00:00+00:00", "2024-01-03T23:59:59.999999+00:00")
    assert spec.static == {"region": ["eu", "us"]}
    assert set(graph.nodes()) == {Node(orders_by_region.key, key) for key in LAUNCHED}


def test_days_with_the_weeks_they_touch_are_adopted_as_the_days_range():
    """What `backfill run --start 2024-01-01 --end 2024-01-10` plans of a daily asset and a
    weekly one: the weeks span more days than the range; the days span it."""
    selection = "key:orders or key:weekly_orders"
    spec = BackfillSpec(module=MODULE, selection=selection, start="2024-01-01", end="2024-01-10")
    planned = set(plan(defs.resolve_asset_graph(), spec).nodes())
    keys: dict[dg.AssetKey, list[str]] = {}
    for node in planned:
        keys.setdefault(node.asset, []).append(node.partition)
    last_week = weekly_orders.partitions_def.time_window_for_partition_key(max(keys[weekly_orders.key]))
    assert last_week.end.isoformat() == "2024-01-14T00:00:00+00:00"  # after the range's last day
    with dg.instance_for_test() as instance:
        adopted, graph = adopted_plan(from_ranges(instance, keys), [MODULE], instance)
    assert set(graph.nodes()) == planned
    assert (adopted.start, adopted.end) == ("2024-01-01T00:00:00+00:00", "2024-01-10T23:59:59.999999+00:00")


def test_a_deployment_requiring_approval_refuses_webserver_backfills_left_to_dagsters_daemon(home):
    """The tag `partition_assets/engine=dagster` in the dialog, and a backfill the engine hands
    back: Dagster's daemon would publish them with no gate or approval. Refused, nothing
    recorded (the handed-back one marked failed); accepted without the setting."""
    add_to_config(home, partition_assets={"engine_modules": [], "approval": {"required": True}})
    with dg.DagsterInstance.from_config(str(home)) as instance:
        by_the_daemon = from_partition_names(instance)._replace(tags={ENGINE_TAG: DAGSTER})
        with pytest.raises(ApprovalError, match="would run on Dagster's daemon.*Nothing was recorded"):
            instance.add_backfill(by_the_daemon)
        assert instance.get_backfills() == []
        engine_run = from_ranges(instance)._replace(tags={ENGINE_TAG: SPARSE})
        instance.add_backfill(engine_run)
        with pytest.raises(ApprovalError, match="not handed to Dagster's daemon"):
            hand_back(instance, engine_run)
        (stored,) = instance.get_backfills()
        assert stored.status == BulkActionStatus.FAILED and stored.tags[ENGINE_TAG] == SPARSE
    add_to_config(home, partition_assets={"engine_modules": []})
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_backfill(by_the_daemon)
        assert instance.get_backfill(by_the_daemon.backfill_id) is not None
