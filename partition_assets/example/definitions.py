"""The example code location: assets, the Spark resource and the Delta IO manager."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dagster as dg

from partition_assets.automation import (
    catch_up_sensor,
    default_schedule_status,
    default_status,
    eager_partitions_sensor,
    partitioned_schedule,
    pause_backfill_job,
    sparse_backfill_job,
)
from partition_assets.automation.operations import backfill_operation_jobs
from partition_assets.backfill import gate_checks
from partition_assets.code_location import resolved
from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets.deploy import with_git_versions
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

# Every asset of the example runs a whole key range at once (`backfill_policy`, a Dagster beta):
# its definitions are the library's own calls of it, not a user's.
with quiet_dagster_betas():
    from partition_assets.example import assets


def lake_root() -> str:
    """PARTITION_ASSETS_LAKE, or `.lake` under the working directory."""
    return os.environ.get("PARTITION_ASSETS_LAKE") or str(Path.cwd() / ".lake")


def build_definitions() -> dg.Definitions:
    spark = SparkResource.from_env()
    engine = sparse_backfill_job(module="partition_assets.example")
    example_assets = dg.load_assets_from_modules([assets])
    definitions = dg.Definitions(
        assets=example_assets,
        # The gates as asset checks (each backfill records its evaluation on the asset's Checks tab).
        asset_checks=gate_checks(example_assets),
        # The engine, and the commands on a recorded backfill (pause included), launchable from the Launchpad.
        jobs=[engine, pause_backfill_job(), *backfill_operation_jobs()],
        # Steps run in the run's own process: their work runs on the Spark server, and a step
        # subprocess (Dagster's default) would import Dagster, pyspark and this code location
        # again, about 4 s of CPU per step, more than most of these steps' own Spark work.
        executor=dg.in_process_executor,
        # Both stopped unless PARTITION_ASSETS_SENSORS names them (README "Automation").
        sensors=[
            eager_partitions_sensor(dg.AssetSelection.all(), default_status=default_status("eager_partitions")),
            catch_up_sensor(
                engine, "group:orders", horizon=timedelta(days=7), default_status=default_status("catch_up")
            ),
        ],
        # Weekday mornings: the newest day, the 3 days before it (late corrections) and, on
        # Mondays, the weekend. Stopped unless PARTITION_ASSETS_SENSORS names it (README
        # "Scheduled runs: lookback and gaps").
        schedules=[
            partitioned_schedule(
                "key:daily_orders or key:daily_revenue",
                "0 6 * * 1-5",
                lookback=3,
                collect_gaps=True,
                name="weekday_revenue",
                default_status=default_schedule_status("weekday_revenue"),
            )
        ],
        resources={
            "spark": spark,
            "io_manager": SparkDeltaIOManager(root_uri=lake_root(), spark=spark),
        },
    )
    # Code versions, run tags and materialization metadata from this checkout's commit; resolved
    # here, so that the code server and the CLI read it resolved (without Dagster's own beta warning).
    return resolved(with_git_versions(definitions, __file__))


defs = build_definitions()
