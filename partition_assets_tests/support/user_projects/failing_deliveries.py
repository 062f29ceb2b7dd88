"""Daily deliveries in a Delta table (SparkDeltaIOManager: a staged backfill holds them back
until it publishes, then records their materializations) whose feed fails on FAILING_DAY
until FEED_FIXED_ENV is set (read as the asset runs: a retry then succeeds), and a daily
summary in the same lake that reads them. PARTITION_ASSETS_TEST_LAKE names the lake."""

import os

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01")
FAILING_DAY = "2024-01-03"
FEED_FIXED_ENV = "DELIVERIES_FEED_FIXED"
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"


@dg.asset(partitions_def=DAYS)
def deliveries(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    if context.partition_key == FAILING_DAY and FEED_FIXED_ENV not in os.environ:
        raise ValueError(f"the feed of {FAILING_DAY} is broken")
    return spark.spark_session.createDataFrame([(1, context.partition_key)], "id long, ds string")


@dg.asset(partitions_def=DAYS)
def delivery_summary(deliveries: DataFrame) -> DataFrame:
    return deliveries.groupBy("ds").count()


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[deliveries, delivery_summary],
    resources={"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=os.environ[LAKE_ENV], spark=spark)},
)
