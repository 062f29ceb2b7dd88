"""The engine's (asset, partition) nodes as Dagster's `AssetGraphSubset`, and back: the form
in which a Dagster backfill holds its target and its requested, materialized and failed
partitions. `partitions_subset` converts one asset's keys, remembering the last few
thousand (definition, keys) it converted: the mirror converts each asset's keys whenever
they grow, and assets sharing a definition hold the same keys (the backfill's range), so
most are not parsed again, and their equal subsets are one object (serialized once).

Contract: `nodes_of(subset_of(nodes, asset_graph)) == set(nodes)` for nodes of
`asset_graph`'s assets and partitions; an unpartitioned asset's node is its one
`UNPARTITIONED` node on both sides; `partitions_subset` holds what `subset_of` holds for
those keys of an asset of that definition.

Not guaranteed: a node of an asset or partition `asset_graph` does not hold is refused by
Dagster (its error, not one of partition_assets/errors.py). `AssetGraphSubset` and
`AssetKeyPartitionKey` are Dagster private names (partition_assets/dagster_internals.py).
"""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=4096)
def partitions_subset(partitions_def: dg.PartitionsDefinition, keys: frozenset[str]) -> PartitionsSubset:
    """`keys` of `partitions_def` as Dagster's PartitionsSubset; the same object again for
    equal keys, while it is among the last 4,096 converted (a subset is a value: operations
    return new ones, so one serves every asset that holds these keys)."""
    return partitions_def.empty_subset().with_partition_keys(sorted(keys))


def nodes_of(subset: AssetGraphSubset) -> set[Node]:
    """The (asset, partition) nodes of Dagster's AssetGraphSubset."""
    return {Node(item.asset_key, item.partition_key or UNPARTITIONED) for item in subset.iterate_asset_partitions()}
