"""Lineage: the (asset, partition)s that read what a backfill rewrites, directly or not.

`cascade` adds to each asset's partitions every partition its upstream partitions reach
through the partition mappings, in topological order: what `downstream` adds to a plan.
`impact` runs the same cascade from a planned backfill to count, per asset outside it,
the partitions that read what it rewrites (what `backfill plan` warns about).

A self-dependent asset that reads earlier partitions is reached from its first rewritten
partition to its last; an unpartitioned input reaches every partition of its readers.

Not guaranteed: only declared dependencies count (an asset that reads a table it does not
declare as an input is not reached); dynamic partitions are those the store holds now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.planning.mapping_memo import MappingMemo

if TYPE_CHECKING:
    from partition_assets.backfill.planning.graph import BackfillGraph
    from partition_assets.dagster_internals import BaseAssetGraph, DynamicPartitionsStore

# The partition mapping of each edge (child, parent) of an asset graph.
EdgeMappings = dict[tuple[dg.AssetKey, dg.AssetKey], dg.PartitionMapping]


def impact(
    asset_graph: BaseAssetGraph, graph: BackfillGraph, dynamic_partitions_store: DynamicPartitionsStore | None = None
) -> dict[dg.AssetKey, int]:
    """Assets outside the backfill that read partitions it rewrites, directly or through
    other assets, with how many of their partitions do so; in topological order.

    The same lineage cascade as `downstream` (a self-dependent asset reading its
    previous partition is reached from the first rewritten one to its last partition),
    started from every partition of the backfill. An unpartitioned asset counts 1.
    """
    selected = set(graph.slices)
    outside = descendants(asset_graph, selected) - selected
    if not outside:
        return {}
    order = [key for key in asset_graph.toposorted_asset_keys if key in selected | outside]
    reached = cascade(
        asset_graph,
        order,
        {key: asset_slice.partition_keys for key, asset_slice in graph.slices.items()},
        mappings_among(asset_graph, order),
        MappingMemo(dynamic_partitions_store),
    )
    return {key: len(reached[key]) for key in order if key in outside and reached[key]}


def mappings_among(asset_graph: BaseAssetGraph, order: list[dg.AssetKey]) -> EdgeMappings:
    """The partition mapping of every edge (child, parent) between assets of `order`."""
    among = set(order)
    return {
        (key, parent): asset_graph.get_partition_mapping(key, parent)
        for key in order
        for parent in sorted(asset_graph.get(key).parent_keys)
        if parent in among
    }


def descendants(asset_graph: BaseAssetGraph, keys: set[dg.AssetKey]) -> set[dg.AssetKey]:
    """Every asset downstream of `keys`, directly or not."""
    found: set[dg.AssetKey] = set()
    stack = list(keys)
    while stack:
        for child in asset_graph.get(stack.pop()).child_keys:
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def cascade(
    asset_graph: BaseAssetGraph,
    order: list[dg.AssetKey],
    keys_by_asset: dict[dg.AssetKey, list[str]],
    mappings_by_edge: EdgeMappings,
    memo: MappingMemo,
) -> dict[dg.AssetKey, list[str]]:
    """Each asset's partitions plus every partition that its upstream partitions reach."""
    parents: dict[dg.AssetKey, list[tuple[dg.AssetKey, dg.PartitionMapping]]] = {key: [] for key in order}
    for (child, parent), mapping in mappings_by_edge.items():
        if parent != child:
            parents[child].append((parent, mapping))
    reached: dict[dg.AssetKey, list[str]] = {}
    for key in order:  # topological: an asset's parents are final before it
        partitions_def = asset_graph.get(key).partitions_def
        keys = set(keys_by_asset.get(key, ()))
        for parent, mapping in parents[key]:
            if reached[parent]:
                parent_def = asset_graph.get(parent).partitions_def
                keys |= memo.downstream_keys(mapping, parent_def, reached[parent], partitions_def)
        if keys and (key, key) in mappings_by_edge:
            keys |= _self_reached(mappings_by_edge[(key, key)], partitions_def, keys, memo)
        reached[key] = memo.order.sorted(partitions_def, keys)
    return reached


def _self_reached(
    mapping: dg.PartitionMapping, partitions_def: dg.PartitionsDefinition, keys: set[str], memo: MappingMemo
) -> set[str]:
    """Partitions of a self-dependent asset that depend on `keys` through itself, transitively."""
    if isinstance(mapping, dg.TimeWindowPartitionMapping) and mapping.end_offset < 0:
        # Each partition reads earlier ones: a change reaches every later partition.
        every = list(partitions_def.get_partition_keys(dynamic_partitions_store=memo.store))
        position = {k: i for i, k in enumerate(every)}
        return set(every[min(position[k] for k in keys) :])
    reached, frontier = set(keys), frozenset(keys)
    while frontier:
        frontier = memo.downstream_keys(mapping, partitions_def, sorted(frontier), partitions_def) - reached
        reached |= frontier
    return reached
