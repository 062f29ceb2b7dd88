"""Dagster surfaces of the engine: a job launchable from the UI, automation sensors and schedules."""

from partition_assets.automation.catch_up import (
    CATCH_UP_TAG,
    catch_up_sensor,
    historical_gaps,
)
from partition_assets.automation.eager import TRIGGER_TAG, eager_partitions_sensor
from partition_assets.automation.job import sparse_backfill_job
from partition_assets.automation.pause_job import pause_backfill_job, pause_run_config
from partition_assets.automation.schedule import (
    SCHEDULE_TAG,
    SKIPPED_TICKS_TAG,
    TICK_TAG,
    TickPlan,
    partitioned_schedule,
)
from partition_assets.automation.switch import default_schedule_status, default_status
from partition_assets.automation.takeover_sensor import coordinator_takeover_sensor
from partition_assets.backfill.planning.run_config import SparseBackfillConfig, backfill_run_config

__all__ = [
    "CATCH_UP_TAG",
    "SCHEDULE_TAG",
    "SKIPPED_TICKS_TAG",
    "TICK_TAG",
    "TRIGGER_TAG",
    "SparseBackfillConfig",
    "TickPlan",
    "backfill_run_config",
    "catch_up_sensor",
    "coordinator_takeover_sensor",
    "default_schedule_status",
    "default_status",
    "eager_partitions_sensor",
    "historical_gaps",
    "partitioned_schedule",
    "pause_backfill_job",
    "pause_run_config",
    "sparse_backfill_job",
]
