"""The storage classes a dagster.yaml names by the path they had before they moved below
`backfill/` (`module: partition_assets.instance.storage`): they are those of
`partition_assets.dagster_instance.storage`, where new configuration names them.

Not guaranteed: only the three classes a dagster.yaml names are here, not the module's helpers."""

from partition_assets.dagster_instance.storage import ConsolidatedEventLogStorage, DirectComputeLogManager, RunStorage

__all__ = ["ConsolidatedEventLogStorage", "DirectComputeLogManager", "RunStorage"]
