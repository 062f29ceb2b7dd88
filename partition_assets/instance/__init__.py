"""The Dagster instance of a deployment that runs backfills on the engine: its class
(named in dagster.yaml as `partition_assets.instance.EngineBackfillInstance`), the tag
that keeps Dagster's backfill daemon off the engine's backfills (daemon_filter.py), and its
lighter default storage."""

from partition_assets.instance.engine_instance import EngineBackfillInstance

__all__ = ["EngineBackfillInstance"]
