"""A code location for the isolation tests (issue 24): daily assets whose runs take a
while (sleeps stand in for work; no storage), one of them in a Dagster pool."""

import os
import time

import dagster as dg

from partition_assets.partitions import daily

DAYS = daily("2024-01-01")
POOL = "warehouse"
RUN_SECONDS = 0.4


@dg.asset(partitions_def=DAYS)
def free(context: dg.AssetExecutionContext) -> None:
    # A worker's niceness, as production processes on its host see it.
    context.add_output_metadata({"niceness": os.nice(0)})
    time.sleep(RUN_SECONDS)


@dg.asset(partitions_def=DAYS, pool=POOL)
def pooled() -> None:
    time.sleep(RUN_SECONDS)


defs = dg.Definitions(assets=[free, pooled])
