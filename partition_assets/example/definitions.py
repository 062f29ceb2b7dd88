"""The example code location: assets, the Spark resource and the Delta IO manager, wired by
`partition_assets.definitions`."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from partition_assets import (
    catch_up_sensor,
    default_schedule_status,
    default_status,
    definitions,
    partitioned_schedule,
    quiet_dagster_betas,
    sparse_backfill_job,
)

# Every asset of the example runs a whole key range at once (`backfill_policy`, a Dagster beta):
# its definitions are the library's own calls of it, not a user's.
with quiet_dagster_betas():
    from partition_assets.example import assets

MODULE = "partition_assets.example"


def build_definitions() -> dg.Definitions:
    # The engine, named here: the catch-up sensor launches it.
    engine = sparse_backfill_job(module=MODULE)
    return definitions(
        assets=dg.load_assets_from_modules([assets]),
        module=MODULE,
        engine=engine,
        # Stopped unless PARTITION_ASSETS_SENSORS names it (README "Automation").
        sensors=[
            catch_up_sensor(
                engine, "group:orders", horizon=timedelta(days=7), default_status=default_status("catch_up")
            )
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
    )


defs = build_definitions()
