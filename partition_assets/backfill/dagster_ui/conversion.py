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
from datetime import datetime
from typing import TYPE_CHECKING

import dagster as dg
import numpy as np

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import AssetSlice, BackfillGraph
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.backfill.planning.windows import WindowCache
from partition_assets.dagster_internals import AssetGraphSubset, AssetKeyPartitionKey, PartitionsSubset

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph


def subset_of(nodes: Iterable[Node], asset_graph: BaseAssetGraph) -> AssetGraphSubset:
    """The nodes as Dagster's AssetGraphSubset."""
    return AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(node.asset, node.partition or None) for node in nodes}, asset_graph
    )


def graph_subset(graph: BackfillGraph, asset_graph: BaseAssetGraph, subsets: PartitionSubsets) -> AssetGraphSubset:
    """Every node of `graph` as Dagster's AssetGraphSubset (`subset_of(graph.nodes())`), each
    time-partitioned asset's from the windows of its slice (`PartitionSubsets.of`), no key parsed."""
    partitioned = {
        key: subsets.of(asset_slice.partitions_def, frozenset(asset_slice.partition_keys), asset_slice=asset_slice)
        for key, asset_slice in graph.slices.items()
        if asset_slice.partitions_def is not None
    }
    unpartitioned = subset_of((Node(key, UNPARTITIONED) for key in graph.slices if key not in partitioned), asset_graph)
    return unpartitioned._replace(partitions_subsets_by_asset_key=partitioned)


class PartitionSubsets:
    """Partition keys as Dagster's PartitionsSubsets, one object per (definition, keys) among
    the last `size` converted (a subset is a value: operations return new ones, so one serves
    every asset holding those keys). Keys of a time-partitioned asset's slice are converted
    from the slice's windows (computed once per slice: windows.py), whatever their number: runs
    of adjacent windows, no key parsed (not with exclusions, whose runs Dagster joins across the
    excluded days). Other keys grown from a set converted before parse only the keys added: an
    asset's keys grow by a few each poll of a long backfill."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._known: OrderedDict[tuple[dg.PartitionsDefinition, frozenset[str]], PartitionsSubset] = OrderedDict()
        self._windows = WindowCache(padding=0)

    def of(
        self,
        partitions_def: dg.PartitionsDefinition,
        keys: frozenset[str],
        grown_from: frozenset[str] = frozenset(),
        asset_slice: AssetSlice | None = None,
    ) -> PartitionsSubset:
        """`keys` of `partitions_def`; `grown_from`, when converted before, is a subset of `keys`;
        `asset_slice`, when given, holds every one of `keys`."""
        found = self._known.get((partitions_def, keys))
        if found is None:
            if (
                asset_slice is not None
                and isinstance(partitions_def, dg.TimeWindowPartitionsDefinition)
                and not partitions_def.exclusions  # Dagster joins the windows around an excluded day
            ):
                found = self._from_windows(partitions_def, keys, asset_slice)
            else:
                base = self._known.get((partitions_def, grown_from)) if grown_from else None
                added = keys - grown_from if base is not None else keys
                found = partitions_def.empty_subset().with_partition_keys(sorted(added))
                found = found if base is None else base | found
            self._known[(partitions_def, keys)] = found
            if len(self._known) > self._size:
                self._known.popitem(last=False)
        self._known.move_to_end((partitions_def, keys))
        return found

    def _from_windows(
        self, partitions_def: dg.TimeWindowPartitionsDefinition, keys: frozenset[str], asset_slice: AssetSlice
    ) -> PartitionsSubset:
        """`keys` as the subset of the windows they cover: each run of adjacent windows one."""
        starts, ends = self._windows.bounds(partitions_def, asset_slice.partition_keys)
        chosen = np.sort(np.fromiter((asset_slice.index_of[key] for key in keys), dtype=np.int64, count=len(keys)))
        starts, ends = starts[chosen], ends[chosen]
        cuts = np.flatnonzero(starts[1:] != ends[:-1]) + 1
        first, last = np.concatenate([[0], cuts]), np.concatenate([cuts, [len(chosen)]]) - 1
        zone = partitions_def.start.tzinfo
        windows = (
            [
                dg.TimeWindow(datetime.fromtimestamp(starts[a], zone), datetime.fromtimestamp(ends[b], zone))
                for a, b in zip(first.tolist(), last.tolist(), strict=True)
            ]
            if len(chosen)
            else []
        )
        return partitions_def.partitions_subset_class(
            partitions_def=partitions_def, num_partitions=len(keys), included_time_windows=windows
        )


def nodes_of(subset: AssetGraphSubset) -> set[Node]:
    """The (asset, partition) nodes of Dagster's AssetGraphSubset."""
    return {Node(item.asset_key, item.partition_key or UNPARTITIONED) for item in subset.iterate_asset_partitions()}
