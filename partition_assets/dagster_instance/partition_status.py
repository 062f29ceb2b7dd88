"""Which partitions of an asset failed in Dagster's partition status (as the UI colours them),
read from the subsets Dagster keeps (its asset status cache: ranges of windows for time
partitions), not partition by partition.

`get_status_by_partition` answers one status per key asked, testing each key against each
subset: over 12 years of hourly partitions, about 300,000 parsed keys (20 s here) for an answer
that is nearly always "materialized". Read from the subsets, what the question costs grows
with the failed partitions, not with those it asks about.

Not guaranteed: the subsets are Dagster's status cache, brought up to date (from its own
cursor) by this read; its first build for an asset reads every materialized partition of it,
as the UI's first look at the asset does.
"""

from __future__ import annotations

from collections.abc import Container

import dagster as dg

from partition_assets.dagster_internals import AssetStatusCacheValue, get_and_update_asset_status_cache_value


def failed_partitions(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions_def: dg.PartitionsDefinition, among: Container[str]
) -> set[str]:
    """The partitions of `among` whose latest run failed to materialize them (FAILED in
    `get_status_by_partition`: failed and not in progress again), read from Dagster's failed
    and in-progress subsets of `key`; none when Dagster keeps no status for it (never
    materialized nor planned)."""
    failed, _ = unfinished_partitions(instance, key, partitions_def)
    return {partition for partition in failed if partition in among}


def unfinished_partitions(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions_def: dg.PartitionsDefinition
) -> tuple[set[str], set[str]]:
    """The partitions of `key` that `get_status_by_partition` calls FAILED (their latest run
    failed to materialize them, and no run in progress plans them again), and those it calls
    IN_PROGRESS, read from Dagster's failed and in-progress subsets; none when Dagster keeps no
    status for it (never materialized nor planned)."""
    cached = get_and_update_asset_status_cache_value(instance, key, partitions_def)
    if not isinstance(cached, AssetStatusCacheValue):
        return set(), set()
    failed = cached.deserialize_failed_partition_subsets(partitions_def)
    in_progress = set(cached.deserialize_in_progress_partition_subsets(partitions_def).get_partition_keys())
    return {partition for partition in failed.get_partition_keys() if partition not in in_progress}, in_progress
