"""Two daily assets on Dagster's default IO manager: the day's visits, and them doubled."""

import dagster as dg

DAYS = dg.DailyPartitionsDefinition("2024-01-01")


@dg.asset(partitions_def=DAYS)
def visits(context: dg.AssetExecutionContext) -> int:
    """The day of the month, as the day's visits."""
    return int(context.partition_key[-2:])


@dg.asset(partitions_def=DAYS)
def doubled_visits(visits: int) -> int:
    return 2 * visits
