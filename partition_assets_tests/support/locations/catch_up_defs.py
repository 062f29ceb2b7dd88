"""A code location for the gaps the catch-up sensor leaves out; fixed partition ranges, so
that the newest windows are the same whenever the tests run.

  monthly_totals ──its month──> daily_share      (March's days read a month that does not exist yet)
  arrivals ──identity──> arrivals_doubled        (arrivals yields nothing on even days)
"""

import dagster as dg

from partition_assets.automation import catch_up_sensor, sparse_backfill_job

MODULE = "partition_assets_tests.support.locations.catch_up_defs"
MONTHS = dg.MonthlyPartitionsDefinition("2024-01-01", end_date="2024-03-01")  # January and February
DAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-03-11")  # the newest: 2024-03-10
FIRST_DAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-01-06")  # the newest: 2024-01-05


@dg.asset(partitions_def=MONTHS, group_name="months")
def monthly_totals() -> None:
    pass


@dg.asset(partitions_def=DAYS, group_name="months", deps=[monthly_totals])
def daily_share() -> None:
    pass


@dg.asset(partitions_def=FIRST_DAYS, group_name="arrivals", output_required=False)
def arrivals(context: dg.AssetExecutionContext):
    if int(context.partition_key[-2:]) % 2:
        yield dg.Output(1)


@dg.asset(partitions_def=FIRST_DAYS, group_name="arrivals")
def arrivals_doubled(arrivals: int) -> int:
    return 2 * arrivals


engine = sparse_backfill_job(module=MODULE)

defs = dg.Definitions(
    assets=[monthly_totals, daily_share, arrivals, arrivals_doubled],
    jobs=[engine],
    sensors=[
        catch_up_sensor(engine, "group:months", name="months"),
        catch_up_sensor(engine, "group:arrivals", name="arrivals"),
    ],
)
