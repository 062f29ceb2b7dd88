"""Daily deliveries in a Delta table (delta_deliveries.py: a staged backfill holds them back
until it publishes, then records their materializations) whose feed fails on FAILING_DAY
until FEED_FIXED_ENV is set (read as the asset runs: a retry then succeeds), and a daily
summary in the same lake that reads them."""

import os

import dagster as dg
from pyspark.sql import DataFrame

from partition_assets.spark import SparkResource
from partition_assets_tests.support.locations.user_projects.delta_deliveries import DAYS, deliveries_project

FAILING_DAY = "2024-01-03"
FEED_FIXED_ENV = "DELIVERIES_FEED_FIXED"


@dg.asset(partitions_def=DAYS)
def deliveries(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    if context.partition_key == FAILING_DAY and FEED_FIXED_ENV not in os.environ:
        raise ValueError(f"the feed of {FAILING_DAY} is broken")
    return spark.spark_session.createDataFrame([(1, context.partition_key)], "id long, ds string")


defs = deliveries_project(deliveries)
