"""A daily asset that yields nothing on even days (`output_required=False`), a downstream
asset that reads it, and a downstream asset that does not depend on it. Dagster's default
IO manager stores every output."""

import dagster as dg

DAYS = dg.DailyPartitionsDefinition("2024-01-01")


@dg.asset(partitions_def=DAYS, output_required=False)
def arrivals(context: dg.AssetExecutionContext):
    """The day's arrivals; none recorded on even days."""
    day = int(context.partition_key[-2:])
    if day % 2:
        yield dg.Output(day)


@dg.asset(partitions_def=DAYS)
def arrivals_doubled(arrivals: int) -> int:
    return 2 * arrivals


@dg.asset(partitions_def=DAYS)
def calendar(context: dg.AssetExecutionContext) -> str:
    return context.partition_key


defs = dg.Definitions(assets=[arrivals, arrivals_doubled, calendar])
