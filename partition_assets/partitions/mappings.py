"""Every dependency shape between partitions, named.

Each function returns one of Dagster's own partition mappings, so Dagster's
webserver, backfills and sensors resolve the same upstream keys as this
library's IO managers and backfill engine. Those that are Dagster betas (the
multi-partition mappings, `allow_nonexistent_upstream_partitions`) are built without
Dagster's beta warning: this library chose them, not its user (dagster_betas.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import dagster as dg

from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets.partitions.definitions import PartitionDefinitionError


def identity() -> dg.IdentityPartitionMapping:
    """Partition K depends on upstream partition K."""
    return dg.IdentityPartitionMapping()


def by_time_window() -> dg.TimeWindowPartitionMapping:
    """Depend on every upstream partition whose window overlaps the downstream one.

    Covers fan-in (hourly -> daily: a day reads its 24 hours, 23 or 25 across
    DST) and fan-out (monthly -> daily: each day reads its month).
    """
    return dg.TimeWindowPartitionMapping()


fan_in = by_time_window
fan_out = by_time_window


def rolling_window(periods: int) -> dg.TimeWindowPartitionMapping:
    """Partition D depends on the `periods` upstream periods ending at D (D-periods+1 .. D).

    At the first partitions the window is cut at the upstream's start.
    """
    if not isinstance(periods, int) or periods < 1:
        raise PartitionDefinitionError(
            f"rolling_window periods {periods!r} must be a whole number >= 1 "
            "(7 for a 7-day window over daily partitions)"
        )
    with quiet_dagster_betas():  # allow_nonexistent_upstream_partitions: a beta parameter
        return dg.TimeWindowPartitionMapping(
            start_offset=-(periods - 1), end_offset=0, allow_nonexistent_upstream_partitions=True
        )


def previous_period(periods: int = 1) -> dg.TimeWindowPartitionMapping:
    """Partition D depends on partition D-periods; the first partitions depend on nothing.

    Use it on an asset's own key for a self-dependency such as a running total.
    """
    if not isinstance(periods, int) or periods < 1:
        raise PartitionDefinitionError(f"previous_period periods {periods!r} must be a whole number >= 1")
    with quiet_dagster_betas():  # allow_nonexistent_upstream_partitions: a beta parameter
        return dg.TimeWindowPartitionMapping(
            start_offset=-periods, end_offset=-periods, allow_nonexistent_upstream_partitions=True
        )


def static_to_static(
    downstream_keys_by_upstream_key: Mapping[str, str | Collection[str]],
) -> dg.StaticPartitionMapping:
    """Map static keys explicitly, e.g. {"de": "emea", "fr": "emea", "us": "amer"}."""
    if not downstream_keys_by_upstream_key:
        raise PartitionDefinitionError("static_to_static needs at least one upstream -> downstream key pair")
    return dg.StaticPartitionMapping(downstream_keys_by_upstream_key)


def all_partitions() -> dg.AllPartitionMapping:
    """Every upstream partition, e.g. for a dimension table read whole."""
    return dg.AllPartitionMapping()


def to_dimension(dimension: str) -> dg.MultiToSingleDimensionPartitionMapping:
    """Between a multi-partitioned asset and a single-dimension one, matched on `dimension`.

    Daily -> (ds x region): each (ds, region) reads day ds. (ds x region) -> daily:
    each day reads every region of that day.
    """
    with quiet_dagster_betas():  # a beta class
        return dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=dimension)


def per_dimension(**mappings: dg.PartitionMapping) -> dg.MultiPartitionMapping:
    """Between two multi-partitioned assets with the same dimensions, one mapping per dimension.

    `per_dimension(ds=rolling_window(7), region=identity())` is a 7-day window per region.
    """
    if not mappings:
        raise PartitionDefinitionError(
            "per_dimension needs a mapping for each dimension, e.g. ds=identity(), region=identity()"
        )
    with quiet_dagster_betas():  # a beta class
        return dg.MultiPartitionMapping(
            {name: dg.DimensionPartitionMapping(name, mapping) for name, mapping in mappings.items()}
        )


def upstream_keys(
    mapping: dg.PartitionMapping,
    downstream_def: dg.PartitionsDefinition,
    upstream_def: dg.PartitionsDefinition,
    downstream_keys: Collection[str],
) -> list[str]:
    """The upstream partition keys that `downstream_keys` depend on under `mapping`."""
    subset = downstream_def.empty_subset().with_partition_keys(downstream_keys)
    result = mapping.get_upstream_mapped_partitions_result_for_partitions(subset, downstream_def, upstream_def)
    return sorted(result.partitions_subset.get_partition_keys())


SELF_DEPENDENCY_METADATA = "partition_assets/self_dependency"


def self_dependency(asset_key: str | dg.AssetKey, periods: int = 1) -> dg.AssetIn:
    """An input on the asset's own partition `periods` before, e.g. yesterday's running total.

    It loads as None where there is no predecessor: at the first partition, or
    before the asset's table exists.
    """
    return dg.AssetIn(
        key=dg.AssetKey.from_coercible(asset_key),
        partition_mapping=previous_period(periods),
        metadata={SELF_DEPENDENCY_METADATA: True},
    )
