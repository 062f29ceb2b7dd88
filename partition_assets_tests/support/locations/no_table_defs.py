"""A code location with nothing for a staged backfill to publish: two daily assets (a run per
partition) that do no work and store nothing (`-> None`: no IO manager writes them, so the
publish records them); their materializations, with the metadata `report` gives its own, are
all a publish records."""

import dagster as dg

from partition_assets.partitions import daily, mappings

DAYS = daily("2024-01-01")


@dg.asset(partitions_def=DAYS)
def source() -> None:
    """Nothing to compute."""


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep(source, partition_mapping=mappings.identity())])
def report(context: dg.AssetExecutionContext) -> None:
    """Nothing to compute; its metadata names its day."""
    context.add_output_metadata({"reported_day": context.partition_key})


defs = dg.Definitions(assets=[source, report])
