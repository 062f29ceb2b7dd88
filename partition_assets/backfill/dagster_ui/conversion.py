"""The engine's (asset, partition) nodes as Dagster's `AssetGraphSubset`, and back: the form
in which a Dagster backfill holds its target and its requested, materialized and failed
partitions. `PartitionSubsets` converts one asset's keys, remembering the last few
thousand (definition, keys) it converted: the mirror converts each asset's keys whenever
they grow, and assets sharing a definition hold the same keys (the backfill's range), so
most are not parsed again, and their equal subsets are one object (serialized once).

Contract: `nodes_of(subset_of(nodes, asset_graph)) == set(nodes)` for nodes of
`asset_graph`'s assets and partitions; an unpartitioned asset's node is its one
`UNPARTITIONED` node on both sides; `PartitionSubsets.of` holds what `subset_of` holds
for those keys of an asset of that definition.

Not guaranteed: a node of an asset or partition `asset_graph` does not hold is refused by
Dagster (its error, not one of partition_assets/errors.py). `AssetGraphSubset` and
`AssetKeyPartitionKey` are Dagster private names (partition_assets/dagster_internals.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.dagster_internals import AssetGraphSubset, AssetKeyPartitionKey, PartitionsSubset

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph


def subset_of(nodes: Iterable[Node], asset_graph: BaseAssetGraph) -> AssetGraphSubset:
    """The nodes as Dagster's AssetGraphSubset."""
    return AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(node.asset, node.partition or None) for node in nodes}, asset_graph
    )


class PartitionSubsets:
    """Partition keys as Dagster's PartitionsSubsets, one object per (definition, keys) among
    the last `size` converted (a subset is a value: operations return new ones, so one serves
    every asset holding those keys). Keys grown from a set converted before parse only the
    keys added: an hourly asset's keys grow by a few each poll of a long backfill."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._known: OrderedDict[tuple[dg.PartitionsDefinition, frozenset[str]], PartitionsSubset] = OrderedDict()

    def of(
        self, partitions_def: dg.PartitionsDefinition, keys: frozenset[str], grown_from: frozenset[str] = frozenset()
    ) -> PartitionsSubset:
        """`keys` of `partitions_def`; `grown_from`, when converted before, is a subset of `keys`."""
        found = self._known.get((partitions_def, keys))
        if found is None:
            base = self._known.get((partitions_def, grown_from)) if grown_from else None
            added = keys - grown_from if base is not None else keys
            found = partitions_def.empty_subset().with_partition_keys(sorted(added))
            found = found if base is None else base | found
            self._known[(partitions_def, keys)] = found
            if len(self._known) > self._size:
                self._known.popitem(last=False)
        self._known.move_to_end((partitions_def, keys))
        return found


def nodes_of(subset: AssetGraphSubset) -> set[Node]:
    """The (asset, partition) nodes of Dagster's AssetGraphSubset."""
    return {Node(item.asset_key, item.partition_key or UNPARTITIONED) for item in subset.iterate_asset_partitions()}
