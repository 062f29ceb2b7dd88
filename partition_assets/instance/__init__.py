"""The Dagster instance of a deployment that runs backfills on the engine: its class (named
in dagster.yaml as `partition_assets.instance.EngineBackfillInstance`), above `backfill/`.
What it builds on (its lighter default storage, the daemon's backfill filter) is below
`backfill/`, in `partition_assets.dagster_instance`."""

from partition_assets.instance.engine_instance import EngineBackfillInstance

__all__ = ["EngineBackfillInstance"]
