"""A code location for partition_assets_tests/integration/test_scheduling_range_failure.py: a daily asset
whose runs cover ranges of days and whose code fails on one day, as a bad source file fails a
real job. It stores nothing (no Spark; `-> None`: no IO manager writes it, so its runs leave
their materializations to the publish): its materializations are all a staged backfill of it
publishes, so what the instance records shows what was published."""

import dagster as dg

from partition_assets.partitions import daily

DAYS = daily("2024-01-01", end="2024-01-31")
FAILING_DAY = "2024-01-07"


class BadSourceFileError(Exception):
    """The user's own error, raised by every run whose range holds FAILING_DAY."""


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def daily_counts(context: dg.AssetExecutionContext) -> None:
    """A run over a range holding FAILING_DAY fails as a whole, as Dagster's range runs do."""
    if FAILING_DAY in context.partition_keys:
        raise BadSourceFileError(f"the source file of {FAILING_DAY} is truncated")
    context.add_output_metadata({"days": len(context.partition_keys)})


defs = dg.Definitions(assets=[daily_counts])
