"""What a staged backfill holds back until it publishes, planned without running anything:
the tables it stages, and the assets another IO manager writes as their nodes run."""

import dagster as dg

from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.tables import tables_of, unstaged_assets
from partition_assets_tests.support.locations import safe_defs


def test_assets_another_io_manager_stores_are_named_as_not_held_back(lake):
    """A staged backfill warns about them: their IO manager writes as their nodes run."""
    days = safe_defs.DAYS

    @dg.asset(partitions_def=days, io_manager_key="pickles")
    def pickled(context: dg.AssetExecutionContext) -> int:
        return 1

    @dg.asset(partitions_def=days, deps=[pickled])
    def side_effect_only(context: dg.AssetExecutionContext) -> None:
        pass

    definitions = dg.Definitions(
        assets=[safe_defs.orders, pickled, side_effect_only],
        resources={
            "spark": safe_defs.spark,
            "io_manager": safe_defs.SparkDeltaIOManager(root_uri=str(lake), spark=safe_defs.spark),
            "pickles": dg.FilesystemIOManager(base_dir=str(lake / "pickles")),
        },
    )
    spec = BackfillSpec(module="unused", selection="*", start="2024-01-01", end="2024-01-02")
    graph = plan(definitions.resolve_asset_graph(), spec)
    assert unstaged_assets(definitions, graph) == [pickled.key]
    assert list(tables_of(definitions, graph)) == [safe_defs.orders.key]
