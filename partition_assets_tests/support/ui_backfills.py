"""Asset backfills as the webserver's launch dialog builds them (Dagster's GraphQL mutation
`launchPartitionBackfill` with `partitionNames` and an asset selection)."""

import time
from collections.abc import Sequence

import dagster as dg

from partition_assets.dagster_internals import AssetGraph, PartitionBackfill


def dialog_backfill(
    backfill_id: str,
    asset_graph: AssetGraph,
    partition_names: Sequence[str],
    asset_selection: Sequence[dg.AssetKey],
    instance: dg.DagsterInstance,
) -> PartitionBackfill:
    """The backfill of `partition_names` of each asset of `asset_selection`, untagged."""
    return PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id,
        asset_graph=asset_graph,
        partition_names=partition_names,
        asset_selection=asset_selection,
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=None,
        description=None,
        run_config=None,
    )
