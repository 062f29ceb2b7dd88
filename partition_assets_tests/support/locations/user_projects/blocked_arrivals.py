"""Daily arrivals on Dagster's default IO manager, judged by a blocking partitioned asset
check that fails on BLOCKED_DAY, and two assets downstream of them: a user's project as
Dagster runs it. The day the check fails, Dagster's run keeps both downstream steps from
running and fails. Setting COUNTER_FIXED_ENV (read as the check runs) fixes that day's
counter: a retry then passes."""

import os

import dagster as dg

DAYS = dg.DailyPartitionsDefinition("2024-01-01")
BLOCKED_DAY = "2024-01-03"
COUNTER_FIXED_ENV = "ARRIVALS_COUNTER_FIXED"


@dg.asset(partitions_def=DAYS)
def arrivals(context: dg.AssetExecutionContext) -> int:
    return int(context.partition_key[-2:])


@dg.asset_check(asset=arrivals, partitions_def=DAYS, blocking=True)
def arrivals_were_counted(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """Fails (an error: blocking) on BLOCKED_DAY, whose counter was down until it was fixed."""
    return dg.AssetCheckResult(passed=context.partition_key != BLOCKED_DAY or COUNTER_FIXED_ENV in os.environ)


@dg.asset(partitions_def=DAYS)
def arrivals_doubled(arrivals: int) -> int:
    return 2 * arrivals


@dg.asset(partitions_def=DAYS)
def arrivals_report(arrivals_doubled: int) -> str:
    return f"{arrivals_doubled} arrivals, doubled"


defs = dg.Definitions(assets=[arrivals, arrivals_doubled, arrivals_report], asset_checks=[arrivals_were_counted])
