"""A webserver launch of a static x daily asset, as Dagster's GraphQL mutation
`launchPartitionBackfill` builds it (from the dialog's partition names, or from its ranges),
is adopted by the engine with exactly its target (backfill/dagster_ui/adoption.py)."""

import time

import dagster as dg
import pytest
from dagster._core.definitions.selector import PartitionRangeSelector, PartitionsByAssetSelector, PartitionsSelector

from partition_assets.backfill.dagster_ui.adoption import adopted_plan
from partition_assets.backfill.planning.graph import Node
from partition_assets.dagster_internals import PartitionBackfill

DAYS = dg.DailyPartitionsDefinition("2024-01-01")
REGIONS = dg.StaticPartitionsDefinition(["apac", "eu", "us"])


@dg.asset(partitions_def=DAYS)
def orders() -> None: ...


@dg.asset(partitions_def=dg.MultiPartitionsDefinition({"ds": DAYS, "region": REGIONS}), deps=[orders])
def orders_by_region() -> None: ...


defs = dg.Definitions(assets=[orders, orders_by_region])
# This module, as an engine code location (`engine_modules`).
MODULE = __name__
LAUNCHED = [f"2024-01-0{day}|{region}" for day in (2, 3) for region in ("eu", "us")]


def from_partition_names(instance: dg.DagsterInstance) -> PartitionBackfill:
    """The dialog's `partitionNames` with an asset selection."""
    return PartitionBackfill.from_asset_partitions(
        backfill_id="names",
        asset_graph=defs.resolve_asset_graph(),
        partition_names=LAUNCHED,
        asset_selection=[orders_by_region.key],
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=None,
        description=None,
        run_config=None,
    )


def from_ranges(instance: dg.DagsterInstance) -> PartitionBackfill:
    """`partitionsByAssets`: one single-key range per multi-partition key."""
    selector = PartitionsByAssetSelector(
        asset_key=orders_by_region.key,
        partitions=PartitionsSelector(ranges=[PartitionRangeSelector(key, key) for key in LAUNCHED]),
    )
    return PartitionBackfill.from_partitions_by_assets(
        backfill_id="ranges",
        asset_graph=defs.resolve_asset_graph(),
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        partitions_by_assets=[selector],
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
