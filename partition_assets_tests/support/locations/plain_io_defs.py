"""A code location whose staged backfill holds back one asset and not the other: daily
`readings` stored by Dagster's FilesystemIOManager (a user's plain IO manager, which writes each
output as its node runs: no staging holds it back, its node runs record their materializations)
and a daily `report` of them that stores nothing (`-> None`: its materializations wait for the
publish) and fails on one day. No Spark."""

import dagster as dg

from partition_assets.partitions import daily, mappings

DAYS = daily("2024-01-01", end="2024-01-31")
FAILING_DAY = "2024-01-03"


class MissingReadingsError(Exception):
    """The user's own error, raised by the report of FAILING_DAY."""


@dg.asset(partitions_def=DAYS)
def readings(context: dg.AssetExecutionContext) -> list[int]:
    """The day's meter readings, pickled by the FilesystemIOManager."""
    day = int(context.partition_key[-2:])
    return [day, 2 * day]


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(readings, partition_mapping=mappings.identity())])
def report(context: dg.AssetExecutionContext) -> None:
    """Nothing stored; the report of FAILING_DAY fails."""
    if context.partition_key == FAILING_DAY:
        raise MissingReadingsError(f"the readings of {FAILING_DAY} are incomplete")


defs = dg.Definitions(assets=[readings, report], resources={"io_manager": dg.FilesystemIOManager()})
