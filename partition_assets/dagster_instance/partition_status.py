"""Dagster's partition status of an asset, as the UI colours it (materialized, failed, in
progress), read as the subsets Dagster keeps (its asset status cache: ranges of windows for
time partitions), not partition by partition.

`get_status_by_partition` answers one status per key asked, testing each key against each
subset: over 12 years of hourly partitions, about 300,000 parsed keys for an answer that
is nearly always "materialized". Read as subsets, what a question costs grows with the
partitions it returns (the failed ones, the gaps), not with those it asks about.

Not guaranteed: the subsets are Dagster's status cache, updated (incrementally, from its own
cursor) by this read; its first build for an asset reads every materialized partition of it,
as the UI's first look at the asset does.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import dagster as dg

from partition_assets.dagster_internals import (
    AssetStatusCacheValue,
    PartitionsSubset,
    get_and_update_asset_status_cache_value,
)


@dataclass(frozen=True)
class PartitionStatus:
    """One asset's partitions by status; a partition in `in_progress` is in progress whatever
    else holds it, then one in `failed` failed, as `get_status_by_partition` ranks them."""

    materialized: PartitionsSubset
    failed: PartitionsSubset
    in_progress: PartitionsSubset

    def failed_keys(self, among: Container[str]) -> set[str]:
        """The partitions of `among` whose latest run failed to materialize them (FAILED)."""
        return {key for key in self.failed.get_partition_keys() if key in among and key not in self.in_progress}

    def not_current(self, keys: PartitionsSubset) -> PartitionsSubset:
        """Those of `keys` neither materialized (since their last failure) nor in progress:
        missing or failed."""
        current = (self.materialized - self.failed) | self.in_progress
        return keys - current


def partition_status(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions_def: dg.PartitionsDefinition
) -> PartitionStatus | None:
    """The partition status of `key` in `instance`; None when Dagster keeps none for it (the
    asset was never materialized nor planned: every partition is missing)."""
    cached = get_and_update_asset_status_cache_value(instance, key, partitions_def)
    if not isinstance(cached, AssetStatusCacheValue):
        return None
    return PartitionStatus(
        materialized=cached.deserialize_materialized_partition_subsets(partitions_def),
        failed=cached.deserialize_failed_partition_subsets(partitions_def),
        in_progress=cached.deserialize_in_progress_partition_subsets(partitions_def),
    )
