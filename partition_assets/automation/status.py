"""Which partitions are current, missing or failed: Dagster's own partition status,
the one the UI colours (materialized / failed / missing)."""

from collections.abc import Iterable

import dagster as dg

from partition_assets.backfill.coordinator import materialized
from partition_assets.backfill.graph import BackfillGraph, Node


def failed_partitions(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions_def: dg.PartitionsDefinition, keys: Iterable[str]
) -> set[str]:
    """Partitions of `keys` whose latest run failed to materialize them."""
    status = instance.get_status_by_partition(key, list(keys), partitions_def) or {}
    return {k for k, s in status.items() if s == dg.AssetPartitionStatus.FAILED}


def current_nodes(graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """The graph's nodes that hold a materialization and whose latest run did not fail."""
    failed = {
        Node(key, partition)
        for key, asset_slice in graph.slices.items()
        if asset_slice.partitions_def is not None
        for partition in failed_partitions(instance, key, asset_slice.partitions_def, asset_slice.partition_keys)
    }
    return materialized(graph, instance) - failed
