"""Daily deliveries in a Delta table (SparkDeltaIOManager: a staged backfill holds them back
until it publishes) that yield nothing on even days (`output_required=False`), and a daily
summary in the same lake that reads them. PARTITION_ASSETS_TEST_LAKE names the lake."""

import os

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01")
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"


@dg.asset(partitions_def=DAYS, output_required=False)
def deliveries(context: dg.AssetExecutionContext, spark: SparkResource):
    """The day's deliveries; none on even days."""
    if int(context.partition_key[-2:]) % 2:
        yield dg.Output(spark.spark_session.createDataFrame([(1, context.partition_key)], "id long, ds string"))


@dg.asset(partitions_def=DAYS)
def delivery_summary(deliveries: DataFrame) -> DataFrame:
    return deliveries.groupBy("ds").count()


spark = SparkResource.from_env()
defs = dg.Definitions(
    assets=[deliveries, delivery_summary],
    resources={"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=os.environ[LAKE_ENV], spark=spark)},
)
