"""Daily visits reported by their asset (`MaterializeResult`: nothing for an IO manager to
store, so a staged backfill records them when it publishes), judged by three asset checks as
Dagster users write them: a blocking one that fails on BLOCKED_DAY, a partitioned one, and a
warning that always fails; and a report downstream of the visits."""

import dagster as dg

DAYS = dg.DailyPartitionsDefinition("2024-01-01")
BLOCKED_DAY = "2024-01-03"


@dg.asset(partitions_def=DAYS)
def visits(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"visits": int(context.partition_key[-2:])})


@dg.asset(partitions_def=DAYS, deps=[visits])
def visit_report() -> dg.MaterializeResult:
    return dg.MaterializeResult()


@dg.asset_check(asset=visits, blocking=True)
def visits_are_counted(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """Fails (an error: blocking) on BLOCKED_DAY, whose counter was down."""
    return dg.AssetCheckResult(passed=context.run.tags.get("dagster/partition") != BLOCKED_DAY)


@dg.asset_check(asset=visits, partitions_def=DAYS)
def visits_of_the_day(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True, metadata={"day": context.partition_key})


@dg.asset_check(asset=visits)
def no_bots() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN)


defs = dg.Definitions(assets=[visits, visit_report], asset_checks=[visits_are_counted, visits_of_the_day, no_bots])
