"""The engine's (asset, partition) nodes as Dagster's `AssetGraphSubset`, and back: the form
in which a Dagster backfill holds its target and its requested, materialized and failed
partitions. `subsets_by_asset` gives the same per asset, remembering the subsets of the
last few thousand (definition, keys) it converted: the mirror converts every node it is
told of, and assets sharing a definition report the same keys (a run unit's range), so
most keys are not parsed again.

Contract: `nodes_of(subset_of(nodes, asset_graph)) == set(nodes)` for nodes of
`asset_graph`'s assets and partitions; an unpartitioned asset's node is its one
`UNPARTITIONED` node on both sides; `subsets_by_asset` holds the same subsets as
`subset_of`.

Not guaranteed: a node of an asset or partition `asset_graph` does not hold is refused by
Dagster (its error, not one of partition_assets/errors.py). `AssetGraphSubset` and
`AssetKeyPartitionKey` are Dagster private names (partition_assets/dagster_internals.py).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.planning.graph import Node
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.dagster_internals import AssetGraphSubset, AssetKeyPartitionKey, PartitionsSubset

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph


def subset_of(nodes: Iterable[Node], asset_graph: BaseAssetGraph) -> AssetGraphSubset:
    """The nodes as Dagster's AssetGraphSubset."""
    return AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(node.asset, node.partition or None) for node in nodes}, asset_graph
    )


def subsets_by_asset(
    nodes: Iterable[Node], asset_graph: BaseAssetGraph
) -> tuple[dict[dg.AssetKey, PartitionsSubset], set[dg.AssetKey]]:
    """The nodes as each partitioned asset's PartitionsSubset, and the unpartitioned assets among them."""
    keys_by_asset: dict[dg.AssetKey, set[str]] = defaultdict(set)
    for node in nodes:
        keys_by_asset[node.asset].add(node.partition)
    subsets, unpartitioned = {}, set()
    for asset, keys in keys_by_asset.items():
        partitions_def = asset_graph.get(asset).partitions_def
        if partitions_def is None:
            unpartitioned.add(asset)
        else:
            subsets[asset] = _subset(partitions_def, frozenset(keys))
    return subsets, unpartitioned


@functools.lru_cache(maxsize=4096)
def _subset(partitions_def: dg.PartitionsDefinition, keys: frozenset[str]) -> PartitionsSubset:
    # Dagster's subsets are values (an operation returns a new one): one may serve many assets.
    return partitions_def.empty_subset().with_partition_keys(sorted(keys))


def nodes_of(subset: AssetGraphSubset) -> set[Node]:
    """The (asset, partition) nodes of Dagster's AssetGraphSubset."""
    return {Node(item.asset_key, item.partition_key or UNPARTITIONED) for item in subset.iterate_asset_partitions()}
