"""A code location for the publish tests (partition_assets_tests/integration/test_publication_cost.py): two daily
assets, each giving its materialization metadata of its own, each backfilled in one run
whatever the range.

`stored` is a Delta table (SparkDeltaIOManager) whose body returns `Output(frame,
metadata=...)`; `reported` writes nothing through an IO manager and returns
`MaterializeResult(metadata=...)`. PARTITION_ASSETS_TEST_LAKE names the lake.
"""

import os

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01", end="2024-03-31")
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
ROWS_PER_DAY = 2
RANGE_RUN = dg.BackfillPolicy.single_run()  # one run per asset, however many days


@dg.asset(partitions_def=DAYS, backfill_policy=RANGE_RUN)
def stored(context: dg.AssetExecutionContext, spark: SparkResource) -> dg.Output[DataFrame]:
    """ROWS_PER_DAY rows per day (`ds` the day): a Delta table, with metadata from its body."""
    rows = [(i, day) for day in context.partition_keys for i in range(ROWS_PER_DAY)]
    frame = spark.spark_session.createDataFrame(rows, "id long, ds string")
    return dg.Output(frame, metadata={"body_days": len(context.partition_keys)})


@dg.asset(partitions_def=DAYS, backfill_policy=RANGE_RUN, deps=[stored])
def reported(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Writes nothing through an IO manager: its materialization is its metadata."""
    return dg.MaterializeResult(metadata={"body_first_day": context.partition_keys[0]})


spark = SparkResource.from_env()
lake = os.environ.get(LAKE_ENV, ".lake-publish-tests")
defs = dg.Definitions(
    assets=[stored, reported],
    resources={
        "spark": spark,
        "io_manager": SparkDeltaIOManager(root_uri=lake, spark=spark),
    },
)
