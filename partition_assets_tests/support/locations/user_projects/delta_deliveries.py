"""What the Delta deliveries projects share (failing_deliveries.py, skipping_deliveries.py):
the daily partitions, a daily summary that reads the deliveries, and the Definitions that
store both in one Delta lake (SparkDeltaIOManager: a staged backfill holds them back until it
publishes). PARTITION_ASSETS_TEST_LAKE names the lake, read when the project is imported."""

import os

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01")
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"


def deliveries_project(deliveries: dg.AssetsDefinition) -> dg.Definitions:
    """`deliveries` and a daily summary of it, stored in the Delta lake LAKE_ENV names."""

    @dg.asset(partitions_def=DAYS)
    def delivery_summary(deliveries: DataFrame) -> DataFrame:
        return deliveries.groupBy("ds").count()

    spark = SparkResource.from_env()
    return dg.Definitions(
        assets=[deliveries, delivery_summary],
        resources={"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=os.environ[LAKE_ENV], spark=spark)},
    )
