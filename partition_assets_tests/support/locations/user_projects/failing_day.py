"""Daily readings on Dagster's default IO manager that fail on one day, a summary of each
day's readings, and an asset check of the readings: a user's project as Dagster runs it."""

import dagster as dg

DAYS = dg.DailyPartitionsDefinition("2024-01-01")
FAILING_DAY = "2024-01-03"


@dg.asset(partitions_def=DAYS)
def readings(context: dg.AssetExecutionContext) -> list[int]:
    """The day's meter readings; the feed of FAILING_DAY is broken."""
    if context.partition_key == FAILING_DAY:
        raise ValueError(f"the feed of {FAILING_DAY} is broken")
    day = int(context.partition_key[-2:])
    return [day, 2 * day]


@dg.asset(partitions_def=DAYS)
def reading_total(readings: list[int]) -> int:
    return sum(readings)


@dg.asset_check(asset=readings)
def readings_are_positive() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


defs = dg.Definitions(assets=[readings, reading_total], asset_checks=[readings_are_positive])
