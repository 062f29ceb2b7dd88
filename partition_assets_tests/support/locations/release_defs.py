"""A code location for the release tests (partition_assets_tests/integration/test_release_reads_during_publish.py):
`payouts_daily` and `payouts_quarterly` (built from it), two Delta tables a staged backfill
rewrites together, and `dashboard`, which joins them.

Each row carries the tag written in the lake's file `tag` when its node ran (one per version
of the data), so that a reader knows which version of each table it joined.
PARTITION_ASSETS_TEST_LAKE names the lake.
"""

import os
from pathlib import Path

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager

DAYS = daily("2024-01-01", end="2024-01-02")  # end exclusive: one day
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
TAG_FILE = "tag"
lake = os.environ.get(LAKE_ENV, ".lake-release-tests")


@dg.asset(partitions_def=DAYS)
def payouts_daily(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    tag = (Path(lake) / TAG_FILE).read_text()
    return spark.spark_session.createDataFrame([(1, context.partition_key, tag)], "amount long, ds string, tag string")


@dg.asset(partitions_def=DAYS)
def payouts_quarterly(payouts_daily: DataFrame) -> DataFrame:
    return payouts_daily.select((F.col("amount") * 90).alias("amount"), "ds", "tag")


@dg.asset(partitions_def=DAYS)
def dashboard(payouts_daily: DataFrame, payouts_quarterly: DataFrame) -> DataFrame:
    """The two tables joined by day: their tags side by side."""
    quarterly = payouts_quarterly.select("ds", F.col("tag").alias("quarterly_tag"))
    return payouts_daily.select("ds", F.col("tag").alias("daily_tag")).join(quarterly, "ds")


spark = SparkResource.from_env()
resources = {"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=lake, spark=spark)}
defs = dg.Definitions(assets=[payouts_daily, payouts_quarterly, dashboard], resources=resources)
