"""A code location for partition_assets_tests/integration/test_range_isolation.py: a Delta table whose
runs cover ranges of days, and whose code fails on one day, as a bad source file fails a
real job. PARTITION_ASSETS_TEST_LAKE names the lake."""

import os

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01", end="2024-01-31")
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
FAILING_DAY = "2024-01-07"


class BadSourceFileError(Exception):
    """The user's own error, raised by every run whose range holds FAILING_DAY."""


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def daily_counts(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """One row per day; a run over a range holding FAILING_DAY fails as a whole, as Dagster's range runs do."""
    if FAILING_DAY in context.partition_keys:
        raise BadSourceFileError(f"the source file of {FAILING_DAY} is truncated")
    return spark.spark_session.createDataFrame([(day, 1) for day in context.partition_keys], "ds string, n long")


spark = SparkResource.from_env()
lake = os.environ.get(LAKE_ENV, ".lake-range-failure-tests")
defs = dg.Definitions(
    assets=[daily_counts],
    resources={"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=lake, spark=spark)},
)
