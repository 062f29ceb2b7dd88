"""The engine's (asset, partition) nodes as Dagster's `AssetGraphSubset`, and back: the form
in which a Dagster backfill holds its target and its requested, materialized and failed
partitions.

Contract: `nodes_of(subset_of(nodes, asset_graph)) == set(nodes)` for nodes of
`asset_graph`'s assets and partitions; an unpartitioned asset's node is its one
`UNPARTITIONED` node on both sides.

Not guaranteed: a node of an asset or partition `asset_graph` does not hold is refused by
Dagster (its error, not one of partition_assets/errors.py). `AssetGraphSubset` and
`AssetKeyPartitionKey` are Dagster private names (partition_assets/dagster_internals.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from partition_assets.backfill.planning.graph import Node
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.dagster_internals import AssetGraphSubset, AssetKeyPartitionKey

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph


def subset_of(nodes: Iterable[Node], asset_graph: BaseAssetGraph) -> AssetGraphSubset:
    """The nodes as Dagster's AssetGraphSubset."""
    return AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(node.asset, node.partition or None) for node in nodes}, asset_graph
    )


def nodes_of(subset: AssetGraphSubset) -> set[Node]:
    """The (asset, partition) nodes of Dagster's AssetGraphSubset."""
    return {Node(item.asset_key, item.partition_key or UNPARTITIONED) for item in subset.iterate_asset_partitions()}
