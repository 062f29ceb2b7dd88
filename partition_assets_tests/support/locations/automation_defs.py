"""A code location for the automation tests: no storage, fixed partition ranges.

Three independent families, so one instance serves all tests:
  eager_up ──identity──> eager_down, eager_up ──rolling 2──> eager_pair  (eager sensor)
  gap_raw ──identity──> gap_clean                                         (catch-up sensor)
  job_raw ──identity──> job_clean                                         (engine job)
"""

import os
import time
from pathlib import Path

import dagster as dg

from partition_assets.automation import (
    catch_up_sensor,
    default_status,
    eager_partitions_sensor,
    sparse_backfill_job,
)
from partition_assets.partitions import daily, mappings

# A fixed end: the newest window (2024-01-10) is the same whenever the tests run.
DAYS = daily("2024-01-01", end="2024-01-11")


def failing_partition_marker() -> Path:
    """A file naming a partition of job_raw that fails (node runs share only DAGSTER_HOME)."""
    return Path(os.environ["DAGSTER_HOME"]) / "job_raw.fail"


class FailConfig(dg.Config):
    fail: bool = False  # tests make a partition fail once, then heal it


@dg.asset(partitions_def=DAYS, group_name="eager")
def eager_up(config: FailConfig) -> None:
    if config.fail:
        raise RuntimeError("asked to fail")


@dg.asset(partitions_def=DAYS, group_name="eager", deps=[dg.AssetDep(eager_up, partition_mapping=mappings.identity())])
def eager_down() -> None:
    pass


@dg.asset(
    partitions_def=DAYS, group_name="eager", deps=[dg.AssetDep(eager_up, partition_mapping=mappings.rolling_window(2))]
)
def eager_pair() -> None:
    pass


@dg.asset(partitions_def=DAYS, group_name="gaps")
def gap_raw(config: FailConfig) -> None:
    time.sleep(0.1)
    if config.fail:
        raise RuntimeError("asked to fail")


@dg.asset(partitions_def=DAYS, group_name="gaps", deps=[dg.AssetDep(gap_raw, partition_mapping=mappings.identity())])
def gap_clean() -> None:
    # Slow enough that the catch-up backfill outlasts several daemon loops (~5 s each),
    # so the test sees the sensor skip while it runs.
    time.sleep(2)


@dg.asset(partitions_def=DAYS, group_name="jobs")
def job_raw(context: dg.AssetExecutionContext) -> None:
    marker = failing_partition_marker()
    if marker.exists() and marker.read_text() == context.partition_key:
        raise RuntimeError(f"job_raw fails on {context.partition_key}")


@dg.asset(partitions_def=DAYS, group_name="jobs", deps=[dg.AssetDep(job_raw, partition_mapping=mappings.identity())])
def job_clean() -> None:
    # Slow enough that a terminated engine job (test_automation) stops with nodes left to
    # launch: a node run costs ~0.1 s of bookkeeping, 12 of them end before it lands.
    time.sleep(0.5)


engine = sparse_backfill_job(module="partition_assets_tests.support.locations.automation_defs")

defs = dg.Definitions(
    assets=[eager_up, eager_down, eager_pair, gap_raw, gap_clean, job_raw, job_clean],
    jobs=[engine],
    sensors=[
        eager_partitions_sensor("group:eager", name="eager", default_status=default_status("eager")),
        catch_up_sensor(
            engine, "group:gaps", name="catch_up", minimum_interval_seconds=2, default_status=default_status("catch_up")
        ),
    ],
)
